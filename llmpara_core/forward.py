"""One builder for the operators of a forward pass over ``new_tokens`` tokens per sequence whose
last token sees ``context_len`` positions: prefill is (prompt, prompt), a decode step at
context c is (1, c), speculative verification of gamma drafts is (gamma + 1, c)."""

from __future__ import annotations

import functools
from dataclasses import replace

from .budget import check_time_budget
from .model import ACTIVATION_FLOPS, FFNKind, LayerKind, Model, NormKind, PositionKind
from .operators import (OpKind, Operator, causal_pairs, elementwise, gather, keys_touched,
                        linear, norm)
from .precision import Precision
from .units import FLOPS_PER_MAC, bits_to_bytes

SOFTMAX_FLOPS_PER_SCORE = 5.0     # max, subtract, exp, sum, divide
ROPE_FLOPS_PER_ELEMENT = 3.0      # a 2x2 rotation per pair: 6 FLOPs per 2 elements


def forward_ops(model: Model, precision: Precision, batch: int, new_tokens: int,
                context_len: int, flash_attention: bool = True,
                logits_tokens: int = 1) -> tuple[Operator, ...]:
    """Operators of one forward pass. ``logits_tokens`` tokens per sequence go through the
    LM head (1 for prefill with last-token logits and for a decode step; gamma + 1 when
    verifying drafts). Empty when there are no new tokens. Cached (``FORWARD_CACHE``): the
    operators depend on these arguments alone and are immutable, and a fit re-times the
    same passes thousands of times with other efficiencies."""
    check_time_budget()         # every analysis builds its passes here: its time budget holds
    return _forward_ops(model, precision, batch, new_tokens, context_len, flash_attention,
                        logits_tokens)


# Passes kept by ``forward_ops`` (a pass is a few dozen immutable operators).
FORWARD_CACHE = 4096


@functools.lru_cache(maxsize=FORWARD_CACHE)
def _forward_ops(model: Model, precision: Precision, batch: int, new_tokens: int,
                 context_len: int, flash_attention: bool,
                 logits_tokens: int) -> tuple[Operator, ...]:
    if new_tokens <= 0:
        return ()
    if context_len < new_tokens:
        raise ValueError("context_len must include the new tokens")
    tokens = batch * new_tokens
    h, a = model.hidden_size, precision.activation_bits
    ops: list[Operator] = [gather("embedding", tokens, h, precision.weight_embed_bits, a)]
    if model.position is PositionKind.LEARNED:
        ops.append(gather("position_embedding", tokens, h, precision.weight_embed_bits, a))
        ops.append(elementwise("embedding_add", OpKind.ELEMENTWISE, tokens * h, 1.0, 2, a))
    ops = [o.regrouped(o.count, "model") for o in ops]
    for kind, n_layers in model.layer_groups():
        label = kind.label
        for op in _layer_ops(model, precision, kind, batch, new_tokens, context_len,
                             flash_attention):
            ops.append(op.regrouped(op.count * n_layers, label))
    tail = []
    if model.final_norm:
        tail.append(norm("final_norm", tokens, h, a, precision.norm_bits,
                         model.norm_kind is NormKind.LAYER))
    tail.append(linear("lm_head", OpKind.LM_HEAD, batch * min(logits_tokens, new_tokens), h,
                       model.vocab_size, precision.weight_embed_bits, a))
    ops.extend(o.regrouped(o.count, "model") for o in tail)
    return tuple(ops)


def _layer_ops(model: Model, p: Precision, kind: LayerKind, b: int, s: int, c: int,
               flash: bool) -> list[Operator]:
    tokens, h, a = b * s, model.hidden_size, p.activation_bits
    layer_norm = model.norm_kind is NormKind.LAYER
    extra_norms = max(0, model.norms_per_layer - 2)
    ops = [norm("attn_norm", tokens, h, a, p.norm_bits, layer_norm)] if model.norms_per_layer else []
    if model.mla is not None:
        ops += _mla_ops(model, p, b, s, c, flash)
    else:
        ops += _attention_ops(model, p, kind, b, s, c, flash)
    if extra_norms >= 1:
        ops.append(norm("post_attn_norm", tokens, h, a, p.norm_bits, layer_norm))
    if model.norms_per_layer >= 2:
        ops.append(norm("ffn_norm", tokens, h, a, p.norm_bits, layer_norm))
    ops += _moe_ops(model, p, tokens) if kind.moe else _ffn_ops(
        model, p, tokens, model.intermediate_size, "ffn", OpKind.FFN, model.mlp_bias)
    if extra_norms >= 2:
        ops.append(norm("post_ffn_norm", tokens, h, a, p.norm_bits, layer_norm))
    ops.append(elementwise("residual_add", OpKind.ELEMENTWISE, tokens * h, 1.0, 2, a)
               .regrouped(2, ""))
    return ops


