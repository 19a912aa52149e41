"""The largest context that fits is capped by the model's trained context window, and the
report says which limit binds (issue 15, defect 7)."""

from dataclasses import replace

from llmpara_core import presets
from llmpara_core.analysis import analyze
from llmpara_core.export import report_to_dict
from llmpara_core.memory import MEMORY_LIMIT, WINDOW_LIMIT, ContextLimit, max_context
from llmpara_core.precision import PRECISION_PRESETS
from llmpara_core.units import BYTES_PER_GB
from llmpara_core.workload import Workload

FP16 = PRECISION_PRESETS["FP16"]
WL = Workload(batch=1, prompt_len=2048, gen_len=256)


def test_window_binds_on_a_large_device():
    model = presets.load_model("llama-3-8b")
    rep = analyze(model, presets.load_hardware("nvidia-h100-sxm"), FP16, WL)
    assert model.max_position_embeddings == 8192
    assert rep.context_limit.memory_tokens > 100_000          # memory alone: ~480k tokens
    assert rep.max_context == 8192 and rep.context_limit.binding == WINDOW_LIMIT
    d = report_to_dict(rep, include_operators=False)
    assert d["max_context"] == 8192 and d["max_context_limit"] == "context window"
    assert d["max_context_memory"] == rep.context_limit.memory_tokens


def test_memory_binds_on_a_small_device():
    model = presets.load_model("llama-3-8b")
    hw = replace(presets.load_hardware("nvidia-h100-sxm"), memory_capacity_bytes=17 * BYTES_PER_GB)
    rep = analyze(model, hw, FP16, WL)
    assert 0 < rep.max_context < 8192
    assert rep.context_limit.binding == MEMORY_LIMIT
    assert rep.max_context == max_context(model, FP16, 1, rep.memory.activation_bytes,
                                          hw.memory_capacity_bytes)


def test_unknown_window_leaves_memory_alone():
    lim = ContextLimit(memory_tokens=1000, window_tokens=None)
    assert lim.tokens == 1000 and lim.binding == MEMORY_LIMIT
    assert ContextLimit(500, 500).binding == MEMORY_LIMIT
    assert ContextLimit(600, 500).tokens == 500
