"""Fit TensorRT-LLM's runtime reserve (``serving.config.TRTLLM_RUNTIME_RESERVE_GIB``: device
memory the stack holds outside the weights, activations and KV cache) on the max-load rows, with
the power wall's duty and the release factors refitted on top of each grid value, and print the
leave-one-GPU-out figure (``serving.reserve_fit``; ``llmpara validate --regime serving-maxload
--loo`` gives the same held-out figures).

    python scripts/fit_runtime_reserve.py [--reserves 0,1,2,3,4,5] [--requests N]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import reserve_fit, stack_version, validation as sv  # noqa: E402


def summary(errs) -> str:
    e = [x for _, x in errs]
    by = defaultdict(list)
    for r, x in errs:
        by[f"TP{r.tp}"].append(x)
        by[r.hardware].append(x)
    return (f"{median(map(abs, e)):.1%} (signed {median(e):+.1%}, {len(e)} rows); "
            + "; ".join(f"{k} {median(map(abs, v)):.1%}" for k, v in sorted(by.items())))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reserves", default=",".join(f"{g:g}" for g in reserve_fit.RESERVES_GIB))
    ap.add_argument("--requests", type=int, default=sv.MAX_LOAD_REQUESTS)
    a = ap.parse_args()
    try:
        grid = tuple(float(x) for x in a.reserves.split(","))
    except ValueError:
        print(f"--reserves must be numbers separated by commas, got {a.reserves!r}",
              file=sys.stderr)
        return 2
    if a.requests < 1 or not grid or not all(0 <= g <= 100 for g in grid):
        print("--requests must be >= 1 and reserves in [0, 100] GiB", file=sys.stderr)
        return 2
    by = reserve_fit.record_all(sv.load_rows(sv.SHIPPED_MAX_LOAD), grid, a.requests)
    for g, recs in by.items():
        duty, table, _ = reserve_fit._fitted(recs, lambda r: True)
        print(f"reserve {g:g} GiB: in sample {summary(stack_version.errors(recs, duty, table))}"
              f"\n  duty {duty:g}, factors {table}", flush=True)
    best = reserve_fit.fit(by)
    print(f"\nfitted TRTLLM_RUNTIME_RESERVE_GIB = {best:g}")
    held, chosen = reserve_fit.leave_one_gpu_out(by)
    for g, (res, duty) in chosen.items():
        print(f"leave out {g}: reserve {res:g} GiB, duty {duty:g} fitted on the others; held "
              f"out {summary([x for x in held if x[0].hardware == g])}")
    print(f"leave-one-GPU-out, all rows: {summary(held)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
