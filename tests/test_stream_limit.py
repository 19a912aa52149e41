"""The weight-streaming limit per compute unit (``Efficiency.stream_bytes_per_cu_cycle`` and its
quantised twin, ``roofline.weight_stream_limits``): the preset key ``compute_units``, its
validation, the fitted values and what they do to the estimated time in every engine."""

import dataclasses

import pytest

from helpers import refuses_file_value
from llmpara_core.analysis import analyze
from llmpara_core.calibration.efficiency import default_table
from llmpara_core.hardware import STREAM_FIELDS, Efficiency, HardwareClass
from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
from llmpara_core.precision import precision_preset
from llmpara_core.presets import list_presets, load_hardware, load_model
from llmpara_core.roofline import Rates, effective_memory_bytes, weight_stream_limits
from llmpara_core.workload import Workload

LLAMA8B, WL = load_model("llama-3-8b"), Workload(batch=1, prompt_len=16, gen_len=64)
FP16, Q4 = precision_preset("FP16"), precision_preset("Q4_K_M")


def _eff(hw, framework="llama.cpp"):
    return default_table().efficiency_for(hw, framework)


def test_limit_is_units_times_clock_times_bytes_per_cycle():
    a100 = load_hardware("nvidia-a100-sxm-80gb")
    assert (a100.compute_units, a100.boost_clock_mhz) == (108, 1410)
    eff = Efficiency(stream_bytes_per_cu_cycle=6.0, quant_stream_bytes_per_cu_cycle=8.0)
    lim16, limq = weight_stream_limits(a100, eff)
    assert lim16 == pytest.approx(6.0 * 108 * 1410e6)
    assert limq == pytest.approx(8.0 * 108 * 1410e6)
    # no units or no clock in the file: no limit
    assert weight_stream_limits(dataclasses.replace(a100, compute_units=None), eff) == (0, 0)
    assert weight_stream_limits(dataclasses.replace(a100, boost_clock_mhz=None), eff) == (0, 0)


def test_effective_bytes_count_weights_beyond_the_limit():
    r = Rates(1e12, 2e12, 0.0, None, weight_limit_bytes_per_s=1e12,
              quant_weight_limit_bytes_per_s=4e12)
    assert r.weight_excess() == (pytest.approx(1.0), 0.0)
    # 16-bit weights stream at the 1 TB/s limit: each byte counts twice at 2 TB/s
    assert effective_memory_bytes(10.0, 0.0, r, 0.0, 6.0, False) == pytest.approx(16.0)
    # quantised weights: their limit is above the bandwidth, no extra
    assert effective_memory_bytes(10.0, 0.0, r, 0.0, 6.0, True) == pytest.approx(10.0)
    # a 0..1 share of quantised weights mixes the two
    assert effective_memory_bytes(10.0, 0.0, r, 0.0, 6.0, 0.5) == pytest.approx(13.0)


def test_shipped_bounds_are_llama_cpps_and_bind_on_the_a100_not_on_gddr_cards():
    t = default_table()
    ref = t.profile("llama.cpp").absolute
    assert 1.0 < ref["stream_bytes_per_cu_cycle"] < ref["quant_stream_bytes_per_cu_cycle"] < 64
    # a property of llama.cpp's kernels: not of the classes, not of the generic estimate
    for cls in (HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU):
        assert not any(getattr(t.classes[cls], f) for f in STREAM_FIELDS)
    assert not any(getattr(t.efficiency_for(load_hardware("nvidia-b200")), f)
                   for f in STREAM_FIELDS)
    a100, rtx = load_hardware("nvidia-a100-sxm-80gb"), load_hardware("nvidia-rtx-4090")
    for hw, binds in ((a100, True), (rtx, False)):
        eff = _eff(hw)
        lim16, _ = weight_stream_limits(hw, eff)
        bw = hw.memory_bandwidth_bytes_per_s * eff.memory
        assert (lim16 < bw) is binds, hw.name


def test_limit_slows_llama_cpp_f16_on_the_a100_only():
    a100 = load_hardware("nvidia-a100-sxm-80gb")
    eff = _eff(a100)
    free = dataclasses.replace(eff, **dict.fromkeys(STREAM_FIELDS, 0.0))
    t = analyze(LLAMA8B, a100, FP16, WL, efficiency=eff).estimated.tpot_s
    t_free = analyze(LLAMA8B, a100, FP16, WL, efficiency=free).estimated.tpot_s
    assert t > 1.1 * t_free
    # at the limit: a decode step streams ~16 GB of weights no faster than the limit
    lim16, _ = weight_stream_limits(a100, eff)
    assert t > 15e9 / lim16
    # other stacks run their own kernels: no limit (gpt-fast draws ~1.4 TB/s from an A100)
    assert not any(getattr(_eff(a100, "gpt-fast"), f) for f in STREAM_FIELDS)
    # a GDDR6X card is not slowed
    rtx = load_hardware("nvidia-rtx-4090")
    e = _eff(rtx)
    assert analyze(LLAMA8B, rtx, FP16, WL, efficiency=e).estimated.tpot_s == pytest.approx(
        analyze(LLAMA8B, rtx, FP16, WL, efficiency=dataclasses.replace(
            e, **dict.fromkeys(STREAM_FIELDS, 0.0))).estimated.tpot_s)


