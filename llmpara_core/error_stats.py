"""Error statistics of predicted / measured - 1 over a group of rows, in the keys the
validation tables use (``calibration.summary.group_row``): shared by every validation that is
not a calibration regime (energy under load, speculative batch sweeps)."""

from __future__ import annotations

import statistics


def error_stats(errors) -> dict:
    """Median |error|, signed median, 90th-percentile |error| and the share within 15 %
    (all None for no rows)."""
    errors = list(errors)
    a = sorted(abs(e) for e in errors)
    if not a:
        return {"median_abs_error": None, "median_error": None, "p90_abs_error": None,
                "within_15pct": None}
    return {"median_abs_error": statistics.median(a), "median_error": statistics.median(errors),
            "p90_abs_error": a[min(len(a) - 1, int(round(0.9 * (len(a) - 1))))],
            "within_15pct": sum(x <= 0.15 for x in a) / len(a)}
