"""What an operator of :func:`forward.forward_ops` is, for the operator table: a short note on
the architecture feature it implements ("GQA 8/32 KV heads", "RoPE theta = 500000") and the
parameters (weight elements) one execution holds. Counts follow :mod:`model` (the per-layer
formulas of ``attention_params_per_layer``/``ffn_params``), so the parameters of all operators
of a pass, times their ``count``, add up to ``count_params(model).total`` (up to attention
sinks, which no operator holds)."""

from __future__ import annotations

from .model import FFNKind, Model, NormKind, PositionKind
from .operators import OpKind


def _norm_width(model: Model, name: str) -> int:
    m = model.mla
    if name == "qk_norm":
        return model.head_size            # q and k: one weight vector each (x2 below)
    if name == "q_a_norm" and m is not None and m.q_lora_rank:
        return m.q_lora_rank
    if name == "kv_a_norm" and m is not None:
        return m.kv_lora_rank
    if name == "attn_sub_norm":
        return model.hidden_size
    if name.endswith("_sub_norm"):        # BitNet's FFN sub-norm: intermediate width
        moe = model.moe
        return moe.expert_intermediate_size if name.startswith("moe") and moe else (
            model.intermediate_size)
    return model.hidden_size


def _ffn_width(model: Model, name: str) -> tuple[int, int, bool]:
    """(intermediate width, matrices held per execution, bias) of an FFN operator."""
    moe = model.moe
    if name.startswith("moe_expert") and moe is not None:
        return moe.expert_intermediate_size, moe.num_experts, moe.expert_bias
    if name.startswith("shared_expert") and moe is not None:
        return moe.shared_intermediate_size, 1, False
    return model.intermediate_size, 1, model.mlp_bias


def _ffn_params(model: Model, name: str) -> int:
    inter, copies, bias = _ffn_width(model, name)
    h = model.hidden_size
    if name.endswith("_gate_up"):
        p = 2 * h * inter + (2 * inter if bias else 0)
    elif name.endswith("_up"):
        p = h * inter + (inter if bias else 0)
    elif name.endswith("_down"):
        p = inter * h + (h if bias else 0)
    elif name.endswith("_sub_norm"):
        p = inter * (2 if model.norm_kind is NormKind.LAYER else 1)
    else:
        return 0
    return p * copies


def _attention_params(model: Model, name: str) -> int:
    h, n, m = model.hidden_size, model.num_attention_heads, model.mla
    if m is not None:
        table = {
            "q_proj": h * n * m.qk_head_dim,
            "q_a_proj": h * (m.q_lora_rank or 0),
            "q_b_proj": (m.q_lora_rank or 0) * n * m.qk_head_dim,
            "kv_a_proj": h * (m.kv_lora_rank + m.qk_rope_head_dim),
            "kv_b_proj": m.kv_lora_rank * n * (m.qk_nope_head_dim + m.v_head_dim),
            "o_proj": n * m.v_head_dim * h,
        }
        return table.get(name, 0)       # the absorbed forms reuse kv_b_proj's weights
    qd, kvd, bias = model.q_dim, model.kv_dim, model.attention_bias
    table = {"q_proj": h * qd + (qd if bias else 0), "k_proj": h * kvd + (kvd if bias else 0),
             "v_proj": h * kvd + (kvd if bias else 0),
             "o_proj": qd * h + (h if model.attention_out_bias else 0)}
    return table.get(name, 0)


def operator_params(model: Model, name: str, kind: OpKind) -> int:
    """Weight elements one execution of operator ``name`` holds (0 for weightless ones)."""
    h, v = model.hidden_size, model.vocab_size
    if kind is OpKind.EMBEDDING:
        return (model.max_position_embeddings or 0) * h if name == "position_embedding" else v * h
    if kind is OpKind.LM_HEAD:
        return 0 if model.tie_word_embeddings else v * h
    if kind is OpKind.NORM:
        width = _norm_width(model, name)
        copies = 2 if name == "qk_norm" else (2 if model.norm_kind is NormKind.LAYER else 1)
        return width * copies
    if kind in (OpKind.QKV, OpKind.OUT_PROJ):
        return _attention_params(model, name)
    if kind is OpKind.MOE_ROUTER and model.moe is not None:
        e = model.moe.num_experts
        return h * e + (e if model.moe.router_bias else 0)
    if kind in (OpKind.FFN, OpKind.MOE_EXPERT, OpKind.SHARED_EXPERT):
        if name == "shared_expert_gate":
            return h
        return _ffn_params(model, name)
    return 0


