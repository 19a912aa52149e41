"""Issue 27: a stack's quantised weights streamed at a share of its 16-bit streaming rate
(``Efficiency.quant_memory``), the what-if form of a stack's quantised-matmul cost
(``stack_fit.QUANT_FORMS``; the fit's default stays the fixed cost per matmul in launches, for
every stack: ``QUANT_FORM_BY_STACK``, the per-stack what-if, is empty when shipped)."""

from dataclasses import replace

import pytest

from llmpara_core import calibration
from llmpara_core.analysis import analyze
from llmpara_core.calibration import measurements as validation
from llmpara_core.calibration import stack_fit
from llmpara_core.calibration.efficiency import FrameworkProfile, table_from_dict
from llmpara_core.calibration.fastpath import features
from llmpara_core.errors import ConfigError
from llmpara_core.forward import forward_ops
from llmpara_core.hardware import Efficiency
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import rates, weight_stream_limits
from llmpara_core.workload import Workload

Q4, FP16 = precision_preset("Q4_0"), precision_preset("FP16")


def _eff(**kw) -> Efficiency:
    return Efficiency(compute=0.5, memory=0.8, kv_read=0.9, **kw)


def test_bounds():
    assert Efficiency(quant_memory=0.5).quant_memory == 0.5
    assert Efficiency().quant_memory == 1.0
    for bad in (0, -0.1, 1.5, float("nan")):
        with pytest.raises(ConfigError, match="quant_memory"):
            Efficiency(quant_memory=bad)


def test_limit_is_the_share_of_the_streaming_rate_and_the_lower_of_two():
    hw = load_hardware("nvidia-a100-sxm-80gb")
    stream = hw.memory_bandwidth_bytes_per_s * 0.8
    assert weight_stream_limits(hw, _eff()) == (0.0, 0.0)
    assert weight_stream_limits(hw, _eff(quant_memory=0.5)) == (0.0, pytest.approx(0.5 * stream))
    per_cu = hw.compute_units * hw.boost_clock_mhz * 1e6 * 2.0        # 2 B per unit-cycle
    both = weight_stream_limits(hw, _eff(quant_memory=0.9, quant_stream_bytes_per_cu_cycle=2.0))
    assert both[1] == pytest.approx(min(per_cu, 0.9 * stream))
    # no compute units in the file: the share still applies
    bare = replace(hw, compute_units=None)
    assert weight_stream_limits(bare, _eff(quant_memory=0.5))[1] == pytest.approx(0.5 * stream)


def test_decode_streams_quantised_weights_slower_and_native_ones_not():
    """A memory-bound batch-1 step: the quantised matmuls' weight bytes take 1 / share times as
    long; a 16-bit model is unchanged."""
    model, hw, wl = load_model("llama-3-8b"), load_hardware("nvidia-rtx-4090"), Workload(1, 16, 32)

    def tpot(prec, q):
        return analyze(model, replace(hw, efficiency=_eff(quant_memory=q)), prec,
                       wl).estimated.tpot_s
    qbytes = sum(o.weight_bytes * o.count for o in forward_ops(model, Q4, 1, 1, 32)
                 if o.quantized)
    bw = rates(hw, Q4.compute_dtype, estimated=True,
               efficiency=_eff()).bytes_per_s
    assert tpot(Q4, 0.5) - tpot(Q4, 1.0) == pytest.approx(qbytes / bw, rel=0.02)
    assert tpot(FP16, 0.5) == pytest.approx(tpot(FP16, 1.0), rel=1e-12)


def test_design_space_profile_counts_the_extra_bytes():
    from llmpara_core.dse.profile import profile
    model, wl = load_model("llama-3-8b"), Workload(1, 16, 8)
    p1, p2 = (profile(model, Q4, wl, efficiency=_eff(quant_memory=q)) for q in (1.0, 0.5))
    qbytes = sum(o.weight_bytes * o.count for o in forward_ops(model, Q4, 1, 16, 16)
                 if o.quantized)
    # prefill: the pass's quantised weights once more at share 0.5
    assert float(p2.pre_m_below[-1] - p1.pre_m_below[-1]) == pytest.approx(qbytes, rel=1e-6)


