"""Fit of the speculation costs (``speculative.costs``) on the published batch sweeps, and its
leave-one-sweep-out check.

Every sweep keeps its own alpha, fitted on its smallest batch (``batch_sweeps.fit_sweep``); the
two cost constants are shared by all sweeps and chosen on a grid to minimise the mean
|log(predicted / measured)| of the predicted rows. Leave-one-sweep-out: each sweep is predicted
with the constants fitted on the other sweeps alone, and the criterion (issue 27: median |error|
<= 10 %) is judged on those held-out predictions.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..errors import ConfigError
from .batch_sweeps import SWEEP_TOLERANCE_MEDIAN, Sweep, validate_sweeps
from .costs import SpecCosts, overridden
from ..units import S_PER_US

# The grid searched: share of the per-sequence pass cost a draft pass pays, and the host work
# per sequence per iteration [us].
DRAFT_SEQ_SHARES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0)
ITERATION_SEQ_US = (0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 80.0, 100.0, 120.0)


def _loss(sweeps) -> float:
    logs = [abs(math.log1p(e)) for s in sweeps for e in s.errors]
    return sum(logs) / len(logs) if logs else math.inf


@dataclass(frozen=True)
class SweepFit:
    """The constants fitted on every sweep and the leave-one-sweep-out predictions."""
    costs: SpecCosts
    in_sample: tuple[Sweep, ...]
    held_out: tuple[tuple[Sweep, SpecCosts], ...]   # each sweep with the costs fitted without it

    @property
    def held_out_errors(self) -> tuple[float, ...]:
        return tuple(e for s, _ in self.held_out for e in s.errors)

    @property
    def held_out_median_abs_error(self) -> float | None:
        e = self.held_out_errors
        return statistics.median(abs(x) for x in e) if e else None

    @property
    def in_sample_median_abs_error(self) -> float | None:
        e = [x for s in self.in_sample for x in s.errors]
        return statistics.median(abs(x) for x in e) if e else None

    @property
    def passes(self) -> bool:
        m = self.held_out_median_abs_error
        return m is not None and m <= SWEEP_TOLERANCE_MEDIAN


def _grid(path: str | None, shares, iteration_us) -> dict[SpecCosts, tuple[Sweep, ...]]:
    out = {}
    for d in shares:
        for h in iteration_us:
            c = SpecCosts(float(d), float(h) * S_PER_US)
            with overridden(c):
                out[c] = validate_sweeps(path).sweeps
    return out


def fit_costs(path: str | None = None, shares=DRAFT_SEQ_SHARES,
              iteration_us=ITERATION_SEQ_US) -> SweepFit:
    """Grid fit on all sweeps, then each sweep held out in turn (needs >= 2 sweeps)."""
    grid = _grid(path, shares, iteration_us)
    n = len(next(iter(grid.values())))
    if n < 2:
        raise ConfigError("leave-one-sweep-out needs at least two batch sweeps")
    best = min(grid, key=lambda c: (_loss(grid[c]), c.draft_seq_share, c.iteration_seq_s))
    held = []
    for i in range(n):
        c = min(grid, key=lambda c: (_loss([s for j, s in enumerate(grid[c]) if j != i]),
                                     c.draft_seq_share, c.iteration_seq_s))
        held.append((grid[c][i], c))
    return SweepFit(best, grid[best], tuple(held))
