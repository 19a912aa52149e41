"""The prefill-first scheduler (vLLM V0's default, ``EngineConfig.mixed_batches=False``): no
pass carries decode tokens and prompt tokens together, it agrees with the mixed scheduler where
there is nothing to mix, the CLI and config refuse bad values; the CDNA3 vendor-BLAS GEMM
share (``calibration.efficiency.NATIVE_GEMM_FACTOR``) and the MLPerf vLLM rows' release."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace

import pytest

from llmpara_core.calibration import efficiency as E
from llmpara_core.cli import main
from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware
from llmpara_core.serving import EngineConfig, IterationCost, RequestSpec, engine, simulate
from llmpara_core.serving import mlperf

from helpers import H100, LLAMA3_8B

FP16 = precision_preset("FP16")
SPEC = RequestSpec(isl=300, osl=40, arrival="max-load", requests=120, lengths="uniform",
                   spread=0.5, seed=3)


@pytest.fixture(scope="module")
def cost():
    return IterationCost(LLAMA3_8B, H100, FP16, ParallelPlan())


def _passes(monkeypatch, cost, cfg, spec=SPEC):
    """(decode tokens, prompt chunks) of every mixed/prefill pass of a run."""
    seen = []
    orig = engine._mixed_iteration

    def spy(st, dec, chunks, *rest):
        seen.append((len(dec), len(chunks)))
        return orig(st, dec, chunks, *rest)
    monkeypatch.setattr(engine, "_mixed_iteration", spy)
    res = simulate(cost, cfg, spec)
    return seen, res


def test_prefill_first_never_mixes_decodes_with_prompts(monkeypatch, cost):
    base = EngineConfig(max_batch=16, max_num_tokens=2048, chunked_prefill=False)
    mixed, r_mixed = _passes(monkeypatch, cost, base)
    first, r_first = _passes(monkeypatch, cost, replace(base, mixed_batches=False))
    assert any(d and c for d, c in mixed)              # the mixed scheduler does mix
    assert first and not any(d and c for d, c in first)
    assert len(r_first.finish_s) == len(r_mixed.finish_s) == SPEC.requests
    # every request still gets all its tokens; stalling decodes costs time at this load
    assert (r_first.osl == r_mixed.osl).all()
    assert r_first.makespan_s > r_mixed.makespan_s


def test_one_request_is_the_same_under_both_schedulers(cost):
    """Nothing to mix: one request's prompt pass then its decodes, identical times."""
    spec = RequestSpec(isl=700, osl=30, arrival="max-load", requests=1)
    cfg = EngineConfig(max_batch=8, max_num_tokens=4096, chunked_prefill=False)
    a = simulate(cost, cfg, spec)
    b = simulate(cost, replace(cfg, mixed_batches=False), spec)
    assert b.first_token_s[0] == pytest.approx(a.first_token_s[0], rel=1e-12)
    assert b.finish_s[0] == pytest.approx(a.finish_s[0], rel=1e-12)


def test_config_refuses_a_non_boolean():
    with pytest.raises(ConfigError, match="mixed batches"):
        EngineConfig(mixed_batches="no")


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def test_cli_scheduler_flag():
    args = ("serve", "--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm", "--isl", "256",
            "--osl", "32", "--max-load", "--requests", "60", "--no-search", "--format", "json")
    code, out, _ = _cli(*args, "--scheduler", "prefill-first")
    assert code in (0, None)
    d = json.loads(out)
    assert d["engine"]["mixed_batches"] is False
    code, out, _ = _cli(*args)
    assert json.loads(out)["engine"]["mixed_batches"] is True
    code, out, err = _cli(*args, "--scheduler", "sometimes")
    assert code == 2 and "scheduler" in err and "Traceback" not in err


def test_cdna3_native_stacks_run_at_the_cited_gemm_share():
    mi, h100 = load_hardware("amd-mi300x"), load_hardware("nvidia-h100-sxm")
    factor = 0.601 / 0.801
    assert E.NATIVE_GEMM_FACTOR["cdna3"] == pytest.approx(factor)
    for stack in ("vllm", "sglang"):
        assert E.efficiency_for(mi, stack).compute == pytest.approx(
            E.efficiency_for(h100, stack).compute * factor)
    # the reference stack (its own kernels) and the generic profile are unchanged
    assert E.efficiency_for(mi, "llama.cpp").compute == E.efficiency_for(mi, None).compute


def test_mlperf_vllm_rows_run_the_round_release_scheduler():
    rows = mlperf.load_rows()
    amd = next(r for r in rows if r.framework == "vllm")
    trt = next(r for r in rows if r.framework == "tensorrt-llm")
    assert mlperf._setup(amd)[1].mixed_batches is False
    assert mlperf._setup(amd)[1].chunked_prefill is False
    assert mlperf._setup(amd, releases=False)[1].mixed_batches is True
    assert mlperf._setup(trt)[1].mixed_batches is True
