"""Speculative speedup against batch size (issue 13): alpha fitted on a sweep's smallest batch,
the other batches predicted. Unit tests of the fitting and grouping on synthetic data, the
published sweep (TensorRT-LLM n-gram on Llama-4-Scout, 8x B200, S0062-S0064), the CLI and the
Validation page's regime rows."""

import csv
import io
import json

import pytest

from helpers import H100, LLAMA3_8B
from llmpara_core.cli import main
from llmpara_core.errors import ConfigError
from llmpara_core.model import Model
from llmpara_core.precision import Precision
from llmpara_core.speculative import Setup, Speculation, model_draft, ngram_draft, speedup
from llmpara_core.speculative.batch_sweeps import (SWEEP_KEY, SWEEP_TOLERANCE_MEDIAN, fit_sweep,
                                                   group_sweeps, regime_rows, sweep_rows,
                                                   validate_sweeps, validation_dict)
from llmpara_core.speculative.measurements import Measurement, load_measurements
from llmpara_core.workload import Workload

DRAFT = Model("Llama-3.2 1B (test)", 2048, 16, 32, 8, 8192, 128256, head_dim=64,
              tie_word_embeddings=True, rope_theta=500000.0)


def _setup(batch: int, draft=None) -> Setup:
    return Setup(LLAMA3_8B, H100, Precision(), Workload(batch, 256, 64),
                 draft or model_draft(DRAFT))


def _synthetic(alpha: float, plan, scale=None):
    """Rows whose 'measured' speedup is the model's own at ``alpha`` (times ``scale[id]``)."""
    scale = scale or {}
    return [(rid, _setup(b), g, speedup(_setup(b), Speculation(g, alpha=alpha))
             * scale.get(rid, 1.0)) for rid, b, g in plan]


# ---- fitting on synthetic data -----------------------------------------------------------------

PLAN = [("r64", 64, 3), ("r1", 1, 4), ("r8", 8, 4)]      # deliberately not in batch order


def test_fit_recovers_alpha_and_predicts_its_own_curve():
    alpha, points = fit_sweep(_synthetic(0.7, PLAN))
    assert alpha == pytest.approx(0.7, abs=1e-4)
    assert [p.batch for p in points] == [1, 8, 64]
    assert points[0].fitted and points[0].relative_error is None
    assert all(abs(p.relative_error) < 1e-3 for p in points[1:])


def test_a_slower_measurement_shows_as_the_matching_error():
    # measured 25 % faster at batch 64 than the model's curve -> predicted / measured - 1 = -20 %
    _, points = fit_sweep(_synthetic(0.7, PLAN, scale={"r64": 1.25}))
    err = {p.row_id: p.relative_error for p in points}
    assert err["r64"] == pytest.approx(1 / 1.25 - 1, abs=1e-3)
    assert abs(err["r8"]) < 1e-3 and err["r1"] is None


def test_fit_row_out_of_reach_gives_no_alpha_and_no_predictions():
    rows = _synthetic(0.7, PLAN, scale={"r1": 50.0})      # 50x the batch-1 speedup: no alpha
    alpha, points = fit_sweep(rows)
    assert alpha is None and all(p.predicted_speedup is None for p in points)
    with pytest.raises(ConfigError):
        fit_sweep(rows[:1])


def _row(rid, batch, speedup_, **over) -> Measurement:
    base = {k: "x" for k in SWEEP_KEY} | {"row_id": rid, "batch": str(batch),
                                          "speedup": str(speedup_), "model_gamma": "4",
                                          "model_target": "llama-3.1-8b"}
    return Measurement(rid, tuple((base | over).items()))


def test_grouping_needs_the_same_key_and_two_batches():
    rows = [_row("a", 1, 2.0), _row("b", 4, 1.7), _row("c", 4, 1.6, hardware="other"),
            _row("d", 1, 1.9, source="other"), _row("e", 2, 1.8, source="other"),
            _row("f", 8, 1.2, speedup=""), _row("g", 1, 2.1, method="solo"),
            _row("h", 1, 2.2, method="gamma sweep", model_gamma="2"),
            _row("i", 1, 2.3, method="gamma sweep", model_gamma="3"),
            _row("j", 2.5, 1.5), _row("k", 16, 1.1, model_target="")]
    groups = [[m.row_id for m in g] for g in group_sweeps(rows)]
    # c: other hardware, alone; f: no speedup; g: one row; h/i: one batch; j: not an integer
    # batch; k: not modelled
    assert groups == [["a", "b"], ["d", "e"]]


