"""The fast path of the fit: a row's per-operator FLOPs and bytes at ideal rates (one
``analysis.analyze`` run), re-timed with any efficiency through ``roofline.op_time_s``; and the
optimiser and loss the fits share (:mod:`llmpara_core.calibration.fitting`)."""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from ..analysis import analyze
from ..hardware import IDEAL, Efficiency
from ..operators import OpKind
from ..precision import is_kquant
from ..roofline import (Rates, dequant_factor, expert_flops_factor, gemm_peaks,
                        is_expert_gemm, kv_stream_limit, launches, op_time_s, plan_factors,
                        wave_setup, weight_stream_limits)
from ..units import S_PER_MS
from .measurements import Mapped, build_efficiency

HUBER_DELTA = 0.05
PRIOR_WEIGHT = 2e-5


# ---- fast per-row evaluation ----------------------------------------------------------------

@dataclass(frozen=True)
class PhaseArrays:
    """Per-operator totals of one phase (prefill: one pass; decode: mean per step)."""
    flops: np.ndarray
    mem_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kernels: np.ndarray
    attention_flops: np.ndarray
    kv_reread_bytes: np.ndarray
    quantized: np.ndarray            # 1.0 for matmuls with quantised weights, else 0.0
    weight_bytes: np.ndarray
    names: tuple                     # operator names (the stack's kernel plan names them)
    expert: np.ndarray = None        # 1.0 for routed-expert GEMMs (MoE), else 0.0
    gemm_cols: np.ndarray = None     # output columns per GEMM (Operator.gemm_cols; 0: none)

    @classmethod
    def of(cls, phase) -> "PhaseArrays":
        """Arrays of a phase; attention FLOPs at their own rate in prefill only (as
        ``analysis.analyze``: decode attention is bound by its KV reads)."""
        rows = phase.rows
        att = phase.name == "prefill"
        return cls(np.array([r.flops for r in rows]), np.array([r.memory_bytes for r in rows]),
                   np.array([r.kv_read_bytes for r in rows]),
                   np.array([float(r.count) for r in rows]),
                   np.array([r.flops if att and r.kind is OpKind.ATTENTION else 0.0
                             for r in rows]),
                   np.array([r.kv_reread_bytes for r in rows]),
                   np.array([1.0 if r.quantized else 0.0 for r in rows]),
                   np.array([r.weight_bytes for r in rows]), tuple(r.name for r in rows),
                   np.array([1.0 if is_expert_gemm(r.kind, r.weight_bytes) else 0.0
                             for r in rows]),
                   np.array([r.gemm_cols for r in rows]))

    def time_s(self, r: Rates, moe=None) -> float:
        """The phase's time at rates ``r``; ``moe`` (the model's) times routed-expert GEMMs at
        their own rows per expert (``roofline.expert_flops_factor``)."""
        executions = (self.kernels * plan_factors(self.names, r.kernel_plan) if r.kernel_plan
                      else self.kernels)
        flops = self.flops
        xf = expert_flops_factor(r, moe)
        if xf != 1.0 and self.expert is not None:
            flops = flops * (1.0 + (xf - 1.0) * self.expert)
        return float(np.sum(op_time_s(flops, self.mem_bytes,
                                      launches(executions, self.quantized, r), r,
                                      kv_read_bytes=self.kv_read_bytes,
                                      attention_flops=self.attention_flops,
                                      kv_reread_bytes=self.kv_reread_bytes,
                                      weight_bytes=self.weight_bytes,
                                      quantized=self.quantized,
                                      gemm_cols=(self.gemm_cols if self.gemm_cols is not None
                                                 else 0.0)))) + r.pass_overhead_s


