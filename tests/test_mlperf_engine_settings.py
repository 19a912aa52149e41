"""The MLPerf rows' own engine settings (``presets/tables/mlperf_serving.csv``: ``max_batch``,
``max_num_tokens``, ``min_duration_s`` with their ``engine_source``): parsed, refused when bad,
and used by the row's simulation."""

import csv
import re

import pytest

from llmpara_core.errors import ConfigError
from llmpara_core.serving import mlperf


def _rows():
    return mlperf.load_rows()


def _find(system, benchmark, scenario):
    return next(r for r in _rows() if (r.system, r.benchmark, r.scenario)
                == (system, benchmark, scenario))


def test_shipped_settings_match_their_cited_config():
    rows = _rows()
    with_settings = [r for r in rows if r.max_batch or r.max_num_tokens or r.min_duration_s]
    assert len(with_settings) >= 10
    for r in with_settings:
        src = r.engine_source
        assert src.startswith("github mlcommons/inference_results_v4.1@")
        assert f"/{r.scenario}/" in src or "mixtral-8x7b/__init__.py" in src
        if r.max_batch is not None:
            assert re.search(rf"gpu_batch_size {r.max_batch}\b", src), src
        if r.max_num_tokens is not None:
            assert re.search(rf"max_num_tokens {r.max_num_tokens}\b", src), src
        if r.min_duration_s is not None:
            assert f"min_duration {int(r.min_duration_s * 1000)}" in src, src
    # NVIDIA's per-scenario batch sizes differ: Server runs a larger batch than Offline
    assert _find("DGX-H100_H100-SXM-80GBx8_TRT", "llama2-70b-99", "Offline").max_batch == 896
    assert _find("DGX-H100_H100-SXM-80GBx8_TRT", "llama2-70b-99", "Server").max_batch == 1024
    assert _find("H200-SXM-141GBx8_TRT", "llama2-70b-99", "Offline").max_batch == 806
    assert _find("H200-SXM-141GBx8_TRT", "llama2-70b-99", "Server").max_batch == 896
    # rows without published settings keep the stack defaults
    amd = next(r for r in rows if r.framework == "vllm")
    assert (amd.max_batch, amd.max_num_tokens, amd.min_duration_s) == (None, None, None)


def test_setup_runs_the_rows_settings():
    server = _find("DGX-H100_H100-SXM-80GBx8_TRT", "llama2-70b-99", "Server")
    cfg = mlperf._setup(server, engine=True)[1]
    assert cfg.max_batch == 1024
    assert mlperf._setup(server, engine=False)[1].max_batch == 2048      # stack default
    mix = _find("DGX-H100_H100-SXM-80GBx8_TRT", "mixtral-8x7b", "Offline")
    assert mlperf._setup(mix, engine=True)[1].max_num_tokens == 16384
    assert mlperf._setup(mix, engine=False)[1].max_num_tokens == 8192
    # the comparison runs the stack defaults unless asked (not kept: README, MLPerf)
    assert mlperf._setup(server)[1] == mlperf._setup(server, engine=False)[1]


def test_server_run_lasts_the_rows_min_duration(monkeypatch):
    """A Server run draws min_duration_s of arrivals at the saturation rate (2,400 s in
    NVIDIA's configs, 4x mlperf.conf's 600 s)."""
    seen = []

    def fake_search(cost, cfg, spec, slo, sat):
        seen.append((spec.requests, sat))

        class R:
            max_rate = sat
        return R()
    monkeypatch.setattr(mlperf, "max_rate_meeting_slo", fake_search)
    monkeypatch.setattr(mlperf, "COMPLETED_TOKENS", False)     # no run at the found rate
    row = _find("H200-SXM-141GBx8_TRT", "llama2-70b-99", "Server")
    assert row.min_duration_s == 2400
    mlperf.predict.cache_clear()
    mlperf.predict(row, 150, 10**6, True, True)
    mlperf.predict(row, 150, 10**6, True, False)
    mlperf.predict.cache_clear()
    (n_row, sat), (n_default, sat0) = seen
    assert sat == pytest.approx(sat0, rel=0.05)
    assert n_row == int(max(1000, sat * 2400))
    assert n_default == int(max(1000, sat0 * mlperf.MIN_DURATION_S))


def _write(tmp_path, **over):
    src = mlperf.DATA
    with open(src, newline="") as fh:
        rd = csv.DictReader(fh)
        fields, first = rd.fieldnames, next(rd)
    first.update(over)
    p = tmp_path / "rows.csv"
    with open(p, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerow(first)
    return p


@pytest.mark.parametrize("over, msg", [
    ({"max_batch": "abc"}, "max_batch must be a whole number"),
    ({"max_batch": "1.5"}, "max_batch must be a whole number"),
    ({"max_batch": "0"}, "max_batch must be in"),
    ({"max_batch": "-4"}, "max_batch must be in"),
    ({"max_batch": "99999999999"}, "max_batch must be in"),
    ({"max_num_tokens": "x"}, "max_num_tokens must be a whole number"),
    ({"max_batch": "4096", "max_num_tokens": "2048"}, "exceeds max_num_tokens"),
    ({"min_duration_s": "nan"}, "min_duration_s must be in"),
    ({"min_duration_s": "inf"}, "min_duration_s must be in"),
    ({"min_duration_s": "0"}, "min_duration_s must be in"),
    ({"min_duration_s": "-600"}, "min_duration_s must be in"),
    ({"min_duration_s": "ten"}, "min_duration_s must be a number"),
    ({"engine_source": ""}, "need an engine_source"),
])
def test_bad_engine_columns_are_refused(tmp_path, over, msg):
    with pytest.raises(ConfigError, match=msg) as e:
        mlperf.load_rows(_write(tmp_path, **over))
    assert "line 2" in str(e.value)


def test_engine_columns_are_optional(tmp_path):
    p = _write(tmp_path, max_batch="", max_num_tokens="", min_duration_s="", engine_source="")
    (r,) = mlperf.load_rows(p)
    assert (r.max_batch, r.max_num_tokens, r.min_duration_s) == (None, None, None)
    assert mlperf._setup(r, engine=True)[1] == mlperf._setup(r, engine=False)[1]
