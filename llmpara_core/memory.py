"""Memory footprint: weights, KV cache and activations, fit against capacity, and the largest
batch and context that fit. GB = 1e9 bytes throughout."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Model, count_params
from .operators import Operator
from .precision import Precision
from .units import MAX_SIZE, bits_to_bytes


def weight_bytes(model: Model, precision: Precision) -> float:
    """Bytes of all weights, each component at its own precision."""
    pc = count_params(model)
    ffn = pc.ffn_dense + pc.moe_router + pc.moe_experts + pc.moe_shared
    return (bits_to_bytes(pc.attention, precision.weight_attn_bits)
            + bits_to_bytes(ffn, precision.weight_ffn_bits)
            + bits_to_bytes(pc.embedding + pc.lm_head, precision.weight_embed_bits)
            + bits_to_bytes(pc.norms, precision.norm_bits))


def kv_cache_bytes_per_token(model: Model, precision: Precision) -> float:
    """KV cache bytes per cached token of one sequence, all layers, at the KV bits, before any
    sliding-window cap (MLA: kv_lora_rank + rope dims per layer)."""
    return bits_to_bytes(model.num_hidden_layers * model.kv_cache_elements_per_token_per_layer(),
                         precision.kv_bits)


def kv_cache_bytes(model: Model, precision: Precision, batch: int, context_len: int) -> float:
    """KV cache of ``batch`` sequences at ``context_len`` tokens; sliding-window layers keep
    at most the window."""
    per_layer = bits_to_bytes(model.kv_cache_elements_per_token_per_layer(), precision.kv_bits)
    tokens = sum(n * model.cached_tokens(kind, context_len) for kind, n in model.layer_groups())
    return batch * tokens * per_layer


def activation_peak_bytes(ops: tuple[Operator, ...]) -> float:
    """Largest live activation set of one operator execution (its inputs plus its outputs)."""
    return max((o.act_read_bytes + o.act_write_bytes for o in ops), default=0.0)


@dataclass(frozen=True)
class MemoryFootprint:
    weight_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def utilisation(self) -> float:
        return self.total_bytes / self.capacity_bytes


def max_batch(model: Model, precision: Precision, context_len: int, activation_bytes_per_seq: float,
              capacity_bytes: float) -> int:
    """Largest batch whose weights + KV cache at ``context_len`` + activations fit (0 if even
    the weights do not fit)."""
    free = capacity_bytes - weight_bytes(model, precision)
    per_seq = kv_cache_bytes(model, precision, 1, context_len) + activation_bytes_per_seq
    if free <= 0:
        return 0
    return int(min(MAX_SIZE, free // per_seq)) if per_seq > 0 else MAX_SIZE


def max_context(model: Model, precision: Precision, batch: int, activation_bytes: float,
                capacity_bytes: float) -> int:
    """Largest context (tokens per sequence) whose KV cache for ``batch`` sequences fits next to
    the weights and ``activation_bytes``; 0 if nothing fits. Binary search (KV is monotone)."""
    free = capacity_bytes - weight_bytes(model, precision) - activation_bytes
    if free < kv_cache_bytes(model, precision, batch, 1):
        return 0
    lo, hi = 1, MAX_SIZE
    if kv_cache_bytes(model, precision, batch, hi) <= free:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if kv_cache_bytes(model, precision, batch, mid) <= free:
            lo = mid
        else:
            hi = mid - 1
    return lo


MEMORY_LIMIT = "memory"
WINDOW_LIMIT = "context window"


@dataclass(frozen=True)
class ContextLimit:
    """The largest context (tokens per sequence) a scenario can use, and which limit binds:
    device memory (:func:`max_context`) or the context window the model was trained for
    (``max_position_embeddings``; None when the config does not say)."""
    memory_tokens: int
    window_tokens: int | None

    @property
    def tokens(self) -> int:
        if self.window_tokens is None:
            return self.memory_tokens
        return min(self.memory_tokens, self.window_tokens)

    @property
    def binding(self) -> str:
        """``MEMORY_LIMIT`` or ``WINDOW_LIMIT`` (memory on a tie: more memory would not help)."""
        if self.window_tokens is not None and self.window_tokens < self.memory_tokens:
            return WINDOW_LIMIT
        return MEMORY_LIMIT


def context_limit(model: Model, precision: Precision, batch: int, activation_bytes: float,
                  capacity_bytes: float) -> ContextLimit:
    """:func:`max_context` capped by the model's trained context window."""
    return ContextLimit(max_context(model, precision, batch, activation_bytes, capacity_bytes),
                        model.max_position_embeddings)
