"""Routed-expert GEMMs timed at their own rows per expert (roofline.expert_flops_factor)."""

from dataclasses import replace

import pytest

from helpers import H100, LLAMA3_8B, MIXTRAL
from llmpara_core.analysis import analyze, phase_rates
from llmpara_core.calibration.fastpath import PhaseArrays
from llmpara_core.forward import forward_ops
from llmpara_core.hardware import IDEAL, Efficiency
from llmpara_core.model import MoE
from llmpara_core.precision import Precision
from llmpara_core.roofline import expert_flops_factor, is_expert_gemm, op_time_s, rates
from llmpara_core.workload import Workload

FP16 = Precision()
HALF = 64.0
EFF = Efficiency(compute=0.6, memory=0.7, kernel_overhead_s=0.0, gemm_half_tokens=HALF)
HW = replace(H100, efficiency=EFF)
# gpt-oss-20b-like routing: 32 experts, top-4
MOE32 = replace(MIXTRAL, moe=MoE(num_experts=32, experts_per_token=4,
                                 expert_intermediate_size=2880))


def _expert_rows(rep):
    return [r for r in rep.prefill.rows if is_expert_gemm(r.kind, r.weight_bytes)]


def test_tokens_per_expert():
    moe = MOE32.moe
    assert moe.tokens_per_expert(1) == pytest.approx(1.0)          # one token: one row each
    assert moe.tokens_per_expert(100_000) == pytest.approx(100_000 * 4 / 32, rel=1e-9)
    for t in (2, 16, 64, 512, 4096):                               # between k/E*T and T
        assert 4 * t / 32 <= moe.tokens_per_expert(t) <= t
    every = MoE(num_experts=4, experts_per_token=4, expert_intermediate_size=8)
    assert every.tokens_per_expert(300) == pytest.approx(300)     # all experts see every token


@pytest.mark.parametrize("prompt", [64, 512, 2048])
def test_expert_gemms_at_least_dense_rate(prompt):
    """Each expert GEMM takes at least its FLOPs at the pass's (dense) rate, and exactly its
    FLOPs at the rate of its own rows M = T x k / experts touched."""
    wl = Workload(batch=1, prompt_len=prompt, gen_len=1)
    rep = analyze(MOE32, HW, FP16, wl)
    pre_r, _ = phase_rates(HW, FP16, wl)
    ops = {o.name: o for o in forward_ops(MOE32, FP16, 1, prompt, prompt)}
    m = MOE32.moe.tokens_per_expert(prompt)
    own_rate = HW.peak_fp16_flops_per_s * EFF.compute_at(m)
    rows = _expert_rows(rep)
    assert rows
    for r in rows:
        o = ops[r.name]
        dense = op_time_s(r.flops, r.memory_bytes, o.count, pre_r)
        assert r.estimated_s >= dense
        assert r.estimated_s == pytest.approx(max(r.flops / own_rate,
                                                  r.memory_bytes / pre_r.bytes_per_s), rel=1e-9)


def test_expert_penalty_fades_with_tokens():
    """The slowdown over the dense-equivalent rate falls as the prompt grows and vanishes at
    many tokens per expert."""
    factors = []
    for t in (32, 256, 2048, 16384, 1 << 20):
        r = rates(HW, FP16.compute_dtype, True, tokens_in_flight=t, batch=1)
        factors.append(expert_flops_factor(r, MOE32.moe))
    assert all(f >= 1.0 for f in factors)
    assert factors == sorted(factors, reverse=True) and factors[0] > factors[-1]
    assert factors[0] > 1.5                        # 32 tokens: 4 rows per expert
    assert factors[-1] == pytest.approx(1.0, abs=1e-3)


def test_no_penalty_where_rows_are_the_passs():
    """Factor 1: dense models, one token, ideal rates, no GEMM curve, E = k."""
    r = rates(HW, FP16.compute_dtype, True, tokens_in_flight=512, batch=1)
    assert expert_flops_factor(r, None) == 1.0
    assert expert_flops_factor(rates(HW, FP16.compute_dtype, True, tokens_in_flight=1, batch=1),
                               MOE32.moe) == 1.0
    assert expert_flops_factor(rates(HW, FP16.compute_dtype, False), MOE32.moe) == 1.0
    flat = rates(replace(HW, efficiency=replace(EFF, gemm_half_tokens=0.0)), FP16.compute_dtype,
                 True, tokens_in_flight=512, batch=1)
    assert expert_flops_factor(flat, MOE32.moe) == 1.0
    every = MoE(num_experts=4, experts_per_token=4, expert_intermediate_size=8)
    assert expert_flops_factor(r, every) == pytest.approx(1.0)