def _attention_ops(model: Model, p: Precision, kind: LayerKind, b: int, s: int, c: int,
                   flash: bool) -> list[Operator]:
    tokens, h, a, wa = b * s, model.hidden_size, p.activation_bits, p.weight_attn_bits
    n, d, qd, kvd = model.num_attention_heads, model.head_size, model.q_dim, model.kv_dim
    bias = model.attention_bias
    ops = [linear("q_proj", OpKind.QKV, tokens, h, qd, wa, a, bias, gemm_cols=qd),
           linear("k_proj", OpKind.QKV, tokens, h, kvd, wa, a, bias, gemm_cols=kvd),
           linear("v_proj", OpKind.QKV, tokens, h, kvd, wa, a, bias, gemm_cols=kvd)]
    if model.qk_norm:
        elems = tokens * (qd + kvd)
        ops.append(Operator("qk_norm", OpKind.NORM, 4.0 * elems,
                            weight_bytes=bits_to_bytes(2 * d, wa),
                            act_read_bytes=bits_to_bytes(elems, a),
                            act_write_bytes=bits_to_bytes(elems, a)))
    if model.position is PositionKind.ROPE:
        ops.append(elementwise("rope", OpKind.ROPE, tokens * (qd + kvd),
                               ROPE_FLOPS_PER_ELEMENT, 1, a))
    ops.append(_kv_write(tokens, 2 * kvd, p))
    window = model.sliding_window if kind.sliding else None
    pairs = causal_pairs(s, c, window)
    kv_read = bits_to_bytes(b * keys_touched(s, c, window) * kvd, p.kv_bits)   # K or V
    core = _attention_core(b, n, d, d, pairs, tokens * qd, tokens * qd, kv_read, kv_read, 0.0,
                           a, flash)
    ops += [replace(o, kv_group=float(model.gqa_group)) if o.kv_read_bytes else o
            for o in core]                 # K/V shared by gqa_group query heads (1 = MHA)
    if model.attn_sub_norm:
        ops.append(norm("attn_sub_norm", tokens, qd, a, wa, model.norm_kind is NormKind.LAYER))
    ops.append(linear("o_proj", OpKind.OUT_PROJ, tokens, qd, h, wa, a, model.attention_out_bias,
                      gemm_cols=h))
    return ops


def _kv_write(tokens: float, width: int, p: Precision) -> Operator:
    """New tokens' keys and values (or MLA latents) stored into the cache at KV bits."""
    return Operator("kv_cache_write", OpKind.KV_CACHE, 0.0,
                    act_read_bytes=bits_to_bytes(tokens * width, p.activation_bits),
                    kv_write_bytes=bits_to_bytes(tokens * width, p.kv_bits))


def _attention_core(b: int, n: int, d_qk: int, d_v: int, pairs: float, q_elems: float,
                    out_elems: float, k_bytes: float, v_bytes: float, kv_act_bytes: float,
                    a: float, flash: bool) -> list[Operator]:
    """Scores, softmax and weighted sum over ``pairs`` (query, key) pairs per head.

    FlashAttention: one fused op reading Q, K and V and writing O, no score matrix in memory.
    Otherwise three ops that write and re-read the b*n*pairs score matrix.
    ``kv_act_bytes`` is K/V traffic held as activations (MLA prefill's expanded heads)."""
    qk = FLOPS_PER_MAC * b * n * d_qk * pairs
    sm = SOFTMAX_FLOPS_PER_SCORE * b * n * pairs
    av = FLOPS_PER_MAC * b * n * d_v * pairs
    q_bytes, o_bytes = bits_to_bytes(q_elems, a), bits_to_bytes(out_elems, a)
    if flash:
        return [Operator("flash_attention", OpKind.ATTENTION, qk + sm + av,
                         act_read_bytes=q_bytes + kv_act_bytes, act_write_bytes=o_bytes,
                         kv_read_bytes=k_bytes + v_bytes)]
    scores = bits_to_bytes(b * n * pairs, a)
    return [
        Operator("attn_qk", OpKind.ATTENTION, qk, act_read_bytes=q_bytes + kv_act_bytes / 2,
                 act_write_bytes=scores, kv_read_bytes=k_bytes),
        Operator("attn_softmax", OpKind.ATTENTION, sm, act_read_bytes=scores,
                 act_write_bytes=scores),
        Operator("attn_av", OpKind.ATTENTION, av, act_read_bytes=scores + kv_act_bytes / 2,
                 act_write_bytes=o_bytes, kv_read_bytes=v_bytes),
    ]


