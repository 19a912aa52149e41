"""Operator and forward-pass formulas against hand-derived numbers."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import DEEPSEEK_V3, GEMMA2_9B, GPT2, LLAMA3_8B, MIXTRAL
from llmpara_core.forward import forward_ops
from llmpara_core.memory import kv_cache_bytes, kv_cache_bytes_per_token, weight_bytes
from llmpara_core.model import count_params
from llmpara_core.operators import OpKind, causal_pairs, gather, keys_touched, linear, norm
from llmpara_core.precision import Precision

FP16 = Precision()


def by_name(ops):
    return {o.name: o for o in ops}


# ---- builders -------------------------------------------------------------------------------

def test_linear_flops_and_bytes():
    # 10 tokens x (512 -> 256), 4-bit weights, 16-bit activations, with bias:
    # FLOPs = 2*10*512*256 + 10*256 = 2,624,000; weights (512*256+256)*4/8 = 65,664 B;
    # input 10*512*2 = 10,240 B; output 10*256*2 = 5,120 B.
    op = linear("x", OpKind.FFN, 10, 512, 256, 4, 16, bias=True)
    assert op.flops == 2_624_000
    assert op.weight_bytes == 65_664
    assert op.act_read_bytes == 10_240
    assert op.act_write_bytes == 5_120
    assert op.arithmetic_intensity == pytest.approx(2_624_000 / (65_664 + 15_360))


def test_fractional_bits_do_not_round_to_zero():
    # Q4_0 = 4.5 bits: 32 weights -> 18 bytes (llm-analysis rounded INT4 to zero bytes).
    assert linear("x", OpKind.FFN, 1, 32, 1, 4.5, 16).weight_bytes == 18.0
    assert linear("x", OpKind.FFN, 1, 8, 1, 1.58, 16).weight_bytes == pytest.approx(1.58)


def test_norm_and_gather():
    n = norm("n", 3, 100, 16, 16)                      # RMSNorm: 4 FLOPs per element
    assert (n.flops, n.weight_bytes, n.act_read_bytes) == (1200, 200, 600)
    ln = norm("n", 3, 100, 16, 16, layer_norm=True)    # LayerNorm: weight and bias
    assert ln.weight_bytes == 400 and ln.flops == 2100
    g = gather("e", 7, 4096, 16, 16)                   # reads 7 rows, not the table
    assert g.flops == 0 and g.weight_bytes == 7 * 4096 * 2 and g.arithmetic_intensity == 0


def brute_pairs(s, c, w):
    p = c - s
    return sum(min(p + i + 1, w) if w else p + i + 1 for i in range(s))


@settings(max_examples=200, deadline=None)
@given(s=st.integers(1, 300), extra=st.integers(0, 300), w=st.one_of(st.none(), st.integers(1, 400)))
def test_causal_pairs_closed_form_matches_brute_force(s, extra, w):
    c = s + extra
    assert causal_pairs(s, c, w) == brute_pairs(s, c, w)


def test_causal_prefill_is_about_half_of_full():
    s = 4096
    assert causal_pairs(s, s, None) == s * (s + 1) / 2
    assert causal_pairs(s, s, None) / s**2 == pytest.approx(0.5, abs=1e-3)
    assert keys_touched(1, 5000, 4096) == 4096 and keys_touched(1, 100, 4096) == 100


# ---- Llama-3-8B decode step, hand-derived -------------------------------------------------

def test_llama3_decode_step_hand_numbers():
    ctx = 2048
    ops = by_name(forward_ops(LLAMA3_8B, FP16, 1, 1, ctx))
    h, kvd = 4096, 8 * 128
    assert ops["q_proj"].flops == 2 * h * h and ops["q_proj"].count == 32
    assert ops["k_proj"].weight_bytes == h * kvd * 2
    fa = ops["flash_attention"]
    # Q.K^T and A.V: 2 * 2 * heads(32) * head_dim(128) * ctx; softmax 5 * 32 * ctx
    assert fa.flops == 2 * 2 * 32 * 128 * ctx + 5 * 32 * ctx
    # FlashAttention reads K and V of the 8 KV heads (GQA), once each: 2 * 8*128 * ctx * 2 B
    assert fa.kv_read_bytes == 2 * kvd * ctx * 2
    assert fa.act_read_bytes == 32 * 128 * 2                      # Q of one token
    assert ops["ffn_gate_up"].weight_bytes == h * 2 * 14336 * 2
    assert ops["lm_head"].flops == 2 * h * 128256 and ops["lm_head"].count == 1
    assert ops["embedding"].weight_bytes == h * 2                 # one gathered row
    assert ops["kv_cache_write"].kv_write_bytes == 2 * kvd * 2


def test_decode_weight_bytes_equal_parameter_count():
    """A batch-1 decode step reads every weight once, except the embedding table, of which it
    gathers one row (dense model, 16-bit)."""
    for model in (LLAMA3_8B, GPT2, GEMMA2_9B):
        ops = forward_ops(model, FP16, 1, 1, 100)
        read = sum(o.weight_bytes * o.count for o in ops)
        pc = count_params(model)
        lm_table = model.vocab_size * model.hidden_size   # LM head matrix, tied or not
        pos_rows = model.hidden_size if model.max_position_embeddings and model.position.value == "learned" else 0
        expected = (pc.total - pc.embedding - pc.lm_head + lm_table + model.hidden_size + pos_rows) * 2
        assert read == pytest.approx(expected, rel=1e-12), model.name


def test_kv_cache_per_token_exact():
    assert kv_cache_bytes_per_token(LLAMA3_8B, FP16) == 131_072          # 32 * 2 * 8 * 128 * 2
    assert kv_cache_bytes_per_token(DEEPSEEK_V3, FP16) == 61 * 576 * 2    # MLA latent + rope
    assert kv_cache_bytes_per_token(LLAMA3_8B, replace(FP16, kv_bits=8)) == 65_536


def test_sliding_window_caps_cache():
    # Gemma-2: 21 local layers keep at most 4096 tokens, 21 global keep all.
    per_layer = 2 * 8 * 256 * 2
    assert kv_cache_bytes(GEMMA2_9B, FP16, 1, 8192) == (21 * 4096 + 21 * 8192) * per_layer
    assert kv_cache_bytes(GEMMA2_9B, FP16, 2, 100) == 2 * 42 * 100 * per_layer


def test_weight_bytes_mixed_precision():
    p = Precision(weight_attn_bits=16, weight_ffn_bits=4, weight_embed_bits=16)
    pc = count_params(LLAMA3_8B)
    expected = (pc.attention * 2 + pc.ffn_dense * 0.5 + (pc.embedding + pc.lm_head) * 2
                + pc.norms * 2)
    assert weight_bytes(LLAMA3_8B, p) == expected


# ---- MoE, MLA, FlashAttention -----------------------------------------------------------

def test_moe_expected_distinct_experts():
    moe = MIXTRAL.moe
    assert moe.expected_active_experts(1) == pytest.approx(2.0)
    # 4 tokens, top-2 of 8: 8 * (1 - (6/8)^4) = 5.46875
    assert moe.expected_active_experts(4) == pytest.approx(5.46875)
    assert moe.expected_active_experts(10_000) == pytest.approx(8.0)
    one_expert = 3 * 4096 * 14336 * 2
    for b, experts in ((1, 2.0), (4, 5.46875)):
        ops = by_name(forward_ops(MIXTRAL, FP16, b, 1, 512))
        w = ops["moe_expert_gate_up"].weight_bytes + ops["moe_expert_down"].weight_bytes
        assert w == pytest.approx(experts * one_expert)
        # FLOPs are for k experts per token regardless of how many distinct experts load
        assert ops["moe_expert_down"].flops == pytest.approx(2 * b * 2 * 14336 * 4096)


def test_deepseek_shared_experts_and_dense_first_layers():
    ops = forward_ops(DEEPSEEK_V3, FP16, 1, 1, 4096)
    groups = {(o.name, o.group): o for o in ops}
    assert groups[("ffn_gate_up", "global/dense")].count == 3
    assert groups[("moe_expert_gate_up", "global/moe")].count == 58
    assert groups[("shared_expert_down", "global/moe")].weight_bytes == 2048 * 7168 * 2


def test_mla_absorbed_decode_reads_latent_cache_once():
    ctx = 4096
    ops = {(o.name, o.group): o for o in forward_ops(DEEPSEEK_V3, FP16, 1, 1, ctx)}
    fa = ops[("flash_attention", "global/moe")]
    assert fa.kv_read_bytes == ctx * 576 * 2          # (512 + 64) per token, not per head
    # absorbed scores: 2 * heads * (r + rope) * ctx; output 2 * heads * r * ctx
    assert fa.flops == 2 * 128 * 576 * ctx + 5 * 128 * ctx + 2 * 128 * 512 * ctx
    assert ("kv_b_proj", "global/moe") not in ops      # no per-head K/V expansion in decode
    pre = {o.name for o in forward_ops(DEEPSEEK_V3, FP16, 1, 16, 16)}
    assert "kv_b_proj" in pre and "mla_q_absorb" not in pre


def test_flash_attention_vs_materialised_scores():
    fa = by_name(forward_ops(LLAMA3_8B, FP16, 1, 512, 512, flash_attention=True))
    nf = by_name(forward_ops(LLAMA3_8B, FP16, 1, 512, 512, flash_attention=False))
    pairs = 512 * 513 / 2
    assert nf["attn_qk"].act_write_bytes == 32 * pairs * 2     # causal score matrix written
    assert "attn_softmax" in nf and "flash_attention" not in nf
    total_nf = sum(nf[k].flops for k in ("attn_qk", "attn_softmax", "attn_av"))
    assert fa["flash_attention"].flops == total_nf
    assert fa["flash_attention"].kv_read_bytes == nf["attn_qk"].kv_read_bytes * 2
    assert fa["flash_attention"].act_write_bytes < nf["attn_qk"].act_write_bytes


def test_gpt2_learned_positions_and_biases():
    ops = by_name(forward_ops(GPT2, FP16, 1, 10, 10))
    assert "position_embedding" in ops and "rope" not in ops
    assert ops["q_proj"].flops == 2 * 10 * 768 * 768 + 10 * 768     # bias adds
    assert count_params(GPT2).total == 124_439_808


def test_lm_head_logits_tokens():
    last = by_name(forward_ops(LLAMA3_8B, FP16, 2, 100, 100))["lm_head"]
    allt = by_name(forward_ops(LLAMA3_8B, FP16, 2, 100, 100, logits_tokens=100))["lm_head"]
    assert last.flops == 2 * 2 * 4096 * 128256
    assert allt.flops == 100 * last.flops
    verify = by_name(forward_ops(LLAMA3_8B, FP16, 1, 5, 505, logits_tokens=5))["lm_head"]
    assert verify.flops == 5 * 2 * 4096 * 128256


def test_empty_pass():
    assert forward_ops(LLAMA3_8B, FP16, 1, 0, 0) == ()
    with pytest.raises(ValueError):
        forward_ops(LLAMA3_8B, FP16, 1, 10, 5)
    assert not math.isnan(causal_pairs(1, 1, 1))


def test_forward_ops_cache_returns_what_a_fresh_build_gives():
    """``forward_ops`` keeps its passes (``_forward_ops``' cache): a cached answer equals a
    build from scratch, keyword and positional calls share it, and the time budget is still
    checked on a cached call."""
    import time
    from llmpara_core import forward
    from llmpara_core.budget import TimeBudgetExceeded, time_budget
    first = forward_ops(LLAMA3_8B, FP16, 2, 1, 700)
    assert forward_ops(LLAMA3_8B, FP16, batch=2, new_tokens=1, context_len=700) is first
    assert forward._forward_ops.__wrapped__(LLAMA3_8B, FP16, 2, 1, 700, True, 1) == first
    with pytest.raises(TimeBudgetExceeded):
        with time_budget(None, wall_s=0.001):
            time.sleep(0.01)
            forward_ops(LLAMA3_8B, FP16, 2, 1, 700)
