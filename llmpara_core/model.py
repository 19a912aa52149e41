"""The model description: a frozen, validated record whose field names follow Hugging Face
``config.json``, plus exact parameter counting.

Build one from a preset (``llmpara_core.presets.load_model``) or from any ``config.json``
(``llmpara_core.hf_import.from_hf_config``).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from .errors import ConfigError, require_float, require_int
from .limits import check_int, check_name


class FFNKind(Enum):
    """Gated FFN (SwiGLU/GeGLU: gate and up projections, elementwise product) or plain MLP."""
    GATED = "gated"
    PLAIN = "plain"


class Activation(Enum):
    SILU = "silu"
    GELU = "gelu"
    GELU_TANH = "gelu_tanh"
    RELU = "relu"
    RELU2 = "relu2"


# FLOPs per element of the activation function (first-order; exp/tanh counted as ~4 FLOPs).
ACTIVATION_FLOPS = {
    Activation.SILU: 5.0,       # x * sigmoid(x): neg, exp, add, div, mul
    Activation.GELU: 8.0,
    Activation.GELU_TANH: 8.0,
    Activation.RELU: 1.0,
    Activation.RELU2: 2.0,
}


class NormKind(Enum):
    RMS = "rmsnorm"
    LAYER = "layernorm"


class PositionKind(Enum):
    ROPE = "rope"
    LEARNED = "learned"
    NONE = "none"


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts FFN.

    ``shared_intermediate_size`` is the total width of the always-active shared expert(s)
    (DeepSeek: n_shared_experts x moe_intermediate_size; Qwen2-MoE: shared_expert_intermediate_size).
    ``first_dense_layers`` layers at the start use the dense FFN of ``Model.intermediate_size``.
    """
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int = 0
    shared_expert_gate: bool = False   # Qwen2-MoE: sigmoid gate, a hidden->1 linear
    first_dense_layers: int = 0
    router_bias: bool = False          # gpt-oss
    expert_bias: bool = False          # gpt-oss

    def __post_init__(self):
        check_int("num_experts", self.num_experts, "moe.num_experts")
        check_int("experts_per_token", self.experts_per_token, "moe.experts_per_token")
        if self.experts_per_token > self.num_experts:
            raise ConfigError(
                f"moe.experts_per_token ({self.experts_per_token}) must be <= "
                f"moe.num_experts ({self.num_experts})")
        for f in ("expert_intermediate_size", "shared_intermediate_size", "first_dense_layers"):
            check_int(f, getattr(self, f), f"moe.{f}")

    def expected_active_experts(self, tokens: float) -> float:
        """Expected number of distinct routed experts touched by ``tokens`` tokens, each picking
        k of E experts uniformly: E * (1 - (1 - k/E) ** tokens)."""
        e, k = self.num_experts, self.experts_per_token
        if tokens <= 0:
            return 0.0
        return e * (1.0 - (1.0 - k / e) ** tokens)

    def tokens_per_expert(self, tokens: float) -> float:
        """Mean rows of one touched routed expert's GEMM when ``tokens`` tokens pass the layer:
        tokens x k / experts touched (``expected_active_experts``); 1 token gives 1 row."""
        touched = self.expected_active_experts(tokens)
        return tokens * self.experts_per_token / touched if touched > 0 else 0.0


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3). ``q_lora_rank`` None means a direct q_proj."""
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    def __post_init__(self):
        for f in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            check_int(f, getattr(self, f), f"mla.{f}")
        if self.q_lora_rank is not None:
            check_int("q_lora_rank", self.q_lora_rank, "mla.q_lora_rank")

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_elements_per_token(self) -> int:
        """Latent KV cache per token per layer: kv_lora_rank + qk_rope_head_dim elements."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class LayerKind:
    """What distinguishes one decoder layer from another; layers of equal kind are grouped."""
    sliding: bool
    moe: bool

    @property
    def label(self) -> str:
        attn = "local" if self.sliding else "global"
        ffn = "moe" if self.moe else "dense"
        return f"{attn}/{ffn}"


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer. Sizes are element counts; see module docstring."""
    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    head_dim: int | None = None            # None -> hidden_size // num_attention_heads
    tie_word_embeddings: bool = False
    attention_bias: bool = False           # biases on q, k, v
    attention_out_bias: bool = False       # bias on o_proj
    mlp_bias: bool = False
    ffn_kind: FFNKind = FFNKind.GATED
    hidden_act: Activation = Activation.SILU
    norm_kind: NormKind = NormKind.RMS
    norms_per_layer: int = 2               # hidden-size norms per layer (Gemma-2/3: 4)
    ffn_sub_norm: bool = False             # BitNet: an intermediate-size norm before down_proj
    attn_sub_norm: bool = False            # BitNet: a hidden-size norm before o_proj
    qk_norm: bool = False                  # Qwen3 / Gemma-3: per-head RMSNorm on q and k
    final_norm: bool = True
    position: PositionKind = PositionKind.ROPE
    rope_theta: float | None = 10000.0
    rope_scaling_factor: float = 1.0
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    sliding_layers: tuple[bool, ...] | None = None   # per layer; None -> all layers if window
    attention_sinks: bool = False          # gpt-oss: one learned logit per head per layer
    moe: MoE | None = None
    mla: MLA | None = None
    architecture: str = ""
    source: str = ""
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self):
        check_name("name", self.name)
        for f in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "intermediate_size", "vocab_size"):
            check_int(f, getattr(self, f))
        if self.head_dim is not None:
            check_int("head_dim", self.head_dim)
        elif self.mla is None and self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads}); give head_dim explicitly")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must be divisible by "
                f"num_key_value_heads ({self.num_key_value_heads})")
        require_int("norms_per_layer", self.norms_per_layer, 0, 16)
        for f, cls in (("ffn_kind", FFNKind), ("hidden_act", Activation),
                       ("norm_kind", NormKind), ("position", PositionKind)):
            if not isinstance(getattr(self, f), cls):
                raise ConfigError(f"{f} must be a {cls.__name__}, got {getattr(self, f)!r}")
        require_float("rope_theta", self.rope_theta, lo=0, lo_open=True, allow_none=True)
        require_float("rope_scaling_factor", self.rope_scaling_factor, lo=0, lo_open=True)
        if self.max_position_embeddings is not None:
            check_int("max_position_embeddings", self.max_position_embeddings)
        if self.sliding_window is not None:
            check_int("sliding_window", self.sliding_window)
        if self.sliding_layers is not None:
            if len(self.sliding_layers) != self.num_hidden_layers:
                raise ConfigError(
                    f"sliding_layers has {len(self.sliding_layers)} entries for "
                    f"{self.num_hidden_layers} layers")
            object.__setattr__(self, "sliding_layers", tuple(bool(x) for x in self.sliding_layers))
        if self.moe is not None and self.moe.first_dense_layers > self.num_hidden_layers:
            raise ConfigError(
                f"moe.first_dense_layers ({self.moe.first_dense_layers}) exceeds "
                f"num_hidden_layers ({self.num_hidden_layers})")

    # ---- derived shapes -------------------------------------------------------------------
    @property
    def head_size(self) -> int:
        """Per-head dimension of q/k/v (explicit head_dim, else hidden/heads)."""
        return self.head_dim if self.head_dim is not None else (
            self.hidden_size // self.num_attention_heads)

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_size

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_size

    @property
    def gqa_group(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    def layer_is_sliding(self, layer: int) -> bool:
        if self.sliding_window is None:
            return False
        if self.sliding_layers is None:
            return True
        return self.sliding_layers[layer]

    def layer_is_moe(self, layer: int) -> bool:
        return self.moe is not None and layer >= self.moe.first_dense_layers

    def layer_groups(self) -> list[tuple[LayerKind, int]]:
        """Distinct layer kinds with how many layers have each, in first-seen order."""
        return list(_layer_groups(self))

    def kv_cache_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer: K and V for every KV head, or MLA's latent."""
        if self.mla is not None:
            return self.mla.cache_elements_per_token
        return 2 * self.kv_dim

    def cached_tokens(self, kind: LayerKind, context_len: int) -> int:
        """Tokens a layer of this kind keeps in its cache at ``context_len`` (window-capped)."""
        if kind.sliding and self.sliding_window is not None:
            return min(context_len, self.sliding_window)
        return context_len

    @property
    def features(self) -> dict[str, bool]:
        """Detected architecture features, for display."""
        return {
            "GQA": self.mla is None and self.num_key_value_heads < self.num_attention_heads,
            "MQA": self.mla is None and self.num_key_value_heads == 1,
            "MoE": self.moe is not None,
            "MLA": self.mla is not None,
            "sliding window": self.sliding_window is not None,
            "tied embeddings": self.tie_word_embeddings,
            "gated FFN": self.ffn_kind is FFNKind.GATED,
            "RoPE": self.position is PositionKind.ROPE,
        }


