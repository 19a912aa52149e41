"""CLI for design-space exploration.

``llmpara dse --model M [--preset NAME | --ranges FILE] [--samples N] [--method grid|random|lhs]
[--seed S] [--objectives a,b,...] [--hardware-base H] [--nsga] [--sensitivity] --format json``

Without ``--samples`` the preset's full grid is evaluated (every value of every axis); with it,
N random (default) or Latin-hypercube designs in the axes' ranges. TDP and price are derived
from the design by the coupled power and cost models unless ``--tdp-price swept`` keeps the
preset's lists (then they are constraints). JSON: ``{"points_evaluated", "feasible",
"infeasible", "pareto_size", "pareto": [...], "best", ...}`` -- the front, never every design.
The run streams the designs (``dse.run.explore`` keeps the front, the counts and the best
designs) and the import path is kept lean (numpy and the core only, this subcommand's module
alone): a million designs take about 0.4 s and 80 MB for the whole process.
"""

from __future__ import annotations

import argparse
import sys

from . import base as cli, metrics as cli_metrics
from ..errors import ConfigError

_POINT_KEYS = ("peak_tflops", "bw_gbps", "cap_gb", "sram_mb", "tdp_w", "price_usd", "memory",
               "area_mm2", "embodied_kgco2e", "tokens_per_s", "ttft_s", "tpot_s",
               "j_per_token", "usd_per_mtok", "gco2e_per_mtok", "memory_headroom",
               "avg_power_w")
_TABLE_KEYS = ("peak_tflops", "bw_gbps", "cap_gb", "memory", "tdp_w", "price_usd",
               "tokens_per_s", "ttft_s", "j_per_token", "usd_per_mtok", "gco2e_per_mtok")


