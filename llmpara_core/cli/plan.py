"""``llmpara plan``: the cheapest fleet serving a traffic mix, searched over hardware x TP x PP x
precision x serving stack (closed-form prune, then the serving simulator's SLO rate search).

Example::

    llmpara plan --traffic presets/fleet/example-mix.toml --format table
    llmpara plan --traffic mix.toml --executor ray --address auto --format json
"""

from __future__ import annotations

import sys
from dataclasses import replace

from .base import add_output_args, emit, integer_in
from ..budget import TimeBudgetExceeded
from ..errors import ConfigError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="plan the cheapest fleet for a traffic mix (several models, rates, SLOs)",
        description="Fleet planner: per workload of the traffic file, the cheapest plan "
                    "(device, TP x PP, precision, stack, replicas) meeting its SLO, with "
                    "runners-up, fleet totals and a cost-latency front. Candidates are pruned "
                    "with closed forms, then simulated (SLO rate search) locally or on Ray.")
    p.add_argument("--traffic", required=True, metavar="FILE.toml",
                   help="traffic file: one [[workload]] per model (README: the format)")
    p.add_argument("--hardware", help="comma-separated hardware presets or files (replaces "
                                      "the file's [candidates] hardware)")
    p.add_argument("--precision", help="comma-separated precisions, e.g. FP8,FP16,NVFP4")
    p.add_argument("--framework", help="comma-separated stacks, e.g. vllm,tensorrt-llm,sglang")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: a process pool (default); ray: one Ray task per candidate")
    p.add_argument("--address", help="Ray cluster to join: auto or ray://host:10001 "
                                     "(default: start a local Ray)")
    p.add_argument("--workers", type=integer_in(1, 4096),
                   help="processes (local) or CPUs of a local Ray (default: all CPUs)")
    p.add_argument("--seed", type=integer_in(0, 2**31 - 1), help="replaces the file's seed")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_output_args(p)
    p.set_defaults(func=_cmd_plan)


def _override(mix, args):
    from ..fleet.traffic import (_names, check_frameworks, check_hardware, check_precisions)
    c = mix.candidates
    if args.hardware:
        c = replace(c, hardware=check_hardware(_names(args.hardware, "--hardware")))
    if args.precision:
        c = replace(c, precisions=check_precisions(_names(args.precision, "--precision")))
        mix = replace(mix, workloads=tuple(replace(w, precisions=()) for w in mix.workloads))
    if args.framework:
        c = replace(c, frameworks=check_frameworks(_names(args.framework, "--framework")))
    mix = replace(mix, candidates=c)
    if args.seed is not None:
        mix = replace(mix, seed=args.seed)
    return mix


def plan_rows(p) -> list[dict]:
    """The table / CSV rows of a FleetPlan: every plan (rank 0 = chosen) in display units."""
    rows = []
    for r in p.rows:
        rows.append({
            "workload": r.workload, "rank": r.rank, "model": r.model, "hardware": r.hardware,
            "tp": r.tp, "pp": r.pp, "precision": r.precision, "stack": r.framework,
            "replicas": r.replicas, "gpus": r.gpus, "usd_per_hour": r.usd_per_hour,
            "usd_per_mtok": r.usd_per_million_tokens, "j_per_token": r.j_per_token,
            "headroom_pct": 100.0 * r.headroom, "ttft_ms": 1e3 * r.ttft_s,
            "tpot_ms": None if r.tpot_s is None else 1e3 * r.tpot_s,
            "on_front": r.on_front})
    return rows


def _cmd_plan(args) -> None:
    from ..fleet import load_traffic, make_executor, plan, plan_to_dict
    if args.address is not None and args.executor != "ray":
        raise ConfigError("--address joins a Ray cluster: use it with --executor ray")
    mix = _override(load_traffic(args.traffic), args)
    quiet = args.no_progress or not sys.stderr.isatty()
    state = {"last": -1.0}

    def progress(done, total, stage):
        if quiet or not total:
            return
        frac = done / total
        if frac - state["last"] >= 0.02 or done == total:
            state["last"] = frac
            sys.stderr.write(f"\r{stage}: {done}/{total}   ")
            sys.stderr.flush()

    ex = make_executor(args.executor, args.workers, args.address)
    try:
        result = plan(mix, ex, progress)
    finally:
        ex.close()
        if not quiet:
            sys.stderr.write("\n")
    if result.cancelled and result.notes and "time budget" in result.notes[-1]:
        c = result.counts                       # stopped at --time-budget: say what was done
        raise TimeBudgetExceeded(
            f"{result.notes[-1].split(': the plan uses only')[0]} ({c['simulated']:,} of {c['configurations']:,} configurations "
            "simulated; no plan printed: a partial search may miss the cheapest plan)")
    if args.format == "json":
        emit(plan_to_dict(result, mix), "json")
        return
    rows = plan_rows(result)
    if args.format == "csv":
        emit(rows, "csv")
        return
    emit(rows, "table")
    t, c = result.totals, result.counts
    print(f"\nfleet: {t['gpus']} GPUs, ${t['usd_per_hour']:.2f}/h"
          + (f", ${t['usd_per_million_tokens']:.3f}/M output tokens"
             if t['usd_per_million_tokens'] is not None else "")
          + f", {t['workloads_served']}/{t['workloads']} workloads served")
    print(f"search: {c['configurations']} configurations, {c['pruned_closed_form']} pruned by "
          f"closed forms, {c['skipped_by_cost_bound']} skipped by the cost bound, "
          f"{c['simulated']} simulated ({c['stopped_by_cost']} stopped once they cost more "
          f"than the plans found)")
    for name, why in result.unserved:
        print(f"unserved: {name}: {why}")
    for n in result.notes:
        print(f"note: {n}")
