"""Exact Pareto (non-dominated) sets, non-dominated sorting and the hypervolume indicator.

Objectives are the columns of an ``(n, k)`` array; ``senses`` says per column whether smaller
(``"min"``) or larger (``"max"``) is better. Internally every column is turned into a
minimisation (``"max"`` columns are negated).

Dominance: ``a`` dominates ``b`` when ``a`` is no worse than ``b`` in every objective and
strictly better in at least one. The front is the set of points no point dominates; exact
duplicates do not dominate each other, so all copies of a front point are on the front.

Algorithms:

* two objectives -- sort by (f0, f1) and sweep the running minimum of f1: O(n log n);
* three or more -- candidates are visited in order of a score (sum of min-max normalised
  objectives) that can never decrease along a dominance relation, so a point can only be
  dominated by points whose score is not larger. Each chunk of best-scored candidates is
  checked against that small prefix, and every survivor removes, in one vectorised pass, all
  remaining points it dominates. Work is about (front size x points remaining); for the
  clouds of a design sweep the first few front points remove almost everything;
* ``pareto_mask_naive`` is the obvious O(n^2) double loop, kept for the property tests.

The reference tool used the O(n^2) scan for everything (about 6 s for 3,200 points).

References
----------
H. T. Kung, F. Luccio, F. P. Preparata, "On finding the maxima of a set of vectors",
J. ACM 22(4), 1975 (the sort-and-sweep for two objectives).
K. Deb et al., "A fast and elitist multiobjective genetic algorithm: NSGA-II", IEEE TEC 6(2),
2002 (non-dominated sorting into ranks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import ConfigError

SENSES = ("min", "max")
_CHUNK_ELEMENTS = 4_000_000     # bound on (candidates x points) compared at once
_HV_EXACT_3D_MAX = 3000          # slicing HV in 3-D is O(n^2 log n)
_HV_EXACT_4D_MAX = 1500          # pymoo's exact HV above this gets slow


def to_minimisation(points, senses: Sequence[str] | None = None) -> np.ndarray:
    """``points`` as a float ``(n, k)`` array in which smaller is better in every column.

    Raises ConfigError on NaN, a wrong shape or an unknown sense."""
    f = np.asarray(points, dtype=float)
    if f.ndim == 1:
        f = f.reshape(-1, 1) if senses is not None and len(senses) == 1 else f.reshape(1, -1)
    if f.ndim != 2:
        raise ConfigError(f"objectives must be a 2-D array (points x objectives), got shape "
                          f"{f.shape}")
    k = f.shape[1]
    if senses is None:
        senses = ("min",) * k
    senses = tuple(senses)
    if len(senses) != k:
        raise ConfigError(f"{len(senses)} senses given for {k} objectives")
    bad = [s for s in senses if s not in SENSES]
    if bad:
        raise ConfigError(f"objective sense must be 'min' or 'max', got {bad[0]!r}")
    if k == 0:
        raise ConfigError("at least one objective is needed")
    if np.isnan(f).any():
        raise ConfigError("objectives contain NaN; mark such points infeasible and leave them "
                          "out of the Pareto set")
    flip = np.array([-1.0 if s == "max" else 1.0 for s in senses])
    return f * flip if (flip < 0).any() else f.copy()


def dominates(a, b) -> bool:
    """True when minimisation vector ``a`` dominates ``b`` (<= everywhere, < somewhere)."""
    strictly = False
    for x, y in zip(a, b):
        if x > y:
            return False
        if x < y:
            strictly = True
    return strictly


# ---- the front ------------------------------------------------------------------------------

def pareto_mask(points, senses: Sequence[str] | None = None) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``points`` (``(n, k)``; see module doc)."""
    f = to_minimisation(points, senses)
    n, k = f.shape
    if n == 0:
        return np.zeros(0, dtype=bool)
    if k == 2:
        return _front_2d(f)
    return _front_generic(f)


def pareto_indices(points, senses: Sequence[str] | None = None) -> np.ndarray:
    """Row indices (ascending) of the non-dominated points."""
    return np.flatnonzero(pareto_mask(points, senses))


def pareto_mask_naive(points, senses: Sequence[str] | None = None) -> np.ndarray:
    """The O(n^2) definition, point by point; the reference for property tests."""
    rows = to_minimisation(points, senses).tolist()
    out = np.ones(len(rows), dtype=bool)
    for i, b in enumerate(rows):
        for j, a in enumerate(rows):
            if i != j and dominates(a, b):
                out[i] = False
                break
    return out


def _front_2d(f: np.ndarray) -> np.ndarray:
    """Two objectives: lexicographic sort, then a point survives iff it has the smallest f1
    among points with its f0 and that f1 is strictly below every f1 seen at a smaller f0."""
    n = len(f)
    order = np.lexsort((f[:, 1], f[:, 0]))
    a, b = f[order, 0], f[order, 1]
    starts_mask = np.empty(n, dtype=bool)
    starts_mask[0] = True
    starts_mask[1:] = a[1:] != a[:-1]
    starts = np.flatnonzero(starts_mask)
    group = np.cumsum(starts_mask) - 1
    group_min = b[starts]                        # sorted by f1 inside a group
    running = np.minimum.accumulate(b)
    best_before = np.full(len(starts), np.inf)
    best_before[1:] = running[starts[1:] - 1]
    keep_sorted = (b == group_min[group]) & (group_min < best_before)[group]
    out = np.empty(n, dtype=bool)
    out[order] = keep_sorted
    return out