def test_profile_key_round_trips():
    t = calibration.default_table()
    prof = FrameworkProfile("gpt-fast", "gpt-fast", absolute={"quant_memory": 0.75})
    t2 = replace(t, frameworks={**t.frameworks, "gpt-fast": prof})
    text = calibration.efficiency.table_to_toml(t2)
    assert "quant_memory = 0.75" in text
    import tomllib
    back = table_from_dict(tomllib.loads(text))
    assert back.profile("gpt-fast").absolute["quant_memory"] == 0.75
    hw = load_hardware("nvidia-a100-sxm-80gb")
    assert back.efficiency_for(hw, "gpt-fast").quant_memory == 0.75
    assert back.efficiency_for(hw, "llama.cpp").quant_memory == 1.0
    bad = tomllib.loads(text.replace("quant_memory = 0.75", "quant_memory = 2"))
    with pytest.raises(ConfigError, match="quant_memory"):
        table_from_dict(bad)


@pytest.fixture(scope="module")
def gpt_fast_rows():
    rows, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(rows, skipped)
    return [r for r in mapped if r.framework == "gpt-fast" and r.devices == 1
            and validation.regime(r) == "batch-1"]


def test_share_form_fits_a_known_share_back(gpt_fast_rows):
    """gpt-fast's single-device rows remade by the core with a known share are fitted back
    under the "share" form; the default form stays the launches per quantised matmul."""
    assert stack_fit.QUANT_FORM == "launch"
    assert stack_fit.QUANT_FORM_BY_STACK == {}
    table = calibration.default_table()
    truth = FrameworkProfile("gpt-fast", "gpt-fast", memory_scale=1.3, kv_per_query_head=True,
                             absolute={"quant_memory": 0.7})
    t = replace(table, frameworks={**table.frameworks, "gpt-fast": truth})
    made = [replace(r, measurement=replace(r.measurement, value=features(r).predict(
        t.efficiency_for(r.hardware, "gpt-fast")))) for r in gpt_fast_rows]
    got = stack_fit.fit_framework("gpt-fast", made, table, quant_form="share")
    assert got.absolute["quant_memory"] == pytest.approx(0.7, rel=0.03)
    assert "act_quant_kernels" not in got.absolute
    assert got.memory_scale == pytest.approx(1.3, rel=0.02)
    default = stack_fit.fit_framework("gpt-fast", made, table)
    assert "quant_memory" not in default.absolute and "act_quant_kernels" in default.absolute
    with pytest.raises(ConfigError, match="quant_form"):
        stack_fit.fit_framework("gpt-fast", made, table, quant_form="per-byte")


def test_the_per_stack_form_what_if(gpt_fast_rows, monkeypatch):
    """QUANT_FORM_BY_STACK (the what-if; empty when shipped) gives the stacks it names their
    form by default; a stack it does not name (here MLC, fitted on gpt-fast's rows) keeps the
    launches per quantised matmul."""
    table = calibration.default_table()
    monkeypatch.setattr(stack_fit, "QUANT_FORM_BY_STACK", {"gpt-fast": "share"})
    got = stack_fit.fit_framework("gpt-fast", gpt_fast_rows, table)
    assert "quant_memory" in got.absolute and "act_quant_kernels" not in got.absolute
    got = stack_fit.fit_framework("mlc", gpt_fast_rows, table)
    assert "act_quant_kernels" in got.absolute and "quant_memory" not in got.absolute


def test_share_with_launch_what_if(gpt_fast_rows, monkeypatch):
    """The what-if SHARE_LAUNCH_QUANT_ROWS (off when shipped) fits a cost per quantised matmul
    beside the share only where the stack has that many quantised batch-1 rows."""
    assert stack_fit.SHARE_LAUNCH_QUANT_ROWS == 0
    table = calibration.default_table()
    quant = sum(r.precision.weight_ffn_bits < 16 for r in gpt_fast_rows)
    monkeypatch.setattr(stack_fit, "SHARE_LAUNCH_QUANT_ROWS", quant)
    got = stack_fit.fit_framework("gpt-fast", gpt_fast_rows, table, quant_form="share")
    assert {"quant_memory", "act_quant_kernels"} <= set(got.absolute)
    monkeypatch.setattr(stack_fit, "SHARE_LAUNCH_QUANT_ROWS", quant + 1)
    got = stack_fit.fit_framework("gpt-fast", gpt_fast_rows, table, quant_form="share")
    assert "quant_memory" in got.absolute and "act_quant_kernels" not in got.absolute
