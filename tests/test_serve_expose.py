"""Streaming and the runtime reserve as user settings (issue 31 follow-up): the memory
accounting states the engine's own KV arithmetic, ``serve --stream/--no-stream`` follows the
scenario by default and says what it ran, a larger reserve takes exactly its bytes off the KV
budget (times the fraction under TensorRT-LLM's reading), streaming never raises throughput,
and hostile flags exit 2 with one line."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as hs

from llmpara_core.calibration.stacks import with_stack
from llmpara_core.cli import main
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import (IterationCost, engine_config, kv_capacity_tokens, kv_memory,
                                  mlperf, streaming)
from llmpara_core.units import BYTES_PER_GIB

GIB = BYTES_PER_GIB


def _serve(*extra, model="llama-3.1-8b", hw="nvidia-h100-sxm", fw="tensorrt-llm"):
    out, err = io.StringIO(), io.StringIO()
    argv = ["serve", "-m", model, "-hw", hw, "--requests", "60", "--isl", "512", "--osl",
            "128", "--no-search", "--format", "json", *extra]
    if fw is not None:
        argv[5:5] = ["--framework", fw]
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:          # argparse refuses a bad value with exit 2
            code = e.code
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue()


# ---- the accounting is the engine's arithmetic ----------------------------------------------

@pytest.mark.parametrize("case", [
    ("llama-3.1-8b", "nvidia-h100-sxm", "tensorrt-llm", ParallelPlan(), None),
    ("llama-3.1-8b", "nvidia-h100-sxm", "vllm", ParallelPlan(), 3.0),
    ("llama-3.1-8b", "nvidia-h100-sxm", "generic", ParallelPlan(), 1.5),
    ("llama-3.1-70b", "8x-nvidia-h100-sxm-nvlink", "tensorrt-llm", ParallelPlan(tp=2, pp=2),
     None),
    ("llama-3.1-70b", "nvidia-h100-sxm", "vllm", ParallelPlan(), None),     # does not fit
], ids=["trt", "vllm", "generic", "tp2pp2", "nofit"])
def test_accounting_gives_the_engines_kv_capacity(case):
    model, hw_slug, fw, plan, reserve_gib = case
    hw, _ = with_stack(load_hardware(hw_slug), fw)
    cfg = engine_config(fw, runtime_reserve_bytes=None if reserve_gib is None
                        else reserve_gib * GIB)[0]
    cost = IterationCost(load_model(model), hw, precision_preset("FP16"), plan)
    m = kv_memory(cost, cfg)
    assert m.kv_capacity_tokens == kv_capacity_tokens(cost, cfg)
    assert m.capacity_bytes == hw.memory_capacity_bytes
    # the parts add up to what the engine's free memory is
    assert m.capacity_bytes - m.weight_bytes - m.activation_bytes == pytest.approx(
        cost.free_bytes_per_device(cfg.max_num_tokens), abs=1.0)
    if m.kv_budget_bytes > 0:
        assert m.fits
        blocks = int(m.kv_budget_bytes // m.kv_bytes_per_token) // cfg.block_size
        assert m.kv_capacity_tokens == blocks * cfg.block_size
    else:
        assert not m.fits and m.kv_capacity_tokens == 0
    if case[0] == "llama-3.1-70b" and plan.tp == 1:
        assert not m.fits          # 141 GB of FP16 weights on one 85.5 GB H100


_COST = {}


def _cost_8b():
    if not _COST:
        hw, _ = with_stack(load_hardware("nvidia-h100-sxm"), "tensorrt-llm")
        _COST["c"] = IterationCost(load_model("llama-3.1-8b"), hw, precision_preset("FP16"),
                                   ParallelPlan())
    return _COST["c"]


@settings(max_examples=60, deadline=None)
@given(fraction=hs.floats(0.01, 1.0), reserve_gib=hs.floats(0.0, 90.0),
       of_total=hs.booleans(), block=hs.sampled_from([1, 16, 64, 256]),
       tokens=hs.sampled_from([512, 2048, 8192, 16384]))
def test_accounting_matches_the_engine_for_any_setting(fraction, reserve_gib, of_total, block,
                                                       tokens):
    """Property: for any fraction, reserve, reading and block, the accounting's budget rounded
    down to whole blocks is the engine's capacity, and the parts add up to the budget."""
    cost = _cost_8b()
    cfg = engine_config("generic", kv_memory_fraction=fraction, block_size=block,
                        runtime_reserve_bytes=reserve_gib * GIB, kv_fraction_of_total=of_total,
                        max_num_tokens=tokens, max_batch=min(256, tokens))[0]
    m = kv_memory(cost, cfg)
    assert m.kv_capacity_tokens == kv_capacity_tokens(cost, cfg)
    left = m.capacity_bytes - m.weight_bytes - m.activation_bytes - m.runtime_reserve_bytes
    expect = (left - (1 - fraction) * m.capacity_bytes) if of_total else left * fraction
    assert m.kv_budget_bytes == pytest.approx(expect, abs=1.0)
    if m.kv_budget_bytes > 0:
        whole = int(m.kv_budget_bytes // m.kv_bytes_per_token) // block * block
        assert m.kv_capacity_tokens == whole
    else:
        assert m.kv_capacity_tokens == 0 and not m.fits


# ---- serve --stream / --no-stream -----------------------------------------------------------

def test_default_streaming_follows_the_scenario_and_stack():
    assert streaming.default_streaming("server", "tensorrt-llm")
    assert streaming.default_streaming("interactive", "tensorrt-llm")
    assert not streaming.default_streaming("offline", "tensorrt-llm")
    assert not streaming.default_streaming(None, "tensorrt-llm")
    assert not streaming.default_streaming("server", "vllm")
    # the same size as the MLPerf Server rows' (mlperf.server_stream_s) on the same cost
    hw, _ = with_stack(load_hardware("nvidia-h200-sxm"), "tensorrt-llm")
    cost = IterationCost(load_model("llama-3.1-8b"), hw, precision_preset("FP8"),
                         ParallelPlan(), time_scale=0.93)
    row = SimpleNamespace(scenario="Server", framework="tensorrt-llm")
    assert mlperf.SERVER_STREAMING
    assert streaming.stream_s_per_token(cost.hardware, cost.time_scale) == \
        mlperf.server_stream_s(row, cost) > 0


def test_cli_streaming_flag_and_default_in_the_output():
    code, d, _ = _serve("--max-load")
    assert code == 0 and d["streaming"] is False and d["engine"]["stream_s_per_token"] == 0
    code, d, _ = _serve("--scenario", "server", "--rate", "1")
    assert code == 0 and d["streaming"] is True and d["stream_s_per_token"] > 0
    code, d, _ = _serve("--scenario", "server", "--rate", "1", "--no-stream")
    assert code == 0 and d["streaming"] is False and d["stream_s_per_token"] == 0
    code, d, _ = _serve("--scenario", "offline")
    assert code == 0 and d["streaming"] is False
    hw, _ = with_stack(load_hardware("nvidia-h100-sxm"), "tensorrt-llm")
    code, d, _ = _serve("--max-load", "--stream")
    assert code == 0 and d["streaming"] is True
    assert d["engine"]["stream_s_per_token"] == streaming.stream_s_per_token(hw)
    # the table output names both as well
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["serve", "-m", "llama-3.1-8b", "-hw", "nvidia-h100-sxm", "--framework",
                     "tensorrt-llm", "--max-load", "--requests", "30", "--no-search",
                     "--stream", "--format", "table"]) == 0
    text = out.getvalue()
    for key in ("streaming", "runtime_reserve_bytes", "kv_budget_bytes",
                "memory.capacity_bytes", "memory.weight_bytes"):
        assert key in text, key


