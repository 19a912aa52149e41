"""Per-row leave-one-device-out residuals of the efficiency fit, grouped where they come from.

    python scripts/loo_residuals.py --out /tmp/loo.csv                     # every device
    python scripts/loo_residuals.py --regime prefill --cls consumer-gpu     # print the groups
    python scripts/loo_residuals.py --in-sample --regime batch-1            # the shipped fit
    python scripts/loo_residuals.py --from /tmp/loo.csv --regime batch-1 --cls datacenter-gpu

Each row of the shipped measurements is predicted by a fit without its device (the folds of
``fitting.leave_one_device_out``, from the shipped ``efficiency.toml``: the figures of
``[fit.leave_one_device_out]``), or by the shipped fit itself (``--in-sample``). ``--out``
writes one line per row (measured, predicted, error = predicted / measured - 1, and what the
row is: stack, device, class, MoE experts, devices, parallelism, weight format); the grouped
median |error| and signed median are printed by stack, device, MoE or dense, number of
devices, parallelism and weight format, for the rows of ``--regime`` and ``--cls``. A full
leave-one-device-out takes 12-20 min on one core (``--device`` limits the folds);
``--from`` regroups a CSV written before.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration import default_table, fitting  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402

COLUMNS = ("row_id", "regime", "cls", "stack", "device", "model", "moe_experts", "devices",
           "parallelism", "format", "metric", "prompt_len", "measured", "predicted", "error")
GROUPS = (("stack", "stack"), ("device", "device"), ("MoE experts (0 = dense)", "moe_experts"),
          ("devices", "devices"), ("parallelism", "parallelism"), ("weight format", "format"))


def rows_of(predictions) -> list[dict]:
    out = []
    for p in predictions:
        r, m = p.row, p.row.measurement
        out.append({"row_id": m.row_id, "regime": validation.regime(r),
                    "cls": p.efficiency_class.value, "stack": validation.row_stack(r),
                    "device": r.hardware.slug, "model": m.model,
                    "moe_experts": r.model.moe.num_experts if r.model.moe else 0,
                    "devices": r.devices, "parallelism": m.parallelism, "format": m.quant,
                    "metric": m.metric, "prompt_len": r.workload.prompt_len,
                    "measured": p.measured, "predicted": p.estimated, "error": p.error})
    return out


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"no column {', '.join(missing)} (write it with --out)")
        return [{**r, "error": float(r["error"])} for r in reader]


def print_groups(rows: list[dict], regime: str | None, cls: str | None) -> None:
    sel = [r for r in rows if (regime is None or r["regime"] == regime)
           and (cls is None or r["cls"] == cls)]
    if not sel:
        print("no rows")
        return
    errs = [r["error"] for r in sel]
    print(f"\n{regime or 'all regimes'} / {cls or 'all classes'}: {len(sel)} rows, median "
          f"|error| {statistics.median(abs(e) for e in errs):.1%}, signed "
          f"{statistics.median(errs):+.1%}")
    for title, key in GROUPS:
        by = defaultdict(list)
        for r in sel:
            by[str(r[key])].append(r["error"])
        print(f"\n  {title:38s}    n  median|e|  signed")
        for k, v in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"  {k[:38]:38s} {len(v):4d}  {statistics.median(abs(e) for e in v):8.1%}"
                  f"  {statistics.median(v):+7.1%}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the per-row CSV here")
    ap.add_argument("--from", dest="src", type=Path, help="regroup a CSV written by --out")
    ap.add_argument("--in-sample", action="store_true", help="the shipped fit, no refits")
    ap.add_argument("--device", action="append", help="hold out only these presets")
    ap.add_argument("--regime", choices=validation.REGIMES, help="rows of one regime")
    ap.add_argument("--cls", help="rows of one hardware class (e.g. datacenter-gpu)")
    args = ap.parse_args(argv)
    if args.src:
        try:
            rows = read_rows(args.src)
        except (OSError, UnicodeDecodeError, ValueError, TypeError) as e:
            print(f"loo_residuals: cannot read {args.src}: {e}", file=sys.stderr)
            return 2
    else:
        measured, skipped = validation.read_shipped()
        mapped, _ = validation.map_all(measured, skipped)
        table, t0 = default_table(), time.time()
        preds = (validation.predict_all(mapped, table)[0] if args.in_sample
                 else fitting.leave_one_device_out(mapped, table, args.device))
        rows = rows_of(preds)
        print(f"{len(rows)} rows predicted in {time.time() - t0:.0f} s")
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {args.out}")
    print_groups(rows, args.regime, args.cls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
