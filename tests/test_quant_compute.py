"""The GEMM rate of matmuls with quantised weights (``Efficiency.quant_compute``): what it does to
the estimated time in every engine, which stacks carry it, the hardware-file key, and that the
fitted values explain llama.cpp's prefill rows of one model in 16-bit and quantised weights."""

import dataclasses
import statistics

import numpy as np
import pytest

from helpers import refuses_file_value
from llmpara_core.analysis import analyze
from llmpara_core.calibration.efficiency import default_table
from llmpara_core.calibration.fitting import paired_quant_devices
from llmpara_core.calibration.measurements import Mapped, predict, read_shipped, \
    map_measurement, regime
from llmpara_core.errors import ConfigError
from llmpara_core.forward import forward_ops
from llmpara_core.hardware import Efficiency, HardwareClass
from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import Rates, op_time_s, quant_flops_factor, rates
from llmpara_core.workload import Workload

LLAMA8B = load_model("llama-3-8b")
FP16, Q4 = precision_preset("FP16"), precision_preset("Q4_K_M")
RTX = load_hardware("nvidia-rtx-4090")
PREFILL = Workload(batch=1, prompt_len=2048, gen_len=64)


def _eff(hw, framework="llama.cpp"):
    return default_table().efficiency_for(hw, framework)


def test_quantised_flops_count_one_over_quant_compute_times():
    r = Rates(1e12, 1e12, 0.0, None, quant_compute=0.5)
    assert quant_flops_factor(r, True) == 2.0 and quant_flops_factor(r, False) == 1.0
    # compute-bound: twice the time with quantised weights, same time without
    assert op_time_s(10.0, 1.0, 0, r, quantized=True) == pytest.approx(2 * 10.0 / 1e12)
    assert op_time_s(10.0, 1.0, 0, r, quantized=False) == pytest.approx(10.0 / 1e12)
    # memory-bound (a decode GEMV): unchanged while the FLOPs stay below the bytes' time
    assert op_time_s(1.0, 10.0, 0, r, quantized=True) == pytest.approx(10.0 / 1e12)
    # a 0..1 share of quantised weights mixes the two; attention FLOPs keep their own rate
    assert op_time_s(10.0, 0.0, 0, r, quantized=0.5) == pytest.approx(15.0 / 1e12)
    ra = dataclasses.replace(r, attention_efficiency=0.25)
    assert op_time_s(10.0, 0.0, 0, ra, attention_flops=10.0) == pytest.approx(40.0 / 1e12)
    assert quant_flops_factor(Rates(1e12, 1e12, 0.0, None), True) == 1.0


@pytest.mark.parametrize("value", [0.0, -0.2, 1.5, float("nan"), "slow"])
def test_bad_quant_compute_is_refused(value):
    with pytest.raises(ConfigError, match="quant_compute"):
        Efficiency(quant_compute=value)
    refuses_file_value("quant_compute", value, "quant_compute", section="efficiency")


def test_own_value_round_trips_and_a_missing_key_keeps_the_class():
    own = dataclasses.replace(RTX, efficiency=dataclasses.replace(
        RTX.effective_efficiency, quant_compute=0.6))
    assert hardware_from_dict(hardware_to_dict(own), "x.toml").efficiency.quant_compute == 0.6
    d = hardware_to_dict(RTX)
    d["efficiency"] = {"compute": 0.5, "memory": 0.8}
    assert hardware_from_dict(d, "x.toml").efficiency.quant_compute == \
        RTX.effective_efficiency.quant_compute


def test_shipped_values_per_class_and_which_stacks_carry_them():
    t = default_table()
    gpu = t.classes[HardwareClass.CONSUMER_GPU].quant_compute
    soc = t.classes[HardwareClass.UNIFIED_SOC].quant_compute
    # CUDA: a share of the int8 rate MMQ runs at (issue 27), twice the 16-bit rate on an RTX
    # 4090; relative to the 16-bit GEMMs the quantised path is slower there, as on Metal
    assert RTX.peak_int8_flops_per_s == 2 * RTX.peak_fp16_acc16_flops_per_s
    assert 0.6 < 2 * gpu < 1.0 and 0.6 < soc < 1.0
    r = rates(RTX, Q4.compute_dtype, True, _eff(RTX))
    assert r.quant_compute == pytest.approx(2 * gpu)
    # datacenter GPUs run the consumer GPUs' kernels
    assert t.classes[HardwareClass.DATACENTER_GPU].quant_compute == gpu
    assert _eff(RTX).quant_compute == gpu                 # llama.cpp keeps it
    assert _eff(RTX, None).quant_compute == gpu           # so does the generic estimate
    for stack in ("tensorrt-llm", "vllm", "gpt-fast", "exllamav2", "mlc"):
        assert _eff(RTX, stack).quant_compute == 1.0, stack