def _attention_note(model: Model, group: str) -> str:
    n, kv = model.num_attention_heads, model.num_key_value_heads
    if model.mla is not None:
        m = model.mla
        return (f"MLA: latent KV rank {m.kv_lora_rank} + RoPE {m.qk_rope_head_dim}"
                + (f", query rank {m.q_lora_rank}" if m.q_lora_rank else ""))
    kind = "MQA" if kv == 1 else "GQA" if kv < n else "MHA"
    text = f"{kind} {kv}/{n} KV heads, head dim {model.head_size}"
    if group.startswith("local") and model.sliding_window:
        text += f", window {model.sliding_window:,}"
    return text


def operator_note(model: Model, name: str, kind: OpKind, group: str = "",
                  flash_attention: bool = True) -> str:
    """A short note on the feature an operator implements, for the operator table."""
    moe = model.moe
    norm = "LayerNorm" if model.norm_kind is NormKind.LAYER else "RMSNorm"
    gated = model.ffn_kind is FFNKind.GATED
    act = model.hidden_act.value
    if kind is OpKind.QKV or kind is OpKind.ATTENTION:
        base = _attention_note(model, group)
        if kind is OpKind.ATTENTION:
            base = ("FlashAttention (fused), " if flash_attention else
                    "scores written to memory, ") + base
        return base
    if kind is OpKind.OUT_PROJ:
        return f"output projection of {model.num_attention_heads} heads"
    if kind is OpKind.ROPE:
        theta = f"RoPE theta = {model.rope_theta:g}" if model.rope_theta else "RoPE"
        scale = model.rope_scaling_factor
        return theta + (f", scaling x{scale:g}" if scale != 1 else "")
    if kind is OpKind.KV_CACHE:
        return ("MLA latent cache" if model.mla is not None else
                f"K and V of {model.num_key_value_heads} KV heads")
    if kind is OpKind.NORM:
        return f"{norm} ({name.removesuffix('_norm').replace('_', ' ')})"
    if kind is OpKind.FFN:
        return (f"{'gated (' + act + ' x up)' if gated else act + ' MLP'}, "
                f"width {model.intermediate_size:,}")
    if kind is OpKind.MOE_ROUTER and moe is not None:
        return f"top-{moe.experts_per_token} of {moe.num_experts} experts"
    if kind is OpKind.MOE_EXPERT and moe is not None:
        return (f"{moe.experts_per_token} of {moe.num_experts} experts per token, width "
                f"{moe.expert_intermediate_size:,}")
    if kind is OpKind.SHARED_EXPERT and moe is not None:
        return f"shared expert, width {moe.shared_intermediate_size:,}"
    if kind is OpKind.EMBEDDING:
        if name == "position_embedding":
            return "learned positions"
        return f"vocabulary {model.vocab_size:,}" + (", tied" if model.tie_word_embeddings
                                                     else "")
    if kind is OpKind.LM_HEAD:
        return f"vocabulary {model.vocab_size:,}" + (" (tied to the embedding)"
                                                     if model.tie_word_embeddings else "")
    if kind is OpKind.ELEMENTWISE:
        return "residual add" if "residual" in name else name.replace("_", " ")
    if kind is OpKind.COMM:
        return "collective between devices"
    return ""


def position_note(model: Model) -> str:
    """'RoPE theta = 500000', 'learned positions', ... (for summaries)."""
    if model.position is PositionKind.ROPE:
        return operator_note(model, "rope", OpKind.ROPE)
    return model.position.value
