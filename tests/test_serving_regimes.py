"""``llmpara validate --regime serving-maxload | mlperf`` and what the serving physics does to
the published rows: the figures are computed here, never pinned."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from statistics import median

import numpy as np
import pytest

from llmpara_core.cli import main
from llmpara_core.serving import validation as sv
from llmpara_core.serving.cost import IterationCost


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["validate", *argv])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def summary_of(*argv):
    """Run ``validate`` with ``argv`` in JSON; check it answers and that its median is the
    rows' own. Returns (summary, the rows' errors)."""
    code, out, err = run(*argv, "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    errs = [r["error"] for r in d["rows"] if r["error"] is not None]
    assert d["summary"]["median_abs_error"] == pytest.approx(median(abs(e) for e in errs))
    return d["summary"], errs


def test_serving_maxload_regime_reports_per_gpu_and_per_tp():
    s, errs = summary_of("--regime", "serving-maxload", "--sample", "40", "--requests", "200")
    assert s["rows"] == len(errs) > 20
    assert set(s["per_tp"]) >= {"1", "2", "4"} and set(s["per_gpu"])
    code, out, err = run("--regime", "serving-maxload", "--sample", "40", "--requests", "200",
                         "--loo", "--pooled", "--format", "json")
    assert code == 0, err
    held = json.loads(out)
    code, out, err = run("--regime", "serving-maxload", "--sample", "40", "--requests", "200",
                         "--pooled", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    # --loo --pooled re-predicts each GPU's rows with the power wall's duty fitted without
    # them: the FP8 rows move, the 16-bit ones do not (the wall is FP8 only)
    assert set(held["loo_duty_by_gpu"]) == set(s["per_gpu"])
    by_id = {r["row_id"]: r for r in d["rows"]}
    for r in held["rows"]:
        if r["error"] is not None and r["precision"] != "FP8":
            assert r["error"] == pytest.approx(by_id[r["row_id"]]["error"], rel=1e-9)
    code, out, err = run("--regime", "serving-maxload", "--sample", "40", "--requests", "200",
                         "--loo")
    assert code == 0 and "leave-one-GPU-out" in out and "fitted without its rows" in out
    assert "release factors" in out


@pytest.mark.parametrize("argv", [("--regime", "mlperf", "--refit"),
                                  ("--regime", "batched", "--requests", "10"),
                                  ("--regime", "serving-maxload", "--device", "x"),
                                  ("--regime", "batched", "--pooled")])
def test_serving_regime_bad_flags_exit_2(argv):
    code, _, err = run(*argv)
    assert code == 2 and err.count("\n") == 1


def test_nccl_all_reduces_cut_the_tensor_parallel_over_prediction(monkeypatch):
    """Hypothesis 1 on a sample of the TP4/TP8 max-load rows: with NCCL's model of the
    all-reduce (and 16-bit messages) the signed error at TP >= 4 is lower than with the
    alpha-beta one-shot estimate -- both computed here."""
    rows = [r for r in sv.load_rows(sv.SHIPPED_MAX_LOAD) if r.tp >= 4][::12]
    assert len(rows) >= 30
    nccl = [c.error for c in sv.compare(rows, 200) if c.error is not None]
    sv.predict.cache_clear()
    orig = IterationCost.__init__

    def alpha_beta(self, *a, **k):
        orig(self, *a, **{**k, "allreduce": "alpha-beta"})
    monkeypatch.setattr(IterationCost, "__init__", alpha_beta)
    try:
        old = [c.error for c in sv.compare(rows, 200) if c.error is not None]
    finally:
        sv.predict.cache_clear()
    assert median(nccl) < median(old) - 0.03
    assert median(abs(e) for e in nccl) < median(abs(e) for e in old)


def test_moe_expert_gemms_run_at_their_own_token_counts(monkeypatch):
    """A routed expert's GEMM sees T x top-k / experts-touched tokens, lower on the GEMM curve
    than the pass's T: a long prompt pass gets slower than with the experts timed at T, one
    decode token (each touched expert sees that one token) does not change, and a flat GEMM
    curve (no half-efficiency point) makes the two the same. (Roofline time: without the FP8
    power wall, which would bind on the prompt pass either way.)"""
    import dataclasses

    from llmpara_core.serving import cost as cost_mod
    monkeypatch.setattr(cost_mod, "TENSOR_DUTY", None)

    from llmpara_core.calibration.efficiency import efficiency_for
    from llmpara_core.parallel import ParallelPlan
    from llmpara_core.precision import precision_preset
    from llmpara_core.presets import load_hardware, load_model

    hw = load_hardware("nvidia-h100-sxm")
    eff = efficiency_for(hw, "tensorrt-llm")
    assert eff.gemm_half_tokens > 0

    def times(e):
        cost = IterationCost(load_model("mixtral-8x7b"), hw, precision_preset("FP8"),
                             ParallelPlan(), e)
        st = cost.stages[0]
        assert st.expert_gemm is not None and st.expert_gemm.sum() == 2   # gate_up, down
        prompt = cost.feature_row(1, 4096, 4096)
        one = cost.feature_row(1, 1, 100)
        t = [cost.time_one_s(np.array(f), 1) for f in (prompt, one)]
        cost.stages = (dataclasses.replace(st, expert_gemm=None),)
        t0 = [cost.time_one_s(np.array(f), 1) for f in (prompt, one)]
        return t, t0

    (prompt, one), (prompt0, one0) = times(eff)
    assert prompt > prompt0 * 1.005
    assert one == pytest.approx(one0, rel=1e-12)
    (prompt, _), (prompt0, _) = times(dataclasses.replace(eff, gemm_half_tokens=0.0))
    assert prompt == pytest.approx(prompt0, rel=1e-12)


def test_mlperf_regime_reports_per_scenario_and_per_gpu():
    s, errs = summary_of("--regime", "mlperf", "--sample", "9", "--requests", "200")
    assert s["rows"] == len(errs) == 3
    assert sum(v["rows"] for v in s["per_gpu"].values()) == 3


def test_mlperf_offline_run_is_as_long_as_the_instances_share():
    """An MLPerf Offline run gives each instance its share of the benchmark's minimum query
    count (24,576 for llama2-70b) or 600 s of work;
    the default prediction simulates that many requests, so its drain tail is a small part of
    it and its tokens/s are above a 200-request run's (computed both ways)."""
    from llmpara_core.serving import mlperf
    row = next(r for r in mlperf.load_rows() if r.scenario == "Offline" and r.gpu == "H200"
               and r.benchmark.startswith("llama2") and r.instances == 8)
    assert mlperf.MIN_OFFLINE_QUERIES[row.benchmark] / row.instances == 3072
    long_run = mlperf.predict(row)
    short_run = mlperf.predict(row, 200, 200)
    assert long_run > short_run * 1.02
