"""The hardware-independent half of the design-space evaluation: for a fixed model, precision
and workload the FLOPs and bytes of every operator do not depend on the hardware, so
``profile`` computes them once with the core's forward pass (``forward.forward_ops``) and the
same decode segmentation as ``analysis.integrate_decode``; ``times`` then applies the roofline
(``roofline.op_time_s``'s rule: per operator max(FLOPs / peak, bytes / bandwidth) + launches x
overhead) to arrays of designs:

* operators whose FLOPs and bytes are the same at every decode context are sorted by
  arithmetic intensity once; a design with ridge R = P_eff / BW_eff has every operator of
  intensity <= R memory-bound and the others compute-bound, so its time is
  M_below(R) / BW_eff + F_above(R) / P_eff from cumulative sums (one ``searchsorted``);
* operators that grow with the context (attention over the KV cache) are summed exactly over
  the decode steps with the vectorised form of ``analysis._sum_max_affine``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..analysis import decode_segments
from ..errors import ConfigError
from ..forward import forward_ops
from ..hardware import IDEAL
from ..memory import activation_peak_bytes, kv_cache_bytes, weight_bytes
from ..model import Model
from ..operators import OpKind
from ..precision import DType, Precision
from types import SimpleNamespace

from ..roofline import expert_flops_factor, is_expert_gemm, launches
from ..workload import Workload

try:        # KV-read derating of the estimated roofline (absent in older cores: no derating)
    from ..roofline import effective_memory_bytes as _effective_memory_bytes
except ImportError:     # pragma: no cover
    _effective_memory_bytes = None


@dataclass(frozen=True)
class Profile:
    """FLOPs and bytes of one scenario, ready for vectorised roofline evaluation.

    ``intensity`` (sorted) with reverse-cumulative FLOPs and forward-cumulative bytes per
    phase for the context-independent operators (prefill: one pass; decode: all steps);
    ``varying``: (F_a, F_z, M_a, M_z, n) of decode operators that change with the context
    inside a segment of n steps. Totals are over the whole run (prefill + every decode step)."""
    dtype: DType
    batch: int
    prompt_len: int
    output_tokens: int
    steps: int
    n_dec: int
    intensity: np.ndarray
    pre_f_above: np.ndarray
    pre_m_below: np.ndarray
    dec_f_above: np.ndarray
    dec_m_below: np.ndarray
    varying: tuple[tuple[float, float, float, float, int], ...]
    pre_kernels: float
    dec_kernels: float
    flops_total: float
    bytes_total: float
    needed_bytes: float


class _KVRate:
    """The fields of ``roofline.Rates`` that ``effective_memory_bytes`` reads. No weight-
    streaming limit per compute unit: a design of the space has no compute-unit count
    (``roofline.weight_stream_limits``); the stack's share of its streaming rate for quantised
    weights (``Efficiency.quant_memory``) is kept, as extra bytes (``_time_bytes``)."""
    weight_limit_bytes_per_s = 0.0
    quant_weight_limit_bytes_per_s = 0.0
    kv_limit_bytes_per_s = 0.0       # a design has no compute-unit count either

    def __init__(self, kv_read_efficiency: float, kv_reread: float = 0.0,
                 quant_memory: float = 1.0):
        self.kv_read_efficiency = kv_read_efficiency
        self.kv_reread = kv_reread
        self.quant_memory = quant_memory


def _time_bytes(mem_bytes: float, o, count: int, kv: _KVRate) -> float:
    """Bytes of ``count`` executions of operator ``o`` as the estimated roofline streams them
    (KV-cache reads at ``kv_read`` of the bandwidth, re-read per query head by stacks with
    ``kv_reread``: ``roofline.effective_memory_bytes``; quantised weights counted
    1 / ``quant_memory`` times, as ``roofline.weight_stream_limits`` streams them)."""
    if kv.quant_memory < 1.0 and o.quantized:
        mem_bytes = mem_bytes + o.weight_bytes * count * (1.0 / kv.quant_memory - 1.0)
    if _effective_memory_bytes is None or (kv.kv_read_efficiency == 1.0 and not kv.kv_reread):
        return mem_bytes
    return _effective_memory_bytes(mem_bytes, o.kv_read_bytes * count, kv,
                                   o.kv_reread_bytes * count)


def _flop_scales(efficiency, wl: Workload) -> tuple[float, float, float, float]:
    """(prefill, decode, attention, quantised) factors on the time FLOPs that reproduce the
    estimated roofline's compute rate with the peak x ``compute`` of every design: the GEMM
    curve (``Efficiency.compute_at``: a pass with M tokens in flight runs at M / (M + M_half)),
    prefill attention FLOPs counted 1 / attention_compute times and the FLOPs of matmuls with
    quantised weights 1 / quant_compute times (``roofline.op_time_s``)."""
    if efficiency is None:
        return 1.0, 1.0, 1.0, 1.0
    c = efficiency.compute
    return (c / efficiency.compute_at(wl.batch * max(1, wl.prompt_len)),
            c / efficiency.compute_at(wl.batch), 1.0 / efficiency.attention_compute,
            1.0 / efficiency.quant_compute)


def _expert_factor(efficiency, moe, tokens: int) -> float:
    """``roofline.expert_flops_factor`` of a pass with ``tokens`` in flight under
    ``efficiency`` (every design of the space shares it): routed-expert GEMMs at their own
    rows per expert, lower on the GEMM curve."""
    if efficiency is None or moe is None or efficiency.expert_curve_tokens <= 0:
        return 1.0
    return expert_flops_factor(SimpleNamespace(tokens_in_flight=efficiency.gemm_rows(tokens),
                                               gemm_half_tokens=efficiency.expert_curve_tokens),
                               moe)


def _time_flops(o, scale: float, attention: float, quant: float = 1.0,
                expert: float = 1.0) -> float:
    return (o.flops * o.count * scale * (attention if o.kind is OpKind.ATTENTION else 1.0)
            * (quant if o.quantized else 1.0)
            * (expert if is_expert_gemm(o.kind, o.weight_bytes) else 1.0))


def profile(model: Model, precision: Precision, workload: Workload,
            kv_read: float = 1.0, efficiency=None) -> Profile:
    """Per-operator FLOPs and bytes of the scenario, computed once (see the module docstring).
    ``kv_read``: the efficiency's KV-read factor (the time terms count KV-cache reads as
    the estimated roofline does; energy counts the bytes themselves); ``efficiency`` (when
    given, its kv_read wins) also scales the time FLOPs (``_flop_scales``)."""
    wl = workload
    kv = _KVRate(kv_read)
    if efficiency is not None:
        kv = _KVRate(efficiency.kv_read, efficiency.kv_reread, efficiency.quant_memory)
    pre_sc, dec_sc, att, quant = _flop_scales(efficiency, wl)
    if wl.gen_len < 1:
        raise ConfigError("gen_len is 0: the design space needs output tokens to rank designs")
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    pre_ops = forward_ops(model, precision, wl.batch, wl.prompt_len, wl.prompt_len,
                          wl.flash_attention, logits)
    first, last = wl.decode_contexts
    steps = max(0, last - first + 1)
    lo, hi = (first, last) if steps else (wl.prompt_len + 1, wl.prompt_len + 1)
    pre_x = _expert_factor(efficiency, model.moe, wl.batch * max(1, wl.prompt_len))
    dec_x = _expert_factor(efficiency, model.moe, wl.batch)
    entries = [(_time_flops(o, pre_sc, att, quant, pre_x),
                _time_bytes(o.memory_bytes * o.count, o, o.count, kv), 0)
               for o in pre_ops]
    eff = efficiency or IDEAL      # kernel launches per operator (roofline.launches)
    # attention FLOPs at their own rate in prefill only
    varying, dec_k, dec_f, dec_m = _decode_terms(model, precision, wl, lo, hi, kv, entries,
                                                 (dec_sc, 1.0, quant, dec_x), eff)
    act = max(activation_peak_bytes(pre_ops),
              activation_peak_bytes(forward_ops(model, precision, wl.batch, 1, hi,
                                                wl.flash_attention)))
    needed = (weight_bytes(model, precision) + kv_cache_bytes(model, precision, wl.batch,
                                                              wl.max_context) + act)
    share = steps / (hi - lo + 1)
    pre_f = sum(o.flops * o.count for o in pre_ops)
    pre_m = sum(o.memory_bytes * o.count for o in pre_ops)
    arrays = _sorted_sums(entries)
    return Profile(precision.compute_dtype, wl.batch, wl.prompt_len, wl.batch * wl.gen_len,
                   steps, hi - lo + 1, *arrays, tuple(varying),
                   float(sum(launches(o.count, o.quantized, eff, o.name) for o in pre_ops)), dec_k,
                   pre_f + share * dec_f, pre_m + share * dec_m, needed)


def _decode_terms(model, precision, wl, lo, hi, kv, entries, scales=(1.0, 1.0), eff=IDEAL):
    """Decode operators over contexts lo..hi: context-independent ones appended to
    ``entries`` (times n steps), the others returned as affine (F_a, F_z, M_a, M_z, n);
    plus kernel launches, FLOPs and bytes summed over the steps."""
    varying, dec_k, dec_f, dec_m = [], 0.0, 0.0, 0.0
    for a, z in decode_segments(model, lo, hi):
        n = z - a + 1
        ops_a = forward_ops(model, precision, wl.batch, 1, a, wl.flash_attention)
        ops_z = forward_ops(model, precision, wl.batch, 1, z, wl.flash_attention) if z > a else ops_a
        for oa, oz in zip(ops_a, ops_z):
            c = oa.count
            fa, fz, ma, mz = oa.flops * c, oz.flops * c, oa.memory_bytes * c, oz.memory_bytes * c
            ta = _time_bytes(ma, oa, c, kv)
            tz = _time_bytes(mz, oz, c, kv)
            ga, gz = _time_flops(oa, *scales), _time_flops(oz, *scales)
            if ga == gz and ta == tz:
                entries.append((n * ga, n * ta, 1))
            else:
                varying.append((ga, gz, ta, tz, n))
            dec_k += n * launches(c, oa.quantized, eff, oa.name)
            dec_f += n * (fa + fz) / 2
            dec_m += n * (ma + mz) / 2
    return varying, dec_k, dec_f, dec_m


def _sorted_sums(entries) -> tuple[np.ndarray, ...]:
    """Intensities sorted ascending; per phase, FLOPs of entries at index >= k (reverse
    cumulative) and bytes of entries at index < k (cumulative), for k = 0..m."""
    kept = [e for e in entries if e[0] > 0 or e[1] > 0]
    inten = np.array([f / m if m > 0 else np.inf for f, m, _ in kept])
    order = np.argsort(inten, kind="stable")
    out = [inten[order]]
    for ph in (0, 1):
        f = np.array([kept[i][0] if kept[i][2] == ph else 0.0 for i in order])
        m = np.array([kept[i][1] if kept[i][2] == ph else 0.0 for i in order])
        f_above = np.concatenate([np.cumsum(f[::-1])[::-1], [0.0]]) if len(f) else np.zeros(1)
        m_below = np.concatenate([[0.0], np.cumsum(m)])
        out += [f_above, m_below]
    return tuple(out)


def _sum_max_affine(u0, u1, v0, v1, n: int):
    """Vectorised ``analysis._sum_max_affine``: sum over k = 0..n-1 of max(u(k), v(k)) for
    affine u, v given at k = 0 and k = n - 1 (exact; splits at the crossover)."""
    if n == 1:
        return np.maximum(u0, v0)
    g0, g1 = u0 - v0, u1 - v1
    out = n * np.where(g0 + g1 >= 0, (u0 + u1) / 2, (v0 + v1) / 2)
    cross = np.flatnonzero(g0 * g1 < 0)          # rare: the winner changes inside the segment
    if len(cross):
        a0, a1, b0, b1 = u0[cross], u1[cross], v0[cross], v1[cross]
        c0, c1 = g0[cross], g1[cross]
        k = np.floor(c0 / (c0 - c1) * (n - 1))
        up = c0 > 0
        first = _series(np.where(up, a0, b0), np.where(up, a1, b1), n, 0.0, k)
        second = _series(np.where(up, b0, a0), np.where(up, b1, a1), n, k + 1, float(n - 1))
        out[cross] = first + second
    return out


def _series(x0, x1, n: int, i, j):
    """Sum over k = i..j of the affine x (x0 at k = 0, x1 at k = n - 1); 0 when j < i."""
    a_i = x0 + (x1 - x0) * i / (n - 1)
    a_j = x0 + (x1 - x0) * j / (n - 1)
    return np.where(j >= i, (j - i + 1) * (a_i + a_j) / 2, 0.0)


def times(prof: Profile, pe, be, overhead_s: float):
    """(prefill time, total decode time over the n_dec evaluated steps) [s] of designs with
    effective peaks ``pe`` [FLOP/s] and bandwidths ``be`` [B/s] (arrays; estimated rates).
    Works with reciprocals (one division per design) and in place: ~20 array passes."""
    rpe, rbe = 1.0 / pe, 1.0 / be
    ridge = pe * rbe
    k = count_at_or_below(prof.intensity, ridge)
    pre = _roofline_sum(prof.pre_m_below, prof.pre_f_above, k, rbe, rpe,
                        prof.pre_kernels * overhead_s)
    dec = _roofline_sum(prof.dec_m_below, prof.dec_f_above, k, rbe, rpe,
                        prof.dec_kernels * overhead_s)
    for fa, fz, ma, mz, n in prof.varying:
        dec += _sum_max_affine_designs(fa, fz, ma, mz, n, rpe, rbe, ridge)
    return pre, dec


_LUT_SHIFT = 44              # float64 bits kept for the bucket: exponent + 8 mantissa bits
_LUT_MAX = 1 << 16           # most buckets in one lookup table


def count_at_or_below(sorted_vals: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(sorted_vals, x, side="right")`` (how many values are <= each x),
    several times faster for a short ``sorted_vals`` and positive finite ``x``.

    The bits of a positive float64, read as an integer, grow with its value; dropping the
    low 44 bits puts x in one of 256 buckets per octave. A table gives the count for every
    bucket that no value of ``sorted_vals`` splits; the few x in split buckets are searched
    exactly. Any other input goes to ``searchsorted``."""
    lo, hi = (float(x.min()), float(x.max())) if len(x) else (1.0, 1.0)
    if not (lo > 0 and math.isfinite(hi)):
        return np.searchsorted(sorted_vals, x, side="right")
    b0, b1 = (int(np.float64(v).view(np.int64)) >> _LUT_SHIFT for v in (lo, hi))
    if b1 - b0 >= _LUT_MAX:
        return np.searchsorted(sorted_vals, x, side="right")
    start = (np.arange(b0, b1 + 2, dtype=np.int64) << _LUT_SHIFT).view(np.float64)
    first = np.searchsorted(sorted_vals, start[:-1], side="right")     # count at a bucket's
    last = np.searchsorted(sorted_vals, start[1:], side="left")        # first / last value
    bucket = x.view(np.int64) >> _LUT_SHIFT
    bucket -= b0
    k = first.take(bucket)
    split = np.flatnonzero((first != last).take(bucket))
    if len(split):
        k[split] = np.searchsorted(sorted_vals, x[split], side="right")
    return k


