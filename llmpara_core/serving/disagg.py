"""Disaggregated serving (DistServe / Splitwise style): a pool of prefill replicas and a pool
of decode replicas, the KV cache of every prompt sent from one to the other.

First order, per pool (random routing splits a Poisson stream into Poisson streams, so a pool
of n replicas serves n times one replica's rate):

* a **prefill replica** runs prompts only (OSL = 1: its LM head gives the first token); its
  largest rate meeting the TTFT bound (percentile of the SLO) is found by bisection;
* the **KV transfer** moves each device's share of the prompt's KV cache over its link:
  ISL x KV bytes per token per device / link rate + link latency (the interconnect's inter-node
  link when it has one, else its device link, derated like memory as in the sharding engine;
  or a given rate);
* a **decode replica** receives requests whose KV cache is already there (all but the last
  prompt token, which it processes as its first step) and generates the remaining OSL - 1
  tokens; its TPOT per request is (transfer + its end-to-end time) / (OSL - 1), and its
  largest rate meeting the TPOT bound is found by bisection;
* a split of G GPUs into P prefill and D decode replicas serves min(P r_prefill, D r_decode);
  the best split maximises that rate. Colocated serving of the same GPUs serves G / devices x
  the colocated replica's SLO rate.

TTFT and TPOT are judged per pool (their percentiles are not joined request by request).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError, require_float, require_int
from ..hardware import Efficiency, Hardware
from ..model import Model
from ..parallel import ParallelPlan
from ..precision import Precision
from .cost import IterationCost
from .config import EngineConfig
from .engine import SimResult, simulate
from .report import Slo, judge_slo, max_rate_meeting_slo
from .requests import RequestSpec


@dataclass(frozen=True)
class Split:
    prefill_replicas: int
    decode_replicas: int
    gpus: int
    rate: float                   # requests/s meeting the SLO
    rate_per_gpu: float


@dataclass(frozen=True)
class DisaggStudy:
    """Per-replica SLO rates of each pool, the KV transfer, every split of the GPU budget and
    the colocated baseline (requests/s)."""
    gpu_budget: int
    devices_per_replica: int
    kv_transfer_s: float
    kv_link_bytes_per_s: float
    prefill_rate_per_replica: float
    decode_rate_per_replica: float
    colocated_rate_per_replica: float
    splits: tuple[Split, ...]

    @property
    def best(self) -> Split | None:
        ok = [s for s in self.splits if s.rate > 0]
        return max(ok, key=lambda s: (s.rate, -s.prefill_replicas)) if ok else None

    @property
    def colocated_rate(self) -> float:
        return self.gpu_budget // self.devices_per_replica * self.colocated_rate_per_replica


def kv_link_rate(cost: IterationCost) -> tuple[float, float]:
    """(bytes/s, latency s) of the link a device sends its KV share over."""
    ic = cost.hardware.interconnect
    if ic is None:
        raise ConfigError(f"{cost.hardware.name} has no interconnect: disaggregated serving "
                          f"needs a link for the KV cache (choose a cluster preset or give "
                          f"the link rate)")
    eff = cost.hardware.effective_efficiency.memory
    if ic.inter_node_bandwidth_bytes_per_s:
        return ic.inter_node_bandwidth_bytes_per_s * eff, ic.inter_node_latency_s or ic.latency_s
    return ic.bandwidth_bytes_per_s * eff, ic.latency_s


def disaggregate(model: Model, hardware: Hardware, precision: Precision, spec: RequestSpec,
                 config: EngineConfig, slo: Slo, gpu_budget: int,
                 plan: ParallelPlan | None = None, efficiency: Efficiency | None = None,
                 kv_link_bytes_per_s: float | None = None, colocated_rate: float | None = None,
                 progress=None) -> DisaggStudy:
    """Best prefill:decode split of ``gpu_budget`` GPUs (module docstring); ``colocated_rate``
    = the colocated replica's SLO rate if already known."""
    plan = plan or ParallelPlan()
    cost = IterationCost(model, hardware, precision, plan, efficiency)
    n = cost.devices
    require_int("GPU budget", gpu_budget, 2 * n, 10**7)
    if spec.osl < 2:
        raise ConfigError("disaggregation needs OSL >= 2 (the decode pool generates OSL - 1)")
    if kv_link_bytes_per_s is None:
        link, lat = kv_link_rate(cost)
    else:
        link = require_float("KV link rate", kv_link_bytes_per_s, lo=0, lo_open=True)
        lat = 0.0
    transfer = spec.isl * cost.kv_bytes_per_token() / link + lat
    step = _progress(progress, 3 if colocated_rate is None else 2)
    pre_spec = replace(spec, osl=1)
    pre_cfg = replace(config, prefix_hit_rate=0.0)
    r_pre = _pool_rate(cost, pre_cfg, pre_spec, slo, None, step(0))
    dec_spec = replace(spec, osl=spec.osl - 1)
    dec_cfg = replace(config, prefix_hit_rate=1.0 - 0.5 / spec.isl)

    def judge_decode(res: SimResult):
        e2e = res.finish_s - res.arrival_s
        tpot = (transfer + e2e) / (spec.osl - 1)
        q = float(np.percentile(tpot, slo.percentile))
        return math.nan, q, q <= slo.tpot_s
    r_dec = _pool_rate(cost, dec_cfg, dec_spec, slo, judge_decode, step(1))
    if colocated_rate is None:
        colocated_rate = _pool_rate(cost, config, spec, slo, None, step(2))
    replicas = gpu_budget // n
    splits = tuple(Split(p, replicas - p, replicas * n, min(p * r_pre, (replicas - p) * r_dec),
                         min(p * r_pre, (replicas - p) * r_dec) / (replicas * n))
                   for p in range(1, replicas))
    return DisaggStudy(gpu_budget, n, transfer, link, r_pre, r_dec, colocated_rate, splits)


def _pool_rate(cost, cfg, spec, slo, judge, progress) -> float:
    sat_res = simulate(cost, cfg, replace(spec, arrival="max-load", rate=None))
    sat = len(sat_res.osl) / sat_res.makespan_s
    return max_rate_meeting_slo(cost, cfg, spec, slo, sat, progress,
                                judge or (lambda r: judge_slo(slo, r))).max_rate


def _progress(progress, parts: int):
    def part(i: int):
        if progress is None:
            return None
        return lambda f: progress((i + f) / parts)
    return part


def disagg_to_dict(d: DisaggStudy) -> dict:
    """JSON-ready view (requests/s, seconds, bytes/s)."""
    from dataclasses import asdict
    best = d.best
    return {"gpu_budget": d.gpu_budget, "devices_per_replica": d.devices_per_replica,
            "kv_transfer_s": d.kv_transfer_s, "kv_link_bytes_per_s": d.kv_link_bytes_per_s,
            "prefill_rate_per_replica": d.prefill_rate_per_replica,
            "decode_rate_per_replica": d.decode_rate_per_replica,
            "colocated_rate_per_replica": d.colocated_rate_per_replica,
            "colocated_rate": d.colocated_rate,
            "best_split": None if best is None else asdict(best),
            "splits": [asdict(s) for s in d.splits]}