def _score(f: np.ndarray) -> np.ndarray:
    """Sum of per-column min-max normalised values: never decreases from a point to any point
    it dominates (rounding and clipping are monotone), so it orders candidates safely."""
    fin = np.isfinite(f)
    lo = np.where(fin, f, np.inf).min(axis=0)
    hi = np.where(fin, f, -np.inf).max(axis=0)
    lo = np.where(np.isfinite(lo), lo, 0.0)
    span = np.where(np.isfinite(hi) & (hi > lo), hi - lo, 1.0)
    z = (f - lo) / span
    z = np.nan_to_num(z, nan=0.0, posinf=2.0, neginf=-1.0)
    return np.clip(z, -1.0, 2.0).sum(axis=1)


def _dominated_by_any(block: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each row of ``targets``: is it dominated by some row of ``block``? (small block)"""
    le = (block[:, None, :] <= targets[None, :, :]).all(axis=2)
    lt = (block[:, None, :] < targets[None, :, :]).any(axis=2)
    return (le & lt).any(axis=0)


def _front_generic(f: np.ndarray) -> np.ndarray:
    n, k = f.shape
    score = _score(f)
    order = np.argsort(score, kind="stable")
    cand, idx, sc = f[order], order, score[order]
    keep: list[np.ndarray] = []
    while len(cand):
        m = len(cand)
        c = int(max(1, min(512, _CHUNK_ELEMENTS // max(m, 1), m)))
        u = int(np.searchsorted(sc, sc[c - 1], side="right"))
        chunk = cand[:c]
        dominated = _dominated_by_any(cand[:u], chunk)
        front = chunk[~dominated]
        keep.append(idx[:c][~dominated])
        rest, rest_idx, rest_sc = cand[c:], idx[c:], sc[c:]
        if len(front) and len(rest):
            gone = np.zeros(len(rest), dtype=bool)
            step = max(1, _CHUNK_ELEMENTS // max(len(rest), 1))
            for s in range(0, len(front), step):
                gone |= _dominated_by_any(front[s:s + step], rest)
            rest, rest_idx, rest_sc = rest[~gone], rest_idx[~gone], rest_sc[~gone]
        cand, idx, sc = rest, rest_idx, rest_sc
    out = np.zeros(n, dtype=bool)
    if keep:
        out[np.concatenate(keep)] = True
    return out


# ---- non-dominated sorting ------------------------------------------------------------------

def non_dominated_ranks(points, senses: Sequence[str] | None = None,
                        max_rank: int | None = None) -> np.ndarray:
    """Front index of every point: 0 = the Pareto front, 1 = the front once rank 0 is removed,
    and so on (NSGA-II's fast non-dominated sort gives the same ranks). With ``max_rank``,
    points beyond it get ``max_rank + 1``."""
    f = to_minimisation(points, senses)
    n = len(f)
    ranks = np.full(n, -1, dtype=int)
    remaining = np.arange(n)
    r = 0
    while len(remaining):
        if max_rank is not None and r > max_rank:
            ranks[remaining] = max_rank + 1
            break
        m = pareto_mask(f[remaining])
        ranks[remaining[m]] = r
        remaining = remaining[~m]
        r += 1
    return ranks


def non_dominated_ranks_naive(points, senses: Sequence[str] | None = None) -> np.ndarray:
    """Ranks by repeated naive fronts (reference for tests)."""
    f = to_minimisation(points, senses)
    ranks = np.full(len(f), -1, dtype=int)
    remaining = np.arange(len(f))
    r = 0
    while len(remaining):
        m = pareto_mask_naive(f[remaining])
        ranks[remaining[m]] = r
        remaining = remaining[~m]
        r += 1
    return ranks


# ---- hypervolume ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Hypervolume:
    """Hypervolume of a front in normalised objective space.

    Each objective is mapped to [0, 1] by ``(f - ideal) / (nadir - ideal)`` in minimisation
    orientation, and the reference point is ``1 + margin`` in every coordinate, i.e.
    ``nadir + margin * (nadir - ideal)`` in the objectives' own units (``reference_point``).
    A front made of the ideal point alone scores ``(1 + margin)^k``; a front at the nadir
    scores ``margin^k``. Comparable between runs only when ``ideal`` and ``nadir`` are the
    same (the design-space module fixes them from the evaluated cloud).

    Why not "nadir x 1.1" literally: maximised objectives are negated internally, and scaling
    a negative number by 1.1 moves it the wrong way; the reference tool's fixed (0, 1e6)
    point made its hypervolume equal max(perf) x 1e6 and its stability metric meaningless.
    """
    value: float
    reference_point: tuple[float, ...]   # in the objectives' own units and senses
    ideal: tuple[float, ...]
    nadir: tuple[float, ...]
    exact: bool
    points_used: int


def reference_bounds(points, senses: Sequence[str] | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(ideal, nadir) of a cloud in its own units: best and worst finite value per column."""
    f = to_minimisation(points, senses)
    fin = np.where(np.isfinite(f), f, np.nan)
    if len(f) == 0 or np.isnan(fin).all(axis=0).any():
        raise ConfigError("hypervolume needs at least one finite value per objective")
    flip = _flip(senses, f.shape[1])
    return np.nanmin(fin, axis=0) * flip, np.nanmax(fin, axis=0) * flip


def _flip(senses, k) -> np.ndarray:
    senses = senses or ("min",) * k
    return np.array([-1.0 if s == "max" else 1.0 for s in senses])


def hypervolume(points, senses: Sequence[str] | None = None, ideal=None, nadir=None,
                margin: float = 0.1, samples: int = 200_000, seed: int = 0) -> Hypervolume:
    """Normalised hypervolume of the non-dominated subset of ``points`` (see ``Hypervolume``).

    ``ideal``/``nadir`` are given in the objectives' own units (default: the bounds of
    ``points`` themselves). Exact for two objectives (sweep) and three (slicing, up to
    3,000 front points), pymoo's exact indicator for four (up to 1,500 points), otherwise a
    seeded Monte-Carlo estimate with ``samples`` draws (``exact`` is then False)."""
    f = to_minimisation(points, senses)
    k = f.shape[1]
    flip = _flip(senses, k)
    if ideal is None or nadir is None:
        lo, hi = reference_bounds(points, senses)
        ideal = lo if ideal is None else ideal
        nadir = hi if nadir is None else nadir
    ideal_m = np.asarray(ideal, dtype=float) * flip
    nadir_m = np.asarray(nadir, dtype=float) * flip
    span = nadir_m - ideal_m
    span = np.where(span > 0, span, 1.0)
    ref = 1.0 + margin
    z = (f - ideal_m) / span
    z = z[np.all(z < ref, axis=1)]
    z = z[pareto_mask(z)] if len(z) else z
    z = np.unique(z, axis=0) if len(z) else z
    exact = True
    if len(z) == 0:
        value = 0.0
    elif k == 1:
        value = float(ref - z.min())
    elif k == 2:
        value = _hv2(z, ref, ref)
    elif k == 3 and len(z) <= _HV_EXACT_3D_MAX:
        value = _hv3(z, ref)
    elif k == 4 and len(z) <= _HV_EXACT_4D_MAX and _pymoo_hv() is not None:
        value = float(_pymoo_hv()(ref_point=np.full(k, ref))(z))
    else:
        value, exact = _hv_monte_carlo(z, ref, samples, seed), False
    ref_units = (nadir_m + margin * (nadir_m - ideal_m)) * flip
    return Hypervolume(value, tuple(ref_units.tolist()), tuple(np.asarray(ideal, float).tolist()),
                       tuple(np.asarray(nadir, float).tolist()), exact, len(z))


def _hv2(z: np.ndarray, r0: float, r1: float) -> float:
    """Exact 2-D hypervolume of mutually non-dominated points below (r0, r1)."""
    z = z[np.lexsort((z[:, 1], z[:, 0]))]
    run = np.minimum.accumulate(z[:, 1])
    keep = np.ones(len(z), dtype=bool)
    keep[1:] = z[1:, 1] < run[:-1]
    z = z[keep]
    x_next = np.append(z[1:, 0], r0)
    return float(np.sum((x_next - z[:, 0]) * (r1 - z[:, 1])))


def _hv3(z: np.ndarray, ref: float) -> float:
    """Exact 3-D hypervolume by slicing along the third objective."""
    z = z[np.argsort(z[:, 2], kind="stable")]
    levels = np.unique(z[:, 2])
    total = 0.0
    for i, level in enumerate(levels):
        top = levels[i + 1] if i + 1 < len(levels) else ref
        below = z[z[:, 2] <= level][:, :2]
        total += _hv2(below, ref, ref) * (top - level)
    return float(total)


def _hv_monte_carlo(z: np.ndarray, ref: float, samples: int, seed: int) -> float:
    k = z.shape[1]
    lo = z.min(axis=0)
    box = float(np.prod(ref - lo))
    rng = np.random.default_rng(seed)
    hit = 0
    step = max(1, _CHUNK_ELEMENTS // max(len(z), 1))
    for s in range(0, samples, step):
        u = lo + rng.random((min(step, samples - s), k)) * (ref - lo)
        covered = np.zeros(len(u), dtype=bool)
        for p in z:
            covered |= (p <= u).all(axis=1)
        hit += int(covered.sum())
    return box * hit / samples


def _pymoo_hv():
    try:
        from pymoo.indicators.hv import HV
    except ImportError:      # optional dependency
        return None
    return HV
