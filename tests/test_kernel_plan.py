"""A stack's kernel plan (``Efficiency.kernel_plan``, ``efficiency.KERNEL_PLANS``): the operators
it fuses into a neighbour's kernel or splits in two, counted in every engine's launches."""

import dataclasses

import pytest

from llmpara_core.analysis import analyze
from llmpara_core.calibration.efficiency import KERNEL_PLANS, default_table
from llmpara_core.errors import ConfigError
from llmpara_core.forward import forward_ops
from llmpara_core.hardware import Efficiency, plan_launches
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import launches, rates
from llmpara_core.workload import Workload

A100 = load_hardware("nvidia-a100-sxm-80gb")
LLAMA7B, BF16 = load_model("llama-2-7b"), precision_preset("BF16")
WL = Workload(batch=1, prompt_len=5, gen_len=200)


def _eff(framework):
    return default_table().efficiency_for(A100, framework)


def test_gpt_fast_plan_from_its_source():
    plan = dict(_eff("gpt-fast").kernel_plan)
    assert plan == KERNEL_PLANS["gpt-fast"]
    assert plan["k_proj"] == plan["v_proj"] == 0.0      # one wqkv matmul
    assert plan["ffn_gate_up"] == 2.0                    # w1 and w3
    assert plan["residual_add"] == 0.0                   # folded into the next RMSNorm
    # the reference stack and the serving stacks launch one kernel per operator
    for fw in ("llama.cpp", "tensorrt-llm", "vllm"):
        assert _eff(fw).kernel_plan == ()


def test_launches_follow_the_plan():
    e = Efficiency(act_quant_kernels=1.5, kernel_plan=(("k_proj", 0.0), ("ffn_gate_up", 2.0)))
    assert plan_launches(e.kernel_plan, "q_proj") == 1.0
    assert launches(32, False, e, "k_proj") == 0.0
    assert launches(32, False, e, "ffn_gate_up") == 64.0
    # the activation-quantising kernels follow each launch of a quantised matmul
    assert launches(32, True, e, "ffn_gate_up") == pytest.approx(64 * 2.5)
    assert launches(32, True, e, "q_proj") == pytest.approx(32 * 2.5)


def test_plan_changes_the_estimate_by_its_launches_only():
    eff = _eff("gpt-fast")
    flat = dataclasses.replace(eff, kernel_plan=())
    t = analyze(LLAMA7B, A100, BF16, WL, efficiency=eff).estimated.tpot_s
    t_flat = analyze(LLAMA7B, A100, BF16, WL, efficiency=flat).estimated.tpot_s
    # 14 launches per layer -> 11 (-2 K/V, +1 w3, -2 residual adds): 3 x 32 layers fewer
    assert t_flat - t == pytest.approx(3 * 32 * eff.kernel_overhead_s, rel=1e-6)


def test_fit_fast_path_agrees_with_the_core_under_a_plan():
    from llmpara_core.calibration.fastpath import features
    from llmpara_core.calibration.measurements import map_all, predict, read_shipped
    rows, _ = map_all(*read_shipped())
    row = next(r for r in rows if r.framework == "gpt-fast" and r.devices == 1
               and r.hardware.slug.startswith("nvidia-a100"))
    eff = default_table().efficiency_for(row.hardware, "gpt-fast")
    assert eff.kernel_plan
    assert features(row).predict(eff) == pytest.approx(predict(row).estimated, rel=2e-3)


def test_speculative_pass_counts_the_plan():
    from llmpara_core.speculative.passes import _pass_time_s
    eff = _eff("gpt-fast")
    r = rates(A100, BF16.compute_dtype, True, eff, tokens_in_flight=1, batch=1)
    r_flat = rates(A100, BF16.compute_dtype, True, dataclasses.replace(eff, kernel_plan=()),
                   tokens_in_flight=1, batch=1)
    ops = forward_ops(LLAMA7B, BF16, 1, 1, 100, True)
    assert _pass_time_s(ops, r_flat, True) - _pass_time_s(ops, r, True) == pytest.approx(
        3 * 32 * eff.kernel_overhead_s, rel=1e-6)


@pytest.mark.parametrize("plan", [(("k_proj", -1.0),), (("k_proj", 99.0),), (("k_proj",),),
                                  ((3, 1.0),), [("k_proj", 0.0)]])
def test_bad_plan_is_refused(plan):
    with pytest.raises(ConfigError, match="kernel_plan"):
        Efficiency(kernel_plan=plan)
