"""Fit ``serving.cost.FP4_GEMM_SHARE`` (block-scaled FP4 GEMMs' share of the FP4 peak) on the
TensorRT-LLM max-load NVFP4 rows of the shared batched_throughput.csv that have presets (B200,
TP1), by bisection on the signed median error, and print the MLPerf v4.1 B200 check.

    python scripts/fit_fp4_share.py [--data PATH/batched_throughput.csv] [--requests N]
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import cost, mlperf, validation as sv  # noqa: E402


def rows_of(path: str):
    with open(path, newline="") as f:
        src = [r for r in csv.DictReader(f) if r["framework"] == "TensorRT-LLM"
               and r["hardware"] == "NVIDIA B200" and not r["batch_size"] and r["isl"]
               and r["precision_weights"] == "FP4" and r["metric"] == "output_tok_s_total"
               and r["tp"] == "1"]
    tmp = Path(tempfile.mkdtemp()) / "b200.csv"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(src[0]))
        w.writeheader()
        w.writerows(src)
    return sv.load_rows(tmp)


def errors(rows, share: float, requests: int) -> list[float]:
    cost.FP4_GEMM_SHARE = share
    sv.predict.cache_clear()
    return [c.error for c in sv.compare(rows, requests) if c.error is not None]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/work/shared/validation/batched_throughput.csv")
    ap.add_argument("--requests", type=int, default=1000)
    a = ap.parse_args()
    sv.PRECISIONS["FP4"] = "NVFP4"
    rows = rows_of(a.data)
    lo, hi = 0.3, 1.0
    e = errors(rows, hi, a.requests)
    print(f"{len(rows)} rows; share 1.0: median |err| {median(map(abs, e)):.1%}, signed "
          f"{median(e):+.1%}")
    for _ in range(7):
        mid = (lo + hi) / 2
        e = errors(rows, mid, a.requests)
        print(f"share {mid:.3f}: median |err| {median(map(abs, e)):.1%}, signed {median(e):+.1%}",
              flush=True)
        lo, hi = (mid, hi) if median(e) < 0 else (lo, mid)
    share = round((lo + hi) / 2, 3)
    e = errors(rows, share, a.requests)
    print(f"fitted FP4_GEMM_SHARE = {share}: median |err| {median(map(abs, e)):.1%}, signed "
          f"{median(e):+.1%}")
    mlperf.predict.cache_clear()
    for c in mlperf.compare([r for r in mlperf.load_rows() if r.gpu == "B200"]):
        print(f"MLPerf B200 {c.row.scenario}: measured {c.row.measured:.0f}, predicted "
              f"{c.predicted:.0f} ({c.error:+.1%})")


if __name__ == "__main__":
    main()
