"""What-ifs on how the MLPerf v4.1 rows (``presets/tables/mlperf_serving.csv``; nothing is fitted
on them) are simulated: their boards, their request lengths and their Offline run length,
printed as per-row residual tables beside the shipped comparison (``mlperf.compare``):

    python scripts/mlperf_lengths_whatif.py --no-board
    python scripts/mlperf_lengths_whatif.py --lengths fixed
    python scripts/mlperf_lengths_whatif.py --cap-output 1024
    python scripts/mlperf_lengths_whatif.py --offline-duration 2400 --offline-cap 60000
    python scripts/mlperf_lengths_whatif.py --only XE9640 --only mixtral    (a subset of rows)

``--no-board``: every TP > 1 row on its GPU's 8-GPU NVSwitch board (``mlperf.SYSTEM_BOARDS =
False``, the state before Dell's XE9640 ran on its own HGX H100 4-GPU board).

``--lengths fixed``: every request at the row's mean input and output lengths (shipped:
MLPerf's OpenOrca requests scaled to those means, ``mlperf.lengths_for``).

``--cap-output N``: the scaled outputs clipped at N tokens and the rest rescaled so that the
mean stays the row's (the harness stops a response at its max output length; MLPerf's
llama2-70b and mixtral-8x7b generate at most 1,024 tokens, while OpenOrca's references scaled
by 290 / 219 reach 1,346).

``--offline-duration S`` / ``--offline-cap N``: the runs as long as S seconds at their rate
(shipped: ``mlperf.MIN_DURATION_S`` = 600 s, mlperf.conf; NVIDIA's and Dell's llama2-70b
configs set 2,400 s) -- the Offline run and so the Server search's upper bracket, and the
Server runs' arrivals -- with at most N requests per Offline instance (shipped
``mlperf.OFFLINE_CAP``). A longer run has a smaller share of fill and drain.

Each variant is measured alone against the shipped state; the figures go in docs/serving-validation.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import mlperf  # noqa: E402
from llmpara_core.serving.lengths import LengthTable  # noqa: E402


def _fixed(isl: float, osl: float) -> LengthTable:
    return LengthTable(f"fixed {isl:g}/{osl:g}", "row means",
                       np.array([max(1, round(isl))]), np.array([max(1, round(osl))]))


def _capped(cap: int):
    shipped = mlperf.lengths_for.__wrapped__

    def f(isl: float, osl: float) -> LengthTable:
        t = shipped(isl, osl)
        o = t.osl.astype(float)
        for _ in range(20):                  # clip, then rescale the rest to keep the mean
            o = np.minimum(o, cap)
            o = o * (osl / o.mean())
        o = np.maximum(1, np.minimum(np.rint(o), cap)).astype(np.int64)
        return LengthTable(f"{t.name}, outputs <= {cap}", t.source, t.isl, o)
    return f


def _table(comps, base) -> None:
    print(f"{'system':32s} {'benchmark':14s} {'scen':8s} {'TP':>2s}  {'shipped':>8s}  "
          f"{'variant':>8s}")
    for c, b in zip(comps, base):
        r = c.row
        print(f"{r.system[:32]:32s} {r.benchmark:14s} {r.scenario:8s} {r.tp:2d}  "
              f"{b.error:+8.1%}  {c.error:+8.1%}")

    def block(name, sel):
        e = [c.error for c in comps if sel(c.row)]
        f = [c.error for c in base if sel(c.row)]
        if e:
            print(f"{name:40s} n={len(e):2d}  shipped {median(abs(x) for x in f):5.1%} "
                  f"({median(f):+.1%})  variant {median(abs(x) for x in e):5.1%} "
                  f"({median(e):+.1%})")
    block("all", lambda r: True)
    for s in ("Offline", "Server"):
        block(f"scenario {s}", lambda r, s=s: r.scenario == s)
    for g in sorted({c.row.gpu for c in comps}):
        block(f"gpu {g}", lambda r, g=g: r.gpu == g)
    for b in sorted({c.row.benchmark for c in comps}):
        block(f"benchmark {b}", lambda r, b=b: r.benchmark == b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-board", action="store_true")
    ap.add_argument("--lengths", choices=("scaled", "fixed"), default="scaled")
    ap.add_argument("--cap-output", type=int, default=None)
    ap.add_argument("--offline-duration", type=float, default=None)
    ap.add_argument("--offline-cap", type=int, default=None)
    ap.add_argument("--base", default=None, metavar="CSV",
                    help="the shipped errors from `llmpara validate --regime mlperf --format "
                         "csv` (skips re-running the shipped comparison)")
    ap.add_argument("--only", action="append", default=[],
                    help="rows whose system / benchmark / scenario contains this (repeatable)")
    a = ap.parse_args(argv)
    rows = [r for r in mlperf.load_rows()
            if not a.only or any(s in f"{r.system} {r.benchmark} {r.scenario}" for s in a.only)]
    if a.base:
        import csv
        with open(a.base, newline="") as fh:
            got = {(d["system"], d["benchmark"], d["scenario"]): float(d["predicted"])
                   for d in csv.DictReader(fh)}
        base = tuple(mlperf.MlperfComparison(r, got[(r.system, r.benchmark, r.scenario)])
                     for r in rows)
    else:
        base = mlperf.compare(rows)
    mlperf.predict.cache_clear()
    if a.no_board:
        mlperf.SYSTEM_BOARDS = False
    if a.lengths == "fixed":
        mlperf.lengths_for = _fixed
    if a.cap_output is not None:
        mlperf.lengths_for = _capped(a.cap_output)
    if a.offline_duration is not None:
        mlperf.MIN_DURATION_S = a.offline_duration
    if a.offline_cap is not None:
        mlperf.OFFLINE_CAP = a.offline_cap
    comps = mlperf.compare(rows)
    print(f"variant: {' '.join(sys.argv[1:]) or '(none)'}")
    _table(comps, base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
