"""Energy per output token under load (issue 27, item 3): the power model of
``metrics.energy_validation`` against hand-derived numbers and physical limits, its fit and the
leave-one-device-out figure on the ML.ENERGY rows (computed here, not read from a table), and
``llmpara validate --regime energy``."""

import json
from collections import defaultdict
from dataclasses import replace

import pytest

from llmpara_core.cli import main
from llmpara_core.metrics.energy import EnergyMeasurement
from llmpara_core.metrics.energy_fit import fit_energy
from llmpara_core.metrics.energy_validation import (ENERGY_TOLERANCE_MEDIAN, PowerConstants,
                                                    RowWork, busy_power_w, device_energy_j,
                                                    device_power_w, energy_rows, group_of,
                                                    j_per_token, power_constants, predict_rows,
                                                    recorded_fit, run_time_s)

M = EnergyMeasurement("X1", "llama-3.1-8b", "nvidia-h100-sxm", "BF16", 10, 100, 50, 1.0, None,
                      False, devices=2)


def _work(**kw) -> RowWork:
    base = dict(measurement=M, devices=2, stack="vllm", time_s=10.0, flops=2e15,
                memory_bytes=4e12, peak_flops_per_s=1e15, bandwidth_bytes_per_s=1e12,
                idle_w=100.0, tdp_w=700.0, host_s=4.0)
    base.update(kw)
    return RowWork(**base)


@pytest.fixture(scope="module")
def fit():
    return fit_energy()


# ---- the formula ----------------------------------------------------------------------------

def test_power_model_hand_derived():
    # per device: 1e15 FLOPs at 1e15 FLOP/s = 1 s, 2e12 B at 1e12 B/s = 2 s; busy 6 s, host 4 s
    # u_c = 1/6, u_m = 2/6; R = 600 W
    w, c = _work(), PowerConstants(active=0.2, compute=0.6, memory=0.3, host=0.05)
    assert (w.compute_s, w.memory_s, w.busy_s) == pytest.approx((1.0, 2.0, 6.0))
    assert w.compute_utilisation == pytest.approx(1 / 6)
    p_b = 100 + 600 * (0.2 + 0.6 / 6 + 0.3 * 2 / 6)          # 340 W
    assert busy_power_w(w, c) == pytest.approx(340.0) == pytest.approx(p_b)
    e = 340 * 6 + (100 + 600 * 0.05) * 4                      # 2040 + 520 J per device
    assert device_energy_j(w, c) == pytest.approx(2560.0) == pytest.approx(e)
    assert j_per_token(w, c) == pytest.approx(2 * 2560 / 500)   # 2 devices, 10 x 50 tokens
    assert run_time_s(w, c) == pytest.approx(10.0)               # below the cap: no stretch
    assert device_power_w(w, c) == pytest.approx(256.0)


def test_the_power_cap_stretches_the_busy_time_not_the_energy():
    w = _work()
    hot = PowerConstants(active=1.0, compute=3.0, memory=1.0)
    # P_b = 100 + 600 x (1 + 3 / 6 + 2 / 6) = 1200 W > 700 W
    assert busy_power_w(w, hot) == pytest.approx(1200.0)
    assert run_time_s(w, hot) == pytest.approx(4.0 + 6.0 * 1200 / 700)
    assert device_power_w(w, hot) <= w.tdp_w + 1e-9
    # the same energy as drawn uncapped: the work at a lower clock over a longer time
    assert device_energy_j(w, hot) == pytest.approx(1200 * 6 + 100 * 4)


def test_host_time_beyond_the_run_is_not_busy():
    w = _work(host_s=10.0)
    assert w.busy_s == 0 and w.compute_utilisation == 0 and w.memory_utilisation == 0
    with pytest.raises(Exception):
        PowerConstants(active=-0.1, compute=0, memory=0)


# ---- physics on every published row ----------------------------------------------------------

def test_rows_cover_the_shared_ml_energy_file():
    rows = energy_rows()
    by_group = defaultdict(list)
    for w in rows:
        by_group[group_of(w)].append(w)
        assert w.measurement.source.startswith("ML.ENERGY")
    assert {g: len(v) for g, v in by_group.items()} == {
        "batched, 1 GPU": 32, "batched, tensor parallel": 22, "batch 1": 6}
    assert {w.devices for w in by_group["batched, tensor parallel"]} == {2, 4, 8}
    assert {w.stack for w in rows} == {"vllm-legacy", "hf-eager"}


