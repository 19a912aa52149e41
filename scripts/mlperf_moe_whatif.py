"""TensorRT-LLM's MoE routing kernels in the serving cost, off against on.

``serving.cost.MOE_ROUTING_KERNELS`` (a what-if, off as shipped), on the MLPerf v4.1
rows (``presets/tables/mlperf_serving.csv``; nothing is fitted on them) and, with
``--maxload``, on the shared max-load rows of MoE models.

The switch adds, per MoE layer and pass, the permute (``expandInputRowsKernel``: T x h read,
k T x h written), fc1's read of the k T x h permuted rows (counted once per token by the
forward pass) and four launches (top-k softmax, the expert-id radix sort, the per-expert row
offsets, the permute) -- the kernels of ``CutlassMoeFCRunner::runMoe`` (github
NVIDIA/TensorRT-LLM@03cff08f1494: cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu).
Only MoE rows change, so only those are simulated; the other rows' errors are read from a
``validate --regime mlperf --format csv`` file of the switch-off state (``--base-csv``: main
b480454, or this code as shipped) to give the 20-row summary.

    PYTHONPATH=. python -m llmpara_core validate --regime mlperf --time-budget 3000 \\
        --format csv > base.csv
    python scripts/mlperf_moe_whatif.py --base-csv base.csv
    python scripts/mlperf_moe_whatif.py --maxload [--base-csv maxload.csv]
                                   # max-load MoE rows off vs on (all rows with the csv of
                                   # validate --regime serving-maxload --format csv)
    python scripts/mlperf_moe_whatif.py --refit        # release factors refitted, off / on

Measured on branch mlperf28 (main b480454 + this switch):
  MLPerf pass check (scripts/mlperf_step_check.py, log TPOT / model pass): Mixtral H100 /
  Dell XE8640 / H200 1.11 / 1.09 / 1.10 -> 1.09 / 1.07 / 1.08 (+1.5 ms of ~90-126 ms).
  MLPerf (--base-csv): 9.5 -> 9.0 %, signed +9.5 -> +9.0 % (Offline 9.5 -> 9.5 %, Server
  9.9 -> 9.0 %, H100 12.0 -> 10.7 %); Mixtral H100 / Dell / H200 Offline +15.9 / +13.2 / +20.5
  -> +14.0 / +11.3 / +19.2 %, Server +10.8 / +7.5 / +11.6 -> +9.1 / +5.8 / +10.2 %.
  Max-load (--maxload --base-csv, in sample, factors as shipped): MoE rows 9.5 -> 10.2 %
  (signed -2.3 -> -4.3 %, 391 rows), all rows 8.9 -> 8.9 % (signed +1.2 -> +0.8 %).
  Refit (--refit): MoE factor of 0.11-0.12 1.13 (off) -> 1.12 (on; shipped 1.12); in sample
  8.9 % either way (signed +2.0 / +1.2 %).
  Max-load held out (llmpara validate --regime serving-maxload --loo, the switch set in the
  process): main b480454 9.9 -> 9.8 %; main 61c4fb9 8.3 -> 8.4 % (signed -0.3 -> -1.7 %,
  TP1 8.8 -> 9.6 %): worse, so the switch stays off.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import cost as serving_cost, mlperf  # noqa: E402

SHIPPED = serving_cost.MOE_ROUTING_KERNELS


def _summary(errs: dict) -> str:
    e = list(errs.values())
    return f"median {median(map(abs, e)):.1%}, signed {median(e):+.1%} ({len(e)} rows)"


def _groups(rows, errs: dict) -> None:
    by: dict = {}
    for i, r in enumerate(rows):
        if i in errs:
            by.setdefault(f"scenario {r.scenario}", []).append(errs[i])
            by.setdefault(f"gpu {r.gpu}", []).append(errs[i])
            by.setdefault(f"model {r.benchmark}", []).append(errs[i])
    for k, v in sorted(by.items()):
        print(f"    {k:28s} n={len(v):2d} median {median(map(abs, v)):5.1%} "
              f"signed {median(v):+6.1%}")


def mlperf_whatif(base_csv: str | None) -> None:
    rows = mlperf.load_rows()
    moe = [i for i, r in enumerate(rows) if mlperf._setup(r)[0].moe is not None]
    base: dict = {}
    if base_csv:
        with open(base_csv, newline="") as fh:
            for i, rec in enumerate(csv.DictReader(fh)):
                if rec.get("error"):
                    base[i] = float(rec["error"])
    on: dict = dict(base)
    for flag in (False, True) if not base_csv else (True,):
        serving_cost.MOE_ROUTING_KERNELS = flag
        mlperf.predict.cache_clear()
        comps = mlperf.compare([rows[i] for i in moe])
        for i, c in zip(moe, comps):
            (on if flag else base)[i] = c.error
    serving_cost.MOE_ROUTING_KERNELS = SHIPPED
    print("MLPerf v4.1 rows, error = predicted / measured - 1 (MoE rows simulated; others "
          f"{'from ' + base_csv if base_csv else 'not shown'})")
    for i in moe:
        r = rows[i]
        print(f"  {r.system[:30]:30s} {r.benchmark[:12]:12s} {r.scenario:8s} "
              f"off {base.get(i, float('nan')):+6.1%}  on {on[i]:+6.1%}")
    if len(base) == len(rows):
        print(f"  all rows off: {_summary(base)}")
        _groups(rows, base)
        print(f"  all rows on:  {_summary(on)}")
        _groups(rows, on)


def maxload_whatif(sample: int, base_csv: str | None) -> None:
    """The max-load MoE rows off vs on; with ``base_csv`` (``validate --regime
    serving-maxload --format csv`` of this commit) also every row, the others read from it."""
    from llmpara_core.serving import validation
    rows = [r for r in validation.load_rows(validation.SHIPPED_MAX_LOAD) if r.moe][::sample]
    out = {}
    for flag in (False, True):
        serving_cost.MOE_ROUTING_KERNELS = flag
        validation.predict.cache_clear()
        res = validation.compare(rows)
        out[flag] = {c.row.row_id: c.error for c in res if c.error is not None}
    serving_cost.MOE_ROUTING_KERNELS = SHIPPED
    for flag in (False, True):
        print(f"max-load MoE rows, switch {'on' if flag else 'off'}: {_summary(out[flag])}")
    if base_csv:
        with open(base_csv, newline="") as fh:
            base = {r["row_id"]: float(r["error"]) for r in csv.DictReader(fh) if r["error"]}
        print(f"max-load all rows, switch off: {_summary(base)}")
        print(f"max-load all rows, switch on:  {_summary({**base, **out[True]})}")


def refit_whatif(requests: int) -> None:
    """The release factors refitted on every max-load row (``stack_version.fit``, the method of
    scripts/fit_stack_versions.py, duty as shipped) with the switch off and on: the MoE
    factors and the in-sample figure (the MoE rows re-recorded with the switch on)."""
    from llmpara_core.serving import duty_fit, stack_version as V, validation
    rows = validation.load_rows(validation.SHIPPED_MAX_LOAD)
    serving_cost.MOE_ROUTING_KERNELS = False
    off = duty_fit.record(rows, requests)
    serving_cost.MOE_ROUTING_KERNELS = True
    try:
        on_by = {r.row_id: (r, p) for r, p in duty_fit.record([r for r in rows if r.moe],
                                                               requests)}
    finally:
        serving_cost.MOE_ROUTING_KERNELS = SHIPPED
    on = [on_by.get(r.row_id, (r, p)) for r, p in off]
    duty = serving_cost.TENSOR_DUTY
    for name, rec in (("off", off), ("on", on)):
        table = V.fit(rec, duty)
        moe = {k[0]: v for k, v in table.items() if k[1] == "moe"}
        print(f"switch {name}: refitted MoE factors {moe}; in sample "
              f"{V.summary(V.errors(rec, duty, table))} (shipped factors "
              f"{V.summary(V.errors(rec, duty, V.TIME_SCALE))})")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-csv", help="validate --regime mlperf --format csv of this commit")
    ap.add_argument("--maxload", action="store_true")
    ap.add_argument("--sample", type=int, default=1)
    ap.add_argument("--refit", action="store_true",
                    help="release factors refitted on the max-load rows, switch off and on")
    a = ap.parse_args(argv)
    if a.refit:
        from llmpara_core.serving.validation import MAX_LOAD_REQUESTS
        refit_whatif(MAX_LOAD_REQUESTS)
    elif a.maxload:
        maxload_whatif(a.sample, a.base_csv)
    else:
        mlperf_whatif(a.base_csv)


if __name__ == "__main__":
    main()
