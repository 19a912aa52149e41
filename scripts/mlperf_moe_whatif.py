"""What-if: TensorRT-LLM's MoE routing kernels in the serving cost (``serving.cost.
MOE_ROUTING_KERNELS``), on the MLPerf v4.1 rows (``presets/tables/mlperf_serving.csv``;
nothing is fitted on them) and, with ``--maxload``, on the shared max-load rows of MoE models.

The switch adds, per MoE layer and pass, the permute (``expandInputRowsKernel``: T x h read,
k T x h written), fc1's read of the k T x h permuted rows (counted once per token by the
forward pass) and four launches (top-k softmax, the expert-id radix sort, the per-expert row
offsets, the permute) -- the kernels of ``CutlassMoeFCRunner::runMoe`` (github
NVIDIA/TensorRT-LLM@03cff08f1494: cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu).
Only MoE rows change, so only those are simulated; the other rows' errors are read from a
``validate --regime mlperf --format csv`` file of the same commit (``--base-csv``) to give
the 20-row summary.

    PYTHONPATH=. python -m llmpara_core validate --regime mlperf --time-budget 3000 \\
        --format csv > base.csv
    python scripts/mlperf_moe_whatif.py --base-csv base.csv
    python scripts/mlperf_moe_whatif.py --maxload [--base-csv maxload.csv]
                                   # max-load MoE rows off vs on (all rows with the csv of
                                   # validate --regime serving-maxload --format csv)

Measured on branch mlperf28 (main b480454 + this switch):
  MLPerf pass check (scripts/mlperf_step_check.py, log TPOT / model pass): Mixtral H100 /
  Dell XE8640 / H200 1.112 / 1.091 / 1.098 -> 1.095 / 1.074 / 1.085 (+1.5 ms of ~90-126 ms).
  MLPerf and max-load figures: see the report printed by this script (README, MLPerf).
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
    serving_cost.MOE_ROUTING_KERNELS = False
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
    serving_cost.MOE_ROUTING_KERNELS = False
    for flag in (False, True):
        print(f"max-load MoE rows, switch {'on' if flag else 'off'}: {_summary(out[flag])}")
    if base_csv:
        with open(base_csv, newline="") as fh:
            base = {r["row_id"]: float(r["error"]) for r in csv.DictReader(fh) if r["error"]}
        print(f"max-load all rows, switch off: {_summary(base)}")
        print(f"max-load all rows, switch on:  {_summary({**base, **out[True]})}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-csv", help="validate --regime mlperf --format csv of this commit")
    ap.add_argument("--maxload", action="store_true")
    ap.add_argument("--sample", type=int, default=1)
    a = ap.parse_args(argv)
    if a.maxload:
        maxload_whatif(a.sample, a.base_csv)
    else:
        mlperf_whatif(a.base_csv)


if __name__ == "__main__":
    main()
