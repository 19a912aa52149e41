"""vLLM v0.2's eager decode (issue 27, vl32): the vLLM < 0.6 rows of a build before vLLM's CUDA
graphs (``measurements.eager_decode``), each predicted with ``eager_launch_s`` fitted on the
other eager rows alone (``fitting.fit_eager_launch``), and in sample (fitted on all of them).

    python scripts/vllm_eager_whatif.py            # the shipped table's other values, ~10 s
    python scripts/vllm_eager_whatif.py --off      # the rows as a CUDA-graph build (rule off)

Only the eager cost is refitted here (the class and stack values are the shipped table's);
``llmpara validate --regime batch-1 --loo --device nvidia-a10g --device nvidia-a100-sxm-80gb``
refits everything per fold. Measured on branch vl32 (main 9890937's table, the A10G at 62.89
FP16 TFLOPS): fitted on the A10G row alone 16.68 us per launch -> A100 TP4 row D0658 +2.7 %;
on the A100 row alone 17.83 us -> A10G TP8 row D0664 -2.0 %; in sample 17.25 us (+1.3 /
-1.0 %). --off: D0658 +67.8 %, D0664 +42.4 % (with the A10G's former FP32 fallback peak,
-14.9 %). In the folds of `validate --loo` (classes refitted without the device): D0658
-0.0 %, D0664 -2.0 %.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration import default_table, fitting  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--off", action="store_true", help="price the rows as a CUDA-graph build")
    args = ap.parse_args(argv)
    rows, _ = validation.map_all(*validation.read_shipped())
    table = default_table()
    eager = fitting.eager_rows(rows)
    if not eager:
        print("no eager-decode rows (measurements.EAGER_VLLM_DECODE off?)")
        return 0

    def with_cost(c):
        p = table.profile(fitting.EAGER_STACK)
        p = replace(p, absolute={**p.absolute, "eager_launch_s": c or 0.0})
        return replace(table, frameworks={**table.frameworks, p.name: p})

    def pred(r, c):
        return validation.predict(r, with_cost(0.0 if args.off else c)).estimated
    allc = fitting.fit_eager_launch(rows, table)
    print(f"in sample: eager_launch {allc * 1e6 if allc else 0:.2f} us per launch")
    for r in eager:
        m = r.measurement
        others = [x for x in eager if validation.device_key(x.hardware)
                  != validation.device_key(r.hardware)]
        c = fitting.fit_eager_launch(others, table)
        held, ins = pred(r, c), pred(r, allc)
        print(f"{m.row_id} {r.hardware.slug} TP{r.tp}: measured {m.value:.2f} tok/s; held out "
              f"(cost {c * 1e6 if c else 0:.2f} us) {held:.2f} ({held / m.value - 1:+.1%}); "
              f"in sample {ins:.2f} ({ins / m.value - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