@pytest.mark.parametrize("fw", ["tensorrt-llm", "vllm", "generic"])
def test_streaming_never_raises_throughput(fw):
    """Physics: streaming adds host time after passes and nothing else, so at max load the
    same requests take at least as long; strictly longer where the stack has a per-sequence
    host cost (TensorRT-LLM, vLLM), the same where it has none (generic)."""
    code, off, _ = _serve("--max-load", "--no-stream", fw=fw)
    code2, on, _ = _serve("--max-load", "--stream", fw=fw)
    assert code == code2 == 0
    assert on["streaming"] is True and off["streaming"] is False
    assert on["output_tokens_per_s"] <= off["output_tokens_per_s"]
    if on["engine"]["stream_s_per_token"] > 0:
        assert on["output_tokens_per_s"] < off["output_tokens_per_s"]
    else:
        assert fw == "generic"
        assert on["output_tokens_per_s"] == off["output_tokens_per_s"]


@pytest.mark.parametrize("fw,share", [("vllm", 1.0), ("tensorrt-llm", 0.9)])
def test_larger_reserve_takes_its_bytes_off_the_kv_budget(fw, share):
    """vLLM reads its fraction of the total, which the reserve sits inside: 1 GiB more reserve
    is exactly 1 GiB less KV budget. TensorRT-LLM's fraction is of what is left, so the budget
    loses 0.9 of it. Everything else in the accounting stays."""
    code, a, _ = _serve("--max-load", "--runtime-reserve-gib", "1", fw=fw)
    code2, b, _ = _serve("--max-load", "--runtime-reserve-gib", "3.5", fw=fw)
    assert code == code2 == 0
    assert a["runtime_reserve_bytes"] == 1 * GIB and b["runtime_reserve_bytes"] == 3.5 * GIB
    assert b["memory"]["runtime_reserve_bytes"] == 3.5 * GIB
    drop = a["kv_budget_bytes"] - b["kv_budget_bytes"]
    assert drop == pytest.approx(share * 2.5 * GIB, abs=1.0)        # within 1 byte
    for k in ("capacity_bytes", "weight_bytes", "activation_bytes", "kv_bytes_per_token"):
        assert a["memory"][k] == b["memory"][k], k
    assert b["kv_cache_capacity_tokens"] < a["kv_cache_capacity_tokens"]


@pytest.mark.parametrize("bad", ["--stream=yes", "--no-stream=1", "--stream=maybe"])
def test_hostile_streaming_flags_exit_2_in_one_line(bad):
    code, _, err = _serve("--max-load", bad)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--stream" in lines[0] and "Traceback" not in err


def test_streaming_setting_is_refused_if_not_a_bool():
    with pytest.raises(Exception, match="true or false"):
        streaming.with_streaming(engine_config("vllm")[0], "yes",
                                 load_hardware("nvidia-h100-sxm"))
    cfg = streaming.with_streaming(replace(engine_config("vllm")[0], stream_s_per_token=1e-3),
                                   False, load_hardware("nvidia-h100-sxm"))
    assert cfg.stream_s_per_token == 0.0
