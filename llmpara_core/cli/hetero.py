"""``llmpara hetero``: decode on a device with heterogeneous memory tiers (SRAM / DRAM / Flash).

    llmpara hetero --model "Llama-3 8B" --hardware "Cambricon-LLM (Chiplet)" \\
        --prompt-len 2048 --gen-len 8192 --strategy hot-first --format json

JSON (SI units): ``decode_tokens_per_s`` (estimated, per sequence), ``throughput_tokens_per_s``
(aggregate over the batch), ``tpot_s``, ``ttft_s``, ``ideal`` (the same at peak rates),
``tiers`` (per tier: capacity, bytes stored, bytes read per step, time, energy), ``placement``
(per item and tier), ``operators``, ``reference`` (what the replaced tool would report), and
with ``--migration`` / ``--batches`` the tier-migration and batch sweeps.
"""

from __future__ import annotations

import argparse

from .types import bounded
from .base import (add_framework_arg, add_model_hw_args, add_output_args, add_precision_args,
                   add_workload_args, emit, positive_int, precision_from_args,
                   print_stack, with_framework, workload_from_args)
from ..errors import ConfigError
from ..tiers.engine import STRATEGIES, hetero
from ..tiers.report import (SweepPoint, batch_sweep, reference_estimate, result_to_dict,
                           tier_migration, tier_rows)


def _pin(s: str) -> tuple[str, str]:
    sel, sep, tier = s.partition("=")
    if not sep or not sel.strip() or not tier.strip():
        raise argparse.ArgumentTypeError(f"expected SELECTOR=TIER (e.g. embedding=Flash), got {s!r}")
    return sel.strip(), tier.strip()


def _batches(s: str) -> tuple[int, ...]:
    try:
        out = tuple(positive_int(x) for x in s.split(",") if x.strip())
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"--batches: {e}") from None
    if not out or len(out) > 64:
        raise argparse.ArgumentTypeError("--batches takes 1 to 64 comma-separated integers")
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "hetero", help="decode on heterogeneous memory tiers (placement, per-tier streaming)")
    add_model_hw_args(p)
    add_framework_arg(p)
    add_workload_args(p)
    add_precision_args(p)
    p.add_argument("--strategy", choices=STRATEGIES, default="greedy",
                   help="placement: greedy (the reference's), hot-first, pinned (pins + hot-first)")
    p.add_argument("--pin", type=_pin, action="append", default=[], metavar="SELECTOR=TIER",
                   help="pin items to a tier: a category (embedding, lm_head, attention, ffn, "
                        "norm, moe_expert, shared_expert, router, kv_cache, activations), "
                        "layers:A-B or CATEGORY@layers:A-B; repeatable")
    p.add_argument("--overlap", choices=("operator", "step"), default="operator",
                   help="compute/memory overlap per operator (default) or per decode step")
    p.add_argument("--no-prefetch", action="store_true",
                   help="every operator pays its tiers' access latency (default: only "
                        "data-dependent reads: embedding gather, routed experts)")
    p.add_argument("--expert-zipf", default=0.0, metavar="S",
                   type=bounded("expert_zipf_s", "expert popularity exponent"),
                   help="MoE expert popularity ~ 1/rank^S (0 = uniform routing)")
    p.add_argument("--migration", action="store_true",
                   help="add the weight/KV precision sweep 16 -> 8 -> 4 -> 2 bits")
    p.add_argument("--batches", type=_batches, metavar="B1,B2,...",
                   help="add a batch sweep (e.g. 1,4,16)")
    add_output_args(p)
    p.set_defaults(func=_cmd_hetero)


def _sweep_rows(points: tuple[SweepPoint, ...]) -> list[dict]:
    rows = []
    for pt in points:
        r = pt.result
        row = {"label": pt.label, "weight_bits": pt.weight_bits, "kv_bits": pt.kv_bits,
               "batch": pt.batch, "feasible": pt.feasible, "reason": pt.reason or None,
               "reference_decode_tokens_per_s": (pt.reference.decode_tokens_per_s
                                                 if pt.reference is not None else None)}
        if r is not None:
            names = [t.name for t in r.tiers]
            row.update(
                decode_tokens_per_s=r.estimated.decode_tokens_per_s,
                throughput_tokens_per_s=r.estimated.throughput_tokens_per_s,
                ideal_decode_tokens_per_s=r.ideal.decode_tokens_per_s,
                ideal_throughput_tokens_per_s=r.ideal.throughput_tokens_per_s,
                energy_j_per_token=r.energy.total_j,
                compute_bound_share=r.estimated.compute_bound_share,
                weight_bytes_per_tier=dict(zip(names, map(float, pt.tier_weight_bytes()))),
                kv_cache_bytes_per_tier=dict(zip(names, map(float, r.placement.bytes_by_category()
                                                            .get("kv_cache", [0.0] * len(names))))))
        rows.append(row)
    return rows


def _cmd_hetero(args) -> None:
    from ..presets import load_hardware, load_model
    model = load_model(args.model)
    hw, stack = with_framework(load_hardware(args.hardware), args.framework)
    prec, wl = precision_from_args(args), workload_from_args(args)
    if args.strategy == "pinned" and not args.pin:
        raise ConfigError("--strategy pinned needs at least one --pin SELECTOR=TIER")
    kw = dict(strategy=args.strategy, pins=tuple(args.pin) or None, overlap=args.overlap,
              prefetch=not args.no_prefetch, expert_zipf_s=args.expert_zipf)
    res = hetero(model, hw, prec, wl, **kw)
    d = result_to_dict(res, include_items=True, include_operators=args.format == "json")
    d["stack"] = stack.to_dict()
    ref = reference_estimate(model, hw, prec, wl)
    d["reference"] = {"decode_tokens_per_s": ref.decode_tokens_per_s,
                      "bottleneck_tier": ref.bottleneck_tier,
                      "bytes_per_token": ref.bytes_per_token,
                      "weight_bytes_per_tier": dict(zip([t.name for t in hw.tiers],
                                                        ref.weight_tier_bytes))}
    if args.migration:
        d["migration"] = _sweep_rows(tier_migration(model, hw, prec, wl, **kw))
    if args.batches:
        d["batch_sweep"] = _sweep_rows(batch_sweep(model, hw, prec, wl, args.batches, **kw))
    if args.format == "json":
        emit(d, "json")
        return
    if args.format == "csv":
        emit(None, "csv", tier_rows(res))
        return
    summary = {k: v for k, v in d.items() if not isinstance(v, (dict, list))}
    summary["reference_decode_tokens_per_s"] = ref.decode_tokens_per_s
    print_stack(stack)
    emit(None, "table", [{"quantity": k, "value": v} for k, v in summary.items()])
    print()
    emit(None, "table", [{k: v for k, v in r.items()
                          if k in ("tier", "capacity_bytes", "bandwidth_bytes_per_s", "used_bytes",
                                   "weight_bytes", "kv_cache_bytes", "read_bytes_per_step",
                                   "estimated_time_s_per_step", "time_share")}
                         for r in tier_rows(res)])
    for key in ("migration", "batch_sweep"):
        if key in d:
            print()
            emit(None, "table", [{k: v for k, v in r.items()
                                  if not isinstance(v, dict) and k != "reason"} for r in d[key]])
    for note in res.notes:
        print(f"note: {note}")
