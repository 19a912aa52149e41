"""One call for the CLI and the page: build the iteration cost, simulate, summarise, and
optionally search the largest rate meeting an SLO and size a fleet for a target rate."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from ..errors import ConfigError
from ..hardware import Efficiency, Hardware
from ..metrics.cost import MetricsSettings
from ..model import Model
from ..parallel import ParallelPlan
from ..precision import Precision
from .cost import IterationCost
from .config import EngineConfig
from ..envelope import check_value
from ..limits import MAX_REQUEST_EVENTS, check_arrival_span, check_size
from .engine import SimResult, kv_capacity_tokens, simulate
from .kv_memory import kv_memory
from .report import (SEARCH_STEPS, RateSearch, ServeSummary, Slo, max_rate_meeting_slo,
                     replicas_for_rate,
                     steady_state_output_tokens_per_s, summarize)
from .requests import RequestSpec
from .sweeps import LoadCurve, load_curve


@dataclass(frozen=True)
class ServeStudy:
    """Everything ``serve`` computed. ``search`` is None without an SLO; ``replicas`` None
    without a target rate."""
    summary: ServeSummary
    result: SimResult
    cost: IterationCost
    config: EngineConfig
    spec: RequestSpec
    slo: Slo | None
    saturation_requests_per_s: float
    search: RateSearch | None
    target_rate: float | None
    replicas: int | None
    closed_form_output_tokens_per_s: float | None
    curve: LoadCurve | None = None

    @property
    def gpus_for_target(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.cost.devices


def check_serving_size(spec: RequestSpec, search_runs: int = 0, curve_points: int = 0,
                       extra_runs: int = 0) -> None:
    """Refuse, before any simulation, a study whose simulated requests (requests x runs) pass
    ``limits.MAX_REQUEST_EVENTS`` or whose arrivals span more than
    ``limits.MAX_ARRIVAL_SPAN_S`` (issue 29: 1,000,000 requests with an SLO search ran for
    minutes; a rate of 1e-12 req/s simulated a 1e15-s makespan)."""
    if spec.arrival != "max-load":
        check_arrival_span(spec.requests, spec.rate)
    runs = 1 + (spec.arrival != "max-load") + search_runs + curve_points + extra_runs
    parts = [f"{runs} simulations"]
    if search_runs:
        parts.append(f"{search_runs} of them the SLO rate search (--no-search skips it)")
    check_size(f"requests simulated ({spec.requests:,} requests x {'; '.join(parts)})",
               spec.requests * runs, MAX_REQUEST_EVENTS, "simulate fewer requests")


def serve(model: Model, hardware: Hardware, precision: Precision, spec: RequestSpec,
          config: EngineConfig, plan: ParallelPlan | None = None,
          efficiency: Efficiency | None = None, slo: Slo | None = None,
          target_rate: float | None = None, settings: MetricsSettings | None = None,
          flash_attention: bool = True, search: bool = True, curve_points: int = 0,
          progress=None, at_slo_rate: bool = False, time_scale: float = 1.0) -> ServeStudy:
    """Simulate ``spec`` on one replica of ``plan`` and summarise it; with an SLO, also find
    the largest request rate meeting it (``search``); with ``target_rate`` [requests/s], the
    replicas needed (at the SLO rate if there is an SLO, else at the max-load rate); with
    ``curve_points`` > 0, latency against load at that many rates. ``at_slo_rate`` (MLPerf's
    Server result): after the search, simulate and report at the largest Poisson rate meeting
    the SLO (``spec``'s arrival is then only the starting point; needs ``slo``).
    ``time_scale``: a stack release's factor on the compute time (``stack_version``)."""
    if at_slo_rate and slo is None:
        raise ConfigError("reporting at the SLO rate needs an SLO")
    plan = plan or ParallelPlan()
    check_serving_size(spec, (SEARCH_STEPS + 2) if slo is not None and search else 0,
                       curve_points)
    cost = IterationCost(model, hardware, precision, plan, efficiency, flash_attention,
                         time_scale=time_scale)
    share = (0.3, 0.4, 0.3) if curve_points else (0.3, 0.7, 0.0)

    def part(lo: float, width: float):
        return (lambda f: progress(lo + width * f)) if progress else None   # noqa: E731
    res = simulate(cost, config, spec, part(0.0, share[0]))
    check_value("simulated makespan [s]", res.makespan_s, "time")     # the output envelope
    summ = summarize(res, cost, slo, settings)
    if spec.arrival == "max-load":
        sat = summ.requests_per_s
    else:
        sat_res = simulate(cost, config, replace(spec, arrival="max-load"))
        sat = len(sat_res.osl) / sat_res.makespan_s
    found = None
    if slo is not None and search:
        found = max_rate_meeting_slo(cost, config, spec, slo, sat, part(share[0], share[1]))
    if at_slo_rate:
        if found is None or not found.max_rate:
            raise ConfigError("no request rate meets the SLO on one replica")
        spec = spec.with_rate(found.max_rate, "poisson")
        res = simulate(cost, config, spec)
        summ = summarize(res, cost, slo, settings)
    reps = None
    if target_rate is not None:
        per = found.max_rate if found is not None else sat
        reps = replicas_for_rate(target_rate, per)
        if reps is None:
            raise ConfigError("no request rate meets the SLO on one replica, so no number of "
                              "replicas reaches the target")
    closed = None
    if spec.lengths == "fixed" and spec.table is None:
        closed = steady_state_output_tokens_per_s(cost, config, spec.isl, spec.osl)[0]
    curve = None
    if curve_points:
        curve = load_curve(cost, config, spec, sat, curve_points, slo,
                           part(share[0] + share[1], share[2]))
    if progress:
        progress(1.0)
    return ServeStudy(summ, res, cost, config, spec, slo, sat, found, target_rate, reps, closed,
                      curve)


def replica_fits(model: Model, hardware: Hardware, precision: Precision, plan: ParallelPlan,
                 config: EngineConfig, tokens_per_request: int,
                 flash_attention: bool = True) -> bool:
    """Whether one replica of ``plan`` on ``hardware`` holds the weights, the activations and
    the KV cache of one request of ``tokens_per_request`` tokens (the engine's own capacity
    rule, :func:`.engine.kv_capacity_tokens`)."""
    try:
        cost = IterationCost(model, hardware, precision, plan, None, flash_attention)
    except ConfigError:
        return False                     # e.g. TP does not divide the heads
    cap = kv_capacity_tokens(cost, config)
    return cap > 0 and cap >= tokens_per_request


def smallest_fitting(model: Model, options, precision: Precision, config: EngineConfig,
                     tokens_per_request: int, flash_attention: bool = True):
    """The first (option, hardware, plan) of ``options`` — (label, hardware) pairs in order of
    preference — and tensor-parallel degrees 1, 2, 4 … up to the option's device count, whose
    replica fits (:func:`replica_fits`): the fewest devices first, then the order given. None
    if nothing fits."""
    tried = []
    for label, hw in options:
        devices = hw.interconnect.devices if hw.interconnect else 1
        tp = 1
        while tp <= devices:
            tried.append((tp, label, hw))
            tp *= 2
    for tp, label, hw in sorted(tried, key=lambda t: t[0]):
        plan = ParallelPlan(tp=tp)
        if replica_fits(model, hw, precision, plan, config, tokens_per_request, flash_attention):
            return label, hw, plan
    return None


def study_to_dict(st, stack, defaults_source: str, streaming: bool | None = None) -> dict:
    """JSON-ready dict (SI units) of a ServeStudy run under ``stack`` (a resolved
    ``calibration.stacks.Stack``); the CLI contract's keys at the top level. ``streaming``:
    whether the run was asked to stream (None: whether its engine spends host time on it; a
    profile without a per-sequence cost streams at 0 s a token). ``memory``: the device's
    accounting (:func:`.kv_memory.kv_memory`)."""
    s = st.summary
    mem = kv_memory(st.cost, st.config)
    out = {
        "model": st.cost.model.name, "hardware": st.cost.hardware.name,
        "plan": st.cost.plan.label, "framework": stack.name, "stack": stack.to_dict(),
        "stack_time_scale": st.cost.time_scale,
        "output_tokens_per_s": s.output_tokens_per_s,
        "output_tokens_per_s_per_gpu": s.output_tokens_per_s_per_gpu,
        "requests_per_s": s.requests_per_s,
        "mean_running_batch": s.mean_running_batch,
        "mean_requests_in_system": s.mean_requests_in_system,
        "mean_kv_cache_use": s.mean_kv_use,
        "ttft_s": _pct(s.ttft_s), "tpot_s": _pct(s.tpot_s), "e2e_s": _pct(s.e2e_s),
        "kv_cache_capacity_tokens": s.kv_capacity_tokens,
        "preemptions": s.preemptions,
        "goodput_requests_per_s": s.goodput_requests_per_s,
        "slo_met": s.slo_met,
        "gpus": s.gpus,
        "makespan_s": s.makespan_s,
        "iterations": s.iterations,
        "saturation_requests_per_s": st.saturation_requests_per_s,
        "closed_form_output_tokens_per_s": st.closed_form_output_tokens_per_s,
        "energy_j_per_token": _f(s.energy_j_per_token),
        "avg_power_w_per_gpu": _f(s.avg_power_w_per_gpu),
        "usd_per_million_tokens": _f(s.usd_per_million_tokens),
        "streaming": st.config.stream_s_per_token > 0 if streaming is None else streaming,
        "stream_s_per_token": st.config.stream_s_per_token,
        "runtime_reserve_bytes": st.config.runtime_reserve_bytes,
        "kv_budget_bytes": mem.kv_budget_bytes,
        "memory": mem.to_dict(),
        "engine": {**asdict(st.config), "defaults_source": defaults_source},
        "requests": st.spec.to_dict(),
        "notes": list(s.notes),
    }
    if st.slo is not None:
        out["slo"] = asdict(st.slo)
        if st.search is not None:
            out["max_rate_meeting_slo_requests_per_s"] = st.search.max_rate
            out["slo_search"] = [{"rate": r, "ttft_s": _f(a), "tpot_s": _f(b), "met": m}
                                 for r, a, b, m in st.search.points]
    if st.target_rate is not None:
        out.update(target_rate_requests_per_s=st.target_rate, replicas=st.replicas,
                   gpus_for_target=st.gpus_for_target)
    return out


def _f(v):
    return None if v is None or not math.isfinite(v) else float(v)


def _pct(p) -> dict:
    return {k: _f(v) for k, v in asdict(p).items()}
