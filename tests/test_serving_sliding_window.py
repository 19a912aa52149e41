"""Whether a serving stack applies a model's sliding window (``EngineConfig.sliding_window``):
TensorRT-LLM's profile does not (trtllm-bench sets no max attention window, so every cached
token is kept and read), so a sliding-window model runs there exactly as the same model with no
window; a stack that applies the window is faster on prompts longer than it; models without a
window do not change; a non-boolean setting is refused."""

from dataclasses import replace

import pytest

from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import FRAMEWORK_DEFAULTS, EngineConfig, IterationCost, simulate
from llmpara_core.serving.report import summarize
from llmpara_core.serving.requests import RequestSpec

H100 = load_hardware("nvidia-h100-sxm")
TRT = FRAMEWORK_DEFAULTS["tensorrt-llm"].config


def _tok_s(model, cfg, isl, osl, requests=120):
    cost = IterationCost(model, H100, precision_preset("FP8"), ParallelPlan(),
                         efficiency_for(H100, "tensorrt-llm"))
    res = simulate(cost, cfg, RequestSpec(isl=isl, osl=osl, requests=requests))
    return summarize(res, cost).output_tokens_per_s


def test_stack_defaults_state_whether_they_apply_the_window():
    assert TRT.sliding_window is False
    assert "max_attention_window" in FRAMEWORK_DEFAULTS["tensorrt-llm"].source
    assert FRAMEWORK_DEFAULTS["vllm"].config.sliding_window is True
    assert EngineConfig().sliding_window is True


@pytest.mark.parametrize("isl,osl", [(6000, 400), (300, 5000)])
def test_window_off_equals_the_model_without_a_window(isl, osl):
    mistral = load_model("mistral-7b-v0.1")
    assert mistral.sliding_window == 4096
    off = _tok_s(mistral, TRT, isl, osl)
    plain = _tok_s(replace(mistral, sliding_window=None, sliding_layers=None), TRT, isl, osl)
    assert off == pytest.approx(plain, rel=1e-9)
    on = _tok_s(mistral, replace(TRT, sliding_window=True), isl, osl)
    # contexts past the 4,096-token window: the rolling window reads fewer keys
    assert on > off * 1.02


def test_window_setting_does_not_touch_models_without_one():
    llama = load_model("llama-3.1-8b")
    assert llama.sliding_window is None
    assert _tok_s(llama, TRT, 2000, 300) == pytest.approx(
        _tok_s(llama, replace(TRT, sliding_window=True), 2000, 300), rel=1e-12)


@pytest.mark.parametrize("bad", ["no", 0, None, 1.0])
def test_window_setting_must_be_boolean(bad):
    with pytest.raises(ConfigError, match="sliding window"):
        EngineConfig(sliding_window=bad)


def _serve(*extra):
    import io
    import json
    from contextlib import redirect_stderr, redirect_stdout

    from llmpara_core.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["serve", "-m", "mistral-7b-v0.1", "-hw", "nvidia-h100-sxm", "-q", "FP8",
                         "--framework", "tensorrt-llm", "--isl", "6000", "--osl", "300",
                         "--max-load", "--requests", "60", "--format", "json", *extra])
        except SystemExit as e:          # argparse refuses a bad choice with exit 2
            code = e.code
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue()


def test_cli_sliding_window_switch():
    code, off, _ = _serve()
    assert code == 0 and off["engine"]["sliding_window"] is False
    code, on, _ = _serve("--sliding-window", "on")
    assert code == 0 and on["engine"]["sliding_window"] is True
    assert on["output_tokens_per_s"] > off["output_tokens_per_s"]
    code, _, err = _serve("--sliding-window", "maybe")
    assert code == 2 and "--sliding-window" in err and "Traceback" not in err