def _objectives(s: str) -> tuple[str, ...]:
    from ..dse.evaluation import OBJECTIVES
    objs = tuple(x.strip() for x in s.split(",") if x.strip())
    bad = [o for o in objs if o not in OBJECTIVES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown objective {bad[0]!r} (choose from "
                                         f"{', '.join(OBJECTIVES)})")
    if not 2 <= len(objs) <= 4 or len(set(objs)) != len(objs):
        raise argparse.ArgumentTypeError("give 2 to 4 different objectives, comma-separated")
    return objs


def _space(args):
    from ..dse import space as dse_space
    if args.preset and args.ranges:
        raise ConfigError("give --preset or --ranges, not both")
    space = (dse_space.load_space_file(args.ranges) if args.ranges
             else dse_space.find_space(args.preset or "quick-scan"))
    if args.tdp_price == "derived":
        for key in ("tdp", "price"):
            if space.axis(key) is not None and len(space.axes) > 1:
                space = space.without_axis(key)
    return space


def _context(args, space):
    from ..dse.evaluation import DesignContext
    from ..presets import load_hardware, load_model
    if args.energy_model not in ("components", "auto") or args.alpha is not None:
        raise ConfigError("dse uses the component energy model (no --energy-model/--alpha)")
    if args.price_usd is not None:
        raise ConfigError("--price-usd: the price is a design quantity here (axis 'price')")
    base, stack = cli.with_framework(load_hardware(args.hardware_base or space.base_hardware),
                                     args.framework)
    return DesignContext(load_model(args.model), cli.precision_from_args(args),
                         cli.workload_from_args(args), base,
                         cli_metrics.settings_from_args(args)), stack


def _points(ev, rows) -> list[dict]:
    return [{**{k: p[k] for k in _POINT_KEYS}, "infeasible_reasons": p["infeasible_reasons"]}
            for p in ev.points(rows)]


def _point(ev, i) -> dict:
    return _points(ev, [i])[0]


def _cmd_dse(args) -> None:
    from ..dse.run import explore, summarise
    space = _space(args)
    ctx, stack = _context(args, space)
    method = args.method or ("grid" if args.samples is None else "random")
    if method != "grid" and args.samples is None:
        raise ConfigError(f"--method {method} needs --samples N")
    if args.nsga:
        from ..dse.nsga import run_nsga
        nsga = run_nsga(ctx, space, args.objectives, args.population, args.generations,
                        args.seed)
        res = summarise(nsga.evaluation, nsga.objectives, space, "nsga2", args.seed)
        extra = {"nsga": {"population": nsga.population, "generations": nsga.generations,
                          "history": [vars(g) for g in nsga.history]},
                 "hypervolume": _hv_dict(nsga.hv), "method": "nsga2"}
    else:       # keeps the front and the best designs only, not every design
        res = explore(ctx, space, method, args.samples, args.seed, args.objectives,
                      with_hypervolume=args.hypervolume, keep_sample=0)
        extra = {"method": method, "hypervolume": _hv_dict(res.hypervolume)}
    ev, front, objs = res.evaluation, res.front, res.objectives
    rows = _points(ev, front[:args.front_limit or None])
    if args.format != "json":
        keys = _TABLE_KEYS if args.format == "table" else tuple(rows[0]) if rows else ()
        if args.format == "table":
            cli.print_stack(stack)
        cli.emit(None, args.format, [{k: r[k] for k in keys} for r in rows])
        if args.format == "table":
            print(f"{res.points_evaluated} designs evaluated, {res.feasible_count} feasible, "
                  f"{len(front)} on the front of {', '.join(objs)}")
        return
    out = _summary(ctx, space, res, args)
    out["stack"] = stack.to_dict()
    out.update(extra)
    out["pareto"] = rows
    if args.sensitivity:
        out["sensitivity"] = _sensitivity(ctx, ev, front)
    sys.stdout.write(_json_text(out) + "\n")


_ROWS_MARK = "__llmpara_dse_pareto_rows__"
_SCALARS = (str, int, float, bool, type(None))


def _json_text(out: dict) -> str:
    """``cli.emit(out, "json")``'s text exactly (``json.dumps(indent=2, allow_nan=False,
    default=str)``), with the Pareto rows encoded in one call of json's C encoder (an item
    separator holding the indentation; rows are flat dicts, so "},<newline>{" only occurs
    between rows) instead of its pure-Python indenting generator: ~5x faster for a front of
    thousands of designs."""
    import json
    opts = dict(allow_nan=False, default=str)
    text = json.dumps({**out, "pareto": _ROWS_MARK}, indent=2, **opts)
    rows = out["pareto"]
    flat = all(r and type(r) is dict and all(
        type(v) in _SCALARS or (type(v) in (list, tuple, dict) and not v) for v in r.values())
        for r in rows)
    if not rows:
        body = "[]"
    elif flat:
        body = json.dumps(rows, separators=(",\n      ", ": "), **opts)
        body = ("[\n    {\n      " + body[2:-2].replace("},\n      {", "\n    },\n    {\n      ")
                + "\n    }\n  ]")
    else:
        body = json.dumps(rows, indent=2, **opts).replace("\n", "\n  ")
    return text.replace(json.dumps(_ROWS_MARK), body, 1)


def _summary(ctx, space, res, args) -> dict:
    from ..dse import evaluation as dse
    best = {o: _point(res.evaluation, res.best[o]) for o in res.objectives if o in res.best}
    return {"model": ctx.model.name, "base_hardware": ctx.base.name,
            "hardware_class": ctx.base.hw_class.value, "space": space.to_dict(),
            "derived": [k for k in ("tdp", "price") if space.axis(k) is None
                        and k not in dict(space.fixed)],
            "seed": args.seed, "points_evaluated": res.points_evaluated,
            "feasible": res.feasible_count, "infeasible": res.infeasible_counts(),
            "objectives": [vars(dse.OBJECTIVES[o]) for o in res.objectives],
            "pareto_size": len(res.front), "best": best,
            "assumptions": list(ctx.physics.notes)}


def _hv_dict(hv):
    if hv is None:
        return None
    return {"value": hv.value, "reference_point": list(hv.reference_point),
            "ideal": list(hv.ideal), "nadir": list(hv.nadir), "exact": hv.exact,
            "note": "normalised by the feasible cloud's ideal and nadir; reference point = "
                    "nadir + 10 % of the range"}


def _sensitivity(ctx, ev, front) -> dict:
    from ..dse import evaluation as dse
    base = None
    if len(front):
        p = ev.point(int(front[0]))
        base = {"peak": p["peak_tflops"], "bw": p["bw_gbps"], "cap": p["cap_gb"],
                "sram": p["sram_mb"]}
    s = dse.sensitivity(ctx, base)
    return {"base": s.base, "multipliers": sorted({m for _, m in s.pairs[1:]}),
            "relative": {o: s.relative(o) for o in ("tokens_per_s", "usd_per_mtok",
                                                    "j_per_token")}}


def register(subparsers) -> None:
    from .base import nonneg_int, positive_int
    from .types import bounded
    p = subparsers.add_parser("dse", help="design-space exploration: sweep, Pareto, NSGA-II")
    p.add_argument("--model", required=True, help="model preset name or config.json path")
    g = p.add_argument_group("design space")
    g.add_argument("--preset", help="quick-scan (default), edge-mobile, datacenter-gpu, "
                                    "pim-near-memory, custom")
    g.add_argument("--ranges", help="TOML file with [axes] (format: presets/tables/dse_presets.toml)")
    cli.add_framework_arg(g)
    g.add_argument("--hardware-base", help="hardware preset giving the class, efficiency and "
                                           "the values of axes not swept")
    g.add_argument("--tdp-price", choices=("derived", "swept"), default="derived",
                   help="derived: TDP and price from the power and cost models (default); "
                        "swept: the space's TDP and price values, as constraints")
    g.add_argument("--samples", type=bounded("samples"), help="sample N designs instead of the grid")
    g.add_argument("--method", choices=("grid", "random", "lhs"), help="sampling method")
    g.add_argument("--seed", type=nonneg_int, default=0)
    g.add_argument("--objectives", type=_objectives, default=None,
                   help="2-4 of tokens_per_s, ttft_s, j_per_token, usd_per_mtok, "
                        "gco2e_per_mtok, memory_headroom, price_usd, tdp_w (comma-separated; "
                        "default tokens_per_s,usd_per_mtok,j_per_token)")
    g.add_argument("--front-limit", type=positive_int, help="print at most N front designs")
    g.add_argument("--hypervolume", action="store_true", help="hypervolume of the front")
    g.add_argument("--sensitivity", action="store_true",
                   help="one-at-a-time x0.25..x8 around the first front design (JSON)")
    n = p.add_argument_group("NSGA-II")
    n.add_argument("--nsga", action="store_true", help="NSGA-II over the axes' ranges")
    n.add_argument("--population", type=bounded("population"), default=100)
    n.add_argument("--generations", type=bounded("generations"), default=40)
    cli.add_workload_args(p)
    cli.add_precision_args(p)
    cli_metrics.add_metrics_args(p)
    cli.add_output_args(p)
    p.set_defaults(func=_run)


def _run(args) -> None:
    from ..dse.evaluation import DEFAULT_OBJECTIVES
    if args.objectives is None:
        args.objectives = DEFAULT_OBJECTIVES
    _cmd_dse(args)