def _mla_ops(model: Model, p: Precision, b: int, s: int, c: int, flash: bool) -> list[Operator]:
    """Multi-head latent attention. Prefill expands the latent into per-head K/V (kv_b_proj);
    decode and verification use the absorbed form: queries are mapped into the latent space and
    attend to the (kv_lora_rank + rope) cache directly, shared by all heads."""
    m, n = model.mla, model.num_attention_heads
    tokens, h, a, wa = b * s, model.hidden_size, p.activation_bits, p.weight_attn_bits
    r, dr, dn, dv = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    layer_norm = model.norm_kind is NormKind.LAYER
    if m.q_lora_rank is not None:
        ops = [linear("q_a_proj", OpKind.QKV, tokens, h, m.q_lora_rank, wa, a),
               norm("q_a_norm", tokens, m.q_lora_rank, a, wa, layer_norm),
               linear("q_b_proj", OpKind.QKV, tokens, m.q_lora_rank, n * m.qk_head_dim, wa, a)]
    else:
        ops = [linear("q_proj", OpKind.QKV, tokens, h, n * m.qk_head_dim, wa, a)]
    ops += [linear("kv_a_proj", OpKind.QKV, tokens, h, r + dr, wa, a),
            norm("kv_a_norm", tokens, r, a, wa, layer_norm)]
    if dr:
        ops.append(elementwise("rope", OpKind.ROPE, tokens * (n + 1) * dr,
                               ROPE_FLOPS_PER_ELEMENT, 1, a))
    ops.append(_kv_write(tokens, r + dr, p))
    pairs = causal_pairs(s, c, None)
    latent_bytes = bits_to_bytes(b * c * (r + dr), p.kv_bits)
    if s > 1 and c <= s:   # prefill without earlier cache: expanded (non-absorbed) form
        up = linear("kv_b_proj", OpKind.QKV, b * c, r, n * (dn + dv), wa, a)
        ops.append(replace(up, act_read_bytes=0.0,
                           kv_read_bytes=bits_to_bytes(b * c * r, p.kv_bits)))
        kv_act = bits_to_bytes(b * c * n * (dn + dr + dv), a)   # expanded K (+rope) and V
        ops += _attention_core(b, n, m.qk_head_dim, dv, pairs, tokens * n * m.qk_head_dim,
                               tokens * n * dv, 0.0, 0.0, kv_act, a, flash)
    else:        # absorbed: W_UK folded into the query, W_UV applied after attention
        ops.append(linear("mla_q_absorb", OpKind.QKV, tokens * n, dn, r, wa, a, weight_sets=n))
        ops += _attention_core(b, n, r + dr, r, pairs, tokens * n * (r + dr), tokens * n * r,
                               latent_bytes, 0.0, 0.0, a, flash)
        ops.append(linear("mla_v_absorb", OpKind.QKV, tokens * n, r, dv, wa, a, weight_sets=n))
    ops.append(linear("o_proj", OpKind.OUT_PROJ, tokens, n * dv, h, wa, a))
    return ops


def _ffn_ops(model: Model, p: Precision, tokens: float, inter: int, prefix: str, kind: OpKind,
             bias: bool, weight_sets: float = 1.0, token_reads: float = 1.0) -> list[Operator]:
    """Dense FFN (or one expert set): gated up+gate, activation, down; or plain up, act, down."""
    h, a, wf = model.hidden_size, p.activation_bits, p.weight_ffn_bits
    act_flops = ACTIVATION_FLOPS[model.hidden_act]
    # a dense FFN's GEMMs are tiled over the SMs (the gate and up projections as two GEMMs of
    # ``inter`` columns each, as llama.cpp runs them); routed experts' are not timed so
    cols = (lambda n: n) if kind is OpKind.FFN else (lambda n: 0)
    if model.ffn_kind is FFNKind.GATED:
        ops = [linear(f"{prefix}_gate_up", kind, tokens, h, 2 * inter, wf, a, bias, weight_sets,
                      token_reads, gemm_cols=cols(inter)),
               elementwise(f"{prefix}_act", kind, tokens * inter, act_flops + 1.0, 2, a)]
    else:
        ops = [linear(f"{prefix}_up", kind, tokens, h, inter, wf, a, bias, weight_sets,
                      token_reads, gemm_cols=cols(inter)),
               elementwise(f"{prefix}_act", kind, tokens * inter, act_flops, 1, a)]
    if model.ffn_sub_norm:
        ops.append(norm(f"{prefix}_sub_norm", tokens, inter, a, wf,
                        model.norm_kind is NormKind.LAYER))
    ops.append(linear(f"{prefix}_down", kind, tokens, inter, h, wf, a, bias, weight_sets,
                      gemm_cols=cols(h)))
    return ops


def _moe_ops(model: Model, p: Precision, tokens: float) -> list[Operator]:
    """Router, routed experts (weights of the expected distinct experts the batch touches,
    FLOPs for k experts per token), the weighted combine, and shared experts."""
    moe, h, a = model.moe, model.hidden_size, p.activation_bits
    k = moe.experts_per_token
    ops = [linear("moe_router", OpKind.MOE_ROUTER, tokens, h, moe.num_experts,
                  p.weight_ffn_bits, a, moe.router_bias)]
    touched = moe.expected_active_experts(tokens)
    ops += _ffn_ops(model, p, tokens * k, moe.expert_intermediate_size, "moe_expert",
                    OpKind.MOE_EXPERT, moe.expert_bias, weight_sets=touched,
                    token_reads=1.0 / k)
    ops.append(elementwise("moe_combine", OpKind.MOE_EXPERT, tokens * h, 2.0 * k, k, a))
    if moe.shared_intermediate_size:
        ops += _ffn_ops(model, p, tokens, moe.shared_intermediate_size, "shared_expert",
                        OpKind.SHARED_EXPERT, False)
        if moe.shared_expert_gate:
            ops.append(linear("shared_expert_gate", OpKind.SHARED_EXPERT, tokens, h, 1,
                              p.weight_ffn_bits, a))
    return ops
