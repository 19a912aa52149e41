"""Serving simulator vs published measurements: max-load output throughput of TensorRT-LLM
(fixed ISL/OSL, every GPU out of sample: nothing is fitted to these rows) and the request-rate
rows (TensorRT-LLM/Triton serving table, SGLang and vLLM ShareGPT runs), printed as tables.

    python scripts/validate_serving.py [--requests N] [--tp1-only]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving.validation import (compare, error_summary, load_rows,  # noqa: E402
                                             rate_points)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--tp1-only", action="store_true")
    ap.add_argument("--rates-only", action="store_true", help="only the request-rate rows")
    a = ap.parse_args()
    if not a.rates_only:
        max_load(a)
    rates()


def max_load(a) -> None:
    rows = load_rows(ROOT / "tests/data/serving_trtllm_max_load.csv")
    if a.tp1_only:
        rows = [r for r in rows if r.tp == 1]
    comps = compare(rows, a.requests)
    s = error_summary(comps)
    print(f"max-load output tokens/s, TensorRT-LLM profile: {s['rows']} rows "
          f"({s['skipped']} skipped): median |err| {s['median_abs_error']:.1%}, "
          f"signed {s['median_signed_error']:+.1%}")
    for gpu, v in s["per_gpu"].items():
        print(f"  {gpu:28s} rows {v['rows']:4d}  median |err| {v['median_abs_error']:.1%}  "
              f"signed {v['median_signed_error']:+.1%}")
    by_tp = collections.defaultdict(list)
    for c in comps:
        if c.error is not None:
            by_tp[c.row.tp].append(c.error)
    for tp, e in sorted(by_tp.items()):
        print(f"  TP{tp}: rows {len(e)}  median |err| {median(abs(x) for x in e):.1%}")
    skipped = collections.Counter(c.skipped for c in comps if c.skipped)
    for why, n in skipped.items():
        print(f"  skipped {n}: {why}")


def rates() -> None:
    print("\nrequest-rate rows (measured -> simulated; Triton table = means, SGLang/vLLM = "
          "medians)")
    pts = rate_points(ROOT / "tests/data/serving_rate_rows.csv")
    errs = collections.defaultdict(list)
    for p in pts:
        for k in p.measured:
            errs[(p.framework.split()[0], k)].append(p.predicted[k] / p.measured[k] - 1)
    for (fw, k), e in sorted(errs.items()):
        print(f"  {fw:12s} {k:20s} {len(e):3d} points  median |err| "
              f"{median(abs(x) for x in e):.1%}  signed {median(e):+.1%}")
    for p in pts:
        cells = "  ".join(f"{k} {p.measured[k]:.4g} -> {p.predicted[k]:.4g}"
                          for k in sorted(p.measured))
        rate = "max-load" if p.rate is None else f"{p.rate:g} req/s"
        lens = "ShareGPT" if p.isl is None else f"{p.isl}/{p.osl}"
        print(f"  {p.framework[:12]:12s} {p.model:24s} TP{p.tp} {lens:9s} {rate:10s} {cells}")


if __name__ == "__main__":
    main()