# Dimensions a user may edit on a preset (the reference tool's architecture fields).
EDITABLE_DIMENSIONS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                       "num_key_value_heads", "intermediate_size", "vocab_size",
                       "num_experts", "experts_per_token", "expert_intermediate_size")


def with_dimensions(model: Model, **changes: int) -> Model:
    """A copy of ``model`` with some of ``EDITABLE_DIMENSIONS`` changed (validated again).

    A per-layer sliding-window pattern is repeated or cut to the new layer count; the MoE
    fields need a MoE model. The name gets an " (edited)" suffix."""
    from dataclasses import replace
    unknown = set(changes) - set(EDITABLE_DIMENSIONS)
    if unknown:
        raise ConfigError(f"cannot edit {', '.join(sorted(unknown))}; editable: "
                          f"{', '.join(EDITABLE_DIMENSIONS)}")
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        return model
    moe_keys = {"num_experts", "experts_per_token", "expert_intermediate_size"}
    moe_changes = {k: changes.pop(k) for k in moe_keys & set(changes)}
    if moe_changes and model.moe is None:
        raise ConfigError(f"{model.name} is not a mixture-of-experts model: "
                          f"{', '.join(sorted(moe_changes))} cannot be set")
    fields: dict = dict(changes)
    if moe_changes:
        fields["moe"] = replace(model.moe, **moe_changes)
    layers = changes.get("num_hidden_layers")
    if layers is not None and model.sliding_layers is not None:
        check_int("num_hidden_layers", layers)
        pattern = model.sliding_layers
        fields["sliding_layers"] = tuple(pattern[i % len(pattern)] for i in range(layers))
    name = model.name if model.name.endswith(" (edited)") else f"{model.name} (edited)"
    return replace(model, name=name, **fields)