def test_power_never_exceeds_tdp_and_never_falls_below_idle():
    c = power_constants()
    for w in energy_rows():
        p = device_power_w(w, c)
        assert w.idle_w <= p <= w.tdp_w + 1e-9, w.measurement.row_id


def test_energy_per_token_falls_with_batch():
    """Every published batch sweep (one model on one device set) falls with the batch cap in
    the data, and the prediction falls with it (within 2 % between neighbours)."""
    series = defaultdict(list)
    for p in predict_rows():
        m = p.work.measurement
        if p.work.batched:
            series[(m.model_preset, m.hardware_preset, p.work.devices)].append(p)
    assert len(series) == 8
    for key, ps in series.items():
        ps.sort(key=lambda p: p.work.measurement.batch)
        pred = [p.predicted_j_per_token for p in ps]
        assert all(b <= a * 1.02 for a, b in zip(pred, pred[1:])), key
        assert pred[-1] < 0.8 * pred[0], key
        assert ps[-1].measured_j_per_token < ps[0].measured_j_per_token


def test_tensor_parallel_costs_energy_at_the_same_batch():
    """Gemma-2-9B at batch cap 32 on one A100 vs two (TP2): the published J/token rises
    (0.33 -> 0.55); so does the prediction (two devices' idle and busy power over a pass that
    is not twice as fast)."""
    by_id = {p.work.measurement.row_id: p for p in predict_rows()}
    one, two = by_id["E0264"], by_id["E0267"]
    assert two.measured_j_per_token > one.measured_j_per_token
    assert two.predicted_j_per_token > one.predicted_j_per_token


# ---- the fit and issue 27's figure -----------------------------------------------------------

def test_batched_energy_leave_one_device_out_within_15_percent(fit):
    """Issue 27: batched energy per token within 15 % (median |error|), each device's rows
    predicted with constants fitted on the other device's rows alone."""
    held = [p for p in fit.held_out if p.work.batched]
    assert len(held) == 54 and all(p.held_out for p in held)
    assert fit.batched_median <= ENERGY_TOLERANCE_MEDIAN, sorted(p.error for p in held)
    assert fit.passes
    # the in-sample fit is tighter than the held-out figure, as it must be
    assert fit.median(held_out=False) <= fit.batched_median
    assert len(fit.by_device) == 2


def test_shipped_constants_are_the_fit_on_every_batched_row(fit):
    assert power_constants() == fit.constants
    # the held-out figures the pages show are the ones the fit computes
    rec = recorded_fit()
    assert rec["batched"] == pytest.approx(fit.batched_median, abs=1e-4)
    assert rec["batched_1gpu"] == pytest.approx(fit.median("batched, 1 GPU"), abs=1e-4)
    assert rec["batched_tp"] == pytest.approx(fit.median("batched, tensor parallel"), abs=1e-4)
    assert rec["batch_1"] == pytest.approx(fit.median("batch 1"), abs=1e-4)
    assert (rec["rows_batched"], rec["rows_batch_1"]) == (54, 6)


def test_batch_1_rows_are_predicted_held_out(fit):
    """The HF-eager batch-1 rows are never fitted; reported, with a loose bound (the
    dispatch-bound regime's energy follows its time, which only two rows pin)."""
    b1 = [p for p in fit.held_out if not p.work.batched]
    assert len(b1) == 6
    assert fit.median("batch 1") < 0.5


# ---- the CLI ---------------------------------------------------------------------------------

def test_cli_energy_regime(capsys, fit):
    assert main(["validate", "--regime", "energy", "--loo", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["loo"] is True and d["criterion"]["batched_median_abs_error_max"] == 0.15
    assert d["batched_median_abs_error"] == pytest.approx(fit.batched_median)
    assert [g["n"] for g in d["groups"]] == [54, 32, 22, 6]
    assert len(d["rows"]) == 60
    assert main(["validate", "--regime", "energy"]) == 0
    out = capsys.readouterr().out
    assert "batched median |error|" in out and "E0248" in out and "criterion" in out


@pytest.mark.parametrize("extra", [["--refit"], ["--device", "nvidia-h100-sxm"],
                                   ["--data", "presets/tables/energy_measurements.csv"]])
def test_cli_energy_options_that_do_not_apply_exit_2(extra, capsys):
    rc = main(["validate", "--regime", "energy", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("llmpara: error:") and err.count("\n") == 1


def test_a_row_without_tdp_is_refused():
    from llmpara_core.errors import ConfigError
    from llmpara_core.metrics.energy_validation import row_work
    with pytest.raises(ConfigError):
        row_work(replace(M, devices=0))
