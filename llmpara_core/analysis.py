"""One scenario -> one report: per-operator rows for prefill and decode, TTFT, TPOT, latency,
throughput and memory, each time both *ideal* (peak rates) and *estimated* (derated).

Decode is integrated exactly over every generated token: per-operator FLOPs and bytes are
affine in the context length between sliding-window breakpoints, so sums over the decode steps
are arithmetic series, and max(compute, memory) is summed exactly by splitting at the crossover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .budget import check_time_budget
from .forward import forward_ops
from .hardware import Efficiency, Hardware, fallback_notes
from .memory import (ContextLimit, MemoryFootprint, activation_peak_bytes, context_limit,
                     kv_cache_bytes, kv_cache_bytes_per_token, max_batch, weight_bytes)
from .model import Model, ParamCounts, count_params
from .operators import MemoryTraffic, OpKind, Operator
from .precision import DType, Precision, is_kquant
from .roofline import (Rates, effective_memory_bytes, expert_flops_factor, is_expert_gemm,
                       launches, op_time_s, quant_flops_factor, rates,
                       wave_flops_factor)
from .workload import Workload

_BYTE_FIELDS = ("weight_bytes", "act_read_bytes", "act_write_bytes", "kv_read_bytes",
                "kv_write_bytes", "comm_bytes")


@dataclass(frozen=True)
class OpRow(MemoryTraffic):
    """One operator of a phase, totals over its ``count`` executions in one pass (prefill) or
    averaged per decode step (decode). Times in seconds."""
    phase: str
    name: str
    kind: OpKind
    group: str
    count: int
    flops: float
    weight_bytes: float
    act_read_bytes: float
    act_write_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    comm_bytes: float
    compute_s: float          # ideal FLOPs / peak
    memory_s: float           # ideal bytes / bandwidth
    ideal_s: float
    estimated_s: float
    kv_group: float = 1.0     # query heads per KV head of its KV reads (roofline.kv_read_factor)
    quantized: bool = False   # a matmul with quantised weights (roofline.launches)
    gemm_cols: float = 0.0    # output columns per GEMM (Operator.gemm_cols)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"


@dataclass(frozen=True)
class Phase:
    """Rows of one phase and their totals (prefill: one pass; decode: mean per step)."""
    name: str
    rows: tuple[OpRow, ...]

    @property
    def flops(self) -> float:
        return sum(r.flops for r in self.rows)

    @property
    def memory_bytes(self) -> float:
        return sum(r.memory_bytes for r in self.rows)

    def bytes_of(self, kind: str) -> float:
        return sum(getattr(r, kind) for r in self.rows)

    @property
    def ideal_s(self) -> float:
        return sum(r.ideal_s for r in self.rows)

    @property
    def estimated_s(self) -> float:
        return sum(r.estimated_s for r in self.rows)

    @property
    def arithmetic_intensity(self) -> float | None:
        b = self.memory_bytes
        return self.flops / b if b > 0 else None

    def memory_bound_share(self) -> float:
        """Share of estimated time spent in memory-bound operators."""
        total = self.estimated_s
        return sum(r.estimated_s for r in self.rows if r.bound == "memory") / total if total else 0.0

    def time_share(self, row: OpRow) -> float | None:
        """Share of the phase's estimated time spent in ``row`` (None for an empty phase)."""
        total = self.estimated_s
        return row.estimated_s / total if total else None

    def memory_traffic_shares(self) -> tuple[float, float]:
        """(weight streaming, KV-cache traffic) shares of the phase's estimated time: each
        memory-bound operator's time split by its bytes; compute-bound operators count in
        neither."""
        total = self.estimated_s
        w = kv = 0.0
        for r in self.rows:
            if r.bound != "memory" or r.memory_bytes <= 0:
                continue
            w += r.estimated_s * r.weight_bytes / r.memory_bytes
            kv += r.estimated_s * (r.kv_read_bytes + r.kv_write_bytes) / r.memory_bytes
        return (w / total, kv / total) if total else (0.0, 0.0)

    def by_category(self) -> tuple[CategoryTotal, ...]:
        """Totals per operator kind, in order of first appearance."""
        acc: dict[OpKind, list[float]] = {}
        for r in self.rows:
            a = acc.setdefault(r.kind, [0.0, 0.0, 0.0])
            a[0] += r.flops
            a[1] += r.memory_bytes
            a[2] += r.estimated_s
        total = self.estimated_s
        return tuple(CategoryTotal(self.name, k, f, b, s, s / total if total else None)
                     for k, (f, b, s) in acc.items())


