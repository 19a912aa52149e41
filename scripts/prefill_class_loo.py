"""Leave-one-device-out of llama.cpp's GPU prompt rows with the classes refitted only (fast).

    python scripts/prefill_class_loo.py --out /tmp/prefill.csv       # every GPU device
    python scripts/prefill_class_loo.py --device nvidia-a100-pcie-80gb --device nvidia-a100-sxm-80gb
    python scripts/prefill_class_loo.py --from /tmp/a.csv --against /tmp/b.csv   # compare two

For each GPU device with llama.cpp prefill/TTFT rows (its power-limited twins held out with
it, ``measurements.device_key``), the table is refitted without it -- the classes, memory
technologies and the reference stack's bounds (``fitting.fit_table`` with the stacks left as
shipped: llama.cpp's rows need no other stack) -- and its llama.cpp prompt rows are predicted
with the full core. The same folds as ``fitting.leave_one_device_out`` for these rows, in 15-20 s
a fold instead of minutes (no stack refits), so that a change to the prefill model can be checked
class by class before the whole fit (``scripts/fit_efficiency.py``) is rerun. Prints the median
|error| by class; ``--against`` prints both files' medians on their common rows and every row
that moved by more than 3 points.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration import default_table, fitting  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402

COLUMNS = ("row_id", "device", "cls", "devices", "quant", "prompt", "measured", "predicted",
           "error")
GPU = ("consumer-gpu", "datacenter-gpu")


def run(devices: list[str] | None) -> list[dict]:
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    base = default_table()
    prompt = [r for r in mapped if validation.regime(r) == "prefill"
              and validation.row_stack(r) == fitting.REFERENCE_FRAMEWORK
              and r.hardware.hw_class.value in GPU
              and (not devices or r.hardware.slug in devices)]
    out, t0 = [], time.time()
    for key in sorted({validation.device_key(r.hardware) for r in prompt}, key=str):
        test = [r for r in prompt if validation.device_key(r.hardware) == key]
        train = [r for r in mapped if validation.device_key(r.hardware) != key]
        table = fitting.fit_table(train, base, frameworks=False)
        for p in validation.predict_all(test, table)[0]:
            m = p.row.measurement
            out.append({"row_id": m.row_id, "device": p.row.hardware.slug,
                        "cls": p.efficiency_class.value, "devices": p.row.devices,
                        "quant": m.quant, "prompt": p.row.workload.prompt_len,
                        "measured": p.measured, "predicted": p.estimated, "error": p.error})
        print(f"{test[0].hardware.slug}: {time.time() - t0:.0f} s", flush=True)
    return out


def read(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c in COLUMNS if rows and c not in rows[0]]
    if missing:
        raise ValueError(f"no column {', '.join(missing)}")
    return [{**r, "error": float(r["error"])} for r in rows]


def medians(rows: list[dict]) -> str:
    parts = []
    for cls in GPU:
        e = [abs(r["error"]) for r in rows if r["cls"] == cls]
        if e:
            parts.append(f"{cls} {statistics.median(e):.1%} ({len(e)} rows)")
    return ", ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", action="append", help="only these presets (slug)")
    ap.add_argument("--out", type=Path, help="write the per-row CSV here")
    ap.add_argument("--from", dest="src", type=Path, help="read a CSV written by --out")
    ap.add_argument("--against", type=Path, help="a second CSV to compare with --from")
    ap.add_argument("--cublas-builds", action="store_true",
                    help="what-if: pre-June-2024 llama.cpp CUDA builds' prompt rows on their "
                         "dequantise + FP16 cuBLAS path (measurements.CUBLAS_PROMPT_BUILDS)")
    args = ap.parse_args(argv)
    if args.cublas_builds:
        validation.CUBLAS_PROMPT_SOURCES = validation.CUBLAS_PROMPT_BUILDS
    try:
        rows = read(args.src) if args.src else run(args.device)
        other = read(args.against) if args.against else None
    except (OSError, UnicodeDecodeError, ValueError, KeyError) as e:
        print(f"prefill_class_loo: {e}", file=sys.stderr)
        return 2
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
    if other is None:
        print(medians(rows))
        return 0
    common = {r["row_id"] for r in rows} & {r["row_id"] for r in other}
    a = {r["row_id"]: r for r in rows if r["row_id"] in common}
    b = {r["row_id"]: r for r in other if r["row_id"] in common}
    print(f"{args.src}: {medians(list(a.values()))}")
    print(f"{args.against}: {medians(list(b.values()))}")
    for i in sorted(common, key=lambda i: (a[i]["device"], i)):
        if abs(a[i]["error"] - b[i]["error"]) > 0.03:
            print(f"  {i} {a[i]['device']} x{a[i]['devices']} {a[i]['quant'][:12]} "
                  f"pp{a[i]['prompt']}: {a[i]['error']:+.1%} -> {b[i]['error']:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
