"""What a serving simulation means: throughput, latency percentiles, goodput under an SLO, the
largest request rate meeting the SLO, replicas for a target rate, energy and cost at that load,
and the steady-state closed form the max-load simulation is checked against."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import require_float
from ..metrics.cost import MetricsSettings, tco
from ..metrics.energy import resolve_energy_model
from ..metrics.energy_params import energy_params
from ..metrics.power_model import power_constants
from ..parallel import shard_analyze
from ..workload import Workload
from .cost import IterationCost
from .config import EngineConfig
from .engine import SimResult, kv_capacity_tokens, simulate
from .requests import RequestSpec

SEARCH_STEPS = 12          # bisection steps of the SLO rate search (log scale)


@dataclass(frozen=True)
class Slo:
    """Latency objective: the ``percentile`` of TTFT and of TPOT must not exceed these."""
    ttft_s: float
    tpot_s: float
    percentile: float = 90.0

    def __post_init__(self):
        require_float("SLO TTFT", self.ttft_s, lo=0, hi=1e6, lo_open=True)
        require_float("SLO TPOT", self.tpot_s, lo=0, hi=1e6, lo_open=True)
        require_float("SLO percentile", self.percentile, lo=0, hi=100, lo_open=True)


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, x: np.ndarray) -> "Percentiles":
        x = x[np.isfinite(x)]
        if not len(x):
            return cls(math.nan, math.nan, math.nan)
        return cls(*(float(v) for v in np.percentile(x, [50, 90, 99])))


@dataclass(frozen=True)
class ServeSummary:
    """One simulation summarised (SI units; tokens are output tokens)."""
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    requests_per_s: float
    mean_running_batch: float
    mean_requests_in_system: float
    mean_kv_use: float
    ttft_s: Percentiles
    tpot_s: Percentiles
    e2e_s: Percentiles
    kv_capacity_tokens: int
    preemptions: int
    goodput_requests_per_s: float | None
    slo_met: bool | None
    gpus: int
    makespan_s: float
    iterations: int
    energy_j_per_token: float | None
    avg_power_w_per_gpu: float | None
    usd_per_million_tokens: float | None
    notes: tuple[str, ...] = field(default=())


def per_request(res: SimResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(TTFT, TPOT, E2E) of every request [s]; TPOT is NaN for one-token outputs."""
    ttft = res.first_token_s - res.arrival_s
    e2e = res.finish_s - res.arrival_s
    steps = res.osl - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(steps > 0, (res.finish_s - res.first_token_s) / np.maximum(steps, 1),
                        np.nan)
    return ttft, tpot, e2e


def meets(slo: Slo, ttft: np.ndarray, tpot: np.ndarray) -> bool:
    q = slo.percentile
    t = tpot[np.isfinite(tpot)]
    return bool(np.percentile(ttft, q) <= slo.ttft_s
                and (not len(t) or np.percentile(t, q) <= slo.tpot_s))


def summarize(res: SimResult, cost: IterationCost, slo: Slo | None = None,
              settings: MetricsSettings | None = None) -> ServeSummary:
    """Throughput over the makespan (first arrival to last completion), latency percentiles,
    goodput (requests meeting both SLO bounds per second), energy and cost per token."""
    ttft, tpot, e2e = per_request(res)
    span = res.makespan_s
    out_tokens = float(res.osl.sum())
    gpus = cost.devices
    dt = res.log["dt_s"]
    busy = dt.sum()
    good = None
    ok = None
    if slo is not None:
        fine = (ttft <= slo.ttft_s) & ~(tpot > slo.tpot_s)
        good = float(fine.sum()) / span
        ok = meets(slo, ttft, tpot)
    j_tok, power, usd, notes = _energy_cost(res, cost, out_tokens, span, settings)
    return ServeSummary(
        out_tokens / span, out_tokens / span / gpus, len(res.osl) / span,
        float((res.log["running"] * dt).sum() / busy) if busy > 0 else 0.0,
        res.in_system_integral_s / span,
        float((res.log["kv_used"] * dt).sum() / busy) if busy > 0 else 0.0,
        Percentiles.of(ttft), Percentiles.of(tpot), Percentiles.of(e2e),
        res.kv_capacity_tokens, res.preemptions, good, ok, gpus, span, res.iterations,
        j_tok, power, usd, tuple(notes) + res.notes)


