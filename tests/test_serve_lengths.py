"""Request-length tables (named MLPerf sets, a user's CSV, a lognormal from mean / median /
max) and MLPerf scenarios on the serving simulator and ``llmpara serve``."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from llmpara_core.cli import main
from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.serving import EngineConfig, IterationCost, RequestSpec, simulate, summarize
from llmpara_core.serving import lengths as L, scenarios
from llmpara_core.serving.requests import draw

from helpers import H100, LLAMA3_8B

FP16 = precision_preset("FP16")


@pytest.fixture(scope="module")
def cost():
    return IterationCost(LLAMA3_8B, H100, FP16, ParallelPlan())


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["serve", *argv])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("arrival", ["max-load", "poisson"])
def test_fixed_run_equals_a_table_run_of_equal_lengths(cost, arrival):
    """Physics: a distribution whose every request is (ISL, OSL) is the fixed-length run."""
    table = L.LengthTable("flat", "test", np.full(7, 300), np.full(7, 90))
    kw = dict(requests=150, arrival=arrival, rate=None if arrival == "max-load" else 20.0)
    a = simulate(cost, EngineConfig(), RequestSpec(isl=300, osl=90, **kw))
    b = simulate(cost, EngineConfig(), RequestSpec(table=table, **kw))
    np.testing.assert_array_equal(a.first_token_s, b.first_token_s)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    assert summarize(a, cost).output_tokens_per_s == summarize(b, cost).output_tokens_per_s


def test_named_sets_match_their_published_statistics():
    oo = L.named("openorca")
    assert len(oo) == 24576
    assert oo.isl.mean() == pytest.approx(222.3, abs=0.1)     # README_mlperf: mean 222.3,
    assert np.median(oo.isl) == 152 and oo.isl.max() == 1021  # median 152, max 1,021
    r1 = L.named("deepseek-r1")
    assert len(r1) == 4388
    assert r1.osl.mean() == pytest.approx(4043, abs=1) and r1.osl.max() == 32768
    spec = RequestSpec(table=oo)
    assert (spec.isl, spec.osl, spec.lengths) == (222, 219, "table")


def test_draws_keep_whole_requests_and_are_seeded():
    oo = L.named("openorca")
    _, i1, o1 = draw(RequestSpec(table=oo, requests=2000, seed=4))
    _, i2, o2 = draw(RequestSpec(table=oo, requests=2000, seed=4))
    np.testing.assert_array_equal(i1, i2)
    pairs = set(zip(oo.isl.tolist(), oo.osl.tolist()))
    assert all((a, b) in pairs for a, b in zip(i1.tolist(), o1.tolist()))
    assert abs(np.mean(i1) / oo.isl.mean() - 1) < 0.05


def test_lognormal_fallback_from_mean_median_max():
    t = L.from_stats(L.LengthStats(222.3, 152, 1021), L.LengthStats(290, 250, 1024))
    assert np.median(t.isl) == pytest.approx(152, abs=1)
    assert t.isl.max() <= 1021 and t.isl.min() >= 1
    # the clip at the max pulls the mean below the unclipped lognormal's
    assert 190 < t.isl.mean() < 222.3 + 1
    assert L.parse_stats("stats:222.3/152/1021:290/250/1024") == t


def test_skewed_lengths_change_capacity_answers(cost):
    """Same mean lengths, real skew: a different max-load throughput than fixed lengths."""
    oo = L.named("openorca")
    fixed = simulate(cost, EngineConfig(), RequestSpec(isl=oo.mean_isl, osl=oo.mean_osl,
                                                       requests=400))
    real = simulate(cost, EngineConfig(), RequestSpec(table=oo, requests=400))
    a, b = summarize(fixed, cost).output_tokens_per_s, summarize(real, cost).output_tokens_per_s
    assert abs(b / a - 1) > 0.01


@pytest.mark.parametrize("text,msg", [
    ("", "empty"), ("a,b\n1,2\n", "input_length,output_length"),
    ("input_length,output_length\n", "no rows"),
    ("input_length,output_length\n5,-1\n", "line 2"),
    ("input_length,output_length\n5,1.5\n", "whole"),
    ("input_length,output_length\nnan,3\n", "line 2"),
])
def test_bad_length_csv_is_refused(text, msg):
    with pytest.raises(ConfigError, match=msg):
        L.parse_csv(text.encode())


def test_mlperf_scenarios_cite_the_loadgen_limits():
    s = scenarios.preset("server", "llama-2-70b")
    assert (s.slo.ttft_s, s.slo.tpot_s, s.slo.percentile) == (2.0, 0.2, 99.0)
    i = scenarios.preset("interactive", "llama-2-70b")
    assert (i.slo.ttft_s, i.slo.tpot_s) == (0.45, 0.04)
    assert scenarios.preset("offline", "mixtral-8x7b").arrival == "max-load"
    assert scenarios.preset("server", "llama-3.1-405b").slo.ttft_s == 6.0
    with pytest.raises(ConfigError, match="no interactive"):
        scenarios.preset("interactive", "mixtral-8x7b")


def test_cli_scenario_server_reports_at_the_slo_rate_with_the_benchmark_lengths(tmp_path):
    code, out, err = run("--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm",
                         "--scenario", "server", "--requests", "200", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["scenario"]["mlperf_benchmark"] == "llama2-70b"
    assert d["requests"]["length_table"]["name"] == "openorca"
    assert d["requests"]["arrival"] == "poisson"
    assert d["requests"]["rate"] == pytest.approx(d["max_rate_meeting_slo_requests_per_s"])
    assert d["slo"]["percentile"] == 99.0
    f = tmp_path / "mine.csv"
    f.write_text("input_length,output_length\n100,20\n300,40\n")
    code, out, err = run("--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm",
                         "--scenario", "offline", "--lengths", str(f), "--requests", "50",
                         "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["requests"]["length_table"]["rows"] == 2 and d["requests"]["isl"] == 200


@pytest.mark.parametrize("argv", [
    ("--lengths", "nosuch"), ("--lengths", "/no/such/file.csv"), ("--scenario", "batch"),
    ("--scenario", "offline", "--rate", "3"), ("--scenario", "server", "--max-load"),
    ("--max-load", "--mlperf-benchmark", "llama2-70b"),
    ("--scenario", "interactive", "--mlperf-benchmark", "mixtral-8x7b"),
    ("--max-load", "--lengths", "stats:1/2"),
])
def test_cli_bad_lengths_and_scenarios_exit_2_with_one_line(argv):
    code, out, err = run("--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm",
                         "--requests", "20", *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("llmpara: error:")