def _roofline_sum(m_below, f_above, k, rbe, rpe, launch_s: float):
    """M_below[k] / BW + F_above[k] / P + launches x overhead, in place."""
    t = m_below[k]
    t *= rbe
    f = f_above[k]
    f *= rpe
    t += f
    t += launch_s
    return t


def _sum_max_affine_designs(fa: float, fz: float, ma: float, mz: float, n: int, rpe, rbe,
                            ridge):
    """``_sum_max_affine`` of one varying operator (FLOPs fa..fz, bytes ma..mz over n steps)
    for arrays of designs: n x the larger of the mean compute and mean memory times, except
    where the winner changes inside the segment (the ridge strictly between the operator's
    intensities at both ends), which the exact split of ``_sum_max_affine`` handles."""
    if n == 1 or ma <= 0 or mz <= 0:
        return _sum_max_affine(fa * rpe, fz * rpe, ma * rbe, mz * rbe, n)
    out = rpe * (n * (fa + fz) / 2)
    np.maximum(out, rbe * (n * (ma + mz) / 2), out=out)
    lo, hi = sorted((fa / ma, fz / mz))
    cross = np.flatnonzero((ridge > lo) & (ridge < hi)) if hi > lo else ()
    if len(cross):
        rp, rb = rpe[cross], rbe[cross]
        out[cross] = _sum_max_affine(fa * rp, fz * rp, ma * rb, mz * rb, n)
    return out
