"""``llmpara shard``: one model sharded over a cluster (TP, PP, DP, EP), a best-plan search, or
a scaling curve.

``--hardware`` takes a cluster preset or any device (preset or TOML file) whose
``[interconnect]`` section describes the links; a device without one only allows DP.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from .types import bounded
from .base import (add_framework_arg, add_model_hw_args, add_output_args, add_precision_args,
                   add_workload_args, emit, positive_int, precision_from_args,
                   print_stack, with_framework, workload_from_args)
from ..errors import ConfigError
from ..export import _plain
from ..parallel import (OBJECTIVES, STRATEGIES, ParallelPlan, scaling_curve, search_plans,
                       shard_analyze, shard_report_to_dict)


def _layers(s: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated layer counts such as 40,40, got {s!r}") from None
    if any(n < 1 for n in out):
        raise argparse.ArgumentTypeError(f"every stage needs at least one layer, got {s}")
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "shard", help="shard a model over several devices (TP/PP/DP/EP)",
        description="Per-device memory, time and collectives of a parallelism plan; "
                    "--search finds the best plan, --scaling sweeps the device count.")
    add_model_hw_args(p)
    g = p.add_argument_group("plan")
    g.add_argument("--tp", type=bounded("degree", "TP"), default=1, help="tensor-parallel degree")
    g.add_argument("--pp", type=bounded("degree", "PP"), default=1, help="pipeline stages")
    g.add_argument("--dp", type=bounded("degree", "DP"), default=1,
                   help="data-parallel replicas (the batch is the global batch)")
    g.add_argument("--ep", type=bounded("degree", "EP"), default=1,
                   help="expert-parallel degree (MoE; divides TP x DP and the experts)")
    g.add_argument("--microbatches", type=bounded("microbatches"),
                   help="pipeline microbatches (default min(batch per replica, PP))")
    g.add_argument("--stage-layers", type=_layers,
                   help="layers per pipeline stage, e.g. 21,19 (default: even split)")
    g.add_argument("--overlap", type=bounded("unit_fraction", "overlap"), default=0.0,
                   help="fraction of communication hidden under compute (default 0)")
    g.add_argument("--no-vocab-parallel", action="store_true",
                   help="keep embedding and LM head whole on every TP rank (gpt-fast)")
    add_framework_arg(g)
    s = p.add_argument_group("search / scaling (instead of one plan)")
    s.add_argument("--search", choices=[o.replace("_", "-") for o in OBJECTIVES],
                   help="rank every valid plan that fits by this objective")
    s.add_argument("--max-devices", type=bounded("devices", "max devices"),
                   help="search: use at most this many devices (default: the cluster)")
    s.add_argument("--fill-batch", action="store_true",
                   help="search: run each plan at the largest batch that fits (<= 1024)")
    s.add_argument("--top", type=positive_int, default=10, help="search: rows to show")
    s.add_argument("--scaling", choices=STRATEGIES,
                   help="modelled vs ideal speedup over device counts")
    add_workload_args(p)
    add_precision_args(p)
    add_output_args(p)
    p.set_defaults(func=_cmd_shard)


def _cmd_shard(args) -> None:
    from ..presets import load_hardware, load_model
    model, hw = load_model(args.model), load_hardware(args.hardware)
    hw, stack = with_framework(hw, args.framework)
    precision, workload = precision_from_args(args), workload_from_args(args)
    if args.search and args.scaling:
        raise ConfigError("use either --search or --scaling, not both")
    if args.search:
        found = search_plans(model, hw, precision, workload, args.search.replace("-", "_"),
                             max_devices=args.max_devices, fill_batch=args.fill_batch)
        rows = [{"plan": c.plan.label, "devices": c.plan.devices, "batch": c.batch,
                 "tpot_s": c.tpot_s, "ttft_s": c.ttft_s,
                 "throughput_tokens_per_s": c.throughput_tokens_per_s,
                 "throughput_per_device": c.throughput_per_device,
                 "memory_bytes_per_device": c.memory_per_device_bytes,
                 "communication_share": c.communication_share,
                 "parallel_efficiency": c.parallel_efficiency} for c in found[:args.top]]
        if not rows:
            raise ConfigError(f"no valid plan of {model.name} fits on {hw.name}")
        _emit(stack, args.format, {"objective": args.search, "candidates": rows}, rows)
        return
    if args.scaling:
        pts = scaling_curve(model, hw, precision, workload, args.scaling)
        rows = [{**{k: v for k, v in _plain(pt).items() if k != "plan"},
                 "plan": pt.plan.label if pt.plan else None} for pt in pts]
        _emit(stack, args.format, {"strategy": args.scaling, "points": rows}, rows)
        return
    plan = ParallelPlan(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep,
                        microbatches=args.microbatches, stage_layers=args.stage_layers,
                        overlap=args.overlap, vocab_parallel=not args.no_vocab_parallel)
    report = shard_analyze(model, hw, precision, workload, plan)
    d = shard_report_to_dict(report, include_operators=args.format == "csv")
    d["stack"] = stack.to_dict()
    if args.format == "json":
        emit(d, "json")
    elif args.format == "csv":
        emit(None, "csv", d["operators"])
    else:
        summary = {"plan": report.plan.label, "devices": report.devices}
        summary.update({k: v for k, v in d.items()
                        if not isinstance(v, (dict, list)) and k not in ("model", "hardware")})
        for name in ("prefill_breakdown", "decode_breakdown"):
            summary.update({f"{name}.{k}": v for k, v in d[name].items()})
        print_stack(stack)
        emit(None, "table", [{"quantity": k, "value": v} for k, v in summary.items()])
        for note in report.notes:
            print(f"note: {note}")


def _emit(stack, fmt: str, d: dict, rows: list[dict]) -> None:
    """A search or scaling result: JSON with its ``stack``, or the rows under the stack line."""
    if fmt == "json":
        emit({**d, "stack": stack.to_dict()}, "json")
        return
    if fmt == "table":
        print_stack(stack)
    emit(None, fmt, rows)