def test_engines_agree_with_analysis_under_the_limit():
    """The speculative engine's plain decoding and the serving simulator's iteration time use
    the same limit as the analysis."""
    from llmpara_core.speculative.passes import _pass_time_s
    from llmpara_core.forward import forward_ops
    from llmpara_core.roofline import rates
    a100 = load_hardware("nvidia-a100-sxm-80gb")
    eff = _eff(a100)
    r = rates(a100, FP16.compute_dtype, True, eff, tokens_in_flight=1, batch=1)
    ops = forward_ops(LLAMA8B, FP16, 1, 1, 512, True)
    rep = analyze(LLAMA8B, a100, FP16, Workload(1, 512, 1), efficiency=eff)
    step = _pass_time_s(ops, r, True) + r.pass_overhead_s
    # one decode step at context 512 within 1 % of the analysis's (it integrates 512 -> 513)
    assert step == pytest.approx(rep.estimated.tpot_s, rel=0.01)
    free = dataclasses.replace(eff, **dict.fromkeys(STREAM_FIELDS, 0.0))
    r_free = rates(a100, FP16.compute_dtype, True, free, tokens_in_flight=1, batch=1)
    assert _pass_time_s(ops, r_free, True) < 0.9 * _pass_time_s(ops, r, True)


def test_every_gpu_preset_with_a_clock_cites_its_units():
    n = 0
    for info in list_presets("hardware"):
        hw = load_hardware(info.slug)
        if hw.boost_clock_mhz is not None and info.slug != "nvidia-gb200":
            n += 1
            assert hw.compute_units, info.slug
            if info.slug.startswith("apple-"):     # GPU cores: the variant's name (issue 27)
                assert "compute_units: GPU cores in the variant's name" in hw.source, info.slug
                continue
            assert "compute_units: TechPowerUp GPU Database" in hw.source, info.slug
            assert 4 <= hw.compute_units <= 400, info.slug
    assert n >= 50


@pytest.mark.parametrize("key", STREAM_FIELDS)
@pytest.mark.parametrize("value", [-1.0, 1e6, "wide"])
def test_bad_stream_value_in_a_file_is_refused(key, value):
    refuses_file_value(key, value, key, section="efficiency")


def test_units_and_own_limits_round_trip():
    hw = load_hardware("nvidia-a100-sxm-80gb")
    d = hardware_to_dict(hw)
    assert d["compute_units"] == 108
    assert hardware_from_dict(d, "x.toml").compute_units == 108
    own = dataclasses.replace(hw, efficiency=dataclasses.replace(
        hw.effective_efficiency, stream_bytes_per_cu_cycle=3.5))
    back = hardware_from_dict(hardware_to_dict(own), "x.toml")
    assert back.efficiency.stream_bytes_per_cu_cycle == 3.5
    assert back.efficiency.quant_stream_bytes_per_cu_cycle == \
        hw.effective_efficiency.quant_stream_bytes_per_cu_cycle


def test_missing_units_are_said_in_the_result():
    rtx = load_hardware("nvidia-rtx-4090")
    eff = _eff(rtx)
    assert not any("compute_units" in n
                   for n in analyze(LLAMA8B, rtx, FP16, WL, efficiency=eff).notes)
    bare = dataclasses.replace(rtx, compute_units=None)
    assert any("no compute_units" in n
               for n in analyze(LLAMA8B, bare, FP16, WL, efficiency=eff).notes)
    # a stack without such a bound has nothing to miss
    assert not any("compute_units" in n for n in analyze(
        LLAMA8B, bare, FP16, WL, efficiency=_eff(rtx, "gpt-fast")).notes)


@pytest.mark.parametrize("prec", [FP16, Q4])
def test_one_memory_tier_equals_the_analysis_under_the_bound(prec):
    from llmpara_core.tiers import hetero
    a100 = load_hardware("nvidia-a100-sxm-80gb")
    eff = _eff(a100)
    assert weight_stream_limits(a100, eff)[0] < a100.memory_bandwidth_bytes_per_s * eff.memory
    for wl in (Workload(1, 512, 64), Workload(8, 200, 16)):
        rep = analyze(LLAMA8B, a100, prec, wl, efficiency=eff)
        r = hetero(LLAMA8B, a100, prec, wl, efficiency=eff)
        assert r.estimated.tpot_s == pytest.approx(rep.estimated.tpot_s, rel=1e-9)
        assert r.estimated.ttft_s == pytest.approx(rep.estimated.ttft_s, rel=1e-9)


def test_an_edited_bandwidth_or_peak_drops_the_units():
    from ui.scenario import apply_overrides
    h100 = load_hardware("nvidia-h100-sxm")
    assert apply_overrides(h100, (("tdp", 500.0),)).compute_units == 132   # same chip
    for edit in (("bw", 8000.0), ("peak_fp16", 2000.0)):
        assert apply_overrides(h100, (edit,)).compute_units is None, edit   # a design point
