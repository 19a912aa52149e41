"""The notebooks' host CPUs in llama.cpp's per-kernel cost: held out, per exponent (issue 27).

    python scripts/host_clock_whatif.py                      # exponents 0, 0.5, 1 (~15 min)
    python scripts/host_clock_whatif.py --exponent 0 --exponent 1 --in-sample

The XiongjieDai single-GPU notebooks (May 2024 llama.cpp builds) ran on rented boxes whose host
CPUs differ by generation and clock (``measurements.NOTEBOOK_HOSTS``, each notebook's CPU cell;
boost clocks from the vendors' specs). At 512 tokens the model is too slow on the boxes with
fast hosts (RTX 3070 on an EPYC 7443P -6.5 %, RTX 3080 on a Ryzen 5 3600X -8.4 %, RTX 4070 Ti
on an EPYC 7302 -5.7 %) and too fast on the old hosts (RTX 3080 Ti on an EPYC 7551P +7.3 %,
RTX 4090 on a Xeon Gold 6133 +6.2 %, RTX 4000 Ada on a Xeon E5-2650 v4 +4.4 %, RTX 3090 on a
Xeon E5-2696 v3 +4.0 %) -- held out, main at 39a209e. The rule (``measurements.
host_launch_factor``) scales such a row's per-kernel cost by (3.5 GHz / host boost) ** x; this
script sets x (``HOST_CLOCK_EXPONENT``), holds out the devices of the notebooks with a stated
host (their folds refit the class values and llama.cpp's profile with the rule on, as a full
leave-one-device-out would) and prints the batch-1 decode rows of those folds: median |error|,
rows within 4 % and 6 %, by class. ``--in-sample`` also refits on every row (the shipped
fit's rows) and prints the same figures in sample, so a choice of x can be checked against
the in-sample order. The measured figures are in docs/accuracy.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmpara_core.calibration import default_table, fitting  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402


def summary(preds, label: str) -> None:
    rows = [p for p in preds if validation.regime(p.row) == "batch-1"]
    by: dict[str, list[float]] = {}
    for p in rows:
        by.setdefault(p.efficiency_class.value, []).append(abs(p.error))
        by.setdefault("all", []).append(abs(p.error))
    for cls, errs in sorted(by.items()):
        print(f"  {label} {cls:16s} n={len(errs):3d} median {100 * statistics.median(errs):5.2f} %"
              f"  within 4 %: {sum(e <= 0.04 for e in errs):3d}  within 6 %: "
              f"{sum(e <= 0.06 for e in errs):3d}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exponent", type=float, action="append",
                    help="HOST_CLOCK_EXPONENT values (default 0, 0.5, 1)")
    ap.add_argument("--in-sample", action="store_true", help="also refit on every row")
    ap.add_argument("--rows", action="store_true", help="print each held-out row")
    ap.add_argument("--no-loo", action="store_true", help="only the in-sample refit")
    args = ap.parse_args(argv)
    exps = args.exponent or [0.0, 0.5, 1.0]
    if any(not 0.0 <= x <= 4.0 for x in exps):
        print("host_clock_whatif: --exponent must be within 0 ... 4", file=sys.stderr)
        return 2
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    devices = sorted({r.hardware.slug for r in mapped if validation.notebook_host(r)})
    base = default_table()
    print("devices held out:", ", ".join(devices))
    for x in exps:
        validation.HOST_CLOCK_EXPONENT = x
        t0 = time.time()
        preds = [] if args.no_loo else fitting.leave_one_device_out(mapped, base, devices)
        if preds:
            print(f"exponent {x:g}: held out ({time.time() - t0:.0f} s)")
            summary(preds, "held-out")
        if args.rows:
            for p in sorted(preds, key=lambda p: (p.row.hardware.slug, p.row.measurement.row_id)):
                if validation.regime(p.row) == "batch-1":
                    h = validation.notebook_host(p.row)
                    print(f"    {p.row.measurement.row_id} {p.row.hardware.slug:28s} "
                          f"{(h[0] if h else '-'):22s} {100 * p.error:+6.1f} %")
        if args.in_sample or args.no_loo:
            t0 = time.time()
            table = fitting.fit_table(mapped, base)
            ins = validation.predict_all(mapped, table)[0]
            print(f"exponent {x:g}: in sample ({time.time() - t0:.0f} s)")
            summary(ins, "in-sample")
    validation.HOST_CLOCK_EXPONENT = 0.0
    return 0


if __name__ == "__main__":
    sys.exit(main())
