"""The per-core bound of llama.cpp's Metal decode attention (``Efficiency.
kv_stream_bytes_per_cu_cycle``, ``roofline.kv_stream_limit``; issue 27): the bound is cores x
clock x the value, it counts every query head's pass over its group's K/V (reads and re-reads)
and binds only where it is slower than the DRAM stream, it slows decode more the longer the
context, nothing changes where the class carries no value or the file no cores, and the fit
finds a bound on rows made to need one."""

import dataclasses

import pytest

from llmpara_core.analysis import analyze
from llmpara_core.calibration import fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.calibration.efficiency import default_table
from llmpara_core.hardware import Efficiency, HardwareClass
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import Rates, effective_memory_bytes, kv_stream_limit
from llmpara_core.workload import Workload


def test_limit_is_cores_times_clock():
    hw = load_hardware("apple-m2-ultra")
    eff = Efficiency(kv_stream_bytes_per_cu_cycle=3.0)
    assert kv_stream_limit(hw, eff) == pytest.approx(3.0 * 76 * hw.boost_clock_mhz * 1e6)
    assert kv_stream_limit(hw, Efficiency()) == 0.0
    assert kv_stream_limit(dataclasses.replace(hw, compute_units=None), eff) == 0.0


def test_bytes_are_the_slower_of_dram_and_every_query_heads_pass():
    """KV reads of 100 B and re-reads of 300 B (a 4-head group): DRAM counts (100 + 0.3 x 300)
    / 0.5 = 380 B; the per-core bound at half the memory rate counts 2 x 400 = 800 B."""
    base = dict(flops_per_s=1.0, bytes_per_s=100.0, kernel_overhead_s=0.0, dtype_used=None,
                kv_read_efficiency=0.5, kv_reread=0.3)
    off = Rates(**base)
    slow = Rates(**base, kv_limit_bytes_per_s=50.0)
    fast = Rates(**base, kv_limit_bytes_per_s=1000.0)
    assert effective_memory_bytes(1000.0, 100.0, off, 300.0) == pytest.approx(900 + 380)
    assert effective_memory_bytes(1000.0, 100.0, slow, 300.0) == pytest.approx(900 + 800)
    assert effective_memory_bytes(1000.0, 100.0, fast, 300.0) == pytest.approx(900 + 380)


def test_bound_slows_long_contexts_more():
    hw, model = load_hardware("apple-m1-max"), load_model("llama-3-8b")
    base = default_table().efficiency_for(hw, "llama.cpp")
    off = dataclasses.replace(base, kv_stream_bytes_per_cu_cycle=0.0)
    on = dataclasses.replace(base, kv_stream_bytes_per_cu_cycle=2.0)
    f16 = precision_preset("FP16")

    def slowdown(gen):
        wl = Workload(batch=1, prompt_len=0, gen_len=gen)
        return (analyze(model, hw, f16, wl, on).estimated.tpot_s
                / analyze(model, hw, f16, wl, off).estimated.tpot_s)
    assert slowdown(128) < slowdown(1024) < slowdown(8192)
    assert slowdown(8192) > 1.05


def test_fit_finds_the_bound_the_rows_need():
    """Rows whose measured speed is the model's own at a 3 B/core-cycle bound: the fit lands
    near 3 (and a switch-off fits nothing)."""
    ids = {"D0329", "D0330", "D0339", "D0340", "D0341", "D0342", "D0351", "D0354", "D0357",
           "D0360", "D0363", "D0366", "D0375", "D0378", "D0381", "D0384"}
    rows = [r for r in validation.map_all(*validation.read_shipped())[0]
            if r.measurement.row_id in ids]
    table = default_table()
    made = []
    for r in rows:
        eff = dataclasses.replace(table.efficiency_for(r.hardware),
                                  kv_stream_bytes_per_cu_cycle=3.0)
        t = validation.timings(r, eff)[1]
        m = dataclasses.replace(r.measurement, value=t.decode_tokens_per_s)
        made.append(dataclasses.replace(r, measurement=m))
    fitted = fitting.fit_kv_limits(made, table)
    assert fitted[HardwareClass.UNIFIED_SOC] == pytest.approx(3.0, rel=0.03)
    saved, fitting.KV_STREAM = fitting.KV_STREAM, False
    try:
        assert fitting.fit_kv_limits(made, table) == {}
    finally:
        fitting.KV_STREAM = saved
