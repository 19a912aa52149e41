"""Issue 13: llama.cpp's activation-quantising kernels (``Efficiency.act_quant_kernels``): one
extra launch per matmul with quantised weights on GPUs, none for native weights, none for
stacks that dequantise inside the matmul, and the same count on every timing path."""

import tomllib
from dataclasses import replace

import pytest

from llmpara_core import calibration
from llmpara_core.analysis import analyze
from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.errors import ConfigError
from llmpara_core.forward import forward_ops
from llmpara_core.hardware import Efficiency
from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
from llmpara_core.operators import OpKind
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import rates
from llmpara_core.speculative.passes import _pass_time_s
from llmpara_core.tiers import hetero
from llmpara_core.units import S_PER_US
from llmpara_core.workload import Workload

Q4, FP16 = precision_preset("Q4_0"), precision_preset("FP16")
MATMULS = {OpKind.QKV, OpKind.OUT_PROJ, OpKind.FFN, OpKind.LM_HEAD}


def _eff(aq: float) -> Efficiency:
    return Efficiency(compute=0.5, memory=0.7, kv_read=0.8, kernel_overhead_s=4 * S_PER_US,
                      act_quant_kernels=aq)


def test_bounds():
    assert Efficiency(act_quant_kernels=1).act_quant_kernels == 1
    for bad in (-1, 9, float("nan")):
        with pytest.raises(ConfigError, match="act_quant_kernels"):
            Efficiency(act_quant_kernels=bad)


def test_only_quantised_matmuls_are_flagged():
    model = load_model("llama-3-8b")
    q = forward_ops(model, Q4, 1, 1, 64)
    assert {o.kind for o in q if o.quantized} == MATMULS
    assert not any(o.quantized for o in forward_ops(model, FP16, 1, 1, 64))


def test_decode_step_pays_one_launch_per_quantised_matmul():
    """TPOT grows by (quantised matmuls per step) x kernel overhead: q, k, v, o, gate-up and
    down per layer (6 x 32) and the LM head for Llama-3-8B; native FP16 weights pay nothing."""
    model, hw, wl = load_model("llama-3-8b"), load_hardware("nvidia-rtx-4090"), Workload(1, 16, 32)

    def tpot(prec, aq):
        return analyze(model, replace(hw, efficiency=_eff(aq)), prec, wl).estimated.tpot_s
    n = 6 * model.num_hidden_layers + 1
    assert tpot(Q4, 1.0) - tpot(Q4, 0.0) == pytest.approx(n * 4 * S_PER_US, rel=1e-6)
    assert tpot(FP16, 1.0) == pytest.approx(tpot(FP16, 0.0), rel=1e-12)


def test_same_launches_on_the_other_timing_paths():
    """The speculative pass timer and the memory-tier engine count the same extra launches."""
    model, wl = load_model("llama-3-8b"), Workload(1, 16, 32)
    hw = load_hardware("nvidia-rtx-4090")
    ops = forward_ops(model, Q4, 1, 1, 64)
    r0 = rates(replace(hw, efficiency=_eff(0.0)), Q4.compute_dtype, True)
    r1 = rates(replace(hw, efficiency=_eff(1.0)), Q4.compute_dtype, True)
    n = sum(o.count for o in ops if o.quantized)
    assert n == 6 * model.num_hidden_layers + 1
    assert _pass_time_s(ops, r1, True) - _pass_time_s(ops, r0, True) == pytest.approx(
        n * 4 * S_PER_US, rel=1e-6)
    t = [hetero(model, hw, Q4, wl, efficiency=_eff(aq)).estimated.tpot_s for aq in (0.0, 1.0)]
    assert t[1] - t[0] == pytest.approx(n * 4 * S_PER_US, rel=1e-6)


def test_stacks_that_pay_it():
    """llama.cpp keeps its class's value (1 on GPUs, 0 on Apple SoCs); stacks with fused
    weight-only kernels pay none unless their rows fitted a value (gpt-fast: rows with native
    and quantised weights)."""
    gpu, soc = load_hardware("nvidia-rtx-4090"), load_hardware("apple-m2-ultra")
    assert efficiency_for(gpu, "llama.cpp").act_quant_kernels == 1
    assert efficiency_for(gpu).act_quant_kernels == 1          # generic = the reference stack
    assert efficiency_for(soc, "llama.cpp").act_quant_kernels == 0
    for fw in ("exllamav2", "vllm", "sglang", "tensorrt-llm"):
        assert efficiency_for(gpu, fw).act_quant_kernels == 0, fw
    assert 0 < efficiency_for(gpu, "gpt-fast").act_quant_kernels <= 8


