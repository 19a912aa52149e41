"""An engine that streams (``EngineConfig.stream_s_per_token``) spends its host time per token
produced after each pass; the MLPerf Server rows of TensorRT-LLM stream (NVIDIA's harness turns
streaming off only for Offline: ``mlperf.SERVER_STREAMING``), their Offline rows do not."""

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.serving import EngineConfig, IterationCost, RequestSpec, simulate
from llmpara_core.serving import mlperf
from llmpara_core.serving.lengths import LengthTable

from helpers import H100, LLAMA3_8B

STREAM_S = 3e-5


@pytest.fixture(scope="module")
def cost():
    return IterationCost(LLAMA3_8B, H100, precision_preset("FP16"), ParallelPlan())


@pytest.mark.parametrize("lengths", ["fixed", "table"])
def test_max_load_run_is_longer_by_the_host_time_of_every_token(cost, lengths):
    """With every request queued at t = 0 the schedule does not depend on time, so streaming
    lengthens the run by exactly its host time x the tokens produced (one response per output
    token; reserve policy: no recompute, so no token is produced twice), and each request's
    first token by the host time of the tokens produced up to it."""
    cfg = EngineConfig(max_batch=64, policy="reserve")
    if lengths == "fixed":
        spec = RequestSpec(isl=300, osl=40, requests=150)
    else:
        rng = np.random.default_rng(5)
        spec = RequestSpec(requests=150, table=LengthTable(
            "drawn", "test", rng.integers(20, 700, 300), rng.integers(1, 90, 300)))
    base = simulate(cost, cfg, spec)
    streamed = simulate(cost, replace(cfg, stream_s_per_token=STREAM_S), spec)
    assert streamed.iterations == base.iterations
    assert np.array_equal(streamed.osl, base.osl)
    tokens = float(base.osl.sum())
    assert streamed.busy_s - base.busy_s == pytest.approx(STREAM_S * tokens, rel=1e-9)
    assert streamed.finish_s.max() - base.finish_s.max() == \
        pytest.approx(STREAM_S * tokens, rel=1e-9)
    # the first request to finish waited for the responses of the passes before it
    lead = streamed.first_token_s - base.first_token_s
    assert (lead > 0).all() and lead.max() < STREAM_S * tokens


def test_streaming_at_a_rate_raises_tpot_by_its_host_time_per_pass(cost):
    """At a low Poisson rate (about one request in the engine at a time) a decode pass carries
    one token, so TPOT rises by about one token's host time."""
    spec = RequestSpec(isl=200, osl=60, arrival="poisson", rate=0.02, requests=20, seed=2)
    base = simulate(cost, EngineConfig(), spec)
    streamed = simulate(cost, EngineConfig(stream_s_per_token=1e-3), spec)

    def tpot(r):
        return np.median((r.finish_s - r.first_token_s) / (r.osl - 1))
    assert tpot(streamed) - tpot(base) == pytest.approx(1e-3, rel=0.05)


@pytest.mark.parametrize("bad", [-1e-6, 2.0, math.nan, math.inf])
def test_bad_stream_time_is_refused(bad):
    with pytest.raises(ConfigError, match="stream host time per token"):
        EngineConfig(stream_s_per_token=bad)


def _row(system, scenario, benchmark="llama2-70b-99"):
    return next(r for r in mlperf.load_rows()
                if (r.system, r.benchmark, r.scenario) == (system, benchmark, scenario))


def test_mlperf_server_rows_of_tensorrt_llm_stream_and_offline_rows_do_not(monkeypatch):
    server = _row("DGX-H100_H100-SXM-80GBx8_TRT", "Server")
    cost, _ = mlperf._setup(server)
    seq = cost.hardware.effective_efficiency.seq_overhead_s
    assert seq > 0
    assert mlperf.server_stream_s(server, cost) == pytest.approx(seq * cost.time_scale)
    assert mlperf.server_stream_s(_row("DGX-H100_H100-SXM-80GBx8_TRT", "Offline"), cost) == 0
    assert mlperf.server_stream_s(_row("8xMI300X_2xEPYC-9374F", "Server"), cost) == 0
    monkeypatch.setattr(mlperf, "SERVER_STREAMING", False)
    assert mlperf.server_stream_s(server, cost) == 0


def test_mlperf_server_search_runs_streaming_from_a_non_streaming_offline_rate(monkeypatch):
    """predict's Offline reference run does not stream; the rate search and the run at the
    found rate do."""
    seen = {}
    real = mlperf.simulate

    def spy(cost, cfg, spec, progress=None):
        seen.setdefault("offline" if spec.rate is None else "rated", []).append(
            cfg.stream_s_per_token)
        return real(cost, cfg, spec, progress)

    def fake_search(cost, cfg, spec, slo, sat):
        seen["search"] = cfg.stream_s_per_token
        return SimpleNamespace(max_rate=sat * 0.5)
    monkeypatch.setattr(mlperf, "simulate", spy)
    monkeypatch.setattr(mlperf, "max_rate_meeting_slo", fake_search)
    monkeypatch.setattr(mlperf, "MIN_DURATION_S", 20.0)      # a short run keeps the test fast
    row = _row("H200-SXM-141GB-CTSx1_TRT", "Server")
    mlperf.predict.cache_clear()
    try:
        mlperf.predict(row, 200, 10**6)
    finally:
        mlperf.predict.cache_clear()
    cost, _ = mlperf._setup(row)
    want = mlperf.server_stream_s(row, cost)
    assert want > 0
    assert set(seen["offline"]) == {0.0}
    assert seen["search"] == want and seen["rated"] == [want]
