"""What-if (not the default): how a stack's own quantised matmuls are charged, and gpt-fast's
tensor-parallel all-reduces under NCCL's own cost model (issue 27, batch-1 decode).

    python scripts/quant_cost_whatif.py                      # every variant, held out (~25 min)
    python scripts/quant_cost_whatif.py --variant share --in-sample
    python scripts/quant_cost_whatif.py --per-device       # gpt-fast on one device at a time

A stack whose batch-1 rows mix quantised and native weights (gpt-fast: BF16 and int8 / int4
weight-only; MLC: F16 and q4f16_1) pins what its quantised matmuls cost beyond their bytes
(``stack_fit.fit_framework``). Variants:

* ``launch`` -- the default (``stack_fit.QUANT_FORM``): a fixed cost per quantised matmul, in
  launches (``Efficiency.act_quant_kernels``);
* ``gptfast-share`` -- ``launch``, but gpt-fast's quantised matmuls as ``share`` (its source:
  one fused kernel per quantised matmul; ``stack_fit.QUANT_FORM_BY_STACK``, gptfast29);
* ``share`` -- quantised weights stream at a fitted share of the stack's 16-bit streaming rate
  (``Efficiency.quant_memory``: dequantising inside a matrix-vector product is work per byte);
* ``cu`` -- gpt-fast's quantised weights stream at most so many bytes per compute unit per
  clock cycle (``Efficiency.quant_stream_bytes_per_cu_cycle``: a dequantising rate that scales
  with the SM / CU count and clock, not with the bandwidth);
* ``identified`` -- ``launch``, with a stack's batch-1 and prefill values fitted only where
  its rows of that regime come from two or more physical devices
  (``stack_fit.MIN_FRAMEWORK_DEVICES`` = 2; else the class values with the stack's structural
  terms), in the shipped fit and every fold alike;
* ``nccl`` -- ``launch``, with every estimated all-reduce within a node timed by NCCL's own
  tuning model (``parallel.collectives.nccl_ring_all_reduce_s``, as the serving simulator
  times them) instead of the one-shot estimate: gpt-fast's tensor parallelism calls
  torch.distributed (NCCL) all-reduces. It applies to every stack's rows (MLC's and
  FasterTransformer's too).

Held out: the folds of ``fitting.leave_one_device_out`` for the devices these stacks were
measured on and the other datacenter GPUs (the datacenter class's 67 batch-1 rows), each
refitted under the variant; printed: the batch-1 median |error| of gpt-fast's and MLC's rows,
of the datacenter class, and per row. ``--in-sample``: gpt-fast's and MLC's profiles fitted on
all their rows (classes as shipped), every row of theirs predicted, and the tensor-parallel
series' figures (``llmpara validate --regime tp``) with that gpt-fast profile.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmpara_core.calibration import default_table, fitting, stack_fit  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402
from llmpara_core.parallel import collectives  # noqa: E402
from llmpara_core.roofline import op_time_s  # noqa: E402

STACKS = ("gpt-fast", "mlc")
DEVICES = ("amd-mi250x-gcd", "nvidia-a100-sxm-80gb", "nvidia-a100-pcie-80gb", "nvidia-a10g",
           "nvidia-rtx-3090-ti", "nvidia-rtx-4090")
VARIANTS = ("launch", "share", "gptfast-share", "cu", "nccl", "identified")
CU_STARTS = (2.0, 4.0, 8.0, 16.0)      # bytes per compute unit per cycle
_fit_framework = stack_fit.fit_framework
_net_time = collectives.Net.time


def _cu_fit(name, rows, table, kernels=None, shrink=0.0, quant_form=None):
    """``fit_framework`` with gpt-fast's quantised matmuls bounded per compute unit."""
    if name != "gpt-fast":
        return _fit_framework(name, rows, table, kernels, shrink)
    prof = _fit_framework(name, rows, table, kernels, shrink)
    decode = [r for r in rows if validation.regime(r) == "batch-1"]
    if not stack_fit.mixes_quant(name, decode):
        return prof
    two = len(decode) >= 2 * stack_fit.MIN_FRAMEWORK_ROWS
    n = 2 + two
    base = replace(prof, absolute={k: v for k, v in prof.absolute.items()
                                   if k != "act_quant_kernels"})

    def mk(x):
        return replace(base, memory_scale=math.exp(x[0]),
                       overhead_scale=math.exp(x[1]) if two else 1.0,
                       absolute={**base.absolute, "quant_stream_bytes_per_cu_cycle":
                                 min(64.0, math.exp(x[n - 1]))})

    def effs(x):
        t = stack_fit._with(table, mk(x))
        return [t.efficiency_for(r.hardware, name) for r in decode]
    weight = stack_fit.PRIOR_WEIGHT + shrink / len({r.hardware.slug for r in decode})
    # the loss is flat in the bound wherever it binds nowhere: start from several bounds
    starts = [np.array([0.0] * (n - 1) + [math.log(k)]) for k in CU_STARTS]
    x = stack_fit._fit(decode, effs, starts, 60 * n,
                       prior=lambda x: weight * float(np.sum(np.square(x[:n - 1]))))
    return mk(x)


def _nccl_time(self, kind, n, m_bytes, nodes, est):
    """``Net.time`` with estimated all-reduces within a node by NCCL's tuning model."""
    if est and kind is collectives.Collective.ALL_REDUCE and n > 1 and (
            nodes <= 1 or self.inter is None):
        launch = op_time_s(0.0, 0.0, 1, self.intra[1])
        bus = self.ic.bandwidth_bytes_per_s * collectives.NCCL_NVLINK_SHARE_DEFAULT
        return launch + float(collectives.nccl_ring_all_reduce_s(n, m_bytes, bus))
    return _net_time(self, kind, n, m_bytes, nodes, est)


