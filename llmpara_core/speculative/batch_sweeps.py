"""Speculative speedup against batch size: validation on published batch sweeps.

A *sweep* is one published series measured at several batch sizes: rows of
``presets/tables/speculative_measurements.csv`` with the same method, target, hardware, framework
and source and the same modelled setup (``model_*`` columns: target preset, draft kind and
preset, device and count, precision, stack), with a measured speedup and at least two distinct
batches. The free-text ``draft_model`` column is not part of the key: it records settings the
model does not represent (e.g. an n-gram's match length), which show only through acceptance.

Issue 13's test (Done-when): for each sweep, fit the acceptance alpha on its smallest batch's
measured speedup (``engine.implied_alpha``: the constant alpha at which the predicted speedup
equals it) and predict the speedup of every other row at its own batch and gamma with that
alpha; the median |predicted / measured - 1| over all predicted rows must be <= 10 %
(``SWEEP_TOLERANCE_MEDIAN``). What carries the prediction across batches is the model's cost of
verifying batch x (gamma + 1) tokens against decoding batch tokens (GEMMs turning compute-bound,
MoE experts touched, KV reads, the stack's per-pass costs), since alpha is held fixed, and the
two speculation costs of ``costs`` (fitted on the sweeps; ``fit`` holds each sweep out in turn
for issue 27's leave-one-sweep-out figure).
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass

from ..error_stats import error_stats as _stats
from ..errors import ConfigError
from .costs import SpecCosts, spec_costs
from .engine import Setup, Speculation, implied_alpha, speedup
from .measurements import Measurement, _num, load_measurements, setup_for

SWEEP_TOLERANCE_MEDIAN = 0.10      # issue 13: median |error| of the predicted rows

# Published identity + modelled setup: rows sharing these form one sweep.
SWEEP_KEY = ("method", "target_model", "hardware", "framework", "source", "model_target",
             "model_draft_kind", "model_draft", "model_draft_precision", "model_hardware",
             "model_devices", "model_precision", "model_framework")


@dataclass(frozen=True)
class SweepPoint:
    """One row of a sweep. The fitted row reproduces its measurement by construction and has
    no error; the others are predictions."""
    row_id: str
    batch: int
    gamma: int
    measured_speedup: float
    predicted_speedup: float | None
    fitted: bool

    @property
    def relative_error(self) -> float | None:
        """predicted / measured - 1 (None for the fitted row or when nothing was predicted)."""
        if self.fitted or self.predicted_speedup is None:
            return None
        return self.predicted_speedup / self.measured_speedup - 1.0


@dataclass(frozen=True)
class Sweep:
    """One published sweep: alpha fitted on its smallest batch, the rows predicted with it."""
    method: str
    target: str
    hardware: str
    framework: str                  # as published
    profile: str                    # the efficiency profile modelled (model_framework)
    source: str
    alpha: float | None             # None: no alpha in [0, 1] reproduces the smallest batch
    points: tuple[SweepPoint, ...]

    @property
    def errors(self) -> tuple[float, ...]:
        return tuple(e for p in self.points if (e := p.relative_error) is not None)


@dataclass(frozen=True)
class SweepValidation:
    """Every sweep of a measurement file, with estimated (or ideal) rates."""
    sweeps: tuple[Sweep, ...]
    estimated: bool

    @property
    def errors(self) -> tuple[float, ...]:
        return tuple(e for s in self.sweeps for e in s.errors)

    @property
    def median_abs_error(self) -> float | None:
        return statistics.median(abs(e) for e in self.errors) if self.errors else None

    @property
    def passes(self) -> bool:
        m = self.median_abs_error
        return m is not None and m <= SWEEP_TOLERANCE_MEDIAN


def fit_sweep(rows: list[tuple[str, Setup, int, float]], estimated: bool = True
              ) -> tuple[float | None, tuple[SweepPoint, ...]]:
    """Fit alpha on the smallest batch and predict the rest. ``rows``: (row id, setup at the
    row's batch, gamma, measured speedup); the first row at the smallest batch is the fit.
    Returns (alpha, points in batch order)."""
    if len(rows) < 2:
        raise ConfigError("a batch sweep needs at least two rows")
    ordered = sorted(rows, key=lambda r: r[1].workload.batch)
    fit_id, fit_setup, fit_gamma, fit_measured = ordered[0]
    alpha = implied_alpha(fit_setup, fit_gamma, fit_measured, estimated)
    points = []
    for row_id, su, gamma, measured in ordered:
        fitted = row_id == fit_id
        pred = None
        if alpha is not None:
            pred = speedup(su, Speculation(gamma, alpha=alpha), estimated)
        points.append(SweepPoint(row_id, su.workload.batch, gamma, measured, pred, fitted))
    return alpha, tuple(points)


def _eligible(m: Measurement) -> bool:
    batch, gamma = _num(m.get("batch")), _num(m.get("model_gamma"))
    return (m.modelled and m.measured_speedup is not None and batch is not None and batch >= 1
            and batch == int(batch) and gamma is not None and gamma >= 1)


def group_sweeps(measurements) -> list[list[Measurement]]:
    """Rows grouped by ``SWEEP_KEY`` (file order), keeping groups with >= 2 distinct batches."""
    groups: dict[tuple, list[Measurement]] = {}
    for m in measurements:
        if _eligible(m):
            groups.setdefault(tuple(m.get(k).strip() for k in SWEEP_KEY), []).append(m)
    return [g for g in groups.values() if len({_num(m.get("batch")) for m in g}) >= 2]


def validate_sweeps(path: str | None = None, estimated: bool = True) -> SweepValidation:
    """Fit-on-the-smallest-batch validation of every sweep in the measurement CSV (default:
    the repository's copy), under the speculation costs in force (cached per costs: the
    Validation page asks for it on every run)."""
    return _validate_sweeps(path, estimated, spec_costs())


@functools.lru_cache(maxsize=256)
def _validate_sweeps(path: str | None, estimated: bool, costs: SpecCosts) -> SweepValidation:
    sweeps = []
    for group in group_sweeps(load_measurements(path)):
        rows = []
        for m in group:
            su, gamma = setup_for(m)
            rows.append((m.row_id, su, gamma, m.measured_speedup))
        alpha, points = fit_sweep(rows, estimated)
        first = group[0]
        sweeps.append(Sweep(first.get("method"), first.get("target_model"),
                            first.get("hardware"), first.get("framework"),
                            first.get("model_framework").strip() or "generic",
                            first.get("source"), alpha, points))
    return SweepValidation(tuple(sweeps), estimated)




def regime_rows(path: str | None = None) -> list[dict]:
    """The "speculative" regime for the Validation page's "Error by regime and stack" table
    (rows in ``calibration.summary.group_row``'s format; metric "speedup"): all sweeps, then
    one row per stack. "estimated" uses the row's stack profile, "ideal" peak rates (alpha
    refitted on the smallest batch in each mode); there is no "generic" mode here."""
    est, ideal = validate_sweeps(path, True), validate_sweeps(path, False)
    if not est.sweeps:
        return []

    def row(kind: str, group: str, e_sw, i_sw) -> dict:
        e_err = [x for s in e_sw for x in s.errors]
        i_err = [x for s in i_sw for x in s.errors]
        out = {"metric": "speedup", "kind": kind, "group": group, "n": len(e_err)}
        for mode, errs in (("estimated", e_err), ("ideal", i_err), ("generic", [])):
            out.update({f"{mode}_{k}": v for k, v in _stats(errs).items()})
        return out

    out = [row("regime", "speculative (speedup vs batch)", est.sweeps, ideal.sweeps)]
    for fw in sorted({s.profile for s in est.sweeps}):
        pick = (lambda v: [s for s in v.sweeps if s.profile == fw])
        out.append(row("regime-stack", f"speculative / {fw}", pick(est), pick(ideal)))
    return out


def sweep_rows(v: SweepValidation) -> list[dict]:
    """One flat dict per row of every sweep (CLI csv/json, tables)."""
    return [{"sweep": f"{s.method} · {s.target} · {s.hardware} · {s.framework}",
             "row_id": p.row_id, "batch": p.batch, "gamma": p.gamma, "profile": s.profile,
             "alpha_fitted": s.alpha, "role": "fit" if p.fitted else "predicted",
             "measured_speedup": p.measured_speedup, "predicted_speedup": p.predicted_speedup,
             "error": p.relative_error, "source": s.source}
            for s in v.sweeps for p in s.points]


def validation_dict(v: SweepValidation) -> dict:
    """JSON-ready result: the criterion, the median |error| and every row."""
    return {"regime": "speculative", "mode": "estimated" if v.estimated else "ideal",
            "criterion": {"median_abs_error_max": SWEEP_TOLERANCE_MEDIAN,
                          "method": "alpha fitted on each sweep's smallest batch; the other "
                                    "batches predicted at their own batch and gamma"},
            "sweeps": len(v.sweeps), "rows_predicted": len(v.errors),
            "median_abs_error": v.median_abs_error, "passes": v.passes,
            "rows": sweep_rows(v)}
