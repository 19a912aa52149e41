"""NSGA-II over the continuous ranges of a design space (pymoo), with the vectorised evaluator
of ``llmpara_core.dse`` for whole populations and a hypervolume indicator per generation.

Genes are the swept axes mapped to [0, 1] (log-uniformly on log axes). Objectives are 2-4 of
``dse.OBJECTIVES`` (maximised ones negated for pymoo). Constraints (<= 0 is feasible), so
that infeasible designs are ranked by how far they are from feasibility (Deb's rule, as
pymoo applies it): scenario memory / capacity - 1, die area / reticle - 1, the relative excess
over the nearest allowed memory technology, and for swept TDP or price the required power /
TDP - 1 and cost / price - 1.

Hypervolume reference point: the ideal and nadir of the *feasible* designs of a seeded Latin
hypercube of the same space (``reference_samples`` designs) fix a normalisation; the reference
point is the nadir plus 10 % of the ideal-nadir range in every objective (``pareto.hypervolume``).
It is the same for every generation and every seed of the same space, so the history and
repeated runs are comparable; a front that beats the sample's own front scores higher. (The
reference tool used a fixed (0, 1e6 $/EFLOP) point, which made its hypervolume max perf x 1e6,
reference-tool §6.3.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from . import evaluation as dse
from . import physics as phys
from .space import SearchSpace, sample, unit_to_axis
from ..errors import ConfigError, require_int
from ..limits import MAX_NSGA_EVALUATIONS, check_int, check_size, check_time_budget
from .pareto import Hypervolume, hypervolume, pareto_mask


@dataclass(frozen=True)
class Generation:
    generation: int
    evaluations: int
    feasible: int
    hypervolume: float


@dataclass(frozen=True)
class NSGAResult:
    """The final population, its feasible non-dominated designs and the per-generation
    history; ``hv`` is the final front's hypervolume (reference point in ``hv``)."""
    space: SearchSpace
    objectives: tuple[str, ...]
    evaluation: dse.Evaluation
    front: np.ndarray
    history: tuple[Generation, ...]
    hv: Hypervolume | None
    ideal: tuple[float, ...]
    nadir: tuple[float, ...]
    population: int
    generations: int
    seed: int


def constraints(ctx: dse.DesignContext, ev: dse.Evaluation, swept: set[str]) -> np.ndarray:
    """(n, m) constraint values, <= 0 feasible (see the module docstring)."""
    cp = ctx.physics
    g = [-ev["memory_headroom"], ev["area_mm2"] / phys.die_constants().reticle_mm2 - 1.0,
         phys.memory_violation(ev["bw_gbps"], ev["cap_gb"], cp)]
    if "tdp" in swept:
        g.append(ev["tdp_required_w"] / ev["tdp_w"] - 1.0)
    if "price" in swept:
        g.append((ev["die_usd"] + ev["memory_usd"]) / ev["price_usd"] - 1.0)
    return np.column_stack(g)


@dataclass(frozen=True)
class _Setup:
    """What the pymoo problem needs: the ranged axes (genes), fixed values, swept keys and
    the objective orientation."""
    ctx: dse.DesignContext
    axes: tuple
    fixed: dict
    swept: frozenset
    objectives: tuple[str, ...]
    flip: np.ndarray

    def decode(self, x: np.ndarray) -> dse.Evaluation:
        design = {a.key: unit_to_axis(a, x[:, i].copy()) for i, a in enumerate(self.axes)}
        design.update(self.fixed)
        return self.ctx.evaluate(design)


def _setup(ctx: dse.DesignContext, space: SearchSpace, objs: tuple[str, ...]) -> _Setup:
    axes = tuple(a for a in space.axes if a.hi > a.lo)
    if not axes:
        raise ConfigError("NSGA-II needs at least one axis with a range (lo < hi)")
    fixed = {a.key: a.lo for a in space.axes if a.hi == a.lo} | dict(space.fixed)
    swept = frozenset({dse.base_key(a.key) for a in space.axes} |
                      {dse.base_key(k) for k in fixed})
    flip = np.array([-1.0 if dse.OBJECTIVES[o].sense == "max" else 1.0 for o in objs])
    return _Setup(ctx, axes, fixed, swept, objs, flip)