def test_prefill_slows_and_batch_1_decode_does_not():
    eff = _eff(RTX)
    one = dataclasses.replace(eff, quant_compute=1.0)
    q, q1 = (analyze(LLAMA8B, RTX, Q4, PREFILL, efficiency=e).estimated for e in (eff, one))
    f, f1 = (analyze(LLAMA8B, RTX, FP16, PREFILL, efficiency=e).estimated for e in (eff, one))
    assert q.ttft_s > q1.ttft_s * (1 + 0.5 * (1 / eff.quant_compute - 1))
    assert f.ttft_s == pytest.approx(f1.ttft_s)           # 16-bit weights: unchanged
    assert q.tpot_s == pytest.approx(q1.tpot_s, rel=1e-3)  # GEMVs are memory-bound


def test_engines_agree_with_analysis():
    """A speculative verification pass, the serving simulator's iteration and a one-tier memory
    hierarchy count the quantised FLOPs as the analysis does."""
    from llmpara_core.speculative.passes import _pass_time_s
    from llmpara_core.tiers import hetero
    eff = dataclasses.replace(_eff(RTX), quant_compute=0.5)
    one = dataclasses.replace(eff, quant_compute=1.0)
    tokens = PREFILL.prompt_len
    ops = forward_ops(LLAMA8B, Q4, 1, tokens, tokens, True)

    def pass_s(e):
        return _pass_time_s(ops, rates(RTX, Q4.compute_dtype, True, e,
                                       tokens_in_flight=tokens, batch=1), True)

    def ttft(e):
        return analyze(LLAMA8B, RTX, Q4, PREFILL, efficiency=e).estimated.ttft_s
    assert pass_s(eff) / pass_s(one) == pytest.approx(ttft(eff) / ttft(one), rel=0.02)
    assert pass_s(eff) / pass_s(one) > 1.5
    for e in (eff, one):
        r = hetero(LLAMA8B, RTX, Q4, PREFILL, efficiency=e)
        assert r.estimated.ttft_s == pytest.approx(ttft(e), rel=1e-9)
    from llmpara_core.parallel import ParallelPlan
    from llmpara_core.serving.cost import IterationCost

    def iteration_s(e):
        c = IterationCost(LLAMA8B, RTX, Q4, ParallelPlan(), efficiency=e)
        return c.time_one_s(np.array(c.feature_row(1, tokens, tokens)), 1)
    assert iteration_s(eff) / iteration_s(one) == pytest.approx(ttft(eff) / ttft(one),
                                                                rel=0.02)


def _paired_prefill_ratios(table):
    """{kernel class: [measured/predicted of the quantised row / of the 16-bit row]} over every
    llama.cpp single-device prefill pair of one model at one prompt length, and the rows."""
    rows = [m for m in (map_measurement(x) for x in read_shipped()[0])
            if isinstance(m, Mapped) and m.framework == "llama.cpp" and m.devices == 1
            and regime(m) == "prefill"]
    pairs = {}
    for m in rows:
        p = predict(m, table)
        key = (m.hardware.hw_class, m.hardware.slug, m.model.name, m.workload.prompt_len)
        quant = min(m.precision.weight_attn_bits, m.precision.weight_ffn_bits) < 16
        pairs.setdefault(key, {}).setdefault(quant, []).append(p.measured / p.estimated)
    out = {}
    for k, v in pairs.items():
        if len(v) == 2:
            out.setdefault(k[0], []).append(statistics.median(v[True])
                                            / statistics.median(v[False]))
    return out, rows


def test_fitted_values_explain_the_paired_prefill_rows():
    t = default_table()
    fitted, rows = _paired_prefill_ratios(t)
    assert len(paired_quant_devices(rows)) >= 15
    one = dataclasses.replace(t, classes={c: dataclasses.replace(e, quant_compute=1.0)
                                          for c, e in t.classes.items()})
    without, _ = _paired_prefill_ratios(one)
    for cls in (HardwareClass.CONSUMER_GPU, HardwareClass.UNIFIED_SOC):
        assert len(fitted[cls]) >= 7, cls
        gap, gap_without = (abs(statistics.median(r[cls]) - 1) for r in (fitted, without))
        # quantised rows ran slower than predicted relative to their 16-bit twins with one
        # compute fraction for both (consumer GPUs 49 %, unified 11 %); with the fitted share
        # the median pair is within 9 % and the gap at least halved. (Within 6 % before the
        # refit with llama.cpp's 512-token prompt micro-batches and MoE expert GEMMs, whose
        # class constants moved: consumer 8.1 %, unified 1.8 % since; the held-out prefill
        # figure of the consumer GPUs improved 16.2 -> 13.5 % with it.)
        assert gap_without > 0.08, cls
        assert gap < 0.09 and gap < 0.5 * gap_without, cls
