"""Exact sums of roofline time over the steps of speculative decoding.

A forward pass over ``s`` new tokens per sequence has per-operator FLOPs and bytes that are affine
in its context between breakpoints (sliding windows, MLA's prefill form), so the sum over steps
of each operator's max(compute, memory) time has a closed form (as ``analysis.integrate_decode``
does for plain decode). Internal to ``speculative``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..operators import OpKind, Operator
from ..roofline import (Rates, effective_memory_bytes, launches, op_time_s, plan_factors,
                        quant_flops_factor)

_FLOPS, _MEM, _COMM, _WEIGHT, _KV, _KV_READ, _KV_REREAD, _QWEIGHT = range(8)


def _table(ops: tuple[Operator, ...]) -> tuple[np.ndarray, tuple]:
    """Per-operator totals (x count) of one pass: rows FLOPs, memory bytes, communication bytes,
    weight bytes, KV bytes (read + written), KV bytes read, KV bytes re-read per query head
    (``Operator.kv_reread_bytes``), quantised weight bytes; and per operator its executions,
    whether its weights are quantised, and its name (``roofline.launches``)."""
    arr = np.array([[o.flops * o.count, o.memory_bytes * o.count, o.comm_bytes * o.count,
                     o.weight_bytes * o.count, (o.kv_read_bytes + o.kv_write_bytes) * o.count,
                     o.kv_read_bytes * o.count, o.kv_reread_bytes * o.count,
                     o.weight_bytes * o.count if o.quantized else 0.0]
                    for o in ops], float).reshape(-1, 8).T
    return arr, (np.array([float(o.count) for o in ops]),
                 np.array([1.0 if o.quantized else 0.0 for o in ops]), tuple(o.name for o in ops))


class _Pass:
    """A forward pass over ``s`` new tokens per sequence as a function of its context c: the
    per-operator FLOPs and bytes are affine in c between breakpoints (sliding window w: c = w and
    c = w + s - 1; MLA: c = s, below which the pass takes the expanded prefill form)."""

    def __init__(self, build, s: int, window: int | None, mla: bool, constant: bool = False):
        self._build, self.s, self.constant = build, s, constant
        bps = set()
        if mla:
            bps.add(s)
        if window is not None:
            bps.update({window, window + s - 1})
        self.bps = sorted(b for b in bps if b >= s)
        self._cache: dict[int, tuple[np.ndarray, tuple]] = {}

    def ops(self, c: int) -> tuple[Operator, ...]:
        return self._build(max(int(c), self.s))

    def table(self, c: int) -> tuple[np.ndarray, tuple]:
        c = max(int(c), self.s)
        if c not in self._cache:
            self._cache[c] = _table(self._build(c))
        return self._cache[c]

    def pieces(self, c_first: float, dc: float, n: int):
        """Split steps j = 0..n-1 at contexts c_first + j*dc into affine pieces; yield
        (j0, j1, anchor a, table at a, anchor z, table at z)."""
        if self.constant:
            t = self.table(self.s)
            yield 0, n - 1, self.s, t, self.s, t
            return
        bounds = [-math.inf] + self.bps + [math.inf]
        for lo_b, hi_b in zip(bounds[:-1], bounds[1:]):
            j0 = 0 if lo_b == -math.inf else max(0, math.floor((lo_b - c_first) / dc + 1e-9) + 1)
            j1 = n - 1 if hi_b == math.inf else min(n - 1, math.floor((hi_b - c_first) / dc + 1e-9))
            if j1 < j0:
                continue
            c0, c1 = c_first + j0 * dc, c_first + j1 * dc
            a = math.floor(c0 + 1e-9)
            z = math.ceil(c1 - 1e-9)
            if lo_b != -math.inf:
                a = max(a, int(lo_b) + 1)
            if hi_b != math.inf:
                z = min(z, int(hi_b))
            a = max(a, self.s)
            z = max(z, a)
            yield j0, j1, a, self.table(a), z, self.table(z)


def _at(ta: np.ndarray, tz: np.ndarray, a: int, z: int, c: float) -> np.ndarray:
    """Per-operator values at context ``c`` from the tables at anchors a and z (affine)."""
    if z == a:
        return ta
    return ta + (tz - ta) * ((c - a) / (z - a))


def _sum_max_affine_vec(u0, u1, v0, v1, n) -> np.ndarray:
    """Element-wise exact sum over k = 0..n-1 of max(u_k, v_k) for u, v affine in k with the
    given values at k = 0 and k = n - 1 (vectorised ``analysis._sum_max_affine``; ``n`` may be an
    array broadcasting against the others)."""
    n = np.asarray(n, float)
    span = np.maximum(n - 1, 1.0)
    g0, g1 = u0 - v0, u1 - v1
    same = (g0 * g1 >= 0) | (n == 1)
    whole = np.where(g0 + g1 >= 0, n * (u0 + u1) / 2, n * (v0 + v1) / 2)
    whole = np.where(n == 1, np.maximum(u0, v0), whole)
    with np.errstate(divide="ignore", invalid="ignore"):
        ks = np.floor(np.where(same, 0.0, g0 / (g0 - g1)) * span)
    ks = np.clip(ks, 0, np.maximum(n - 2, 0))
    first_u = g0 > 0
    f0, f1 = np.where(first_u, u0, v0), np.where(first_u, u1, v1)
    s0, s1 = np.where(first_u, v0, u0), np.where(first_u, v1, u1)

    def series(x0, x1, i, j):      # sum over k = i..j of affine x
        return (j - i + 1) * (x0 + (x1 - x0) / span * (i + j) / 2)
    split = series(f0, f1, 0, ks) + series(s0, s1, ks + 1, n - 1)
    return np.where(same, whole, split)


@dataclass
class _Sum:
    """Totals over steps: time [s], FLOPs, memory bytes, weight bytes, KV bytes."""
    time_s: float = 0.0
    flops: float = 0.0
    mem: float = 0.0
    weight: float = 0.0
    kv: float = 0.0

    def add(self, other: "_Sum", w: float = 1.0) -> None:
        for k in ("time_s", "flops", "mem", "weight", "kv"):
            setattr(self, k, getattr(self, k) + w * getattr(other, k))


def _steps(p: _Pass, r: Rates, c_firsts, dc: float, n_steps: float) -> _Sum:
    """Exact totals of pass ``p`` over steps at contexts c + j*dc for every c in ``c_firsts``:
    floor(n_steps) whole steps, then the remainder as a weighted share of one more step."""
    full = int(math.floor(n_steps + 1e-12))
    frac = n_steps - full
    runs = [(c, full, 1.0) for c in c_firsts if full > 0]
    if frac > 1e-12:
        runs += [(c + full * dc, 1, frac) for c in c_firsts]
    v0s, v1s, ms, ws, kerns = [], [], [], [], []
    for c_first, n, w in runs:
        for j0, j1, a, (ta, kern), z, (tz, _) in p.pieces(c_first, dc, n):
            v0s.append(_at(ta, tz, a, z, c_first + j0 * dc))
            v1s.append(_at(ta, tz, a, z, c_first + j1 * dc))
            ms.append(j1 - j0 + 1)
            ws.append(w)
            counts, quantized, names = kern
            kerns.append(float(np.sum(launches(counts * plan_factors(names, r.kernel_plan),
                                               quantized, r))))
    out = _Sum()
    if not ms:
        return out
    v0, v1 = np.stack(v0s), np.stack(v1s)             # (runs, field, op)
    m, w = np.array(ms, float), np.array(ws, float)
    # memory time with KV-cache reads streamed at the device's KV-read efficiency (roofline);
    # affine in the context like the bytes themselves
    share = _quant_share(v0)        # weights do not change with the context
    mem0 = effective_memory_bytes(v0[:, _MEM], v0[:, _KV_READ], r, v0[:, _KV_REREAD],
                                  v0[:, _WEIGHT], share)
    mem1 = effective_memory_bytes(v1[:, _MEM], v1[:, _KV_READ], r, v1[:, _KV_REREAD],
                                  v1[:, _WEIGHT], _quant_share(v1))
    qf = quant_flops_factor(r, share)
    t = _sum_max_affine_vec(v0[:, _FLOPS] * qf / r.flops_per_s, v1[:, _FLOPS] * qf / r.flops_per_s,
                            mem0 / r.bytes_per_s, mem1 / r.bytes_per_s, m[:, None])
    out.time_s = float((t.sum(axis=1) * w).sum() + (m * w * np.array(kerns)).sum()
                       * r.kernel_overhead_s)
    out.time_s += float((m * w).sum()) * r.pass_overhead_s          # fixed cost per pass
    tot = ((v0 + v1).sum(axis=2) * (m * w / 2)[:, None]).sum(axis=0)   # per field
    if r.link_bytes_per_s:
        out.time_s += tot[_COMM] / r.link_bytes_per_s
    out.flops, out.mem, out.weight, out.kv = tot[_FLOPS], tot[_MEM], tot[_WEIGHT], tot[_KV]
    return out


def _quant_share(v: np.ndarray) -> np.ndarray:
    """Share of each operator's weight bytes that is quantised (0 where it has none)."""
    w = v[:, _WEIGHT]
    return np.divide(v[:, _QWEIGHT], w, out=np.zeros_like(w), where=w > 0)


def _pass_time_s(ops: tuple[Operator, ...], r: Rates, estimated: bool) -> float:
    return sum(op_time_s(o.flops * o.count, o.memory_bytes * o.count,
                         launches(o.count, o.quantized, r, o.name) if estimated else 0, r,
                         o.comm_bytes * o.count,
                         o.kv_read_bytes * o.count,
                         o.flops * o.count if o.kind is OpKind.ATTENTION else 0.0,
                         o.kv_reread_bytes * o.count, o.weight_bytes * o.count,
                         o.quantized) for o in ops)

