"""Many simulations: latency against load (with the knee), the throughput-latency frontier over
deployments (TP, PP, batch cap), and a fleet sweep over (model, hardware, TP, rate) points
spread over processes with ``concurrent.futures`` (the same ``evaluate_point`` maps unchanged
onto Ray or Dask workers)."""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError
from ..limits import MAX_REQUEST_EVENTS, TimeBudgetExceeded, check_size
from ..hardware import Efficiency, Hardware
from ..model import Model
from ..parallel import ParallelPlan
from ..precision import Precision
from .cost import IterationCost
from .config import EngineConfig
from .engine import simulate
from .report import Slo, meets, per_request, summarize
from .requests import RequestSpec

KNEE_TTFT_FACTOR = 2.0       # knee: last rate whose p90 TTFT <= 2 x its lowest-rate value


@dataclass(frozen=True)
class LoadPoint:
    """One request rate [requests/s] simulated: throughput and latency percentiles [s]."""
    rate: float
    output_tokens_per_s: float
    requests_per_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    e2e_p90_s: float
    mean_running_batch: float
    slo_met: bool | None


@dataclass(frozen=True)
class LoadCurve:
    points: tuple[LoadPoint, ...]
    saturation_requests_per_s: float
    knee_rate: float | None


def _point(cost: IterationCost, cfg: EngineConfig, spec: RequestSpec, rate: float,
           slo: Slo | None) -> LoadPoint:
    res = simulate(cost, cfg, spec.with_rate(rate))
    s = summarize(res, cost, slo)
    ttft, tpot, _ = per_request(res)
    return LoadPoint(rate, s.output_tokens_per_s, s.requests_per_s, s.ttft_s.p50, s.ttft_s.p90,
                     s.ttft_s.p99, s.tpot_s.p50, s.tpot_s.p90, s.tpot_s.p99, s.e2e_s.p90,
                     s.mean_running_batch, None if slo is None else meets(slo, ttft, tpot))


def load_curve(cost: IterationCost, cfg: EngineConfig, spec: RequestSpec, saturation: float,
               points: int = 10, slo: Slo | None = None, progress=None) -> LoadCurve:
    """``points`` rates from 5 % to 110 % of the max-load request rate ``saturation``
    (geometric spacing), each a full simulation of ``spec``'s requests."""
    if points < 2:
        raise ConfigError("a load curve needs at least 2 points")
    rates = np.geomspace(0.05, 1.1, points) * saturation
    pts = []
    for i, r in enumerate(rates):
        pts.append(_point(cost, cfg, spec, float(r), slo))
        if progress is not None:
            progress((i + 1) / points)
    base = pts[0].ttft_p90_s
    knee = None
    for p in pts:
        if p.ttft_p90_s <= KNEE_TTFT_FACTOR * base:
            knee = p.rate
    return LoadCurve(tuple(pts), saturation, knee)


@dataclass(frozen=True)
class FrontierPoint:
    """One deployment at max load: throughput per GPU against latency [s]."""
    tp: int
    pp: int
    max_batch: int
    gpus: int
    output_tokens_per_s_per_gpu: float
    tpot_p50_s: float
    ttft_p50_s: float
    on_front: bool
    note: str = ""


def frontier(model: Model, hardware: Hardware, precision: Precision, cfg: EngineConfig,
             spec: RequestSpec, plans, batch_caps, efficiency: Efficiency | None = None,
             progress=None) -> tuple[FrontierPoint, ...]:
    """Max-load simulation of every (plan, batch cap); ``on_front`` marks the points no other
    beats on both throughput per GPU (higher) and median TPOT (lower). Plans that cannot run
    (heads, links, memory) are kept with the reason."""
    spec = replace(spec, arrival="max-load", rate=None)
    combos = [(p, b) for p in plans for b in batch_caps]
    check_size(f"requests simulated ({spec.requests:,} requests x {len(combos)} plan and batch "
               "combinations)", spec.requests * len(combos), MAX_REQUEST_EVENTS,
               "simulate fewer requests, plans or batch caps")
    pts = []
    for i, (plan, cap) in enumerate(combos):
        try:
            cost = IterationCost(model, hardware, precision, plan, efficiency)
            res = simulate(cost, replace(cfg, max_batch=int(cap)), spec)
            s = summarize(res, cost)
            pts.append(FrontierPoint(plan.tp, plan.pp, int(cap), cost.devices,
                                     s.output_tokens_per_s_per_gpu, s.tpot_s.p50, s.ttft_s.p50,
                                     False))
        except TimeBudgetExceeded:
            raise                       # not a reason of this plan: the whole sweep stops
        except ConfigError as e:
            pts.append(FrontierPoint(plan.tp, plan.pp, int(cap), plan.tp * plan.pp, math.nan,
                                     math.nan, math.nan, False, str(e).splitlines()[0]))
        if progress is not None:
            progress((i + 1) / len(combos))
    ok = [p for p in pts if not p.note]
    front = {id(p) for p in ok if not any(
        q.output_tokens_per_s_per_gpu >= p.output_tokens_per_s_per_gpu
        and q.tpot_p50_s <= p.tpot_p50_s and q is not p
        and (q.output_tokens_per_s_per_gpu > p.output_tokens_per_s_per_gpu
             or q.tpot_p50_s < p.tpot_p50_s) for q in ok)}
    return tuple(replace(p, on_front=id(p) in front) for p in pts)


# ---- fleet sweep ----------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepPoint:
    """One (model, hardware, TP, rate) point by preset names, picklable for any executor."""
    model: str
    hardware: str
    tp: int
    rate: float | None          # None = max load
    isl: int = 512
    osl: int = 256
    requests: int = 1000
    precision: str = "FP16"
    framework: str | None = None     # None = the hardware class's default stack


def evaluate_point(p: SweepPoint) -> dict:
    """Simulate one sweep point under its stack (``framework`` None = the class default); a
    plain dict (JSON-ready), errors reported in ``error``."""
    from ..calibration.stacks import with_stack
    from ..precision import precision_preset
    from ..presets import load_hardware, load_model
    from .config import framework_defaults
    out = {"model": p.model, "hardware": p.hardware, "tp": p.tp, "rate": p.rate}
    try:
        hw = load_hardware(p.hardware)
        stack_hw, stack = with_stack(hw, p.framework)
        cost = IterationCost(load_model(p.model), hw, precision_preset(p.precision),
                             ParallelPlan(tp=p.tp), stack_hw.efficiency)
        spec = RequestSpec(isl=p.isl, osl=p.osl, requests=p.requests)
        if p.rate is not None:
            spec = spec.with_rate(p.rate)
        s = summarize(simulate(cost, framework_defaults(stack.name).config, spec), cost)
        out.update(stack=stack.to_dict(), output_tokens_per_s=s.output_tokens_per_s,
                   output_tokens_per_s_per_gpu=s.output_tokens_per_s_per_gpu,
                   ttft_p90_s=s.ttft_s.p90, tpot_p90_s=s.tpot_s.p90, error=None)
    except ConfigError as e:
        out["error"] = str(e).splitlines()[0]
    return out


def run_sweep(points, workers: int | None = None) -> list[dict]:
    """``evaluate_point`` over ``points`` on ``workers`` processes (1 = in this process)."""
    points = list(points)
    if workers == 1 or len(points) <= 1:
        return [evaluate_point(p) for p in points]
    with ProcessPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(evaluate_point, points, chunksize=max(1, len(points) // 32)))
