"""What-if: each kernel of a ROCm / HIP row dearer by a fixed time, held out (issue 27, gf32).

    python scripts/hip_dispatch_whatif.py --baseline B.json             # 0 and the cited 2.99 us
    python scripts/hip_dispatch_whatif.py --baseline B.json --us 0,1,2,2.99,4 --in-sample

B.json is the output of ``llmpara validate --regime batch-1 --loo --time-budget 3000 --format
json`` (or of ``llmpara validate --loo`` with every regime: only batch-1 decode rows are read)
on the same code. Sets ``measurements.HIP_GRAPH_NODE_EXTRA_S`` (shipped 0 = off; the comment
there cites the per-node figure) and reruns the batch-1 leave-one-device-out folds of every
device measured with a stack that has ROCm rows (gpt-fast: the MI250X GCD, and the A100 SXM4
80GB held out with its 330 W twin); the other rows are taken from B.json (their folds do not
see the rule: no other stack or class has a HIP row). ``--in-sample`` also refits the stack on
all rows and prints its in-sample batch-1 figure, to check the held-out ordering against it.

Measured (gf32: main at 9890937 plus the switch, its shipped table; B.json that commit's
``llmpara validate --loo --time-budget 3000 --format json``), ``--us 0,1,2,2.989,4,5,6,8,12
--in-sample``: held out datacenter batch 1 7.29 / 6.41 / 5.79 / 4.67 / 4.54 / 4.64 / 5.50 /
7.02 / 9.28 % (rows within 6 % of 67: 30 / 32 / 35 / 39 / 44 / 43 / 38 / 31 / 29), overall 3.90
/ 3.86 / 3.86 / 3.71 / 3.56 / 3.58 / 3.86 / 3.86 / 3.88 % (within 4 % of 275: 141 / 144 / 146 /
150 / 155 / 154 / 146 / 145 / 143); gpt-fast in sample 6.41 / 5.54 / 4.89 / 4.02 / 4.02 / 3.67
/ 4.94 / 4.87 / 5.01 %. The switch ships at the cited 2.99 us (measurements.py has the
citation); docs/accuracy.md ("HIP's per-node cost on a replayed graph") has the rows.
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
from device_bandwidth_whatif import report_folds, summary  # noqa: E402  (same report)


def batch1(p: dict) -> bool:
    return p.get("metric") == "decode_tok_s" and p.get("batch") == 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--us", default=f"0,{validation.HIP_GRAPH_NODE_CITED_S / S_PER_US:.3f}",
                    help="comma-separated extra microseconds per kernel on HIP rows")
    ap.add_argument("--baseline", type=Path, required=True,
                    help="validate --loo --format json of the other rows")
    ap.add_argument("--in-sample", action="store_true", help="also the in-sample stack fit")
    args = ap.parse_args(argv)
    try:
        extras = [float(x) for x in args.us.split(",")]
        if not extras or any(not (0.0 <= x <= 50.0) for x in extras):
            raise ValueError("extra microseconds must lie in 0 .. 50")
        base = [p for p in json.loads(args.baseline.read_text(encoding="utf-8"))["predictions"]
                if batch1(p)]
        if not base:
            raise ValueError(f"{args.baseline}: no batch-1 decode predictions")
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"hip_dispatch_whatif: {e}", file=sys.stderr)
        return 2
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    stacks = {r.framework for r in mapped if validation.hip_runtime(r) and r.framework}
    folds = sorted({r.hardware.slug for r in mapped
                    if r.framework in stacks and validation.regime(r) == "batch-1"})
    table = default_table()
    print(f"folds rerun: {', '.join(folds)} (stacks {', '.join(sorted(stacks))})")
    saved = validation.HIP_GRAPH_NODE_EXTRA_S
    try:
        for us in extras:
            validation.HIP_GRAPH_NODE_EXTRA_S = us * S_PER_US
            t0 = time.time()
            preds = fitting.leave_one_device_out(mapped, table, folds)
            print(f"\n+{us:.3f} us per HIP kernel ({time.time() - t0:.0f} s), held out")
            report_folds(preds, base, stacks)
            if args.in_sample:
                t = fitting.fit_table(mapped, table, only=stacks, classes_too=False)
                ins = [p for p in validation.predict_all(
                    [r for r in mapped if r.framework in stacks
                     and validation.regime(r) == "batch-1"], t)[0]]
                print(f"  in sample ({', '.join(sorted(stacks))}): "
                      f"{summary([p.error for p in ins])}")
    finally:
        validation.HIP_GRAPH_NODE_EXTRA_S = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