def test_dense_model_unchanged_exactly():
    """A dense model's prefill is the plain sum of its operators at the pass's rates."""
    wl = Workload(batch=2, prompt_len=300, gen_len=1)
    rep = analyze(LLAMA3_8B, HW, FP16, wl)
    pre_r, _ = phase_rates(HW, FP16, wl)
    brute = sum(op_time_s(o.flops * o.count, o.memory_bytes * o.count, o.count, pre_r,
                          kv_read_bytes=o.kv_read_bytes * o.count,
                          attention_flops=(o.flops * o.count
                                           if o.kind.name == "ATTENTION" else 0.0),
                          kv_reread_bytes=o.kv_reread_bytes * o.count,
                          weight_bytes=o.weight_bytes * o.count, quantized=o.quantized)
                for o in forward_ops(LLAMA3_8B, FP16, 2, 300, 300))
    assert rep.prefill.estimated_s == brute


def test_batched_decode_experts():
    """Decode: at batch 1 each touched expert's GEMM has the step's one row (no change); at
    batch 16 the 64 routed rows spread over ~28 experts, ~2.3 rows each: slower than 16."""
    for batch in (1, 16):
        wl = Workload(batch=batch, prompt_len=10, gen_len=4)
        _, dec_r = phase_rates(HW, FP16, wl)
        m = MOE32.moe.tokens_per_expert(batch)
        want = (batch / (batch + HALF)) / (m / (m + HALF))
        assert expert_flops_factor(dec_r, MOE32.moe) == pytest.approx(want)
        assert (want > 1.0) == (batch > 1)


def test_fast_path_matches_analysis():
    """The fit's fast path (ideal per-operator rows re-timed) gives the kernel's prefill (at
    4,096 tokens the expert GEMMs are compute-bound: at 512 they read 32 experts' weights)."""
    wl = Workload(batch=1, prompt_len=4096, gen_len=1)
    rep = analyze(MOE32, HW, FP16, wl)
    ideal = analyze(MOE32, replace(HW, efficiency=IDEAL), FP16, wl)
    pre_r, _ = phase_rates(HW, FP16, wl)
    fast = PhaseArrays.of(ideal.prefill).time_s(pre_r, MOE32.moe)
    assert fast == pytest.approx(rep.estimated.ttft_s, rel=1e-9)
    assert fast > PhaseArrays.of(ideal.prefill).time_s(pre_r)    # without the expert rows' M


def test_single_device_plan_matches_analysis():
    """The parallel evaluator at TP1/PP1 times the expert GEMMs as the kernel does."""
    from llmpara_core import parallel as P
    wl = Workload(batch=4, prompt_len=2048, gen_len=8)
    a = analyze(MOE32, HW, FP16, wl)
    r = P.shard_analyze(MOE32, HW, FP16, wl, P.ParallelPlan())
    assert r.estimated.ttft_s == pytest.approx(a.estimated.ttft_s, rel=1e-12)
    assert r.estimated.tpot_s == pytest.approx(a.estimated.tpot_s, rel=1e-12)


def test_expert_only_curve_leaves_dense_gemms_flat():
    """``expert_half_tokens`` (llama.cpp's fitted class value): routed-expert GEMMs on the
    curve, dense GEMMs and batch-1 decode exactly as without it."""
    flat = replace(EFF, gemm_half_tokens=0.0)
    curved = replace(flat, expert_half_tokens=HALF)
    wl = Workload(batch=1, prompt_len=4096, gen_len=4)
    for model in (LLAMA3_8B, MOE32):
        a = analyze(model, replace(HW, efficiency=flat), FP16, wl)
        b = analyze(model, replace(HW, efficiency=curved), FP16, wl)
        assert b.estimated.tpot_s == a.estimated.tpot_s            # batch 1: one row each
        if model.moe is None:
            assert b.estimated.ttft_s == a.estimated.ttft_s
        else:
            assert b.estimated.ttft_s > a.estimated.ttft_s
    ubatch = replace(curved, prompt_ubatch_tokens=512.0)            # micro-batches of 512
    r = rates(replace(HW, efficiency=ubatch), FP16.compute_dtype, True, tokens_in_flight=4096)
    assert r.tokens_in_flight == 512
    assert expert_flops_factor(r, MOE32.moe) > expert_flops_factor(
        rates(replace(HW, efficiency=curved), FP16.compute_dtype, True, tokens_in_flight=4096),
        MOE32.moe)
