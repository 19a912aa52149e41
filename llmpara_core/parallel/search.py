"""Scaling curves over the device count (modelled vs ideal) and the search for the best plan
(lowest TPOT, highest throughput per device) among the plans that fit in memory."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..analysis import analyze
from ..errors import ConfigError
from ..limits import MAX_PLANS, check_size, check_time_budget
from ..hardware import Hardware
from ..model import Model
from .evaluation import shard_analyze
from .plan import ParallelPlan, divisors
from ..precision import Precision
from ..workload import Workload


# ---- scaling curves and plan search ---------------------------------------------------------

STRATEGIES = ("tp", "pp", "dp", "ep", "best-tpot", "best-throughput")


@dataclass(frozen=True)
class ScalingPoint:
    """One device count of a scaling curve. ``speedup`` = aggregate decode throughput / that of
    one device serving the per-replica batch (TP, PP, EP: the same global batch, so also the
    TPOT ratio; DP: weak scaling, DP x batch sequences); ideal = devices. None = no valid or
    fitting plan (``note`` says why)."""
    devices: int
    plan: ParallelPlan | None
    tpot_s: float | None
    ttft_s: float | None
    throughput_tokens_per_s: float | None
    speedup: float | None
    ideal_speedup: float
    efficiency: float | None
    communication_share: float | None
    fits: bool | None
    note: str = ""


def default_device_counts(hardware: Hardware) -> tuple[int, ...]:
    """1, 2, 4, ... up to the cluster's device count (and the count itself)."""
    n = hardware.interconnect.devices if hardware.interconnect else 1
    counts = {1 << i for i in range(n.bit_length()) if 1 << i <= n} | {n}
    return tuple(sorted(counts))