@dataclass(frozen=True)
class CategoryTotal:
    """One operator kind's totals in a phase; ``time_share`` of the phase's estimated time."""
    phase: str
    kind: OpKind
    flops: float
    memory_bytes: float
    estimated_s: float
    time_share: float | None


@dataclass(frozen=True)
class Timing:
    """Latency and throughput of a scenario at one set of rates (ideal or estimated)."""
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    decode_tokens_per_s: float       # per sequence, 1 / TPOT
    throughput_tokens_per_s: float   # aggregate decode over the batch, batch / TPOT
    prefill_tokens_per_s: float | None   # batch * prompt / TTFT; None without a prompt


@dataclass(frozen=True)
class Report:
    model: Model
    hardware: Hardware
    precision: Precision
    workload: Workload
    params: ParamCounts
    weight_bytes: float
    kv_cache_bytes_per_token: float
    memory: MemoryFootprint
    max_batch: int
    max_context: int        # tokens per sequence: memory capped by the model's context window
    prefill: Phase
    decode: Phase
    decode_steps: int
    decode_ideal_total_s: float
    decode_estimated_total_s: float
    estimated: Timing
    ideal: Timing
    dtype_used: DType
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    efficiency: Efficiency
    notes: tuple[str, ...] = field(default=())
    context_limit: ContextLimit | None = None   # max_context's two limits and which binds

    @property
    def decode_flops_total(self) -> float:
        """FLOPs of every decode step of the generation (mean per step x steps)."""
        return self.decode.flops * self.decode_steps

    @property
    def total_flops(self) -> float:
        """FLOPs of the whole request: prefill (one pass) + every decode step."""
        return self.prefill.flops + self.decode_flops_total


def analyze(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
            efficiency: Efficiency | None = None) -> Report:
    """Full analysis of one scenario. ``efficiency`` overrides the hardware's derating."""
    check_time_budget("no estimate finished")
    wl = workload
    ideal_r = rates(hardware, precision.compute_dtype, estimated=False)
    pre_r, est_r = phase_rates(hardware, precision, wl, efficiency)
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    prefill_ops = forward_ops(model, precision, wl.batch, wl.prompt_len, wl.prompt_len,
                              wl.flash_attention, logits)
    prefill = Phase("prefill", tuple(_row("prefill", o, ideal_r, pre_r, model.moe)
                                     for o in prefill_ops))
    first, last = wl.decode_contexts
    steps = max(0, last - first + 1)
    lo, hi = (first, last) if steps else (wl.prompt_len + 1, wl.prompt_len + 1)
    decode, dec_ideal, dec_est = integrate_decode(model, precision, wl.batch, lo, hi,
                                                  wl.flash_attention, ideal_r, est_r,
                                                  moe=model.moe)
    n_dec = hi - lo + 1
    dec_est += n_dec * est_r.pass_overhead_s
    ideal = _timing(wl, prefill.ideal_s, dec_ideal / n_dec, steps)
    pre_est_s = prefill.estimated_s + (pre_r.pass_overhead_s if wl.prompt_len else 0.0)
    est = _timing(wl, pre_est_s, dec_est / n_dec, steps)

    w_bytes = weight_bytes(model, precision)
    act = max(activation_peak_bytes(prefill_ops),
              activation_peak_bytes(forward_ops(model, precision, wl.batch, 1, hi,
                                                wl.flash_attention)))
    kv_full = kv_cache_bytes(model, precision, wl.batch, wl.max_context)
    cap = hardware.memory_capacity_bytes
    notes = []
    ctx_limit = context_limit(model, precision, wl.batch, act, cap)
    used = ideal_r.dtype_used
    if used is not precision.compute_dtype:
        notes.append(f"{hardware.name} has no {precision.compute_dtype.value} peak; "
                     f"used its {used.value} peak")
    notes += fallback_notes(hardware, efficiency)
    return Report(
        model, hardware, precision, wl, count_params(model), w_bytes,
        kv_cache_bytes_per_token(model, precision),
        MemoryFootprint(w_bytes, kv_full, act, cap),
        max_batch(model, precision, wl.max_context, act / wl.batch, cap),
        ctx_limit.tokens,
        prefill, decode, steps, dec_ideal * steps / n_dec, dec_est * steps / n_dec, est, ideal,
        used, ideal_r.flops_per_s, ideal_r.bytes_per_s,
        efficiency or hardware.effective_efficiency, tuple(notes + list(model.warnings)),
        ctx_limit)