def _energy_cost(res: SimResult, cost: IterationCost, out_tokens: float, span: float,
                 settings: MetricsSettings | None):
    """Energy per output token and $/M output tokens (``metrics.cost.tco``) at the simulated
    load. Energy under the settings' model: ``"auto"`` = the fitted power model
    (``metrics.energy_validation``: kernel time at the busy power plus the technology energies
    of the FLOPs and bytes, the stack's per-pass and launch time at the host-wait power) where
    the device has a TDP and an idle power, else the component model (``metrics.energy``);
    idle power while no request runs; collectives' link energy is inside the power model's
    busy power and left out of the component model."""
    hw = cost.hardware
    s = (settings or MetricsSettings()).resolved()
    p = energy_params(hw, cost.precision.compute_dtype, hw.effective_efficiency)
    flops, w, kv, act = cost.dynamic_work(res.feature_sum)
    gpus = cost.devices
    idle_s = max(0.0, span - res.busy_s)
    model = resolve_energy_model(s.energy_model, hw, p)
    if model == "power":
        c = power_constants()
        busy_w = p.idle_w + (hw.tdp_w - p.idle_w) * c.active
        host_w = p.idle_w + (hw.tdp_w - p.idle_w) * c.host
        log = res.log
        host_s = min(res.busy_s, cost.host_time_s(log["iterations"], log["running"])) \
            if len(log["iterations"]) else 0.0
        total_j = gpus * (busy_w * (res.busy_s - host_s) + host_w * host_s
                          + p.idle_w * idle_s) \
            + c.dynamic * (flops * p.flop_j + (w + kv + act) * p.main_j_per_byte)
        notes = [f"energy: power model (presets/tables/energy_power.toml, fitted on the batched "
                 f"ML.ENERGY rows): kernels at {busy_w:.3g} W + {c.dynamic:g} x technology "
                 f"energies, the stack's per-pass and launch time ({host_s / max(res.busy_s, 1e-12):.0%}"
                 f" of the busy time) at {host_w:.3g} W, idle at {p.idle_w:.3g} W"]
    else:
        dyn = flops * p.flop_j + w * p.weight_j_per_byte + kv * p.kv_j_per_byte \
            + act * p.act_j_per_byte
        total_j = dyn + gpus * (p.static_w * res.busy_s + (p.idle_w or 0.0) * idle_s)
        notes = ["energy: component model (metrics.energy) summed over iterations; link energy "
                 "of collectives not counted"]
        if s.energy_model not in ("auto", "components"):
            notes.append(f"the {s.energy_model} model prices one scenario's operators; the "
                         "serving simulation uses the component model instead")
        elif s.energy_model == "auto":
            notes.append(f"{hw.name} has no TDP or idle power for the fitted power model")
    power = total_j / span / gpus if span > 0 else None
    price = hw.price_usd if s.price_usd is None else s.price_usd
    t = tco(price, power or 0.0, p.idle_w, out_tokens / span / gpus, s.lifetime_years,
            s.utilisation, s.usd_per_kwh, s.pue, s.include_idle)
    if price is None:
        notes.append(f"no price for {hw.name}: $/Mtok unknown")
    return total_j / out_tokens, power, t.usd_per_million_tokens, notes


def steady_state_output_tokens_per_s(cost: IterationCost, cfg: EngineConfig, isl: int,
                                     osl: int) -> tuple[float, int]:
    """Closed form of max-load throughput with fixed lengths: B = min(max batch, KV capacity /
    (ISL + OSL)) requests run as one wave -- prefill of B prompts, then OSL - 1 decode steps,
    timed by ``shard_analyze`` (exact decode integral) -- so B x OSL / E2E(B). Returns
    (output tokens/s, B)."""
    cap = kv_capacity_tokens(cost, cfg)
    per = -(-(isl + osl) // cfg.block_size) * cfg.block_size
    b = max(1, min(cfg.max_batch, cap // per))
    r = shard_analyze(cost.model, cost.hardware, cost.precision,
                      Workload(batch=b, prompt_len=isl, gen_len=osl,
                               flash_attention=cost.flash), cost.plan)
    return b * osl / r.estimated.e2e_latency_s, b


@dataclass(frozen=True)
class RateSearch:
    """Largest request rate [requests/s] whose simulation meets the SLO, and the points tried
    (rate, TTFT at the percentile, TPOT at the percentile, met)."""
    max_rate: float
    points: tuple[tuple[float, float, float, bool], ...]
    saturation_rate: float


def judge_slo(slo: Slo, res: SimResult) -> tuple[float, float, bool]:
    """(TTFT and TPOT at the SLO percentile [s], both within the SLO)."""
    ttft, tpot, _ = per_request(res)
    t = tpot[np.isfinite(tpot)]
    return (float(np.percentile(ttft, slo.percentile)),
            float(np.percentile(t, slo.percentile)) if len(t) else math.nan,
            meets(slo, ttft, tpot))


def max_rate_meeting_slo(cost: IterationCost, cfg: EngineConfig, spec: RequestSpec, slo: Slo,
                         saturation_rate: float, progress=None, judge=None) -> RateSearch:
    """Bisection (log scale, ``SEARCH_STEPS`` steps) on the Poisson (or the spec's gamma) rate
    between 1 % and 100 % of the max-load request rate; 0 if even 1 % misses the SLO.
    ``judge(result) -> (ttft_q, tpot_q, ok)`` replaces the SLO check (default ``judge_slo``)."""
    pts = []
    judge = judge or (lambda res: judge_slo(slo, res))

    def ok(rate: float) -> bool:
        a, b, m = judge(simulate(cost, cfg, spec.with_rate(rate)))
        pts.append((rate, a, b, m))
        if progress is not None:
            progress(len(pts) / (SEARCH_STEPS + 2))
        return m

    lo, hi = saturation_rate * 0.01, saturation_rate
    if ok(hi):
        return RateSearch(hi, tuple(pts), saturation_rate)
    if not ok(lo):
        return RateSearch(0.0, tuple(pts), saturation_rate)
    for _ in range(SEARCH_STEPS):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return RateSearch(lo, tuple(sorted(pts)), saturation_rate)


def replicas_for_rate(target_rate: float, rate_per_replica: float) -> int | None:
    """Replicas needed to serve ``target_rate`` requests/s when one serves
    ``rate_per_replica`` (random routing splits a Poisson stream into Poisson streams)."""
    require_float("target rate", target_rate, lo=0, hi=1e12, lo_open=True)
    if rate_per_replica <= 0:
        return None
    return math.ceil(target_rate / rate_per_replica - 1e-9)