def use(variant: str) -> None:
    """Switch the fit and the core to ``variant`` (the default: ``launch``)."""
    stack_fit.QUANT_FORM = "share" if variant == "share" else "launch"
    stack_fit.QUANT_FORM_BY_STACK = {"gpt-fast": "share"} if variant == "gptfast-share" else {}
    stack_fit.MIN_FRAMEWORK_DEVICES = 2 if variant == "identified" else 1
    stack_fit.fit_framework = _cu_fit if variant == "cu" else _fit_framework
    fitting.fit_framework = stack_fit.fit_framework
    collectives.Net.time = _nccl_time if variant == "nccl" else _net_time
    from llmpara_core.parallel import evaluation
    evaluation._shard_cached.cache_clear()


def _median(xs) -> float:
    xs = [abs(x) for x in xs]
    return statistics.median(xs) if xs else float("nan")


def held_out(mapped, table, devices) -> list:
    preds = []
    for slug in devices:
        t0 = time.time()
        preds += [p for p in fitting.leave_one_device_out(mapped, table, [slug])
                  if validation.regime(p.row) == "batch-1"]
        print(f"  fold {slug}: {time.time() - t0:.0f} s", flush=True)
    return preds


def in_sample(mapped, table) -> list:
    fws = dict(table.frameworks)
    for name in STACKS:
        rows = [r for r in mapped if r.framework == name and r.hardware.efficiency is None]
        fws[name] = stack_fit.fit_framework(name, rows, table)
        print(f"  {name}: memory_scale {fws[name].memory_scale:.3f}, overhead_scale "
              f"{fws[name].overhead_scale:.3f}, {fws[name].absolute}")
    t = replace(table, frameworks=fws)
    return validation.predict_all([r for r in mapped if r.framework in STACKS
                                   and validation.regime(r) == "batch-1"], t)[0]


def per_device(mapped, table) -> None:
    """gpt-fast's profile fitted on each of its devices' rows alone (classes as shipped): what
    a fold left with that one device fits."""
    rows = [r for r in mapped if r.framework == "gpt-fast" and r.hardware.efficiency is None]
    for slug in sorted({r.hardware.slug for r in rows}):
        p = stack_fit.fit_framework("gpt-fast", [r for r in rows if r.hardware.slug == slug],
                                    table)
        print(f"  gpt-fast on {slug} alone: memory_scale {p.memory_scale:.3f}, overhead_scale "
              f"{p.overhead_scale:.3f}, {p.absolute}")


def tp_figures(mapped, table) -> None:
    """The tensor-parallel series (``llmpara validate --regime tp``'s in-sample computation)
    with gpt-fast's profile fitted on all its rows under the current variant (its setups
    re-timed with it; FasterTransformer's profile as shipped)."""
    from llmpara_core.calibration.tp_measurements import (compare_tp_measurements,
                                                          load_tp_measurements)
    from llmpara_core.calibration.tp_validation import tp_error_summary
    rows = [r for r in mapped if r.framework == "gpt-fast" and r.hardware.efficiency is None]
    t = stack_fit._with(table, stack_fit.fit_framework("gpt-fast", rows, table))
    tp = load_tp_measurements()
    setups = {k: replace(v, hardware=replace(v.hardware, efficiency=t.efficiency_for(
        replace(v.hardware, efficiency=None), v.efficiency_profile)))
              if v.efficiency_profile == "gpt-fast" else v for k, v in tp.setups.items()}
    s = tp_error_summary(compare_tp_measurements(replace(tp, setups=setups)))
    gf = s["per_framework"]["gpt-fast"]
    print(f"  TP series: tokens/s per sequence {s['median_abs_error']:.1%} (gpt-fast "
          f"{gf['median_abs_error']:.1%}), speedup {s['median_abs_speedup_error']:.1%} "
          f"(gpt-fast {gf['median_abs_speedup_error']:.1%})")


def report(preds) -> None:
    for name in STACKS:
        rs = [p for p in preds if validation.row_stack(p.row) == name]
        print(f"  {name}: {len(rs)} rows, median |error| {_median(p.error for p in rs):.1%}")
        print("    " + " ".join(f"{p.row.measurement.row_id}:{p.error:+.0%}" for p in rs))
    dc = [p for p in preds if p.efficiency_class.value == "datacenter-gpu"]
    if len(dc) > 30:
        print(f"  datacenter-GPU rows: {len(dc)}, median |error| "
              f"{_median(p.error for p in dc):.1%}, within 6 %: "
              f"{sum(abs(p.error) <= 0.06 for p in dc)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", choices=VARIANTS)
    ap.add_argument("--in-sample", action="store_true", help="no refits without a device")
    ap.add_argument("--per-device", action="store_true",
                    help="gpt-fast fitted on each of its devices alone, nothing else")
    ap.add_argument("--device", action="append", help=f"folds (default: {', '.join(DEVICES)})")
    args = ap.parse_args(argv)
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    table = default_table()
    for v in args.variant or VARIANTS:
        mode = ("one device at a time" if args.per_device else
                "in sample" if args.in_sample else "leave-one-device-out")
        print(f"\n{v} ({mode})", flush=True)
        use(v)
        if args.per_device:
            per_device(mapped, table)
            continue
        report(in_sample(mapped, table) if args.in_sample
               else held_out(mapped, table, args.device or DEVICES))
        if args.in_sample:
            tp_figures(mapped, table)
    use("launch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
