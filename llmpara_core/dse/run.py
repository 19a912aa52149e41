"""A run over a design space: sample it, evaluate the designs chunk by chunk and keep only what
is reported, so that a million designs need a few tens of MB instead of every column of every
design (~25 float64 columns, ~200 MB).

Per chunk of ``evaluation.CHUNK_POINTS`` designs a run keeps: the number of feasible designs
and of infeasible ones per reason; per objective the best feasible design (first of equals,
as ``argmax``/``argmin`` over all designs) and the finite range over the feasible designs (the
hypervolume's normalisation); the chunk's front candidates (``pareto.front_candidates``: its
feasible designs minus those the grid pre-filter proves dominated, a superset of the chunk's
front); and, when asked, the designs of a seeded uniform sample (a cloud to draw).

The front of the space is the front of the union of the chunks' candidates, exactly: a design
left out of its chunk's candidates is dominated in the space; a candidate dominated in the
space is dominated by a design of the space's front (dominance is a strict partial order on a
finite set), which is a candidate of its own chunk, so the last reduction removes it.
``tests/test_dse.py`` checks the result against ``evaluation.pareto_front`` of all designs at
once, for several chunk sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from . import physics as phys
from .evaluation import (DEFAULT_OBJECTIVES, OBJECTIVES, DesignContext, Evaluation,
                         check_objectives, objective_matrix)
from .pareto import front_candidates, hypervolume, pareto_mask
from .space import SearchSpace, sample

SAMPLE_SEED = 0        # seed of the uniform sample of designs kept for a cloud


@dataclass(frozen=True)
class DSEResult:
    """A sweep. ``evaluation`` holds the kept designs: every design (``keep_sample=None``), or
    the front, each objective's best design and the seeded sample; ``design_index`` gives each
    row's index in the sampled order. ``front``, ``best`` and ``sample`` are rows of
    ``evaluation`` (the front sorted best first by the first objective); the counts and
    ``bounds`` (ideal, nadir of the feasible designs) are over every evaluated design."""
    space: SearchSpace
    method: str
    seed: int
    objectives: tuple[str, ...]
    evaluation: Evaluation
    front: np.ndarray
    hypervolume: object | None
    points_evaluated: int
    feasible_count: int
    reason_counts: dict[str, int]
    best: dict[str, int]
    sample: np.ndarray
    design_index: np.ndarray
    bounds: tuple[np.ndarray, np.ndarray]

    def infeasible_counts(self) -> dict[str, int]:
        """Designs per infeasibility reason (a design may have several)."""
        return dict(self.reason_counts)


def explore(ctx: DesignContext, space: SearchSpace, method: str = "grid",
            samples: int | None = None, seed: int = 0,
            objectives: Sequence[str] = DEFAULT_OBJECTIVES, with_hypervolume: bool = False,
            progress: Callable[[float], None] | None = None,
            keep_sample: int | None = None) -> DSEResult:
    """Sample ``space``, evaluate every design and reduce the feasible ones to the front.
    ``keep_sample``: None keeps every design in the result; a number keeps only the front,
    the best design of each objective and a seeded uniform sample of that many designs."""
    objs = check_objectives(objectives)
    ctx.check_keys(space.keys)
    design = sample(space, method, samples, seed)
    design.update({k: v for k, v in space.fixed})
    n = int(np.broadcast(*[np.asarray(v) for v in design.values()]).size)
    run = _Reduction(objs, None if keep_sample is None else sample_rows(n, keep_sample))
    for start, part in ctx.chunks(design, progress):
        run.add(start, part)
    return run.result(space, method, seed, with_hypervolume)


def summarise(ev: Evaluation, objectives: Sequence[str], space: SearchSpace, method: str,
              seed: int, with_hypervolume: bool = False) -> DSEResult:
    """The same reduction of an evaluation already in memory (every design kept)."""
    run = _Reduction(check_objectives(objectives), None)
    run.add(0, ev)
    return run.result(space, method, seed, with_hypervolume)


def sample_rows(n: int, m: int) -> np.ndarray:
    """A seeded uniform sample of ``m`` of ``n`` designs, sorted (all of them when n <= m)."""
    if n <= m:
        return np.arange(n)
    if m <= 0:
        return np.zeros(0, dtype=np.intp)
    return np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, int(m), replace=False))


class _Reduction:
    """What a run keeps of the chunks it is fed (see the module docstring)."""

    def __init__(self, objs: tuple[str, ...], sample_idx: np.ndarray | None):
        self.objs, self.sample_idx = objs, sample_idx
        self.senses = [OBJECTIVES[o].sense for o in objs]
        self.n = self.feasible = 0
        self.counts = {name: 0 for name in phys.REASONS.values()}
        self.kept: list[tuple[np.ndarray, Evaluation]] = []        # sample or every design
        self.cands: list[tuple[np.ndarray, Evaluation]] = []       # front candidates
        self.best: dict[str, tuple[float, int, Evaluation]] = {}
        self.lo = np.full(len(objs), np.inf)
        self.hi = np.full(len(objs), -np.inf)

    def add(self, start: int, ev: Evaluation) -> None:
        self.n += ev.n
        r = ev.reasons
        for bit, name in phys.REASONS.items():
            self.counts[name] += int(np.count_nonzero(r & bit))
        if self.sample_idx is None:
            self.kept.append((start + np.arange(ev.n), ev))
        else:
            lo, hi = np.searchsorted(self.sample_idx, (start, start + ev.n))
            rows = self.sample_idx[lo:hi] - start
            self.kept.append((rows + start, ev.take(rows)))
        feas = np.flatnonzero(r == 0)
        self.feasible += len(feas)
        if len(feas) == 0:
            return
        f = objective_matrix(ev, self.objs, feas)
        self._extremes(start, ev, feas, f)
        rows = feas[front_candidates(f, self.senses)]
        self.cands.append((start + rows, ev.take(rows)))

    def _extremes(self, start: int, ev: Evaluation, feas: np.ndarray, f: np.ndarray) -> None:
        for j, (o, sense) in enumerate(zip(self.objs, self.senses)):
            col = f[:, j]
            i = int(col.argmax() if sense == "max" else col.argmin())
            old = self.best.get(o)
            if old is None or (col[i] > old[0] if sense == "max" else col[i] < old[0]):
                self.best[o] = (float(col[i]), start + int(feas[i]), ev.take([feas[i]]))
            fin = col if np.isfinite(col).all() else col[np.isfinite(col)]
            if len(fin):
                self.lo[j] = min(self.lo[j], fin.min())
                self.hi[j] = max(self.hi[j], fin.max())

    def _front(self) -> tuple[np.ndarray, Evaluation | None]:
        """(design indices of the front sorted best first by the first objective, the
        candidates' evaluation)."""
        if not self.cands:
            return np.zeros(0, dtype=np.intp), None
        idx = np.concatenate([i for i, _ in self.cands])
        ev = Evaluation.concat([e for _, e in self.cands])
        rows = np.flatnonzero(pareto_mask(objective_matrix(ev, self.objs), self.senses))
        first = ev[self.objs[0]][rows]
        order = np.argsort(-first if self.senses[0] == "max" else first, kind="stable")
        return idx[rows[order]], ev.take(rows[order])

    def result(self, space, method, seed, with_hypervolume: bool) -> DSEResult:
        front_idx, front_ev = self._front()
        parts = list(self.kept)
        if self.sample_idx is not None:
            parts += [(front_idx, front_ev)] if len(front_idx) else []
            parts += [(np.array([i]), e) for _, i, e in self.best.values()]
        idx = np.concatenate([i for i, _ in parts])
        ev = Evaluation.concat([e for _, e in parts])
        if self.sample_idx is not None:
            idx, first = np.unique(idx, return_index=True)
            ev = ev.take(first)
        where = lambda d: np.searchsorted(idx, d)           # noqa: E731  (idx is sorted)
        front = where(front_idx)
        bounds = self._bounds()
        hv = None
        if with_hypervolume and len(front):
            hv = hypervolume(objective_matrix(ev, self.objs, front), self.senses, *bounds)
        sample_rows_ = (np.arange(ev.n) if self.sample_idx is None
                        else where(self.sample_idx))
        return DSEResult(space, method, seed, self.objs, ev, front, hv, self.n, self.feasible,
                         dict(self.counts), {o: int(where(b[1])) for o, b in self.best.items()},
                         sample_rows_, idx, bounds)

    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(ideal, nadir) of the feasible designs, as ``evaluation._bounds``."""
        none = ~np.isfinite(self.lo)
        lo, hi = np.where(none, 0.0, self.lo), np.where(none, 1.0, self.hi)
        mx = np.array([s == "max" for s in self.senses])
        return np.where(mx, hi, lo), np.where(mx, lo, hi)
