"""cost_efficiency(): kWh, TCO per EFLOP and GFLOPS/$ beside $/Mtok, checked against the
definitions recomputed from the report and the TCO result."""

import pytest

from llmpara_core.analysis import analyze
from llmpara_core.metrics.cost import MetricsSettings, cost_efficiency, scenario_metrics
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.workload import Workload


def _scenario(hw="nvidia-h100-sxm", batch=1, pue=1.25):
    report = analyze(load_model("llama-3-8b"), load_hardware(hw), precision_preset("FP16"),
                     Workload(batch=batch, prompt_len=512, gen_len=128))
    m = scenario_metrics(report, MetricsSettings(pue=pue))
    return report, m, cost_efficiency(report, m)


def test_definitions():
    report, m, ce = _scenario()
    e, t = m.energy, m.tco
    flops = sum(o.flops for o in e.prefill) + e.decode_steps * sum(o.flops for o in e.decode)
    assert ce.achieved_flops_per_s == pytest.approx(flops / e.total_time_s)
    assert ce.kwh_per_million_tokens == pytest.approx(e.j_per_output_token * 1.25 * 1e6 / 3.6e6)
    busy_usd_per_s = (t.capex_usd_per_busy_hour + t.electricity_usd_per_busy_hour) / 3600
    assert ce.usd_per_eflop == pytest.approx(busy_usd_per_s / ce.achieved_flops_per_s * 1e18)
    assert ce.gflops_per_usd_peak == pytest.approx(report.peak_flops_per_s / 1e9 / t.price_usd)
    assert ce.gflops_per_usd_achieved < ce.gflops_per_usd_peak


def test_larger_batch_executes_cheaper_flops_and_tokens():
    _, m1, small = _scenario(batch=1)
    _, m2, big = _scenario(batch=32)
    assert big.usd_per_eflop < small.usd_per_eflop
    assert big.kwh_per_million_tokens < small.kwh_per_million_tokens


def test_no_price_gives_none_not_a_number():
    _, m, ce = _scenario(hw="nvidia-h200-sxm")
    if m.tco.price_usd is None:
        assert ce.usd_per_eflop is None and ce.gflops_per_usd_peak is None
    assert ce.kwh_per_million_tokens > 0
