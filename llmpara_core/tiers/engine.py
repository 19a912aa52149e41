"""Heterogeneous memory tiers (SRAM / DRAM / Flash, or any ordered list): placement of weights,
KV cache and activations across tiers, per-tier streaming time of decode, tier migration under
quantisation, and energy per token from per-tier energy per byte.

Model
-----
*Placement.* The stored data are split into items: each weight tensor of each layer (and each
routed expert of each MoE layer), the embedding table, final norm and LM head, the KV cache of
each layer (at the workload's full context, for the whole batch) and the activation working set
(the largest live set of any operator of a decode step or of a prefill pass of at most
``prefill_chunk_tokens`` tokens — chunked prefill, as serving engines run it). Items are laid
into tiers under their capacities, byte-exactly (an item may straddle two tiers; its reads are
then split in the same proportion). Strategies (in :mod:`~llmpara_core.tiers.placement`):

``greedy``
    The reference tool's algorithm (its ``compute_data_placement``), generalised to N tiers:
    activations and then as many *whole layers* as fit go to the first tier; the KV cache and
    then all remaining weights (model order: embedding, layers, final norm, LM head) fill the
    other tiers in the listed order (fastest first in the presets, as the reference's fixed
    SRAM, DRAM, Flash), and only then any room left in the first tier. Unlike the reference,
    the last tier's capacity is checked.
``hot-first``
    Activations first, then items by *read density* (bytes read per decode step per stored
    byte), into the tiers by decreasing bandwidth. Dense weights are read once per step
    (density 1); among them attention, shared experts/router, norms and the LM head go before
    the dense FFN. Routed experts are read with probability 1 - (1 - q_e)^b (q_e = k/E
    uniform, or a Zipf popularity), the KV cache at (mean context / full context), and the embedding table is only gathered
    (b rows of V), so it sinks to the slowest tier. Filling tiers fastest-first in order of
    density is the fractional-knapsack optimum of sum(bytes_t / bandwidth_t) when every operator
    is memory-bound.
``pinned``
    User pins (``selector -> tier name``) are placed first, in their tier, then ``hot-first``
    for everything else. Pins may also be given with the other strategies.

If something cannot be placed, :class:`~llmpara_core.errors.InfeasibleError` says what, how
many bytes, and what the tiers hold.

*Time.* Each operator of a decode step (from :func:`~llmpara_core.forward.forward_ops`, the
single forward-pass builder) has its weight bytes attributed to the tiers holding that operator's
weights, its KV-cache reads/writes to the tiers holding that layer's cache and its activation
traffic to the tiers holding the activations. Its memory time is the sum over tiers of
bytes_t / bandwidth_t (tiers stream one after the other, not in parallel), and

    t_op = max(FLOPs / peak, sum_t bytes_t / bw_t) + latency + kernels * overhead      (operator)
    t_step = max(sum FLOPs / peak, sum_t bytes_t / bw_t) + latency + overhead           (step)

with ``overlap="operator"`` (default; equal to :func:`~llmpara_core.analysis.analyze` for a single
tier) or ``overlap="step"`` (compute of one operator hidden under the streaming of the others).
Latency: with ``prefetch=True`` only *data-dependent* accesses pay a tier's access latency —
the embedding gather (depends on the token) and routed experts (depend on the router); weight
and KV streams are predictable and prefetched. With ``prefetch=False`` every operator execution
pays it. An execution pays the largest latency of the tiers it reads (the requests are issued
together; the transfers then share the data path, hence the sum of bytes_t / bw_t). Decode is
integrated exactly over all generated tokens (bytes and FLOPs are affine in the context between
sliding-window breakpoints; max(affine, affine) is summed exactly at the crossover), as in
:func:`~llmpara_core.analysis.integrate_decode`. *Ideal* uses peak rates; *estimated* derates
compute and every tier's bandwidth by the hardware's efficiency factors (KV-cache reads at the
efficiency's ``kv_read`` share of that, when it has one, as the plain roofline does) and adds the
per-kernel overhead.

Sweeps, the reference tool's own formula, the check of its claims and plain-data views are in
:mod:`~llmpara_core.tiers.report`; tier tables and their link form in
:mod:`~llmpara_core.tiers.formats`.

*Energy.* Per decode step: sum_t bytes_t * energy_t (tier pJ/B; the class default when a tier
does not say) + FLOPs * the class's energy per FLOP + idle power * step time; per token = / batch.

References: reference-tool §5 (its hetero model) and §10 item 14 (its defects: whole model at
the slowest tier's bandwidth as soon as a byte spills, tokens/s falling as 1/batch, LM head and
KV reads ignored, Flash capacity never checked), which this module fixes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..analysis import _sum_max_affine, decode_segments
from ..errors import ConfigError, InfeasibleError
from ..forward import forward_ops
from ..hardware import Efficiency, Hardware, MemoryTier
from ..model import Model
from ..operators import OpKind, Operator
from ..precision import Precision
from ..roofline import Rates, kv_read_factor, launches, quant_flops_factor, rates
from .placement import (  # noqa: F401  (re-exported: the placement half of the model)
    CATEGORIES, CATEGORY_RANK, DEFAULT_PREFILL_CHUNK, MIGRATION_BITS, OVERLAPS, STRATEGIES,
    WEIGHT_CATEGORIES, Item, Placement, _decode_range, _touched, build_items,
    expert_selection_probs, place)
from ..workload import Workload


# ---- attribution of operator bytes to tiers ------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Index:
    """Tier shares per (group, op) of weight reads (summing to 1), expert fractions per group
    (E x N, summed over the group's layers), KV fractions per group, activation fractions."""
    weights: dict
    experts: dict            # group -> (E x N) fractions summed over the group's layers
    kv: dict
    act: np.ndarray
    q: np.ndarray | None
    zipf_s: float


def _index(placement: Placement, model: Model, expert_zipf_s: float) -> _Index:
    nt = len(placement.tiers)
    frac = placement.fractions
    weights: dict = {}
    experts: dict = {}
    kv: dict = {}
    act = np.zeros(nt)
    e_count = model.moe.num_experts if model.moe is not None else 0
    for it, f in zip(placement.items, frac):
        if it.category == "activations":
            act = act + f
        elif it.category == "kv_cache":
            kv[it.group] = kv.get(it.group, np.zeros(nt)) + f
        elif it.category == "moe_expert":
            m = experts.setdefault(it.group, np.zeros((e_count, nt)))
            if it.expert is None:            # a whole layer's experts (uniform routing)
                m += f
            else:
                m[it.expert] += f
        else:
            for name in it.ops:
                key = (it.group, name)
                weights[key] = weights.get(key, np.zeros(nt)) + f * it.stored_bytes
    for key, v in weights.items():       # byte-weighted share of each tier, summing to 1
        total = v.sum()
        weights[key] = v / total if total > 0 else np.eye(nt)[0]
    return _Index(weights, experts, kv, act, expert_selection_probs(model, expert_zipf_s),
                  expert_zipf_s)


def _attribute(op: Operator, idx: _Index, model: Model, tokens: float, nt: int):
    """Bytes of ``op`` (all ``count`` executions) per tier, split as (weights, kv, act), a
    boolean mask of tiers read by data-dependent accesses, and the KV-cache reads per tier
    (part of kv)."""
    n = op.count
    w = np.zeros(nt)
    dep = np.zeros(nt, dtype=bool)
    if op.weight_bytes > 0:
        if op.kind is OpKind.MOE_EXPERT:
            m = idx.experts[op.group]
            per_expert = op.weight_bytes / model.moe.expected_active_experts(tokens)
            w = per_expert * (_touched(idx.q, tokens) @ m)
            dep = w > 0
        else:
            f = idx.weights.get((op.group, op.name))
            if f is None:
                raise InfeasibleError(f"internal: no placement for {op.group}/{op.name}")
            w = op.weight_bytes * n * f
            if op.kind is OpKind.EMBEDDING:
                dep = w > 0
    kv_b = (op.kv_read_bytes + op.kv_write_bytes) * n
    kv = kv_r = np.zeros(nt)
    if kv_b > 0:
        f = idx.kv.get(op.group)
        if f is None or f.sum() <= 0:
            raise InfeasibleError(f"internal: no KV placement for group {op.group}")
        kv = kv_b * f / f.sum()
        kv_r = op.kv_read_bytes * n * f / f.sum()
    act_b = (op.act_read_bytes + op.act_write_bytes) * n
    a = act_b * idx.act / idx.act.sum() if act_b > 0 else np.zeros(nt)
    return w, kv, a, dep, kv_r


# ---- evaluation ----------------------------------------------------------------------------

@dataclass(frozen=True)
class TierOpRow:
    """One decode operator, mean per step over the generated tokens (all ``count``
    executions). ``tier_bytes`` per tier; times in seconds at ideal rates, plus the estimated
    total time."""
    name: str
    kind: OpKind
    group: str
    count: int
    flops: float
    tier_bytes: tuple[float, ...]
    weight_tier_bytes: tuple[float, ...]
    compute_s: float
    memory_s: float
    latency_s: float
    ideal_s: float
    estimated_s: float

    @property
    def memory_bytes(self) -> float:
        return sum(self.tier_bytes)

    @property
    def effective_bandwidth_bytes_per_s(self) -> float | None:
        """Bytes / ideal memory time: the harmonic mix of the tiers it reads."""
        return self.memory_bytes / self.memory_s if self.memory_s > 0 else None

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"


@dataclass(frozen=True)
class TierTiming:
    """Decode (and prefill) timing at one set of rates. ``tier_memory_s`` is each tier's
    streaming time per decode step (bytes_t / bw_t summed over operators), ``compute_s`` the
    compute time per step; ``tpot_s`` the step time after overlap, latency and overhead."""
    tpot_s: float
    decode_tokens_per_s: float        # per sequence, 1 / TPOT
    throughput_tokens_per_s: float    # aggregate over the batch, batch / TPOT
    ttft_s: float
    e2e_latency_s: float
    compute_s: float
    tier_memory_s: tuple[float, ...]
    latency_s: float
    overhead_s: float
    compute_bound_share: float        # share of step time in compute-bound operators


@dataclass(frozen=True)
class TierEnergy:
    """Energy per generated token [J] (decode), by tier and source."""
    tier_j: tuple[float, ...]
    memory_j: float
    compute_j: float
    static_j: float | None
    total_j: float
    assumed_tiers: tuple[str, ...] = ()   # tiers without their own pJ/B (class default used)


@dataclass(frozen=True, eq=False)
class HeteroResult:
    model: Model
    hardware: Hardware
    precision: Precision
    workload: Workload
    placement: Placement
    overlap: str
    prefetch: bool
    expert_zipf_s: float
    rows: tuple[TierOpRow, ...]
    tier_bytes_per_step: tuple[float, ...]          # mean decode step, all kinds
    tier_weight_bytes_per_step: tuple[float, ...]
    tier_kv_bytes_per_step: tuple[float, ...]
    tier_act_bytes_per_step: tuple[float, ...]
    flops_per_step: float
    ideal: TierTiming
    estimated: TierTiming
    energy: TierEnergy
    notes: tuple[str, ...] = field(default=())

    @property
    def tiers(self) -> tuple[MemoryTier, ...]:
        return self.placement.tiers

    @property
    def kv_bytes_per_step(self) -> float:
        """KV-cache bytes read and written per mean decode step, over every tier."""
        return sum(self.tier_kv_bytes_per_step)

    @property
    def decode_tokens_per_s(self) -> float:
        """Estimated decode tokens/s per sequence (1 / TPOT)."""
        return self.estimated.decode_tokens_per_s


def _rates(hardware: Hardware, precision: Precision, estimated: bool,
           efficiency: Efficiency | None, tokens_in_flight: float | None = None,
           batch: int | None = None, kv_group: float = 1.0):
    """(compute rates, bandwidth per tier, extra seconds per KV-cache byte read per tier).

    Estimated: every tier derated by the efficiency's ``memory`` factor, and KV-cache reads
    streamed at its ``kv_read`` fraction of that, ``roofline.kv_read_factor`` times for a
    model whose attention shares each K/V head among ``kv_group`` query heads (as
    :func:`~llmpara_core.roofline.op_time_s` does; 1.0 when the efficiency has no such
    factor). Where the stack's decode attention is bound per compute unit
    (``Rates.kv_limit_bytes_per_s``: every query head's pass over its group's K/V), a KV byte
    takes the longer of that and its tier's stream, as ``roofline.effective_memory_bytes``."""
    r = rates(hardware, precision.compute_dtype, estimated, efficiency,
              tokens_in_flight=tokens_in_flight, batch=batch)
    eff = (efficiency or hardware.effective_efficiency) if estimated else None
    bw = np.array([t.bandwidth_bytes_per_s for t in hardware.tiers])
    if eff is None:
        return r, bw, np.zeros(len(bw))
    bw = bw * eff.memory
    kv_read = getattr(eff, "kv_read", 1.0)
    per_byte_s = kv_read_factor(kv_group, r) / kv_read / bw
    if r.kv_limit_bytes_per_s > 0:
        per_byte_s = np.maximum(per_byte_s, kv_group / r.kv_limit_bytes_per_s)
    return r, bw, per_byte_s - 1.0 / bw


def evaluate(placement: Placement, model: Model, hardware: Hardware, precision: Precision,
             workload: Workload, overlap: str = "operator", prefetch: bool = True,
             expert_zipf_s: float = 0.0, efficiency: Efficiency | None = None) -> HeteroResult:
    """Decode (and prefill) time, throughput and energy of a given placement."""
    if overlap not in OVERLAPS:
        raise ConfigError(f"overlap must be one of {', '.join(OVERLAPS)}, got {overlap!r}")
    tiers = placement.tiers
    if tuple(tiers) != tuple(hardware.tiers):
        raise ConfigError("placement was made for different memory tiers")
    nt = len(tiers)
    wl, b = workload, workload.batch
    idx = _index(placement, model, expert_zipf_s)
    lat = np.array([t.latency_s or 0.0 for t in tiers])
    notes = list(placement.notes)
    unknown_lat = [t.name for t in tiers if t.latency_s is None]
    if unknown_lat and nt > 1:
        notes.append(f"latency unknown for {', '.join(unknown_lat)}: taken as 0")
    ri, bwi, kxi = _rates(hardware, precision, False, None)
    group = 1.0 if model.mla is not None else float(model.gqa_group)
    re_, bwe, kxe = _rates(hardware, precision, True, efficiency, b, b, group)
    re_pre = _rates(hardware, precision, True, efficiency, b * max(1, wl.prompt_len), b)[0]
    if ri.dtype_used is not precision.compute_dtype:
        notes.append(f"{hardware.name} has no {precision.compute_dtype.value} peak; used its "
                     f"{ri.dtype_used.value} peak")

    def op_parts(o: Operator, tokens: float):
        w, kv, a, dep, kv_r = _attribute(o, idx, model, tokens, nt)
        tb = w + kv + a
        touched = tb > 0 if not prefetch else dep
        return tb, w, kv, a, _latency(lat, touched) * o.count, kv_r

    lo, hi = _decode_range(wl)
    steps_eval = hi - lo + 1
    acc: dict[int, list] = {}
    tot = {"ideal": 0.0, "est": 0.0}
    step_u = {"ideal": [], "est": []}      # per segment (u0, u1, v0, v1, n, const)
    sums = dict(tb=np.zeros(nt), w=np.zeros(nt), kv=np.zeros(nt), a=np.zeros(nt),
                kv_r=np.zeros(nt), flops=0.0, lat=0.0, ovh=0.0, cb_i=0.0, cb_e=0.0)
    for a_, z_ in decode_segments(model, lo, hi):
        n = z_ - a_ + 1
        ops_a = forward_ops(model, precision, b, 1, a_, wl.flash_attention)
        ops_z = forward_ops(model, precision, b, 1, z_, wl.flash_attention) if z_ > a_ else ops_a
        seg = {"ideal": [0.0, 0.0, 0.0, 0.0, 0.0], "est": [0.0, 0.0, 0.0, 0.0, 0.0]}
        for i, (oa, oz) in enumerate(zip(ops_a, ops_z)):
            pa, pz = op_parts(oa, b), op_parts(oz, b)
            fa, fz = oa.flops * oa.count, oz.flops * oz.count
            latency = pa[4]
            row = acc.setdefault(i, [oa, 0.0, np.zeros(nt), np.zeros(nt), 0.0, 0.0, 0.0, 0.0,
                                     0.0])
            mean = lambda x, y: n * (x + y) / 2.0   # noqa: E731  (arithmetic series)
            row[1] += mean(fa, fz)
            row[2] = row[2] + mean(pa[0], pz[0])
            row[3] = row[3] + mean(pa[1], pz[1])
            for key, r, bw, kx, slot in (("ideal", ri, bwi, kxi, 6), ("est", re_, bwe, kxe, 7)):
                qf = quant_flops_factor(r, oa.quantized)
                u0, u1 = fa * qf / r.flops_per_s, fz * qf / r.flops_per_s
                v0 = _mem_s(pa, bw, kx, r, oa.quantized)
                v1 = _mem_s(pz, bw, kx, r, oz.quantized)
                ovh = (launches(oa.count, oa.quantized, r, oa.name) * r.kernel_overhead_s
                       if key == "est" else 0.0)
                t_op = _sum_max_affine(u0, u1, v0, v1, n) + n * (latency + ovh)
                row[slot] += t_op
                tot[key] += t_op
                s = seg[key]
                s[0] += u0; s[1] += u1; s[2] += v0; s[3] += v1; s[4] += latency + ovh  # noqa: E702
                if key == "ideal":
                    row[4] += mean(u0, u1)
                    row[5] += mean(v0, v1)
                    if (u0 + u1) > (v0 + v1):
                        sums["cb_i"] += t_op
                else:
                    if (u0 + u1) > (v0 + v1):
                        sums["cb_e"] += t_op
            row[8] += n * latency
            sums["tb"] += mean(pa[0], pz[0])
            sums["w"] += mean(pa[1], pz[1])
            sums["kv"] += mean(pa[2], pz[2])
            sums["a"] += mean(pa[3], pz[3])
            sums["kv_r"] += mean(pa[5], pz[5])
            sums["flops"] += mean(fa, fz)
            sums["lat"] += n * latency
            sums["ovh"] += (n * launches(oa.count, oa.quantized, re_, oa.name)
                            * re_.kernel_overhead_s)
        for key in ("ideal", "est"):
            step_u[key].append((*seg[key], n))
    if overlap == "step":
        for key in ("ideal", "est"):
            tot[key] = sum(_sum_max_affine(u0, u1, v0, v1, n) + n * c
                           for u0, u1, v0, v1, c, n in step_u[key])
    tot["est"] += steps_eval * re_.pass_overhead_s          # per forward pass (analysis)
    k = steps_eval
    rows = tuple(
        TierOpRow(o.name, o.kind, o.group, o.count, fl / k, tuple(tb / k), tuple(wb / k),
                  cs / k, ms / k, lt / k, ti / k, te / k)
        for o, fl, tb, wb, cs, ms, ti, te, lt in acc.values())

    ttft_i, ttft_e = _prefill_time(model, precision, wl, idx, lat, prefetch,
                                   ((ri, bwi, kxi, False), (re_pre, bwe, kxe, True)), nt, overlap)
    steps = wl.decode_steps
    tier_b = sums["tb"] / k

    def timing(key, r, bw, kx, ttft, cb):
        tpot = tot[key] / k
        ttft = ttft if wl.prompt_len else tpot
        return TierTiming(
            tpot_s=tpot,
            decode_tokens_per_s=1.0 / tpot if tpot > 0 else math.inf,
            throughput_tokens_per_s=b / tpot if tpot > 0 else math.inf,
            ttft_s=ttft, e2e_latency_s=ttft + steps * tpot,
            compute_s=sums["flops"] / k / r.flops_per_s,
            tier_memory_s=tuple(tier_b / bw + sums["kv_r"] / k * kx),
            latency_s=sums["lat"] / k,
            overhead_s=sums["ovh"] / k if key == "est" else 0.0,
            compute_bound_share=(cb / tot[key]) if tot[key] > 0 else 0.0)

    ideal = timing("ideal", ri, bwi, kxi, ttft_i, sums["cb_i"])
    est = timing("est", re_, bwe, kxe, ttft_e, sums["cb_e"])
    energy = _energy(hardware, tier_b, sums["flops"] / k, est.tpot_s, b)
    if energy.assumed_tiers:
        notes.append(f"no energy per byte for {', '.join(energy.assumed_tiers)}: used the "
                     f"{hardware.hw_class.value} class default")
    return HeteroResult(model, hardware, precision, wl, placement, overlap, prefetch,
                        expert_zipf_s, rows, tuple(tier_b), tuple(sums["w"] / k),
                        tuple(sums["kv"] / k), tuple(sums["a"] / k), sums["flops"] / k,
                        ideal, est, energy, tuple(notes))


def _latency(lat: np.ndarray, touched: np.ndarray) -> float:
    """Exposed access latency of one operator execution: its tiers are accessed concurrently,
    so the slowest first byte counts (max, not sum)."""
    return float(lat[touched].max()) if touched.any() else 0.0


def _mem_s(parts, bw: np.ndarray, kv_extra: np.ndarray, r: Rates | None = None,
           quantized: bool = False) -> float:
    """Streaming time of one operator's per-tier bytes: sum over tiers of bytes / bandwidth,
    plus the KV-cache reads' extra time per byte (``parts`` from ``op_parts``), plus the time
    its weights take beyond it where the stack streams them no faster than its limit
    (``roofline.weight_stream_limits``; ``r`` = the estimated rates).
    """
    return float((parts[0] / bw).sum() + (parts[5] * kv_extra).sum()
                 + _weight_limit_s(parts[1], bw, r, quantized))


def _weight_limit_s(weight: np.ndarray, bw: np.ndarray, r: Rates | None, quantized: bool) -> float:
    """Extra time [s] of per-tier ``weight`` bytes read at min(tier bandwidth, the rates'
    weight-streaming limit) instead of the tier bandwidth."""
    if r is None:
        return 0.0
    lim = r.quant_weight_limit_bytes_per_s if quantized else r.weight_limit_bytes_per_s
    if lim <= 0:
        return 0.0
    return float((weight * np.maximum(0.0, 1.0 / lim - 1.0 / bw)).sum())


def _prefill_time(model, precision, wl, idx, lat, prefetch, rate_sets, nt, overlap):
    """TTFT of the prompt with the same attribution (ideal, estimated)."""
    if not wl.prompt_len:
        return 0.0, 0.0
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    ops = forward_ops(model, precision, wl.batch, wl.prompt_len, wl.prompt_len,
                      wl.flash_attention, logits)
    tokens = wl.batch * wl.prompt_len
    out = []
    for r, bw, kx, est in rate_sets:
        total = comp = mem = const = 0.0
        for o in ops:
            w, kv, a, dep, kv_r = _attribute(o, idx, model, tokens, nt)
            tb = w + kv + a
            touched = tb > 0 if not prefetch else dep
            c = (o.flops * o.count * _attention_factor(o, r) * quant_flops_factor(r, o.quantized)
                 / r.flops_per_s)
            m = (float((tb / bw).sum() + (kv_r * kx).sum())
                 + _weight_limit_s(w, bw, r, o.quantized))
            k = _latency(lat, touched) * o.count + (launches(o.count, o.quantized, r, o.name)
                                                          * r.kernel_overhead_s if est else 0.0)
            total += max(c, m) + k
            comp += c
            mem += m
            const += k
        out.append((total if overlap == "operator" else max(comp, mem) + const)
                   + (r.pass_overhead_s if est else 0.0))
    return out[0], out[1]


def _attention_factor(o: Operator, r) -> float:
    """Attention FLOPs run at ``attention_efficiency`` of the rate (roofline.op_time_s)."""
    return 1.0 / r.attention_efficiency if o.kind is OpKind.ATTENTION else 1.0


def _energy(hardware: Hardware, tier_bytes: np.ndarray, flops: float, tpot_s: float,
            batch: int) -> TierEnergy:
    default = hardware.defaults.memory_energy_j_per_byte
    assumed = tuple(t.name for t in hardware.tiers if t.energy_j_per_byte is None)
    e = np.array([t.energy_j_per_byte if t.energy_j_per_byte is not None else default
                  for t in hardware.tiers])
    tier_j = tier_bytes * e / batch
    compute_j = flops * hardware.defaults.compute_energy_j_per_flop / batch
    idle = hardware.effective_idle_w
    static = idle * tpot_s / batch if idle is not None else None
    mem = float(tier_j.sum())
    return TierEnergy(tuple(tier_j), mem, compute_j, static,
                      mem + compute_j + (static or 0.0), assumed)


def hetero(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
           strategy: str = "greedy", pins: dict[str, str] | None = None,
           overlap: str = "operator", prefetch: bool = True, expert_zipf_s: float = 0.0,
           efficiency: Efficiency | None = None,
           prefill_chunk_tokens: int | None = DEFAULT_PREFILL_CHUNK) -> HeteroResult:
    """Place the scenario on the hardware's tiers and evaluate decode. Raises InfeasibleError
    when it does not fit."""
    p = place(model, hardware, precision, workload, strategy, pins, expert_zipf_s,
              prefill_chunk_tokens)
    return evaluate(p, model, hardware, precision, workload, overlap, prefetch, expert_zipf_s,
                    efficiency)
