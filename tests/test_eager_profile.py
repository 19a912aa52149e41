"""HF eager's per-kernel cost, fitted on the measured time per token of its energy rows
(calibration.stack_fit.fit_energy_profiles)."""

import dataclasses
from pathlib import Path

import pytest

from llmpara_core.analysis import analyze
from llmpara_core.calibration.efficiency import default_table
from llmpara_core.calibration.stack_fit import fit_energy_profiles
from llmpara_core.metrics.energy import read_energy_measurements
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.workload import Workload

DATA = Path(__file__).resolve().parents[1] / "presets" / "tables" / "energy_measurements.csv"


def _eager_rows():
    return [m for m in read_energy_measurements(DATA)
            if m.measured_s_per_step and "eager" in m.framework.lower()]


def _step_s(table, m):
    hw = load_hardware(m.hardware_preset)
    r = analyze(load_model(m.model_preset), hw, precision_preset(m.precision_preset),
                Workload(batch=m.batch, prompt_len=m.prompt_len, gen_len=m.gen_len),
                efficiency=table.efficiency_for(hw, "hf-eager"))
    return r.estimated.e2e_latency_s / m.gen_len


def test_shipped_profile_meets_its_rows():
    rows, table = _eager_rows(), default_table()
    assert len(rows) == 2
    prof = table.profile("hf-eager")
    assert prof.rows == 2 and prof.absolute["kernel_overhead_s"] > 10e-6
    for m in rows:
        # one number for two rows (7B and 13B): each within 15 % of its measured time
        assert _step_s(table, m) == pytest.approx(m.measured_s_per_step, rel=0.15)
    # without the profile the device's own (llama.cpp-like) values are too fast (the 7B row
    # by almost 2x)
    base = dataclasses.replace(table, frameworks={
        k: v for k, v in table.frameworks.items() if k != "hf-eager"})
    assert all(_step_s(base, m) < 0.85 * m.measured_s_per_step for m in rows)
    assert min(_step_s(base, m) / m.measured_s_per_step for m in rows) < 0.6


def test_fit_follows_the_measurements():
    rows, table = _eager_rows(), default_table()
    fws = {k: v for k, v in table.frameworks.items() if k != "hf-eager"}
    base = dataclasses.replace(table, frameworks=fws)
    k1 = fit_energy_profiles(base, fws, rows)["hf-eager"].absolute["kernel_overhead_s"]
    slower = [dataclasses.replace(m, measured_s_per_step=1.5 * m.measured_s_per_step)
              for m in rows]
    k2 = fit_energy_profiles(base, fws, slower)["hf-eager"].absolute["kernel_overhead_s"]
    assert k2 > 1.4 * k1
    assert k1 == pytest.approx(table.profile("hf-eager").absolute["kernel_overhead_s"],
                               rel=1e-2)
    # rows the model cannot meet (faster than with no per-kernel cost) are skipped, not fitted
    fast = [dataclasses.replace(m, measured_s_per_step=1e-6) for m in rows]
    assert fit_energy_profiles(base, fws, fast) == {}
    # a stack fitted on other rows keeps its profile
    assert fit_energy_profiles(table, table.frameworks, rows) == {}