def phase_rates(hardware: Hardware, precision: Precision, wl: Workload,
                efficiency: Efficiency | None = None) -> tuple[Rates, Rates]:
    """Estimated (prefill, decode) rates: a prefill pass has batch x prompt tokens in flight,
    a decode step one per sequence (``roofline.rates``; ``kquant``: weights in a llama.cpp
    k-quant format, ``precision.is_kquant``)."""
    dt, kq = precision.compute_dtype, is_kquant(precision)
    return (rates(hardware, dt, True, efficiency, tokens_in_flight=wl.batch * max(1, wl.prompt_len),
                  batch=wl.batch, kquant=kq),
            rates(hardware, dt, True, efficiency, tokens_in_flight=wl.batch, batch=wl.batch,
                  kquant=kq))


def _timing(wl: Workload, prefill_s: float, tpot_s: float, steps: int) -> Timing:
    e2e = prefill_s + steps * tpot_s
    return Timing(
        ttft_s=prefill_s if wl.prompt_len else tpot_s,
        tpot_s=tpot_s,
        e2e_latency_s=e2e,
        decode_tokens_per_s=1.0 / tpot_s if tpot_s > 0 else math.inf,
        throughput_tokens_per_s=wl.batch / tpot_s if tpot_s > 0 else math.inf,
        prefill_tokens_per_s=(wl.batch * wl.prompt_len / prefill_s
                              if wl.prompt_len and prefill_s > 0 else None))


def _row(phase: str, o: Operator, ideal_r: Rates, est_r: Rates, moe=None) -> OpRow:
    """One operator's row; ``moe`` (the model's) times routed-expert GEMMs at their own rows
    per expert (``roofline.expert_flops_factor``)."""
    n = o.count
    flops, mem, comm = o.flops * n, o.memory_bytes * n, o.comm_bytes * n
    xf = expert_flops_factor(est_r, moe) if is_expert_gemm(o.kind, o.weight_bytes) else 1.0
    return OpRow(phase, o.name, o.kind, o.group, n, flops,
                 *(getattr(o, f) * n for f in _BYTE_FIELDS),
                 compute_s=flops / ideal_r.flops_per_s, memory_s=mem / ideal_r.bytes_per_s,
                 ideal_s=op_time_s(flops, mem, 0, ideal_r, comm),
                 estimated_s=op_time_s(flops * xf, mem, launches(n, o.quantized, est_r, o.name),
                                       est_r, comm, o.kv_read_bytes * n,
                                       flops if o.kind is OpKind.ATTENTION else 0.0,
                                       o.kv_reread_bytes * n, o.weight_bytes * n, o.quantized,
                                       o.gemm_cols),
                 kv_group=o.kv_group, quantized=o.quantized, gemm_cols=o.gemm_cols)


def decode_segments(model: Model, lo: int, hi: int) -> list[tuple[int, int]]:
    """Split [lo, hi] at sliding-window sizes, inside which every quantity is affine in the
    context length."""
    cuts = sorted({model.sliding_window} if model.sliding_window else set())
    segs, start = [], lo
    for w in cuts:
        if start <= w < hi:
            segs.append((start, w))
            start = w + 1
    segs.append((start, hi))
    return segs


