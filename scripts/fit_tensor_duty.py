"""Fit ``serving.cost.TENSOR_DUTY`` (the power wall of an FP8 serving iteration: the share of
its time a device can run its tensor cores at their full-clock FP8 rate within its TDP) on the
TensorRT-LLM max-load rows (``presets/tables/serving_max_load.csv``, copied from the shared
``batched_throughput.csv``), with a leave-one-GPU-out figure, and print the MLPerf v4.1 check
(rows never fitted on).

    python scripts/fit_tensor_duty.py [--requests N] [--duties 0.4,0.45,...] [--cache F.pkl]
                                      [--no-mlperf]

The method is ``llmpara_core.serving.duty_fit`` (each configuration simulated once, its passes
re-timed for every duty of the grid: exact at max load under the no-eviction policy);
``llmpara validate --regime serving-maxload --loo`` gives the same held-out figures.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import cost as C, duty_fit, mlperf, validation as sv  # noqa: E402


def stats(errs) -> str:
    e = [x for _, x in errs]
    return f"{median(map(abs, e)):.1%} (signed {median(e):+.1%}, {len(e)} rows)"


def groups(errs) -> str:
    by = defaultdict(list)
    for r, e in errs:
        by[f"TP{r.tp}"].append(e)
        shape = ("prompt-heavy" if r.isl >= 4 * r.osl else
                 "decode-heavy" if r.osl >= 4 * r.isl else "balanced")
        by[f"{r.precision} {shape}"].append(e)
    return "; ".join(f"{k} {median(map(abs, v)):.1%} ({median(v):+.1%})"
                     for k, v in sorted(by.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=sv.MAX_LOAD_REQUESTS)
    ap.add_argument("--duties", default=",".join(f"{d:g}" for d in duty_fit.DUTIES))
    ap.add_argument("--cache", help="pickle of the recorded passes (written if missing)")
    ap.add_argument("--no-mlperf", action="store_true")
    a = ap.parse_args()
    try:
        duties = [float(x) for x in a.duties.split(",")]
    except ValueError:
        print(f"--duties must be numbers separated by commas, got {a.duties!r}", file=sys.stderr)
        return 2
    if a.requests < 1 or not duties or not all(0 < d <= 1 for d in duties):
        print("requests must be >= 1 and duties in (0, 1]", file=sys.stderr)
        return 2
    if a.cache and Path(a.cache).exists():
        records = pickle.loads(Path(a.cache).read_bytes())
    else:
        records = duty_fit.record(sv.load_rows(sv.SHIPPED_MAX_LOAD), a.requests)
        if a.cache:
            Path(a.cache).write_bytes(pickle.dumps(records))
    base = duty_fit.errors(records, None)
    print(f"no wall: {stats(base)}\n  {groups(base)}")
    for d in duties:
        print(f"duty {d:.2f}: {stats(duty_fit.errors(records, d))}")
    best = duty_fit.fit(records, duties)
    res = duty_fit.errors(records, best)
    print(f"\nfitted TENSOR_DUTY = {best:.2f}: {stats(res)}\n  {groups(res)}")
    held, chosen = duty_fit.leave_one_gpu_out(records, duties)
    for g, d in chosen.items():
        print(f"leave out {g}: duty fitted on the others {d:.2f}; held out "
              f"{stats([(r, e) for r, e in held if r.hardware == g])} (no wall "
              f"{stats([(r, e) for r, e in base if r.hardware == g])})")
    print(f"leave-one-GPU-out, all rows: {stats(held)}\n  {groups(held)}")
    if not a.no_mlperf:
        saved, C.TENSOR_DUTY = C.TENSOR_DUTY, best
        try:
            mlperf.predict.cache_clear()
            s = mlperf.error_summary(mlperf.compare())
            print(f"\nMLPerf v4.1 at duty {best:.2f} (never fitted on): median "
                  f"{s['median_abs_error']:.1%}, signed {s['median_signed_error']:+.1%}; "
                  + "; ".join(f"{k} {v['median_abs_error']:.1%} ({v['median_signed_error']:+.1%})"
                              for k, v in {**s['per_scenario'], **s['per_gpu']}.items()))
        finally:
            C.TENSOR_DUTY = saved
            mlperf.predict.cache_clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