# Architecture choices the sidebar's editor may change besides the dimensions above.
EDITABLE_FEATURES = ("shared_intermediate_size", "kv_lora_rank", "q_lora_rank", "rope_theta",
                     "rope_scaling_factor", "ffn_kind", "norm_kind")
_MOE_KEYS = ("num_experts", "experts_per_token", "expert_intermediate_size")


def with_architecture(model: Model, **changes) -> Model:
    """A copy of ``model`` with dimensions (``EDITABLE_DIMENSIONS``, via :func:`with_dimensions`)
    and features (``EDITABLE_FEATURES``) changed, validated again; None values are ignored.

    * MoE fields on a dense model make it a MoE model (top-k defaults to 2, the expert width to
      the dense FFN's); ``shared_intermediate_size`` needs a MoE model.
    * ``kv_lora_rank`` / ``q_lora_rank`` need an MLA model; ``rope_*`` a RoPE model.
    * ``ffn_kind``: "gated" (SwiGLU-style, 3 matrices) or "plain" (2); ``norm_kind``:
      "rmsnorm" or "layernorm"."""
    from dataclasses import replace
    changes = {k: v for k, v in changes.items() if v is not None}
    unknown = set(changes) - set(EDITABLE_DIMENSIONS) - set(EDITABLE_FEATURES)
    if unknown:
        raise ConfigError(f"cannot edit {', '.join(sorted(unknown))}")
    feats = {k: changes.pop(k) for k in EDITABLE_FEATURES if k in changes}
    if not feats and not changes:
        return model
    fields: dict = {}
    moe_new = {k: changes[k] for k in _MOE_KEYS if k in changes}
    if model.moe is None and (moe_new or "shared_intermediate_size" in feats):
        if "shared_intermediate_size" in feats and not moe_new:
            raise ConfigError(f"{model.name} is not a mixture-of-experts model: set the number "
                              "of experts first")
        e = int(moe_new.get("num_experts", 8))
        model = replace(model, moe=MoE(
            num_experts=e, experts_per_token=int(moe_new.get("experts_per_token", min(2, e))),
            expert_intermediate_size=int(moe_new.get("expert_intermediate_size",
                                                     model.intermediate_size))))
    if "shared_intermediate_size" in feats:
        model = replace(model, moe=replace(model.moe, shared_intermediate_size=int(
            feats.pop("shared_intermediate_size"))))
    mla = {k: int(feats.pop(k)) for k in ("kv_lora_rank", "q_lora_rank") if k in feats}
    if mla:
        if model.mla is None:
            raise ConfigError(f"{model.name} has no multi-head latent attention (MLA): "
                              f"{', '.join(sorted(mla))} cannot be set")
        fields["mla"] = replace(model.mla, **mla)
    if ("rope_theta" in feats or "rope_scaling_factor" in feats) and (
            model.position is not PositionKind.ROPE):
        raise ConfigError(f"{model.name} does not use RoPE: its theta/scaling cannot be set")
    for k in ("rope_theta", "rope_scaling_factor"):
        if k in feats:
            fields[k] = float(feats.pop(k))
    if "ffn_kind" in feats:
        fields["ffn_kind"] = _enum(FFNKind, feats.pop("ffn_kind"), "ffn_kind")
    if "norm_kind" in feats:
        fields["norm_kind"] = _enum(NormKind, feats.pop("norm_kind"), "norm_kind")
    edited = with_dimensions(model, **changes) if changes else model
    name = edited.name if edited.name.endswith(" (edited)") else f"{edited.name} (edited)"
    return replace(edited, name=name, **fields)


