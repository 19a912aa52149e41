"""The grid pre-filter of ``pareto``: an O(n) pass that removes only dominated points.

Objectives 1..k-1 are cut into bins (``_bin``: monotone in the value, about equal counts per
bin); a point whose objective 0 is at least the smallest objective 0 among the points lying
in a strictly lower bin of *every* other objective is dominated (no larger in objective 0,
strictly smaller in all the others) and is dropped. The smallest objective 0 over all strictly
lower cells is a running minimum along each axis of the small cell grid, shifted by one cell.
The pass is repeated with bins refitted to the survivors while it removes a quarter of them.
Every front point survives, so the front of the survivors is the front of the cloud
(``tests/test_pareto.py`` checks both against the O(n^2) definition).

Input: a float ``(n, k)`` minimisation array without NaN (``pareto.to_minimisation``), k >= 2.
"""

from __future__ import annotations

import math

import numpy as np

PREFILTER_MIN_POINTS = 2048      # smaller clouds go straight to the exact steps
_PREFILTER_ROUNDS = 4            # refits of the grid pre-filter at most
_PREFILTER_CELLS = 4096          # cells of the pre-filter's grid over objectives 1..k-1
_FINE_BINS = 1 << 14             # resolution of the pre-filter's histogram equalisation


def grid_prefilter(f: np.ndarray, min_points: int = PREFILTER_MIN_POINTS) -> np.ndarray:
    """Indices of the rows of ``f`` (minimisation, k >= 2) that survive the grid pre-filter
    (see the module docstring): a superset of the front, refitted while it removes at least a
    quarter of the points."""
    keep = np.arange(len(f))
    for r in range(_PREFILTER_ROUNDS):
        if len(keep) < min_points:
            break
        alive = ~_grid_dominated(f if r == 0 else f[keep])
        dropped = len(keep) - int(np.count_nonzero(alive))
        keep = keep[alive]
        if dropped * 4 < len(alive) + dropped:
            break
    return keep


def _grid_dominated(f: np.ndarray) -> np.ndarray:
    """Rows of ``f`` dominated by a row in a strictly lower bin of every objective 1..k-1
    with an objective 0 no larger (exactly dominated: strictly better in objectives 1..k-1).

    A bin is floor((x - lo) / width) clipped to [0, bins - 1]: monotone in x, so a lower bin
    means a strictly smaller value; the minimum of objective 0 over all strictly lower cells
    is a running minimum along each axis of the cell grid, shifted by one cell."""
    n, k = f.shape
    bins = max(2, int(round(_PREFILTER_CELLS ** (1.0 / (k - 1)))))
    cell = np.zeros(n, dtype=np.intp)          # index in the (bins + 1)^(k-1) shifted grid
    for j in range(1, k):
        b = _bin(f[:, j], bins)
        cell *= bins + 1
        cell += b
    shape = (bins + 1,) * (k - 1)
    best = np.full(shape, np.inf)
    np.minimum.at(best.reshape(-1), cell, f[:, 0])
    seen = np.zeros(shape, dtype=bool)          # a point lies at or below (an +inf best is
    seen.reshape(-1)[cell] = True               # a point only where one was seen)
    for ax in range(k - 1):
        np.minimum.accumulate(best, axis=ax, out=best)
        np.logical_or.accumulate(seen, axis=ax, out=seen)
    # strictly lower in every axis: the running values at (b1 - 1, ..., b(k-1) - 1), i.e. the
    # grids shifted by one cell along every axis (nothing where a coordinate is 0)
    lower = (slice(1, None),) * (k - 1)
    upper = (slice(None, -1),) * (k - 1)
    best_below = np.full(shape, np.inf)
    best_below[lower] = best[upper]
    seen_below = np.zeros(shape, dtype=bool)
    seen_below[lower] = seen[upper]
    return seen_below.reshape(-1)[cell] & (best_below.reshape(-1)[cell] <= f[:, 0])


def _bin(x: np.ndarray, bins: int) -> np.ndarray:
    """Bin index 0..bins-1 of each value, monotone non-decreasing in the value: a fine grid
    of equal widths over the finite range, then histogram equalisation (a fine cell's bin
    = bins x the share of values in lower fine cells), so the bins hold similar counts
    however skewed the values are."""
    fin = x if np.isfinite(x).all() else x[np.isfinite(x)]
    if len(fin) == 0:
        return np.zeros(len(x), dtype=np.intp)
    lo, hi = float(fin.min()), float(fin.max())
    scale = _FINE_BINS / (hi - lo) if hi > lo else 0.0
    if scale == 0.0 or not math.isfinite(scale):       # one finite value: it and +inf
        return np.where(x > hi, bins - 1, 0).astype(np.intp)
    z = x - lo
    z *= scale
    np.clip(z, 0, _FINE_BINS - 1, out=z)
    fine = z.astype(np.intp)
    counts = np.bincount(fine, minlength=_FINE_BINS)
    below = np.cumsum(counts) - counts
    return (below * bins // len(x))[fine]