def _pymoo_parts(su: _Setup, history: list, senses, ideal, nadir, generations, progress):
    """The pymoo problem (vectorised over a population) and the per-generation callback."""
    from pymoo.core.callback import Callback
    from pymoo.core.problem import Problem

    class _Problem(Problem):
        def _evaluate(self, x, out, *args, **kwargs):
            ev = su.decode(x)
            out["F"] = dse.objective_matrix(ev, su.objectives) * su.flip
            out["G"] = constraints(su.ctx, ev, su.swept)

    class _History(Callback):
        def notify(self, algorithm):
            check_time_budget(f"{algorithm.n_gen} of {generations} generations")
            cv = algorithm.pop.get("CV").ravel()
            f = algorithm.pop.get("F")[cv <= 0] * su.flip
            history.append(Generation(algorithm.n_gen, algorithm.evaluator.n_eval,
                                      int(np.count_nonzero(cv <= 0)),
                                      _hv(f, senses, ideal, nadir)))
            if progress is not None:
                progress(min(1.0, algorithm.n_gen / generations))

    n_con = 3 + ("tdp" in su.swept) + ("price" in su.swept)
    problem = _Problem(n_var=len(su.axes), n_obj=len(su.objectives), n_ieq_constr=n_con,
                       xl=np.zeros(len(su.axes)), xu=np.ones(len(su.axes)))
    return problem, _History()


def run_nsga(ctx: dse.DesignContext, space: SearchSpace,
             objectives: Sequence[str] = dse.DEFAULT_OBJECTIVES, population: int = 100,
             generations: int = 40, seed: int = 0, reference_samples: int = 4096,
             progress: Callable[[float], None] | None = None) -> NSGAResult:
    """NSGA-II (pymoo) over ``space``'s continuous ranges; see the module docstring."""
    objs = dse.check_objectives(objectives)
    population = check_int("population", population)
    generations = check_int("generations", generations)
    check_size(f"NSGA-II evaluations ({population:,} population x {generations:,} "
               "generations)", population * generations, MAX_NSGA_EVALUATIONS,
               "use a smaller population or fewer generations")
    seed = require_int("seed", seed, 0, 2**32 - 1)
    ctx.check_keys(space.keys)
    try:
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.operators.sampling.lhs import LHS
        from pymoo.optimize import minimize
    except ImportError as e:          # pragma: no cover - pymoo is in requirements.txt
        raise ConfigError(f"NSGA-II needs pymoo ({e})") from None
    su = _setup(ctx, space, objs)
    senses = [dse.OBJECTIVES[o].sense for o in objs]
    ideal, nadir = _reference(ctx, space, objs, reference_samples, seed)
    history: list[Generation] = []
    problem, callback = _pymoo_parts(su, history, senses, ideal, nadir, generations, progress)
    res = minimize(problem, NSGA2(pop_size=population, sampling=LHS()),
                   ("n_gen", generations), seed=seed, callback=callback, verbose=False,
                   save_history=False)
    ev = su.decode(np.clip(res.pop.get("X"), 0.0, 1.0))
    front = dse.pareto_front(ev, objs)
    hv = (hypervolume(dse.objective_matrix(ev, objs, front), senses, ideal, nadir)
          if len(front) else None)
    return NSGAResult(space, objs, ev, front, tuple(history), hv, tuple(ideal.tolist()),
                      tuple(nadir.tolist()), population, generations, seed)


def _reference(ctx, space, objs, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(ideal, nadir) of the feasible designs of a Latin hypercube of ``space``."""
    design = sample(space, "lhs", n, seed)
    design.update(dict(space.fixed))
    ev = ctx.evaluate(design)
    if not ev.feasible.any():
        raise ConfigError(f"none of {n} Latin-hypercube designs of this space is feasible "
                          f"(most common reason: {_top_reason(ev)}); widen the ranges")
    return dse._bounds(ev, objs)


def _top_reason(ev: dse.Evaluation) -> str:
    counts = {name: int(np.count_nonzero(ev.reasons & bit)) for bit, name in phys.REASONS.items()}
    return phys.REASON_TEXT[max(counts, key=counts.get)]


def _hv(f: np.ndarray, senses, ideal, nadir) -> float:
    if len(f) == 0:
        return 0.0
    f = f[pareto_mask(f, senses)]
    return hypervolume(f, senses, ideal, nadir).value

