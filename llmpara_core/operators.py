"""Operator records and the small pure builders that make them.

An operator instance carries FLOPs and a byte breakdown (weights read, activations read and
written, KV cache read and written, communication) for ONE execution, plus ``count``: how many
times it runs per forward pass (e.g. once per layer of its group). Totals and arithmetic
intensity are derived, never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .units import FLOPS_PER_MAC, bits_to_bytes


class OpKind(Enum):
    """Operator category (used for colours, filters and grouping)."""
    EMBEDDING = "embedding"
    NORM = "norm"
    QKV = "qkv"
    ROPE = "rope"
    ATTENTION = "attention"
    KV_CACHE = "kv_cache"
    OUT_PROJ = "out_proj"
    FFN = "ffn"
    MOE_ROUTER = "moe_router"
    MOE_EXPERT = "moe_expert"
    SHARED_EXPERT = "shared_expert"
    ELEMENTWISE = "elementwise"
    LM_HEAD = "lm_head"
    COMM = "communication"


class MemoryTraffic:
    """Mixin for records with the five memory byte fields: their sum and the arithmetic
    intensity (FLOPs per byte) derived from it."""
    flops: float
    weight_bytes: float
    act_read_bytes: float
    act_write_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float

    @property
    def memory_bytes(self) -> float:
        """Bytes moved to/from device memory (communication excluded)."""
        return (self.weight_bytes + self.act_read_bytes + self.act_write_bytes
                + self.kv_read_bytes + self.kv_write_bytes)

    @property
    def kv_reread_bytes(self) -> float:
        """KV-cache reads x (query heads per KV head - 1): what the further query heads of each
        GQA group would read again if each streamed its group's K/V itself
        (``roofline.effective_memory_bytes``)."""
        return self.kv_read_bytes * (getattr(self, "kv_group", 1.0) - 1.0)

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte of memory traffic; None when nothing moves."""
        b = self.memory_bytes
        return self.flops / b if b > 0 else None


@dataclass(frozen=True)
class Operator(MemoryTraffic):
    """One operator of a forward pass; sizes are per execution, ``count`` executions per pass."""
    name: str
    kind: OpKind
    flops: float
    weight_bytes: float = 0.0
    act_read_bytes: float = 0.0
    act_write_bytes: float = 0.0
    kv_read_bytes: float = 0.0
    kv_write_bytes: float = 0.0
    comm_bytes: float = 0.0
    count: int = 1
    group: str = ""            # layer group label ("global/dense", "model", ...)
    kv_group: float = 1.0      # query heads sharing each K/V head read here (GQA group; 1 = MHA/MLA)
    quantized: bool = False    # a matmul with weights below 16 bits (Efficiency.act_quant_kernels)
    gemm_cols: float = 0.0     # output columns of each GEMM it stands for (0: not timed as a
                               # tiled GEMM; roofline.wave_flops_factor)

    @property
    def total_flops(self) -> float:
        return self.flops * self.count

    @property
    def total_memory_bytes(self) -> float:
        return self.memory_bytes * self.count

    def regrouped(self, count: int, group: str) -> "Operator":
        """A copy that runs ``count`` times per pass in layer group ``group`` (fast path:
        dataclasses.replace is too slow for the hot loop of the forward builder)."""
        return Operator(self.name, self.kind, self.flops, self.weight_bytes, self.act_read_bytes,
                        self.act_write_bytes, self.kv_read_bytes, self.kv_write_bytes,
                        self.comm_bytes, count, group, self.kv_group, self.quantized,
                        self.gemm_cols)


def linear(name: str, kind: OpKind, tokens: float, d_in: int, d_out: int, w_bits: float,
           a_bits: float, bias: bool = False, weight_sets: float = 1.0,
           token_reads: float = 1.0, gemm_cols: float = 0.0) -> Operator:
    """y = x W (+ b) for ``tokens`` rows: 2 * tokens * d_in * d_out FLOPs (1 MAC = 2 FLOPs).

    ``weight_sets`` scales the weight bytes read (MoE: expected distinct experts touched);
    ``token_reads`` scales the input rows read (MoE: each token is dispatched k times).
    ``gemm_cols``: output columns of each GEMM the operator stands for where it is a dense
    layer's weight matmul timed with tile and wave quantisation (0: not).
    """
    flops = FLOPS_PER_MAC * tokens * d_in * d_out + (tokens * d_out if bias else 0.0)
    w_elems = d_in * d_out + (d_out if bias else 0)
    return Operator(
        name, kind, flops,
        weight_bytes=bits_to_bytes(w_elems, w_bits) * weight_sets,
        act_read_bytes=bits_to_bytes(tokens * d_in, a_bits) * token_reads,
        act_write_bytes=bits_to_bytes(tokens * d_out, a_bits), quantized=w_bits < 16,
        gemm_cols=float(gemm_cols))


def norm(name: str, tokens: float, width: int, a_bits: float, w_bits: float,
         layer_norm: bool = False) -> Operator:
    """RMSNorm (~4 FLOPs/element: square, sum, scale, weight) or LayerNorm (~7, with mean and
    bias); reads the input and the weight vector, writes the output."""
    per_elem = 7.0 if layer_norm else 4.0
    w_elems = width * (2 if layer_norm else 1)
    return Operator(name, OpKind.NORM, per_elem * tokens * width,
                    weight_bytes=bits_to_bytes(w_elems, w_bits),
                    act_read_bytes=bits_to_bytes(tokens * width, a_bits),
                    act_write_bytes=bits_to_bytes(tokens * width, a_bits))


def elementwise(name: str, kind: OpKind, elements: float, flops_per_elem: float,
                inputs: int, a_bits: float) -> Operator:
    """An elementwise op over ``elements`` outputs reading ``inputs`` tensors of that size."""
    return Operator(name, kind, flops_per_elem * elements,
                    act_read_bytes=bits_to_bytes(inputs * elements, a_bits),
                    act_write_bytes=bits_to_bytes(elements, a_bits))


def gather(name: str, tokens: float, width: int, w_bits: float, a_bits: float) -> Operator:
    """Embedding lookup: reads ``tokens`` rows of the table (not the whole table), no FLOPs."""
    return Operator(name, OpKind.EMBEDDING, 0.0,
                    weight_bytes=bits_to_bytes(tokens * width, w_bits),
                    act_read_bytes=0.0,
                    act_write_bytes=bits_to_bytes(tokens * width, a_bits))


def causal_pairs(new_tokens: int, context_len: int, window: int | None) -> float:
    """Number of (query, key) pairs attended by ``new_tokens`` queries whose last one sees
    ``context_len`` keys, causally, each query seeing at most ``window`` keys.

    Query i (0-based) sees p + i + 1 keys with p = context_len - new_tokens, capped at window.
    Exact closed form (prefill over s tokens gives s(s+1)/2, about half of s^2).
    """
    s, c = new_tokens, context_len
    p = c - s
    full = s * p + s * (s + 1) / 2.0          # sum_{i=0}^{s-1} (p + i + 1)
    if window is None or window >= c:
        return full
    # Queries with p + i + 1 > window see exactly `window` keys.
    first_capped = max(0, window - p)         # smallest i with p + i + 1 > window
    n_capped = s - first_capped
    uncapped = first_capped * p + first_capped * (first_capped + 1) / 2.0
    return uncapped + n_capped * window


def keys_touched(new_tokens: int, context_len: int, window: int | None) -> int:
    """Distinct cached positions any of the new queries reads (each read once per KV head)."""
    if window is None:
        return context_len
    return min(context_len, window + new_tokens - 1)
