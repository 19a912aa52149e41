"""Roofline, time and the exact decode integration; properties of the analysis."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import DEEPSEEK_V3, GEMMA2_9B, H100, LLAMA3_8B, MIXTRAL, TINY
from llmpara_core.analysis import _sum_max_affine, analyze
from llmpara_core.errors import ConfigError
from llmpara_core.forward import forward_ops
from llmpara_core.hardware import Efficiency, Hardware, HardwareClass
from llmpara_core.precision import DType, Precision
from llmpara_core.roofline import op_time_s, rates
from llmpara_core.workload import Workload

FP16 = Precision()


def brute_decode_time(model, hw, prec, wl, estimated):
    """Sum per-step times by building every decode step (the slow obvious way)."""
    r = rates(hw, prec.compute_dtype, estimated)
    first, last = wl.decode_contexts
    total = 0.0
    for c in range(first, last + 1):
        for o in forward_ops(model, prec, wl.batch, 1, c, wl.flash_attention):
            total += op_time_s(o.flops * o.count, o.memory_bytes * o.count,
                               o.count if estimated else 0, r)
    return total


@pytest.mark.parametrize("model,batch,prompt,gen", [
    (LLAMA3_8B, 1, 100, 40),
    (LLAMA3_8B, 64, 300, 30),          # compute/memory crossover inside the range
    (GEMMA2_9B, 2, 4080, 40),          # crosses the 4096 sliding window
    (MIXTRAL, 8, 10, 25),
    (DEEPSEEK_V3, 1, 0, 12),           # empty prompt: llama-bench tg convention
])
def test_decode_integration_is_exact(model, batch, prompt, gen):
    wl = Workload(batch, prompt, gen)
    rep = analyze(model, H100, FP16, wl)
    assert rep.decode_ideal_total_s == pytest.approx(brute_decode_time(model, H100, FP16, wl, False), rel=1e-9)
    assert rep.decode_estimated_total_s == pytest.approx(brute_decode_time(model, H100, FP16, wl, True), rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(u0=st.floats(0, 10), u1=st.floats(0, 10), v0=st.floats(0, 10), v1=st.floats(0, 10),
       n=st.integers(1, 60))
def test_sum_max_affine_matches_brute_force(u0, u1, v0, v1, n):
    def at(a, b, k):
        return a if n == 1 else a + (b - a) * k / (n - 1)
    brute = sum(max(at(u0, u1, k), at(v0, v1, k)) for k in range(n))
    assert _sum_max_affine(u0, u1, v0, v1, n) == pytest.approx(brute, rel=1e-9, abs=1e-12)


def test_timing_definitions():
    wl = Workload(4, 1000, 101)
    rep = analyze(LLAMA3_8B, H100, FP16, wl)
    for t, total in ((rep.estimated, rep.decode_estimated_total_s), (rep.ideal, rep.decode_ideal_total_s)):
        assert t.tpot_s == pytest.approx(total / 100)          # gen - 1 decode steps
        assert t.e2e_latency_s == pytest.approx(t.ttft_s + 100 * t.tpot_s)
        assert t.decode_tokens_per_s == pytest.approx(1 / t.tpot_s)
        assert t.throughput_tokens_per_s == pytest.approx(4 / t.tpot_s)
        assert t.prefill_tokens_per_s == pytest.approx(4000 / t.ttft_s)
    assert rep.estimated.tpot_s > rep.ideal.tpot_s
    assert rep.estimated.ttft_s > rep.ideal.ttft_s


def test_llama3_8b_h100_ideal_decode_is_weight_streaming():
    # 16.06 GB of weights less the 1.05 GB embedding table (only one row is gathered), plus
    # the KV cache at context 2049: 2049 * 131,072 B = 0.27 GB -> 15.28 GB per step.
    rep = analyze(LLAMA3_8B, H100, FP16, Workload(1, 2048, 2))
    step_bytes = rep.decode.memory_bytes
    assert step_bytes == pytest.approx(16_060_522_496 - 2 * 128256 * 4096 + 2049 * 131072, rel=0.001)
    assert rep.ideal.tpot_s == pytest.approx(step_bytes / 3.35e12, rel=0.01)


def test_peak_follows_compute_dtype():
    fp16 = rates(H100, DType.FP16, False)
    assert fp16.flops_per_s == 989.4e12                     # never the fp32 peak
    assert fp16.ridge_flops_per_byte == pytest.approx(989.4e12 / 3.35e12)
    assert rates(H100, DType.FP8, False).flops_per_s == 1978.9e12
    # int4 falls back to the next data type the device has (int8), never a faster one
    r = rates(H100, DType.INT4, False)
    assert (r.flops_per_s, r.dtype_used) == (1978.9e12, DType.INT8)
    npu = Hardware("npu", HardwareClass.MOBILE_NPU, 77e9, 16e9, peak_int8_flops_per_s=45e12)
    assert rates(npu, DType.FP16, False).dtype_used is DType.INT8
    note = analyze(TINY, npu, FP16, Workload(1, 8, 4)).notes
    assert any("no fp16 peak" in n for n in note)


def test_estimated_uses_efficiency():
    r = rates(H100, DType.FP16, True)
    assert r.flops_per_s == pytest.approx(989.4e12 * 0.7)
    assert r.bytes_per_s == pytest.approx(3.35e12 * 0.6)
    assert op_time_s(0, 0, 10, r) == pytest.approx(40e-6)


# ---- properties --------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 64), prompt=st.integers(1, 3000))
def test_prefill_flops_linear_in_batch(batch, prompt):
    one = analyze(LLAMA3_8B, H100, FP16, Workload(1, prompt, 2))
    many = analyze(LLAMA3_8B, H100, FP16, Workload(batch, prompt, 2))
    assert many.prefill.flops == pytest.approx(batch * one.prefill.flops, rel=1e-9)
    assert many.decode.flops == pytest.approx(batch * one.decode.flops, rel=1e-9)
    assert many.memory.kv_cache_bytes == pytest.approx(batch * one.memory.kv_cache_bytes)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 256), prompt=st.integers(1, 5000), gen=st.integers(1, 300),
       flash=st.booleans(), moe=st.booleans())
def test_time_at_least_roofline_bound(batch, prompt, gen, flash, moe):
    model = MIXTRAL if moe else LLAMA3_8B
    rep = analyze(model, H100, FP16, Workload(batch, prompt, gen, flash))
    for phase in (rep.prefill, rep.decode):
        for row in phase.rows:
            bound = max(row.flops / 989.4e12, row.memory_bytes / 3.35e12)
            assert row.ideal_s >= bound * (1 - 1e-12)
            assert row.estimated_s >= row.ideal_s
        assert phase.ideal_s >= max(phase.flops / 989.4e12, phase.memory_bytes / 3.35e12) * (1 - 1e-12)


def test_causal_prefill_attention_about_half_of_full():
    s = 8192
    rep = analyze(LLAMA3_8B, H100, FP16, Workload(1, s, 1))
    attn = next(r for r in rep.prefill.rows if r.name == "flash_attention")
    full = 32 * (2 * 2 * 32 * 128 + 5 * 32) * s * s     # all s x s pairs, 32 layers
    assert attn.flops / full == pytest.approx(0.5, abs=0.001)


def test_decode_slower_with_longer_context():
    short = analyze(LLAMA3_8B, H100, FP16, Workload(1, 128, 128))
    long = analyze(LLAMA3_8B, H100, FP16, Workload(1, 32000, 128))
    assert long.estimated.tpot_s > short.estimated.tpot_s


def test_memory_fit_and_limits():
    rep = analyze(LLAMA3_8B, H100, FP16, Workload(1, 2048, 256))
    assert rep.memory.fits and rep.max_batch > 100
    over = analyze(LLAMA3_8B, H100, FP16, Workload(rep.max_batch + 5, 2048, 256))
    assert not over.memory.fits
    small = replace(H100, memory_capacity_bytes=10e9)
    tiny_rep = analyze(LLAMA3_8B, small, FP16, Workload(1, 2048, 256))
    assert not tiny_rep.memory.fits and tiny_rep.max_batch == 0 and tiny_rep.max_context == 0


def test_override_efficiency():
    eff = Efficiency(1.0, 1.0, 0.0)
    rep = analyze(LLAMA3_8B, H100, FP16, Workload(1, 512, 64), efficiency=eff)
    assert rep.estimated.tpot_s == pytest.approx(rep.ideal.tpot_s)


@pytest.mark.parametrize("kwargs", [
    dict(batch=0), dict(batch=-7), dict(batch=1.5), dict(prompt_len=-1), dict(gen_len=10**10),
    dict(batch=True), dict(prompt_len=0, gen_len=0), dict(flash_attention="yes"),
])
def test_workload_validation(kwargs):
    with pytest.raises(ConfigError):
        Workload(**kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(weight_attn_bits=0), dict(kv_bits=65), dict(activation_bits=float("nan")),
    dict(weight_ffn_bits="4"), dict(compute_dtype="fp12"),
])
def test_precision_validation(kwargs):
    with pytest.raises(ConfigError):
        Precision(**kwargs)


def test_model_validation_names_field():
    with pytest.raises(ConfigError, match="num_key_value_heads"):
        replace(LLAMA3_8B, num_key_value_heads=5)
    with pytest.raises(ConfigError, match="hidden_size"):
        replace(LLAMA3_8B, hidden_size=0)
    with pytest.raises(ConfigError, match="experts_per_token"):
        replace(MIXTRAL.moe, experts_per_token=9)
    with pytest.raises(ConfigError, match="vocab_size"):
        replace(LLAMA3_8B, vocab_size=10**12)
