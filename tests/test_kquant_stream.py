"""The Metal k-quant streaming bound (``Efficiency.kquant_stream_bytes_per_cu_cycle``,
``roofline.weight_stream_limits`` with ``kquant``; issue 27): which formats are k-quants, that
the bound applies to k-quant weights only and only where the class carries it, that the GPU
kernels' per-SM bounds stay off Apple GPU cores, and that the fit finds a bound on rows made
to need one."""

import dataclasses

import pytest

from llmpara_core.analysis import analyze
from llmpara_core.calibration import fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.calibration.efficiency import default_table
from llmpara_core.hardware import Efficiency, HardwareClass
from llmpara_core.precision import Precision, is_kquant, precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import weight_stream_limits
from llmpara_core.workload import Workload


def _named(name: str, bits: float = 4.85) -> Precision:
    return Precision(bits, bits, bits, 16.0, 16.0, "fp16", name=name)


@pytest.mark.parametrize("name,expected", [
    ("Q4_K_M", True), ("Q4_K_M (GGUF 4.58 GiB)", True), ("q5_k_s", True), ("Q6_K", True),
    ("Q4_0", False), ("Q8_0", False), ("MXFP4 (MoE experts) GGUF", False), ("Q4_KM", False),
    ("FP16", False), ("W4A16", False)])
def test_kquant_formats_by_name(name, expected):
    assert is_kquant(_named(name)) is expected


def test_sixteen_bit_weights_are_never_kquant():
    assert not is_kquant(_named("Q4_K_M", bits=16.0))


def test_apple_presets_carry_cores_and_the_clock_of_their_fp32_peak():
    m1max = load_hardware("apple-m1-max")
    assert m1max.compute_units == 32
    # 10.4 TFLOPS FP32 / (32 cores x 128 ALUs x 2 FLOPs) = 1270 MHz
    assert m1max.boost_clock_mhz == pytest.approx(10.4e12 / (32 * 256) / 1e6, abs=1)


def test_bound_is_cores_times_clock_for_kquant_weights_only():
    hw = load_hardware("apple-m1-max")
    eff = Efficiency(kquant_stream_bytes_per_cu_cycle=5.0)
    cycles = hw.compute_units * hw.boost_clock_mhz * 1e6
    assert weight_stream_limits(hw, eff, kquant=True) == (0.0, pytest.approx(5.0 * cycles))
    assert weight_stream_limits(hw, eff, kquant=False) == (0.0, 0.0)
    assert weight_stream_limits(dataclasses.replace(hw, compute_units=None), eff, True) == (0, 0)


def test_gpu_per_sm_bounds_stay_off_apple_cores():
    """llama.cpp's per-SM bounds are fitted on GPU kernel-class devices: an Apple preset with
    GPU cores does not take them (its 16-bit weights would otherwise stream at ~240 GB/s)."""
    hw = load_hardware("apple-m1-max")
    eff = Efficiency(stream_bytes_per_cu_cycle=6.0, quant_stream_bytes_per_cu_cycle=8.0)
    assert weight_stream_limits(hw, eff) == (0.0, 0.0)
    a100 = load_hardware("nvidia-a100-sxm-80gb")
    assert weight_stream_limits(a100, eff)[0] > 0


def test_bound_slows_kquant_decode_on_a_wide_memory_few_cores_device():
    hw, model = load_hardware("apple-m1-max"), load_model("llama-3-8b")
    wl = Workload(batch=1, prompt_len=16, gen_len=64)
    base = default_table().efficiency_for(hw, "llama.cpp")
    off = dataclasses.replace(base, kquant_stream_bytes_per_cu_cycle=0.0)
    on = dataclasses.replace(base, kquant_stream_bytes_per_cu_cycle=4.0)   # ~160 GB/s
    q4k, q40 = precision_preset("Q4_K_M"), precision_preset("Q4_0")
    t_off = analyze(model, hw, q4k, wl, off).estimated.tpot_s
    t_on = analyze(model, hw, q4k, wl, on).estimated.tpot_s
    assert t_on > 1.5 * t_off
    # Q4_0 is not a k-quant: unchanged
    assert analyze(model, hw, q40, wl, on).estimated.tpot_s == \
        pytest.approx(analyze(model, hw, q40, wl, off).estimated.tpot_s)


def test_fit_finds_the_bound_the_kquant_rows_need():
    """Rows whose measured speed is the model's own at a 4 B/core-cycle bound: the fit lands
    near 4 (and a switch-off fits nothing)."""
    rows = [r for r in validation.map_all(*validation.read_shipped())[0]
            if r.measurement.row_id in {"D0329", "D0330", "D0335", "D0336", "D0345", "D0351",
                                        "D0363", "D0375", "D0387"}]
    table = default_table()
    made = []
    for r in rows:
        eff = dataclasses.replace(table.efficiency_for(r.hardware),
                                  kquant_stream_bytes_per_cu_cycle=4.0)
        t = validation.timings(r, eff)[1]
        m = dataclasses.replace(r.measurement, value=t.decode_tokens_per_s)
        made.append(dataclasses.replace(r, measurement=m))
    fitted = fitting.fit_kquant_limits(made, table)
    assert fitted[HardwareClass.UNIFIED_SOC] == pytest.approx(4.0, rel=0.03)
    saved, fitting.KQUANT_STREAM = fitting.KQUANT_STREAM, False
    try:
        assert fitting.fit_kquant_limits(made, table) == {}
    finally:
        fitting.KQUANT_STREAM = saved
