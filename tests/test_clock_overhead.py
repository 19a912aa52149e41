"""The per-kernel cost at a GPU's boost clock (hardware.clock_overhead_factor): the preset key
``boost_clock_MHz``, its validation, and what it does to the estimated time."""

import dataclasses

import pytest

from helpers import refuses_file_value
from llmpara_core.hardware import (CLOCK_OVERHEAD_EXPONENT, REFERENCE_CLOCK_MHZ,
                                   UNIFIED_CLOCK_OVERHEAD_EXPONENT, UNIFIED_REFERENCE_CLOCK_MHZ,
                                   HardwareClass, clock_overhead_factor)
from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
from llmpara_core.presets import load_hardware, load_model

DC, CONSUMER, SOC = (HardwareClass.DATACENTER_GPU, HardwareClass.CONSUMER_GPU,
                     HardwareClass.UNIFIED_SOC)


def test_factor_follows_the_clock_on_gpus_only():
    assert clock_overhead_factor(DC, REFERENCE_CLOCK_MHZ) == 1.0
    assert clock_overhead_factor(DC, None) == 1.0
    # a GPU at half the reference clock pays 2 ** exponent times the class's cost
    assert clock_overhead_factor(CONSUMER, REFERENCE_CLOCK_MHZ / 2) == pytest.approx(
        2 ** CLOCK_OVERHEAD_EXPONENT)
    assert clock_overhead_factor(DC, 1410) > 1.0 > clock_overhead_factor(CONSUMER, 2520)
    # Apple's Metal GPUs (their own kernel class) scale with their own exponent and reference
    assert clock_overhead_factor(SOC, None) == 1.0
    assert clock_overhead_factor(SOC, UNIFIED_REFERENCE_CLOCK_MHZ) == 1.0
    assert clock_overhead_factor(SOC, UNIFIED_REFERENCE_CLOCK_MHZ / 2) == pytest.approx(
        2 ** UNIFIED_CLOCK_OVERHEAD_EXPONENT)


def test_apple_generations_pay_less_per_kernel_as_their_clock_rises():
    """An M4 Max (1,678 MHz) pays less per kernel than an M2 Max (1,398), an M1 Max (1,270)
    more: the unified class's per-kernel cost at each Apple GPU's clock."""
    cost = {n: load_hardware(n).effective_efficiency.kernel_overhead_s
            for n in ("apple-m1-max", "apple-m2-max", "apple-m4-max-40c")}
    assert cost["apple-m1-max"] > cost["apple-m2-max"] > cost["apple-m4-max-40c"]
    assert cost["apple-m2-max"] / cost["apple-m4-max-40c"] == pytest.approx(
        (1678 / 1398) ** UNIFIED_CLOCK_OVERHEAD_EXPONENT, rel=1e-3)


def test_slower_clock_costs_more_per_kernel():
    a100 = load_hardware("nvidia-a100-sxm-80gb")
    assert a100.boost_clock_mhz == 1410
    slow = a100.effective_efficiency.kernel_overhead_s
    fast = dataclasses.replace(a100, boost_clock_mhz=2820.0).effective_efficiency
    none = dataclasses.replace(a100, boost_clock_mhz=None).effective_efficiency
    assert slow / fast.kernel_overhead_s == pytest.approx(2 ** CLOCK_OVERHEAD_EXPONENT)
    assert none.kernel_overhead_s == pytest.approx(
        slow / clock_overhead_factor(DC, 1410))
    # the rest of the efficiency does not move with the clock
    assert dataclasses.replace(fast, kernel_overhead_s=slow) == a100.effective_efficiency


def test_every_gpu_preset_with_a_clock_cites_it():
    from llmpara_core.presets import list_presets
    n = 0
    for info in list_presets("hardware"):
        hw, slug = load_hardware(info.slug), info.slug
        if hw.boost_clock_mhz is not None:
            n += 1
            assert "boost_clock_MHz" in hw.source, slug
            assert 300 <= hw.boost_clock_mhz <= 4000, slug
    assert n >= 40


@pytest.mark.parametrize("key, value, msg", [
    ("boost_clock_MHz", 0, "boost_clock_mhz"), ("boost_clock_MHz", -5, "boost_clock_MHz"),
    ("boost_clock_MHz", 1e9, "boost_clock_mhz"), ("boost_clock_MHz", "fast", "boost_clock_MHz"),
    ("boost_clock_MHz", float("nan"), "boost_clock"),
    # the compute units that bound a stack's weight streaming (test_stream_limit.py)
    ("compute_units", 0, "compute_units"), ("compute_units", -3, "compute_units"),
    ("compute_units", 1e9, "compute_units"), ("compute_units", "many", "compute_units"),
    ("compute_units", float("nan"), "compute_units")])
def test_bad_clock_or_units_are_refused(key, value, msg):
    refuses_file_value(key, value, msg)


def test_clock_round_trips():
    hw = load_hardware("nvidia-rtx-4090")
    d = hardware_to_dict(hw)
    assert d["boost_clock_MHz"] == 2520
    assert hardware_from_dict(d, "x.toml").boost_clock_mhz == 2520


def test_left_out_keys_are_said_in_the_result():
    from llmpara_core.analysis import analyze
    from llmpara_core.precision import precision_preset
    from llmpara_core.workload import Workload
    model, fp16, wl = load_model("llama-3-8b"), precision_preset("FP16"), Workload(1, 64, 8)
    hw = load_hardware("nvidia-rtx-4090")
    assert not any("boost_clock" in n or "memory_type" in n
                   for n in analyze(model, hw, fp16, wl).notes)
    bare = dataclasses.replace(hw, boost_clock_mhz=None, memory_type=None)
    notes = analyze(model, bare, fp16, wl).notes
    assert any("no boost_clock_MHz" in n and "2,000 MHz" in n for n in notes)
    assert any("no memory_type" in n and "consumer-gpu" in n for n in notes)
    # a file with its own [efficiency] takes nothing from its class: nothing to say
    own = dataclasses.replace(bare, efficiency=hw.effective_efficiency)
    assert not any("boost_clock" in n or "memory_type" in n
                   for n in analyze(model, own, fp16, wl).notes)
    # Apple's GPUs (their own kernel class) are not clock-scaled
    assert not any("boost_clock" in n for n in analyze(
        model, load_hardware("apple-m2-ultra"), fp16, wl).notes)