def _enum(cls, value, what: str):
    try:
        return value if isinstance(value, cls) else cls(str(value).strip().lower())
    except ValueError:
        raise ConfigError(f"{what} must be one of {', '.join(m.value for m in cls)}, got "
                          f"{value!r}") from None


@functools.lru_cache(maxsize=512)
def _layer_groups(model: Model) -> tuple[tuple[LayerKind, int], ...]:
    counts = Counter(LayerKind(model.layer_is_sliding(i), model.layer_is_moe(i))
                     for i in range(model.num_hidden_layers))
    return tuple(counts.items())


# ---- parameter counting ---------------------------------------------------------------------

@dataclass(frozen=True)
class ParamCounts:
    """Exact parameter counts by component (elements, not bytes)."""
    embedding: int        # token table (+ learned position table)
    lm_head: int          # 0 when tied to the embedding
    attention: int        # all layers, incl. biases, MLA projections, sinks, q/k norms
    ffn_dense: int        # dense FFN layers, incl. biases
    moe_router: int
    moe_experts: int      # all routed experts, all layers
    moe_shared: int       # shared experts (+ shared gate)
    norms: int            # layer norms, sub-norms and the final norm
    moe_experts_active: int   # routed experts' parameters used by one token (k of E)

    @property
    def total(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.ffn_dense
                + self.moe_router + self.moe_experts + self.moe_shared + self.norms)

    @property
    def active(self) -> int:
        """Parameters one token uses: total minus the routed experts it does not pick."""
        return self.total - self.moe_experts + self.moe_experts_active


def _norm_params(model: Model, width: int) -> int:
    return width * (2 if model.norm_kind is NormKind.LAYER else 1)


def attention_params_per_layer(model: Model) -> int:
    h, n = model.hidden_size, model.num_attention_heads
    if model.mla is not None:
        m = model.mla
        if m.q_lora_rank is not None:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * n * m.qk_head_dim
        else:
            q = h * n * m.qk_head_dim
        kv = (h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
              + m.kv_lora_rank * n * (m.qk_nope_head_dim + m.v_head_dim))
        return q + kv + n * m.v_head_dim * h
    qd, kvd = model.q_dim, model.kv_dim
    p = h * (qd + 2 * kvd) + qd * h
    if model.attention_bias:
        p += qd + 2 * kvd
    if model.attention_out_bias:
        p += h
    if model.qk_norm:
        p += 2 * model.head_size
    if model.attn_sub_norm:
        p += _norm_params(model, h)
    if model.attention_sinks:
        p += n
    return p


def ffn_params(model: Model, hidden: int, inter: int, bias: bool) -> int:
    """One FFN (dense layer, one expert or the shared expert) of width ``inter``."""
    mats = 3 if model.ffn_kind is FFNKind.GATED else 2
    p = mats * hidden * inter
    if bias:
        p += (2 * inter if model.ffn_kind is FFNKind.GATED else inter) + hidden
    if model.ffn_sub_norm:
        p += _norm_params(model, inter)
    return p


def count_params(model: Model) -> ParamCounts:
    """Exact parameter count of ``model``: the LM head, final norm and biases exactly once,
    tied embeddings once, shared experts and dense-first layers included."""
    h, L = model.hidden_size, model.num_hidden_layers
    embedding = model.vocab_size * h
    if model.position is PositionKind.LEARNED:
        embedding += (model.max_position_embeddings or 0) * h
    lm_head = 0 if model.tie_word_embeddings else model.vocab_size * h
    attention = L * attention_params_per_layer(model)
    norms = L * model.norms_per_layer * _norm_params(model, h)
    if model.final_norm:
        norms += _norm_params(model, h)
    ffn_dense = router = experts = shared = experts_active = 0
    moe = model.moe
    n_moe = 0 if moe is None else L - moe.first_dense_layers
    ffn_dense = (L - n_moe) * ffn_params(model, h, model.intermediate_size, model.mlp_bias)
    if moe is not None:
        router = n_moe * (h * moe.num_experts + (moe.num_experts if moe.router_bias else 0))
        one = ffn_params(model, h, moe.expert_intermediate_size, moe.expert_bias)
        experts = n_moe * moe.num_experts * one
        experts_active = n_moe * moe.experts_per_token * one
        if moe.shared_intermediate_size:
            shared = n_moe * (ffn_params(model, h, moe.shared_intermediate_size, False)
                              + (h if moe.shared_expert_gate else 0))
    return ParamCounts(embedding, lm_head, attention, ffn_dense, router, experts, shared,
                       norms, experts_active)
