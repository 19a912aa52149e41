"""What-if of the MLPerf v4.1 rows run with the submitters' own engine settings
(``presets/tables/mlperf_serving.csv``: ``max_batch``, ``max_num_tokens``, ``min_duration_s``,
each with its ``engine_source``) against the stack defaults and mlperf.conf's 600 s
(``mlperf.ENGINE_SETTINGS``), and the operating point of one row at a Poisson rate: requests
in flight (time-weighted) and p99 / mean TPOT, for comparison with a Server log's Little's-law
figure (completed samples/s x mean latency per instance).

    python scripts/mlperf_engine_settings_whatif.py [--rows I,J,...]
    python scripts/mlperf_engine_settings_whatif.py --operating-point ROW --share 0.93
    python scripts/mlperf_engine_settings_whatif.py --trt-policy on-demand

``--trt-policy on-demand`` runs the TensorRT-LLM rows with KV blocks allocated as tokens are
written and requests evicted (recomputed) when the cache is full -- TensorRT-LLM's
MAX_UTILIZATION capacity scheduler -- instead of the stack default's reservation at admission
(GUARANTEED_NO_EVICT; ``config.FRAMEWORK_DEFAULTS``), both with and without the rows' settings.

Prints per row measured, predicted (defaults), predicted (own settings) and both errors, then
the median |error| and signed median overall and per scenario for both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import mlperf  # noqa: E402
from llmpara_core.serving.engine import simulate  # noqa: E402
from llmpara_core.serving.report import per_request  # noqa: E402
from llmpara_core.serving.requests import RequestSpec  # noqa: E402


def operating_point(i: int, share: float, duration_s: float) -> None:
    row = mlperf.load_rows()[i]
    s = mlperf._setup(row)
    if s is None:
        sys.exit(f"error: row {i} has no preset")      # not reached: every shipped row has one
    cost, cfg = s
    table = mlperf.lengths_for(row.isl, row.osl)
    off = simulate(cost, cfg, RequestSpec(table=table, requests=6000))
    sat = len(off.osl) / off.makespan_s
    rate = sat * share
    res = simulate(cost, cfg, RequestSpec(table=table, requests=int(rate * duration_s))
                   .with_rate(rate))
    ttft, tpot, _ = per_request(res)
    tpot = tpot[np.isfinite(tpot)]
    run, dt = np.asarray(res.log["running"]), np.asarray(res.log["dt_s"])
    print(f"{row.system} {row.benchmark} {row.scenario}: {share:g} x the Offline rate = "
          f"{rate * table.osl.mean() * row.instances:.0f} tok/s (measured {row.measured:.0f}); "
          f"in flight {float((run * dt).sum() / dt.sum()):.0f}, TPOT mean "
          f"{tpot.mean() * 1e3:.0f} ms p99 {np.percentile(tpot, 99) * 1e3:.0f} ms, TTFT p99 "
          f"{np.percentile(ttft, 99):.2f} s")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", help="comma-separated row indices (default: all)")
    ap.add_argument("--operating-point", type=int, metavar="ROW")
    ap.add_argument("--share", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--trt-policy", choices=("reserve", "on-demand"), default="reserve",
                    help="KV policy of the TensorRT-LLM rows (default: the stack's, reserve)")
    a = ap.parse_args(argv)
    if a.trt_policy != "reserve":
        mlperf.RELEASE_ENGINE = {**mlperf.RELEASE_ENGINE,
                                 "tensorrt-llm": {"policy": a.trt_policy}}
    if a.operating_point is not None:
        if not 0 <= a.operating_point < len(mlperf.load_rows()):
            ap.error(f"--operating-point must be a row index in 0..{len(mlperf.load_rows()) - 1}")
        if not (0 < a.share <= 1.5 and 0 < a.duration <= 86400):
            ap.error("--share must be in (0, 1.5] and --duration in (0, 86400]")
        operating_point(a.operating_point, a.share, a.duration)
        return
    rows = mlperf.load_rows()
    if a.rows:
        try:
            rows = [rows[int(x)] for x in a.rows.split(",")]
        except (ValueError, IndexError):
            ap.error(f"--rows must be indices in 0..{len(rows) - 1}")
    base = mlperf.compare(rows, engine=False)
    own = mlperf.compare(rows, engine=True)
    for b, o in zip(base, own):
        r = b.row
        fmt = (lambda e: "   n/a" if e is None else f"{e:+6.1%}")
        print(f"{r.system:32s} {r.benchmark:14s} {r.scenario:8s} {r.measured:9.0f} "
              f"{fmt(b.error)} {fmt(o.error)}")
    for name, comps in (("defaults", base), ("own settings", own)):
        s = mlperf.error_summary(comps)
        per = ", ".join(f"{k} {v['median_abs_error']:.1%}" for k, v in s["per_scenario"].items())
        print(f"{name}: median {s['median_abs_error']:.1%}, signed "
              f"{s['median_signed_error']:+.1%}; {per}")


if __name__ == "__main__":
    main()
