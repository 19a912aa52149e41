"""Fit and leave-one-GPU-out check of the FP8 power wall (``cost.TENSOR_DUTY``) on the
TensorRT-LLM max-load rows (``validation``).

Each distinct configuration is simulated once without the wall, recording every pass's
roofline compute time, full-rate FP8 tensor-core work and collective time
(``IterationCost.recorder``). At max load under TensorRT-LLM's reserve (no-eviction) policy,
which requests run in which pass does not depend on time, so the run's makespan under a wall of
duty d is exactly sum(max(compute, work / d) + collectives) over its passes
(``tests/test_serving_power_wall.py`` checks it): every duty of a grid is scored from the one
simulation. The duty kept is the grid's lowest median |error| over the rows; leave-one-GPU-out
picks it on the other GPUs' rows and scores the held-out GPU's rows with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import median

import numpy as np

from ..budget import TimeBudgetExceeded
from ..calibration.efficiency import efficiency_for
from ..parallel import ParallelPlan
from ..precision import precision_preset
from ..presets import load_hardware, load_model
from . import cost as C
from . import validation as sv
from .config import FRAMEWORK_DEFAULTS
from .engine import simulate
from .requests import RequestSpec

DUTIES = (0.36, 0.38, 0.4, 0.42, 0.44, 0.46, 0.47, 0.48, 0.5, 0.52, 0.55, 0.6, 0.7)


@dataclass(frozen=True)
class RunParts:
    """One simulated max-load configuration: output tokens and its passes' parts [s]."""
    output_tokens: float
    compute_s: np.ndarray
    work_s: np.ndarray
    comm_s: np.ndarray

    def tokens_per_s(self, duty: float | None, time_scale: float = 1.0) -> float:
        """Output tokens/s with the wall at ``duty`` (None: none) and the roofline compute
        time times ``time_scale`` (a stack release's factor, ``stack_version``)."""
        c = self.compute_s * time_scale
        c = c if duty is None else np.maximum(c, self.work_s / duty)
        return self.output_tokens / float((c + self.comm_s).sum())


def record(rows, requests: int = sv.MAX_LOAD_REQUESTS,
           reserve_bytes: float | None = None) -> list[tuple]:
    """[(row, RunParts)] for the rows that have presets (each configuration simulated once,
    without the wall; ``reserve_bytes``: TensorRT-LLM's runtime reserve per device, None = the
    shipped one, ``config.TRTLLM_RUNTIME_RESERVE_GIB``)."""
    runs: dict = {}
    out = []
    for r in rows:
        dev, model = sv.device_for(r), sv.MODELS.get(r.model)
        prec = sv.PRECISIONS.get(r.precision)
        if dev is None or model is None or prec is None:
            continue
        key = (model, dev, prec, r.tp, r.isl, r.osl, r.max_batch, r.max_num_tokens)
        if key not in runs:
            try:
                runs[key] = _run(model, dev, prec, r, requests, reserve_bytes)
            except TimeBudgetExceeded:
                raise
            except Exception:       # noqa: BLE001 - a row that cannot run is left out
                runs[key] = None
        if runs[key] is not None:
            out.append((r, runs[key]))
    return out


def _run(model: str, dev: str, prec: str, r, requests: int,
         reserve_bytes: float | None = None) -> RunParts:
    hw = load_hardware(dev)
    cost = C.IterationCost(load_model(model), hw, precision_preset(prec), ParallelPlan(tp=r.tp),
                           efficiency_for(hw, "tensorrt-llm"))
    cfg = FRAMEWORK_DEFAULTS["tensorrt-llm"].config
    if r.max_batch or r.max_num_tokens:
        cfg = replace(cfg, max_batch=r.max_batch or cfg.max_batch,
                      max_num_tokens=r.max_num_tokens or cfg.max_num_tokens)
    if reserve_bytes is not None:
        cfg = replace(cfg, runtime_reserve_bytes=reserve_bytes)
    cost.recorder = []
    saved, C.TENSOR_DUTY = C.TENSOR_DUTY, None
    try:
        res = simulate(cost, cfg, RequestSpec(isl=r.isl, osl=r.osl, requests=requests))
    finally:
        C.TENSOR_DUTY = saved
    parts = [np.concatenate([p[k] for p in cost.recorder]) for k in range(3)]
    if abs(float((parts[0] + parts[2]).sum()) - res.busy_s) > 1e-6 * res.busy_s:
        raise RuntimeError("the recorded passes do not add up to the run")   # pp > 1, overlap
    return RunParts(float(res.osl.sum()), *parts)


def errors(records, duty: float | None) -> list[tuple]:
    """[(row, predicted / measured - 1)] with the wall at ``duty`` (None: none)."""
    return [(r, p.tokens_per_s(duty) / r.measured - 1) for r, p in records]


def _score(errs, keep) -> float:
    return median(abs(e) for r, e in errs if keep(r.hardware))


def fit(records, duties=DUTIES) -> float:
    """The grid's duty with the lowest median |error| over ``records``."""
    res = {d: errors(records, d) for d in duties}
    return min(duties, key=lambda d: _score(res[d], lambda g: True))


def leave_one_gpu_out(records, duties=DUTIES) -> tuple[list[tuple], dict]:
    """([(row, held-out error)], {gpu: duty fitted without it})."""
    res = {d: errors(records, d) for d in duties}
    held, chosen = [], {}
    for g in sorted({r.hardware for r, _ in records}):
        d = min(duties, key=lambda x: _score(res[x], lambda h: h != g))
        chosen[g] = d
        held += [(r, e) for r, e in res[d] if r.hardware == g]
    return held, chosen