@dataclass(frozen=True)
class RowFeatures:
    """A row's prefill and decode operators at ideal rates, and the device's peaks."""
    row: Mapped
    prefill: PhaseArrays
    decode: PhaseArrays
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float

    def _rates(self, eff: Efficiency, tokens: float) -> Rates:
        bw = self.bandwidth_bytes_per_s * eff.memory
        peak, ratio = self.peak_flops_per_s, 1.0
        if eff.gemm_fp16_acc16 or eff.quant_gemm_int8:     # the stack's GEMM units
            peak, _, ratio = gemm_peaks(self.row.hardware, self.row.precision.compute_dtype, eff)
        return Rates(peak * eff.compute_at(tokens), bw,
                     eff.kernel_overhead_s, None, None,
                     eff.kv_read, eff.pass_overhead_s(self.row.workload.batch),
                     eff.attention_compute, eff.kv_reread, eff.act_quant_kernels,
                     *weight_stream_limits(self.row.hardware, eff,
                                           is_kquant(self.row.precision)), eff.kernel_plan,
                     eff.quant_compute * ratio, eff.expert_curve_tokens, eff.gemm_rows(tokens),
                     dequant_factor(eff, tokens) * eff.memory,
                     *wave_setup(self.row.hardware, eff, tokens),
                     kv_limit_bytes_per_s=kv_stream_limit(self.row.hardware, eff))

    def predict(self, eff: Efficiency) -> float:
        eff = build_efficiency(self.row, eff)
        m, wl = self.row.measurement, self.row.workload
        b, moe = wl.batch, self.row.model.moe
        if m.metric in ("decode_tok_s", "throughput_tok_s"):
            step = self.decode.time_s(self._rates(eff, b), moe)
            return (1.0 if m.metric == "decode_tok_s" else b) / step
        pre = self.prefill.time_s(self._rates(eff, b * wl.prompt_len), moe)
        if m.metric == "prefill_tok_s":
            return b * wl.prompt_len / pre
        if m.metric == "ttft_ms":
            return pre / S_PER_MS
        step = self.decode.time_s(self._rates(eff, b), moe)
        return b * wl.gen_len / (pre + (wl.gen_len - 1) * step)


@functools.lru_cache(maxsize=4096)
def features(row: Mapped) -> RowFeatures:
    """A row's operators at ideal rates (cached: every leave-one-device-out refit reuses
    them; the arrays are never written)."""
    rep = analyze(row.model, replace(row.hardware, efficiency=IDEAL), row.precision,
                  row.workload)
    return RowFeatures(row, PhaseArrays.of(rep.prefill), PhaseArrays.of(rep.decode),
                       rep.peak_flops_per_s, rep.bandwidth_bytes_per_s)


# ---- optimiser ------------------------------------------------------------------------------

def nelder_mead(f, x0, step: float = 0.3, iters: int = 400, tol: float = 1e-7) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (plain Nelder-Mead, standard coefficients)."""
    n = len(x0)
    pts = [np.asarray(x0, float)] + [np.asarray(x0, float) + step * np.eye(n)[i]
                                     for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        centre = np.mean(pts[:-1], axis=0)
        xr = centre + (centre - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = centre + 2.0 * (centre - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = centre + 0.5 * (pts[-1] - centre)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    return pts[int(np.argmin(vals))]


def implied_cost(time_at, target: float, hi: float, iters: int = 40) -> float | None:
    """The fixed cost c in [0, ``hi``] at which ``time_at(c)`` -- a modelled time that grows
    with c -- equals a row's measured ``target`` (bisection): 0 when the model is already as
    slow with no cost at all, None when even ``hi`` is too fast (not a cost of that kind)."""
    if time_at(0.0) >= target:
        return 0.0
    if time_at(hi) <= target:
        return None
    lo = 0.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if time_at(mid) < target else (lo, mid)
    return (lo + hi) / 2


def _logit(p: float) -> float:
    p = min(max(p, 0.02), 0.9)       # start inside the range, where the loss has a slope
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, x))))


def huber(residuals: np.ndarray) -> np.ndarray:
    d = HUBER_DELTA
    return d * d * (np.sqrt(1.0 + (residuals / d) ** 2) - 1.0)


def weights(rows: list[Mapped]) -> np.ndarray:
    n = Counter((r.hardware.slug, r.measurement.metric) for r in rows)
    return np.array([1.0 / math.sqrt(n[(r.hardware.slug, r.measurement.metric)]) for r in rows])


