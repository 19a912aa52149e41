"""The tensor-parallel validation figures: :mod:`.tp_measurements`' comparisons summarised, and
the leave-one-series-out check of the stacks fitted on those series (``stack_fit``'s
``fit_tp_profiles``). Apart from ``tp_measurements`` because ``stack_fit`` builds on it."""

from __future__ import annotations

import statistics
from dataclasses import replace

from .efficiency import default_table
from .stack_fit import TP_FIT_NOTE, fit_tp_profiles
from .tp_measurements import (TPComparison, TPTable, compare_tp_measurements,
                              load_tp_measurements, series_label)


def tp_fitted_stacks(eff_table=None) -> tuple[str, ...]:
    """Stacks of the shipped efficiency table whose profile was fitted on these series (no
    other rows measure them: ``stack_fit.fit_tp_profiles``)."""
    eff_table = eff_table or default_table()
    return tuple(sorted(n for n, p in eff_table.frameworks.items() if p.note == TP_FIT_NOTE))


def held_out_comparisons(table: TPTable | None = None, only_series: set[str] | None = None,
                         eff_table=None) -> tuple[TPComparison, ...]:
    """Leave-one-series-out: the rows of each series whose stack is fitted on these series
    (``tp_fitted_stacks``) predicted with that stack refitted on the other series alone.
    Series of stacks fitted on other rows (batch-1 or batched decode) keep the shipped
    prediction: none of their constants saw these rows. ``only_series``: hold out only these
    (the others keep their in-sample comparison)."""
    table = table or load_tp_measurements()
    eff_table = eff_table or default_table()
    fitted = set(tp_fitted_stacks(eff_table))
    base = {k: replace(v.hardware, efficiency=None) for k, v in table.setups.items()}
    out = {c.measurement.row_id: c for c in compare_tp_measurements(table)}
    series = sorted({series_label(table, r) for r in table.rows
                     if table.setups[r.setup].efficiency_profile in fitted})
    for s in series:
        if only_series is not None and s not in only_series:
            continue
        rest = replace(table, rows=tuple(r for r in table.rows if series_label(table, r) != s))
        fws = {k: v for k, v in eff_table.frameworks.items() if k not in fitted}
        t = replace(eff_table, frameworks={**fws, **fit_tp_profiles(
            replace(eff_table, frameworks=fws), fws, rest)})
        setups = {k: replace(v, hardware=replace(base[k], efficiency=t.efficiency_for(
            base[k], v.efficiency_profile))) if v.efficiency_profile in fitted else v
                  for k, v in table.setups.items()}
        fold = replace(table, setups=setups)
        for c in compare_tp_measurements(fold):
            if c.series == s:
                out[c.measurement.row_id] = c
    return tuple(out[r.row_id] for r in table.rows)


def tp_error_summary(comps) -> dict:
    """Median |error| of tokens/s per sequence (all rows and per framework) and of the
    speedup over the rows that scale (not a series' base row, not a superlinear series)."""
    def med(xs):
        xs = list(xs)
        return statistics.median(xs) if xs else None
    scaled = [c for c in comps if c.measured_speedup != 1.0 and not c.superlinear_series]
    fws = sorted({c.framework for c in comps})
    return {"rows": len(comps), "median_abs_error": med(abs(c.error) for c in comps),
            "median_signed_error": med(c.error for c in comps),
            "scaled_rows": len(scaled),
            "median_abs_speedup_error": med(abs(c.speedup_error) for c in scaled),
            "per_framework": {f: {"rows": sum(c.framework == f for c in comps),
                                  "median_abs_error": med(abs(c.error) for c in comps
                                                          if c.framework == f),
                                  "median_signed_error": med(c.error for c in comps
                                                             if c.framework == f),
                                  "median_abs_speedup_error": med(
                                      abs(c.speedup_error) for c in scaled if c.framework == f)}
                              for f in fws}}