# ---- the published sweep ------------------------------------------------------------------------

def test_the_published_sweep_is_found_and_fitted_on_batch_1():
    v = validate_sweeps()
    assert len(v.sweeps) == 1
    s = v.sweeps[0]
    assert [p.row_id for p in s.points] == ["S0062", "S0063", "S0064"]
    assert [(p.batch, p.gamma) for p in s.points] == [(1, 5), (4, 5), (32, 3)]
    assert s.profile == "tensorrt-llm" and 0 < s.alpha < 1
    fit = s.points[0]
    assert fit.fitted and fit.predicted_speedup == pytest.approx(1.9613, rel=1e-4)
    assert len(v.errors) == 2 and v.median_abs_error == pytest.approx(
        sum(abs(e) for e in v.errors) / 2)
    # the batch-1 speedup (1.96) exceeds the data set's mean accepted length (1.66): the
    # fitted alpha implies more tokens per pass than that at gamma = 5
    by_id = {m.row_id: m for m in load_measurements()}
    assert by_id["S0062"].mean_accepted_tokens == 1.66
    assert all(not by_id[r].in_test for r in ("S0062", "S0063", "S0064"))


@pytest.mark.xfail(strict=True, reason=(
    "issue 13 criterion not met (estimated median |error| 20.0 %: batch 4 +10.6 %, batch 32 "
    "+29.3 %). With 8 GPUs modelled as one device, fixed per-pass costs dominate a decode "
    "step and at batch 32 all 16 experts are read already; with the host work TensorRT-LLM "
    "pays serially when it speculates (29.4 us per sequence, cited), an iteration costs "
    "1.16x (batch 4) and 1.15x (batch 32) a decode step in the model where the measurements "
    "imply 1.29x and 1.49x with the alpha fitted on batch 1, which also exceeds the published "
    "accepted length. Strict: when the efficiency model meets the criterion this fails and "
    "the marker must go."))
def test_speedup_vs_batch_criterion_median_within_10_percent():
    assert validate_sweeps().median_abs_error <= SWEEP_TOLERANCE_MEDIAN


def test_ideal_rates_also_fit_on_the_smallest_batch():
    ideal = validate_sweeps(estimated=False)
    assert not ideal.estimated and ideal.sweeps[0].points[0].predicted_speedup == \
        pytest.approx(1.9613, rel=1e-4)
    assert len(ideal.errors) == 2


# ---- outputs: CLI and the Validation page's rows -------------------------------------------------

def test_cli_json_csv_and_table(capsys):
    assert main(["validate", "--regime", "speculative", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    v = validate_sweeps()
    assert d == json.loads(json.dumps(validation_dict(v)))
    assert d["median_abs_error"] == pytest.approx(v.median_abs_error)
    assert d["passes"] is v.passes and d["criterion"]["median_abs_error_max"] == 0.10
    assert main(["validate", "--regime", "speculative", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["role"] for r in rows] == ["fit", "predicted", "predicted"]
    assert main(["validate", "--regime", "speculative"]) == 0
    out = capsys.readouterr().out
    assert "median |error|" in out and "S0064" in out and "criterion" in out


@pytest.mark.parametrize("extra", [["--loo"], ["--refit"], ["--device", "nvidia-b200"],
                                   ["--data", "presets/tables/speculative_measurements.csv"]])
def test_cli_options_that_do_not_apply_exit_2(extra, capsys):
    rc = main(["validate", "--regime", "speculative", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("llmpara: error:") and err.count("\n") == 1
    assert "Traceback" not in err


def test_regime_rows_have_the_page_table_columns():
    rows = regime_rows()
    assert [r["kind"] for r in rows] == ["regime", "regime-stack"]
    assert rows[0]["group"] == "speculative (speedup vs batch)"
    assert rows[1]["group"] == "speculative / tensorrt-llm"
    v = validate_sweeps()
    for r in rows:
        assert r["n"] == 2 and r["metric"] == "speedup"
        assert r["estimated_median_abs_error"] == pytest.approx(v.median_abs_error)
        assert {"estimated_median_error", "estimated_p90_abs_error", "estimated_within_15pct",
                "ideal_median_abs_error"} <= set(r)
    assert len(sweep_rows(v)) == 3


def test_ngram_drafts_cost_nothing_so_batch_1_fit_is_acceptance_only():
    # the sweep's draft is an n-gram lookup: no draft passes, only verification
    su = _setup(1, ngram_draft())
    assert speedup(su, Speculation(3, alpha=0.0)) < 1.0 < speedup(su, Speculation(3, alpha=0.5))
