"""MLPerf's Server figure is LoadGen's *completed* tokens/s (tokens over the time the last query
finished), so a run's drain after its last arrival lowers it (``mlperf.completed_share``)."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from llmpara_core.serving import mlperf
from llmpara_core.serving.engine import simulate


def _row(system="H200-SXM-141GB-CTSx1_TRT", scenario="Server"):
    return next(r for r in mlperf.load_rows()
                if (r.system, r.benchmark, r.scenario) == (system, "llama2-70b-99", scenario))


def test_share_is_the_run_length_over_the_run_plus_its_drain():
    res = SimpleNamespace(arrival_s=np.array([0.0, 10.0, 20.0]),
                          finish_s=np.array([5.0, 30.0, 26.0]))      # drain 30 - 20 = 10 s
    row = _row()
    assert row.min_duration_s == 2400                                # NVIDIA's config
    assert mlperf.completed_share(res, row) == pytest.approx(2400 / 2410)
    # a row without a published run length: mlperf.conf's 600 s
    assert mlperf.completed_share(res, replace(row, min_duration_s=None)) == \
        pytest.approx(600 / 610)
    # nothing left after the last arrival: no drain
    done = SimpleNamespace(arrival_s=np.array([0.0, 5.0]), finish_s=np.array([4.0, 5.0]))
    assert mlperf.completed_share(done, row) == 1.0


def test_run_logs_give_the_run_length_of_every_nvidia_server_row():
    """The run logs' min_duration (NVIDIA: 2,400 s; AMD's 8x MI300X: 600 s) is carried for the
    Server rows whose configs do not publish it."""
    rows = {(r.system, r.benchmark, r.scenario): r for r in mlperf.load_rows()}
    assert rows["B200-SXM-180GBx1_TRT", "llama2-70b-99", "Server"].min_duration_s == 2400
    assert rows["H200-SXM-141GBx8_TRT", "mixtral-8x7b", "Server"].min_duration_s == 2400
    assert rows["8xMI300X_2xEPYC-9374F", "llama2-70b-99", "Server"].min_duration_s == 600
    assert "mlperf_log_summary.txt" in rows["8xMI300X_2xEPYC-9374F", "llama2-70b-99",
                                            "Server"].engine_source


def test_server_prediction_is_the_completed_rate(monkeypatch):
    """predict = found rate x mean output x completed_share of a run at that rate; Offline rows
    are unchanged (LoadGen's Offline figure already ends at the last completion)."""
    rate_share = 0.5
    seen = {}

    def fake_search(cost, cfg, spec, slo, sat):
        seen["spec"], seen["cost"], seen["cfg"] = spec, cost, cfg
        return SimpleNamespace(max_rate=sat * rate_share)
    monkeypatch.setattr(mlperf, "max_rate_meeting_slo", fake_search)
    monkeypatch.setattr(mlperf, "MIN_DURATION_S", 40.0)      # a short run keeps the test fast
    row = _row()
    mlperf.predict.cache_clear()
    try:
        with_drain = mlperf.predict(row, 200, 10**6)
        monkeypatch.setattr(mlperf, "COMPLETED_TOKENS", False)
        mlperf.predict.cache_clear()
        scheduled = mlperf.predict(row, 200, 10**6)
        off = _row(scenario="Offline")
        off_on = mlperf.predict(off, 200, 10**6)
        monkeypatch.setattr(mlperf, "COMPLETED_TOKENS", True)
        mlperf.predict.cache_clear()
        assert mlperf.predict(off, 200, 10**6) == off_on
    finally:
        mlperf.predict.cache_clear()
    spec = seen["spec"]
    res = simulate(seen["cost"], seen["cfg"], spec.with_rate(scheduled / row.instances
                                                            / float(spec.table.osl.mean())))
    share = mlperf.completed_share(res, row)
    assert 0.9 < share < 1.0
    assert with_drain == pytest.approx(scheduled * share, rel=1e-9)