def scaling_curve(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                  strategy: str = "tp",
                  device_counts: tuple[int, ...] | None = None) -> tuple[ScalingPoint, ...]:
    """Modelled vs ideal scaling of one strategy over device counts (see ``STRATEGIES``):
    pure TP, PP, DP (weak scaling), EP (TP = EP = n, MoE only), or the best plan for TPOT or
    throughput per device at each count."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown scaling strategy {strategy!r}; choose from "
                          f"{', '.join(STRATEGIES)}")
    counts = device_counts or default_device_counts(hardware)
    base = analyze(model, hardware, precision, workload).estimated.throughput_tokens_per_s
    points = []
    for n in counts:
        wl = replace(workload, batch=workload.batch * n) if strategy == "dp" else workload
        try:
            if strategy.startswith("best"):
                objective = "min_tpot" if strategy == "best-tpot" else "max_throughput_per_device"
                found = search_plans(model, hardware, precision, wl, objective,
                                     exact_devices=n)
                if not found:
                    points.append(_empty_point(n, "no valid plan fits"))
                    continue
                plan = found[0].plan
            else:
                plan = ParallelPlan(**{"tp": {"tp": n}, "pp": {"pp": n}, "dp": {"dp": n},
                                       "ep": {"tp": n, "ep": n}}[strategy])
            r = shard_analyze(model, hardware, precision, wl, plan)
        except ConfigError as e:
            points.append(_empty_point(n, str(e)))
            continue
        sp = r.estimated.throughput_tokens_per_s / base
        points.append(ScalingPoint(n, plan, r.estimated.tpot_s, r.estimated.ttft_s,
                                   r.estimated.throughput_tokens_per_s, sp, float(n), sp / n,
                                   r.decode_breakdown.communication_share, r.fits,
                                   "" if r.fits else "does not fit in memory"))
    return tuple(points)


def _empty_point(n: int, note: str) -> ScalingPoint:
    return ScalingPoint(n, None, None, None, None, None, float(n), None, None, None, note)


OBJECTIVES = ("min_tpot", "max_throughput_per_device")


@dataclass(frozen=True)
class PlanCandidate:
    """A feasible plan of a search, with its batch and headline figures."""
    plan: ParallelPlan
    batch: int
    tpot_s: float
    ttft_s: float
    throughput_tokens_per_s: float
    throughput_per_device: float
    memory_per_device_bytes: float       # the fullest device
    communication_share: float | None
    parallel_efficiency: float


def candidate_plans(model: Model, max_devices: int, batch: int,
                    exact_devices: int | None = None) -> list[ParallelPlan]:
    """Power-of-two (and the device count itself) TP x PP x DP, and EP options for MoE,
    using at most ``max_devices`` (exactly ``exact_devices`` when given)."""
    top = exact_devices or max_devices
    degrees = sorted({1 << i for i in range(top.bit_length()) if 1 << i <= top} | {top})
    plans = []
    for tp in degrees:
        for pp in degrees:
            for dp in degrees:
                n = tp * pp * dp
                if n > top or (exact_devices and n != exact_devices) or dp > batch:
                    continue
                eps = [1]
                if model.moe is not None:
                    eps = [e for e in divisors(tp * dp)
                           if e > 1 and model.moe.num_experts % e == 0] + [1]
                plans += [ParallelPlan(tp=tp, pp=pp, dp=dp, ep=e) for e in eps]
    return plans


def search_plans(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                 objective: str = "min_tpot", max_devices: int | None = None,
                 exact_devices: int | None = None, fill_batch: bool = False,
                 batch_cap: int = 1024, tpot_limit_s: float | None = None,
                 progress=None) -> tuple[PlanCandidate, ...]:
    """Feasible plans (valid and fitting every device's memory), best first for ``objective``:
    ``min_tpot`` (ties: fewer devices) or ``max_throughput_per_device`` (ties: lower TPOT).
    ``fill_batch`` runs each plan at the largest global batch that fits (at most
    ``batch_cap``); ``tpot_limit_s`` drops plans slower per token. ``progress(fraction)`` is
    called as plans are evaluated."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
    ic = hardware.interconnect
    limit = max_devices or (ic.devices if ic else 1)
    batch_room = max(workload.batch, batch_cap) if fill_batch else workload.batch
    plans = candidate_plans(model, limit, batch_room, exact_devices)
    check_size(f"parallel plans to evaluate ({limit:,} devices"
               f"{f', {model.moe.num_experts:,} experts' if model.moe is not None else ''})",
               len(plans), MAX_PLANS, "search over fewer devices (a smaller --max-devices "
               "or cluster) or evaluate one plan (--tp/--pp/--dp/--ep)")
    found = []
    for i, plan in enumerate(plans):
        check_time_budget(f"{i:,} of {len(plans):,} plans evaluated")
        if progress is not None:
            progress(i / max(1, len(plans)))
        cand = _evaluate(model, hardware, precision, workload, plan, fill_batch, batch_cap)
        if cand is not None and (tpot_limit_s is None or cand.tpot_s <= tpot_limit_s):
            found.append(cand)
    if progress is not None:
        progress(1.0)
    if objective == "min_tpot":
        key = lambda c: (c.tpot_s, c.plan.devices, c.ttft_s)           # noqa: E731
    else:
        key = lambda c: (-c.throughput_per_device, c.tpot_s)            # noqa: E731
    return tuple(sorted(found, key=key))


def _evaluate(model, hardware, precision, workload, plan, fill_batch, batch_cap):
    try:
        r = shard_analyze(model, hardware, precision, workload, plan)
        if fill_batch:
            b = min(batch_cap, r.max_batch)
            while b >= plan.dp:
                r = shard_analyze(model, hardware, precision, replace(workload, batch=b), plan)
                if r.fits:
                    break
                b = int(b * 0.9)
    except ConfigError:
        return None
    if not r.fits:
        return None
    return PlanCandidate(plan, r.workload.batch, r.estimated.tpot_s, r.estimated.ttft_s,
                         r.estimated.throughput_tokens_per_s, r.throughput_per_device,
                         r.worst_stage.total_bytes, r.decode_breakdown.communication_share,
                         r.parallel_efficiency)

