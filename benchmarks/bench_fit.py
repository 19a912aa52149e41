"""Benchmark: the efficiency fit's inner loops (``scripts/fit_efficiency.py``).

    python benchmarks/bench_fit.py [--runs N] [--no-shrink] [--whole]

Times, in process (shipped rows mapped once, outside the timed region):
- one gpt-fast stack fit (``stack_fit.fit_framework``, shrinkage 0) on its 28 rows, 20 of them
  on several devices (each trial efficiency re-times them with the core's sharded pipeline);
- one nested shrinkage choice of gpt-fast (``stack_fit.choose_shrink``: 6 strengths x 2
  devices of refits), the part that made the whole script take ~30 min;
- with ``--whole``: the in-sample fit of the whole table (``fitting.fit_table``, once).
Prints the median and spread of the runs. The fit's result does not depend on these timings:
``scripts/fit_efficiency.py`` writes the same table before and after a speed change.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core import calibration  # noqa: E402
from llmpara_core.calibration import fitting, stack_fit  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402
from llmpara_core.metrics.energy import read_energy_measurements  # noqa: E402


def _timed(f, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out


def _line(name: str, t: list[float]) -> str:
    return (f"{name:34s} median {statistics.median(t):7.2f} s "
            f"(min {min(t):.2f}, max {max(t):.2f}, n={len(t)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-shrink", action="store_true", help="skip the nested shrinkage choice")
    ap.add_argument("--whole", action="store_true", help="also time the whole in-sample fit")
    args = ap.parse_args()
    rows, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(rows, skipped)
    table = calibration.default_table()
    gf = [r for r in mapped if r.framework == "gpt-fast" and r.hardware.efficiency is None]
    print(_line("gpt-fast stack fit", _timed(
        lambda: stack_fit.fit_framework("gpt-fast", gf, table), args.runs)))
    if not args.no_shrink:
        print(_line("gpt-fast nested shrinkage choice", _timed(
            lambda: stack_fit.choose_shrink("gpt-fast", gf, table), args.runs)))
    if args.whole:
        energy = read_energy_measurements(ROOT / "presets" / "tables" / "energy_measurements.csv")
        print(_line("in-sample fit of the table", _timed(
            lambda: fitting.fit_table(mapped, calibration.provisional_table(), energy=energy), 1)))


if __name__ == "__main__":
    main()
