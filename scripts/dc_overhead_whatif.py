"""What-if: the datacenter GPU class's own per-kernel cost, held out (issue 27, dc31).

    python scripts/dc_overhead_whatif.py --baseline B.json             # off, then on
    python scripts/dc_overhead_whatif.py --baseline B.json --min-devices 1,2 --in-sample

``B.json`` is ``llmpara validate --regime batch-1 --loo --time-budget 3000 --format json``
on the same code with the switch off. The datacenter class takes the consumer class's
per-kernel cost (``fitting.SHARED_OVERHEAD``); with ``fitting.OWN_OVERHEAD`` it fits its own
where its llama.cpp rows span ``--min-devices`` physical devices. The leave-one-device-out
folds of the datacenter devices are rerun (their class values and the stacks measured on them
are refitted) and the other batch-1 rows are taken from ``--baseline`` (their folds refit the
datacenter class too, which moves only stacks fitted across classes -- MLC, ExLlamaV2 -- a
little: the full ``validate --loo`` is the check). ``--in-sample`` also refits the whole table
on every row (``fitting.fit_table`` on the mapped rows -- not the shipped table's fit by
``scripts/fit_efficiency.py``, so its figures are not ``validate --refit``'s) and prints the
in-sample batch-1 figures per class.

Why it was tried (issue 27, dc31): the fused-build plan for the consumer class's 2025 llama.cpp
builds refits the shared per-kernel cost higher (3.345 -> 3.619 us), which cost gpt-fast's A100
BF16 tensor-parallel rows 1-4 points held out. Measured on dc31 (main at 39a209e, baseline
/work/briefs31/loo_main_39a209e.json; `python scripts/dc_overhead_whatif.py --baseline B.json
--min-devices 0,1,2 --in-sample`, ~45 s per setting plus ~70 s per in-sample fit), batch 1:

  setting            held out, datacenter (67 rows)   overall (275)    in sample: dc / consumer
  off (shared)       7.23 %, 17 in 4 %, 24 in 6 %     4.34 %, 125 in 4 %   4.69 / 2.62 %
  own, >= 1 device   7.23 %, 13 in 4 %, 26 in 6 %     4.36 %, 121 in 4 %   3.70 / 2.92 %
  own, >= 2 devices  held out as off (every fold with a datacenter llama.cpp device holds one
                     of the two A100s out, leaving one device: the donor's value); in sample
                     as >= 1 device

In sample the datacenter class fits its own 4.413 us (consumer 3.625) and its rows improve
(4.69 -> 3.70 %; the consumer rows lose 2.62 -> 2.92 % as the per-compute-unit streaming bounds,
fitted on both classes' rows, move); held out nothing is gained: each A100 fold fits the value
on the other A100 alone, and gpt-fast's A100 TP rows get worse (Llama-2 7B BF16 TP8 -7.1 ->
-9.4 %, Mixtral BF16 TP8 -1.9 -> -3.7 %) while the A100 PCIe's llama.cpp rows move both ways
(8B Q4_K_M TP1 +3.4 -> -5.7 %, 4-GPU split +8.7 -> 0.0 %). The consumer class's held-out rows
do not move in these folds (it is the donor, fitted first); the stacks fitted across classes
(MLC, ExLlamaV2) would move slightly in the consumer folds, not rerun here. Not kept
(``fitting.OWN_OVERHEAD = False``); the earlier tries are in the comment at
``fitting.SHARED_OVERHEAD``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration import default_table, fitting  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402
from llmpara_core.units import S_PER_US  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_bandwidth_whatif import summary  # noqa: E402  (same row summary)

CLASSES = ("datacenter-gpu", "consumer-gpu", "unified-soc")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--min-devices", default="1", help="comma-separated; 0 = switch off")
    ap.add_argument("--in-sample", action="store_true")
    args = ap.parse_args(argv)
    try:
        settings = [int(x) for x in args.min_devices.split(",")]
        base = [p for p in json.loads(args.baseline.read_text(encoding="utf-8"))["predictions"]
                if p["metric"] == "decode_tok_s" and p["batch"] == 1]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"dc_overhead_whatif: {e}", file=sys.stderr)
        return 2
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    table = default_table()
    folds = sorted({r.hardware.slug for r in mapped
                    if validation.efficiency_class(r).value == "datacenter-gpu"
                    and validation.regime(r) == "batch-1"})
    print(f"folds rerun: {', '.join(folds)}")
    for n in settings:
        fitting.OWN_OVERHEAD, fitting.OWN_OVERHEAD_MIN_DEVICES = n > 0, max(n, 1)
        t0 = time.time()
        preds = fitting.leave_one_device_out(mapped, table, folds)
        new = {p.row.measurement.row_id: p.error for p in preds
               if validation.regime(p.row) == "batch-1"}
        rows = [(p["class"], new.get(p["row_id"], p["error"])) for p in base]
        print(f"\nmin devices {n} ({'on' if n else 'off'}; {time.time() - t0:.0f} s)")
        print(f"  overall:        {summary([e for _, e in rows])}")
        for c in CLASSES:
            print(f"  {c:15s} {summary([e for k, e in rows if k == c])}")
        for p in sorted(preds, key=lambda p: p.row.measurement.row_id):
            if validation.regime(p.row) == "batch-1":
                m = p.row.measurement
                print(f"    {m.row_id} {p.row.hardware.slug:26s} "
                      f"{(p.row.framework or '')[:10]:10s} {m.quant[:18]:18s} "
                      f"x{p.row.devices}  {p.error:+.3f}")
        if args.in_sample:
            t0 = time.time()
            t = fitting.fit_table(mapped, table)
            ps = validation.predict_all([r for r in mapped
                                         if validation.regime(r) == "batch-1"], t)[0]
            dc = t.classes.get(validation.HardwareClass.DATACENTER_GPU)
            cg = t.classes.get(validation.HardwareClass.CONSUMER_GPU)
            print(f"  in sample ({time.time() - t0:.0f} s): per-kernel cost datacenter "
                  f"{dc.kernel_overhead_s / S_PER_US:.3f} us, consumer "
                  f"{cg.kernel_overhead_s / S_PER_US:.3f} us")
            print(f"    overall:        {summary([p.error for p in ps])}")
            for c in CLASSES:
                print(f"    {c:15s} "
                      f"{summary([p.error for p in ps if p.efficiency_class.value == c])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
