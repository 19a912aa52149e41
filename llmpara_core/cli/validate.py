"""``llmpara validate``: predictions against published measurements and the error summary.

    llmpara validate                                   # shipped measurements, table
    llmpara validate --data my_runs.csv --format json  # your CSV (same columns)
    llmpara validate --data my_runs.csv --refit        # fit the efficiencies on it first

Formats: ``table`` prints the error summary, the worst cases with the likely reason and the
skipped rows; ``json`` one object with the summary, the worst cases, the skipped rows and every
prediction; ``csv`` the per-row predictions (errors = predicted / measured - 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

from .base import add_output_args, emit, positive_int
from ..errors import ConfigError
from ..calibration.measurements import MAX_CSV_BYTES


def register(sub) -> None:
    p = sub.add_parser("validate", help="compare predictions with published measurements")
    p.add_argument("--data", help="measurements CSV (columns of presets/tables/"
                                  "measurements.csv; default: the shipped file)")
    p.add_argument("--refit", action="store_true",
                   help="fit the efficiency model on this data before predicting "
                        "(in-sample errors)")
    p.add_argument("--worst", type=positive_int, default=12, help="worst cases to list")
    add_output_args(p)
    p.set_defaults(func=run)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    f = Path(path)
    if not f.is_file():
        raise ConfigError(f"measurements file not found: {path}")
    if f.stat().st_size > MAX_CSV_BYTES:
        raise ConfigError(f"{path}: too large for a measurements CSV")
    try:
        return f.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None


def run(args) -> None:
    from ..calibration import efficiency as calibration, fitting, measurements as validation, summary as vs
    rows, skipped = validation.read_measurements(_read(args.data))
    mapped, skipped = validation.map_all(rows, skipped)
    if not mapped:
        raise ConfigError(f"no row could be mapped to a scenario ({len(skipped)} skipped; "
                          f"first reason: {skipped[0].reason if skipped else 'none'})")
    table = calibration.default_table()
    if args.refit:
        table = fitting.fit_table(mapped, table)
    preds, bad = validation.predict_all(mapped, table)
    summary = vs.summarize(preds, skipped + bad, args.worst,
                           fitted_classes=set(fitting.fitted_classes(table)))
    if args.format == "json":
        emit(vs.summary_dict(summary, preds) | {"refit": bool(args.refit)}, "json")
    elif args.format == "csv":
        emit(None, "csv", [vs.prediction_row(p) for p in preds])
    else:
        _print_table(summary)


def _print_table(summary) -> None:
    out = sys.stdout
    h = summary.headline
    out.write(f"{summary.rows} rows predicted, {len(summary.skipped)} skipped. Estimated "
              f"batch-1 decode tokens/s: median |error| {h.median_abs:.1%} over {h.n} rows.\n"
              "error = predicted / measured - 1; generic = class values, estimated = with the "
              "row's framework profile.\n\n")
    rows = [{"metric": g.metric, "group": g.group if g.kind == "all" else f"{g.kind}: {g.group}",
             "n": g.estimated.n, "ideal": _pct(g.ideal.median_abs),
             "generic": _pct(g.generic.median_abs), "estimated": _pct(g.estimated.median_abs),
             "bias": _pct(g.estimated.median_signed, signed=True),
             "within_15pct": _pct(g.estimated.within_band)} for g in summary.groups]
    emit(None, "table", rows)
    out.write("\nworst cases (estimated):\n")
    emit(None, "table", [{"row_id": w.prediction.row.measurement.row_id,
                          "metric": w.prediction.row.measurement.metric,
                          "hardware": w.prediction.row.hardware.name,
                          "model": w.prediction.row.model.name,
                          "measured": w.prediction.measured,
                          "estimated": w.prediction.estimated,
                          "error": _pct(w.prediction.error, signed=True),
                          "why": "; ".join(w.reasons)} for w in summary.worst])
    if summary.skipped:
        out.write("\nskipped rows:\n")
        emit(None, "table", [vs_skipped(s) for s in summary.skipped])


def vs_skipped(s) -> dict:
    return {"row_id": s.row_id, "hardware": s.hardware, "model": s.model, "reason": s.reason}


def _pct(x, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%}" if signed else f"{x:.1%}"