def integrate_decode(model: Model, precision: Precision, batch: int, lo: int, hi: int,
                     flash: bool, ideal_r: Rates, est_r: Rates,
                     ops_at=None, moe=None) -> tuple[Phase, float, float]:
    """Decode steps at contexts lo..hi (inclusive): mean per-step rows, and the exact total
    ideal and estimated time over all steps. ``ops_at(c)`` (default: ``forward_ops`` of one
    decode step at context c) gives a step's operators, affine in c within each segment (the
    sharding module passes a device's share of the step). ``moe`` (the model's) times
    routed-expert GEMMs at their own rows per expert (``roofline.expert_flops_factor``)."""
    if ops_at is None:
        def ops_at(c: int) -> tuple[Operator, ...]:
            return forward_ops(model, precision, batch, 1, c, flash)
    acc: dict[int, list] = {}
    total_ideal = total_est = 0.0
    for a, z in decode_segments(model, lo, hi):
        n = z - a + 1
        ops_a = ops_at(a)
        ops_z = ops_at(z) if z > a else ops_a
        if [o.name for o in ops_a] != [o.name for o in ops_z]:
            raise AssertionError("decode operators must not change with context length")
        for i, (oa, oz) in enumerate(zip(ops_a, ops_z)):
            c = oa.count
            vals = [n * (getattr(oa, f) + getattr(oz, f)) / 2 * c for f in ("flops",) + _BYTE_FIELDS]
            mem_a, mem_z = oa.memory_bytes * c, oz.memory_bytes * c
            ti = _sum_max_affine(oa.flops * c / ideal_r.flops_per_s, oz.flops * c / ideal_r.flops_per_s,
                                 mem_a / ideal_r.bytes_per_s, mem_z / ideal_r.bytes_per_s, n)
            eff_a = effective_memory_bytes(mem_a, oa.kv_read_bytes * c, est_r,
                                           oa.kv_reread_bytes * c, oa.weight_bytes * c,
                                           oa.quantized)
            eff_z = effective_memory_bytes(mem_z, oz.kv_read_bytes * c, est_r,
                                           oz.kv_reread_bytes * c, oz.weight_bytes * c,
                                           oz.quantized)
            qf = quant_flops_factor(est_r, oa.quantized) * wave_flops_factor(est_r, oa.gemm_cols)
            if is_expert_gemm(oa.kind, oa.weight_bytes):
                qf = qf * expert_flops_factor(est_r, moe)
            te = _sum_max_affine(oa.flops * c * qf / est_r.flops_per_s,
                                 oz.flops * c * qf / est_r.flops_per_s,
                                 eff_a / est_r.bytes_per_s, eff_z / est_r.bytes_per_s, n)
            te += n * launches(c, oa.quantized, est_r, oa.name) * est_r.kernel_overhead_s
            if est_r.link_bytes_per_s:
                link = vals[-1] / est_r.link_bytes_per_s
                te += link
                ti += vals[-1] / ideal_r.link_bytes_per_s
            ci = n * (oa.flops + oz.flops) / 2 * c / ideal_r.flops_per_s
            mi = n * (mem_a + mem_z) / 2 / ideal_r.bytes_per_s
            entry = acc.setdefault(i, [oa, [0.0] * len(vals), 0.0, 0.0, 0.0, 0.0])
            entry[1] = [x + y for x, y in zip(entry[1], vals)]
            entry[2] += ci
            entry[3] += mi
            entry[4] += ti
            entry[5] += te
            total_ideal += ti
            total_est += te
    steps = hi - lo + 1
    rows = tuple(
        OpRow("decode", o.name, o.kind, o.group, o.count, *(v / steps for v in vals),
              compute_s=ci / steps, memory_s=mi / steps, ideal_s=ti / steps, estimated_s=te / steps,
              kv_group=o.kv_group, quantized=o.quantized, gemm_cols=o.gemm_cols)
        for o, vals, ci, mi, ti, te in acc.values())
    return Phase("decode", rows), total_ideal, total_est


def _sum_max_affine(u0: float, u1: float, v0: float, v1: float, n: int) -> float:
    """Exact sum over k = 0..n-1 of max(u(k), v(k)) where u and v are affine with the given
    values at k = 0 and k = n - 1."""
    if n == 1:
        return max(u0, v0)
    g0, g1 = u0 - v0, u1 - v1
    if g0 * g1 >= 0:   # same winner throughout
        return n * ((u0 + u1) / 2 if g0 + g1 >= 0 else (v0 + v1) / 2)

    def at(x0, x1, k):
        return x0 + (x1 - x0) * k / (n - 1)

    def series(x0, x1, i, j):   # sum of affine x over k = i..j
        return (j - i + 1) * (at(x0, x1, i) + at(x0, x1, j)) / 2 if j >= i else 0.0

    k_star = int(math.floor(g0 / (g0 - g1) * (n - 1)))   # last k on the first winner's side
    first = (u0, u1) if g0 > 0 else (v0, v1)
    second = (v0, v1) if g0 > 0 else (u0, u1)
    return series(*first, 0, k_star) + series(*second, k_star + 1, n - 1)