def test_shipped_table_states_it_per_class():
    t = tomllib.loads(calibration.efficiency.table_to_toml(calibration.default_table()))
    assert t["class"]["consumer-gpu"]["act_quant_kernels"] == 1
    assert t["class"]["datacenter-gpu"]["act_quant_kernels"] == 1
    assert t["class"]["unified-soc"]["act_quant_kernels"] == 0
    assert t["framework"]["llama.cpp"]["act_quant"] is True
    assert "act_quant" not in t["framework"]["tensorrt-llm"]


HW_TOML = """
name = "Test GPU"
source = "test"
class = "consumer-gpu"
memory_bandwidth_GBps = 1000
memory_capacity_GB = 24
[peak_TFLOPS]
fp16 = 100
[efficiency]
memory = 0.8
{extra}
"""


def _hw(extra: str):
    return hardware_from_dict(tomllib.loads(HW_TOML.format(extra=extra)), "t.toml")


def test_hardware_file_key_round_trips_and_is_validated():
    hw = _hw("act_quant_kernels = 0")
    assert hw.efficiency.act_quant_kernels == 0
    assert hardware_to_dict(hw)["efficiency"]["act_quant_kernels"] == 0
    again = _hw("")
    assert again.efficiency.act_quant_kernels == 1          # the class's value
    assert "act_quant_kernels" not in hardware_to_dict(again)["efficiency"]
    for bad, msg in (("-1", ">= 0"), ("100", "act_quant_kernels"), ('"one"', "number")):
        with pytest.raises(ConfigError, match=msg):
            _hw(f"act_quant_kernels = {bad}")


def test_design_space_profile_counts_them():
    """The design-space profile's kernel counts include the extra launches (its times use them
    with the efficiency's kernel overhead)."""
    from llmpara_core.dse.profile import profile
    model, wl = load_model("llama-3-8b"), Workload(2, 16, 8)
    p0, p1 = (profile(model, Q4, wl, efficiency=_eff(aq)) for aq in (0.0, 1.0))
    n = sum(o.count for o in forward_ops(model, Q4, 2, 1, 64) if o.quantized)
    assert p1.dec_kernels - p0.dec_kernels == pytest.approx(n * p0.steps, rel=1e-9)
    assert p1.pre_kernels - p0.pre_kernels == pytest.approx(n, rel=1e-9)


def test_a_stack_with_quantised_and_native_rows_fits_its_own_value():
    """gpt-fast's single-device rows (BF16, int8 and int4 weight-only) remade by the core with a
    known per-quantised-matmul cost are fitted back; the shipped table carries gpt-fast's own
    fitted value."""
    from llmpara_core.calibration import measurements as validation
    from llmpara_core.calibration.efficiency import FrameworkProfile
    from llmpara_core.calibration.fastpath import features
    from llmpara_core.calibration.stack_fit import fit_framework
    rows, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(rows, skipped)
    gf = [r for r in mapped if r.framework == "gpt-fast" and r.devices == 1
          and validation.regime(r) == "batch-1"]
    assert any(r.precision.weight_ffn_bits < 16 for r in gf)
    assert any(r.precision.weight_ffn_bits >= 16 for r in gf)
    table = calibration.default_table()
    truth = FrameworkProfile("gpt-fast", "gpt-fast", memory_scale=1.3, kv_per_query_head=True,
                             absolute={"act_quant_kernels": 2.0})
    t = replace(table, frameworks={**table.frameworks, "gpt-fast": truth})
    made = [replace(r, measurement=replace(r.measurement, value=features(r).predict(
        t.efficiency_for(r.hardware, "gpt-fast")))) for r in gf]
    got = fit_framework("gpt-fast", made, table)
    # the per-kernel scale and the launches per quantised matmul trade against each other a
    # little on eight rows; their product (the cost per quantised matmul) is what is pinned
    assert got.absolute["act_quant_kernels"] * got.overhead_scale == pytest.approx(2.0, rel=0.1)
    assert got.memory_scale == pytest.approx(1.3, rel=0.02)
    t2 = replace(table, frameworks={**table.frameworks, "gpt-fast": got})
    for r in made:
        assert features(r).predict(t2.efficiency_for(r.hardware, "gpt-fast")) == pytest.approx(
            r.measurement.value, rel=0.01)
    shipped = calibration.default_table().profile("gpt-fast").absolute
    assert 0 < shipped["act_quant_kernels"] <= 8
    assert "act_quant_kernels" not in calibration.default_table().profile("llama.cpp").absolute
