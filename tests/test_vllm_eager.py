"""Issue 27 (vl32): vLLM builds before CUDA graphs decode eagerly (``measurements.eager_decode``,
``Efficiency.eager_launch_s``, ``fitting.fit_eager_launch``), and the A10G's FP16 tensor peak
(a GA102 lower bound) that keeps its batch-1 matrix-vector products memory-bound."""

from dataclasses import replace

import pytest

from llmpara_core import roofline
from llmpara_core.calibration import default_table, fitting
from llmpara_core.calibration import measurements as M
from llmpara_core.hardware import Efficiency
from llmpara_core.errors import ConfigError
from llmpara_core.precision import DType
from llmpara_core.presets import load_hardware

EAGER_IDS = {"D0658", "D0664"}     # vLLM v0.2 (commit acbed3e of 2023-10-06), llm-perf-bench


@pytest.fixture(scope="module")
def rows():
    return M.map_all(*M.read_shipped())[0]


def test_eager_rows_are_the_pre_graph_vllm_decode_rows(rows):
    eager = {r.measurement.row_id for r in rows if M.eager_decode(r)}
    assert eager == EAGER_IDS
    # the ML.ENERGY vLLM v0.4 / v0.5 rows ran releases with CUDA graphs
    later = [r for r in rows if r.framework == "vllm-legacy" and r.measurement.row_id
             not in EAGER_IDS]
    assert later and not any(M.eager_decode(r) for r in later)
    assert all(M.vllm_build_date(r) < M.VLLM_GRAPHS_FROM for r in rows
               if r.measurement.row_id in EAGER_IDS)


def test_rule_off_prices_them_as_a_graph_build(rows, monkeypatch):
    monkeypatch.setattr(M, "EAGER_VLLM_DECODE", False)
    assert not any(M.eager_decode(r) for r in rows)


def test_build_efficiency_adds_the_host_cost_per_launch_only_to_eager_rows(rows):
    eff = Efficiency(compute=0.7, memory=0.9, kernel_overhead_s=4e-6, eager_launch_s=1.5e-5)
    for r in rows:
        out = M.build_efficiency(r, eff)
        if r.measurement.row_id in EAGER_IDS:
            assert out.kernel_overhead_s == pytest.approx(4e-6 + 1.5e-5)
        elif r.framework == "vllm-legacy":
            assert out.kernel_overhead_s == pytest.approx(4e-6)


def test_eager_launch_is_validated():
    with pytest.raises(ConfigError):
        Efficiency(eager_launch_s=-1e-6)


def test_fitted_on_one_device_predicts_the_other(rows):
    """Each eager row predicted from the cost fitted on the other device's row alone: a host
    cost per launch transfers between an A100 (TP4) and an A10G (TP8); without it the A100
    row runs far too fast."""
    table = default_table()
    eager = fitting.eager_rows(rows)
    assert {r.measurement.row_id for r in eager} == EAGER_IDS

    def with_cost(c):
        p = table.profile(fitting.EAGER_STACK)
        p = replace(p, absolute={**p.absolute, "eager_launch_s": c})
        return replace(table, frameworks={**table.frameworks, p.name: p})
    for r in eager:
        other = [x for x in eager if x is not r]
        c = fitting.fit_eager_launch(other, table)
        assert c is not None and 5e-6 < c < 5e-5           # tens of us: a host cost
        held = M.predict(r, with_cost(c))
        assert abs(held.error) < 0.08
        without = M.predict(r, with_cost(0.0))
        assert abs(without.error) > abs(held.error)


def test_a10g_fp16_peak_is_the_ga102_geforce_rate_bound():
    a10g, a10, rtx3090 = (load_hardware(s) for s in ("nvidia-a10g", "nvidia-a10",
                                                      "nvidia-rtx-3090"))
    per_sm_clock = a10g.compute_units * a10g.boost_clock_mhz
    geforce = rtx3090.peak_fp16_flops_per_s / (rtx3090.compute_units * rtx3090.boost_clock_mhz)
    pro = a10.peak_fp16_flops_per_s / (a10.compute_units * a10.boost_clock_mhz)
    assert a10g.peak_fp16_flops_per_s == pytest.approx(geforce * per_sm_clock, rel=2e-3)
    assert a10g.peak_fp16_flops_per_s < pro * per_sm_clock
    assert roofline.rates(a10g, DType.FP16, estimated=False).flops_per_s \
        == pytest.approx(a10g.peak_fp16_flops_per_s)
