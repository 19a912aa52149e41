"""The Serving page's streaming select and runtime-reserve box (issue 31 follow-up): the stack's
and scenario's defaults shown and used, a link's values applied and written back (live URL and
'Copy link'), the numbers the core's for the same settings, hostile link values a warning and
the default, and the memory line the core's accounting."""

from apptest_util import metric, open_page

from llmpara_core import serving
from llmpara_core.calibration.stacks import with_stack
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.units import BYTES_PER_GIB
from ui.format import sig
from ui.scenario import _PAGE_LINK

PAGE = "app_pages/serving_page.py"
BASE = dict(model="llama-3.1-8b", hardware="nvidia-h100-sxm", prompt="512", gen="128",
            sv_requests="120", sv_search="false", sv_arrival="Max load")


def _clean(at, what):
    assert not at.exception, (what, [e.value for e in at.exception])
    assert not at.error, (what, [e.value for e in at.error])


def _captions(at) -> str:
    return "\n".join(c.value.replace("\\", "") for c in at.caption)


def _core(fw, reserve_gib=None, stream=False, requests=120):
    hw, _ = with_stack(load_hardware("nvidia-h100-sxm"), fw)
    cfg = serving.engine_config(fw, runtime_reserve_bytes=None if reserve_gib is None
                                else reserve_gib * BYTES_PER_GIB)[0]
    cfg = serving.streaming.with_streaming(cfg, stream, hw)
    return serving.serve(load_model("llama-3.1-8b"), hw, precision_preset("FP16"),
                         serving.RequestSpec(isl=512, osl=128, arrival="max-load",
                                             requests=requests), cfg, search=False)


def test_defaults_are_the_stacks_and_shown():
    at = open_page(PAGE, **BASE, fw="tensorrt-llm")
    _clean(at, "trt defaults")
    assert not at.warning, [w.value for w in at.warning]
    box = at.number_input(key="sv_reserve")
    assert box.value is None and box.proto.placeholder == "stack default: 4 GiB"
    assert at.selectbox(key="sv_stream").value == "default"
    text = _captions(at)
    assert "runtime reserve 4 GiB (the stack default)" in text
    assert "streaming off (the default" in text
    st = _core("tensorrt-llm")
    assert metric(at, "Requests/s") == sig(st.summary.requests_per_s)
    # the memory line: capacity in GB and GiB, weights, reserve, the budget and the tokens
    m = serving.kv_memory(st.cost, st.config)
    line = next(c for c in text.splitlines() if c.startswith("Memory per device"))
    assert "capacity 85.5 GB (79.6 GiB)" in line and "reserve 4.29 GB (4 GiB)" in line
    assert f"KV budget {m.kv_budget_bytes / 1e9:.1f} GB" in line
    assert f"{m.kv_capacity_tokens:,} tokens" in line
    assert metric(at, "KV cache (tokens)") == f"{m.kv_capacity_tokens:,}"
    vllm = open_page(PAGE, **BASE, fw="vllm")
    _clean(vllm, "vllm defaults")
    assert vllm.number_input(key="sv_reserve").proto.placeholder == "stack default: 0 GiB"
    assert "as vLLM reads it" in _captions(vllm)


def test_link_values_apply_round_trip_and_match_the_core():
    at = open_page(PAGE, **BASE, fw="tensorrt-llm", sv_reserve="2.5", sv_stream="on")
    _clean(at, "link")
    assert not at.warning, [w.value for w in at.warning]
    assert at.number_input(key="sv_reserve").value == 2.5
    assert at.selectbox(key="sv_stream").value == "on"
    text = _captions(at)
    assert "runtime reserve 2.5 GiB," in text and "streaming on (chosen;" in text
    st = _core("tensorrt-llm", 2.5, True)
    assert metric(at, "Requests/s") == sig(st.summary.requests_per_s)
    assert metric(at, "KV cache (tokens)") == f"{st.summary.kv_capacity_tokens:,}"
    assert at.query_params["sv_reserve"] == "2.5" and at.query_params["sv_stream"] == "on"
    assert at.session_state[_PAGE_LINK]["sv_reserve"] == "2.5"
    # edits go back into the link: a new reserve, streaming off
    at.number_input(key="sv_reserve").set_value(6.0)
    at.selectbox(key="sv_stream").set_value("off")
    at.run()
    _clean(at, "edited")
    assert at.query_params["sv_reserve"] == "6"      # the box writes the URL itself
    # (the select is bound to the URL, which the browser rewrites: test_browser_serving.py)
    assert at.session_state[_PAGE_LINK]["sv_stream"] == "off"
    assert "runtime reserve 6 GiB," in _captions(at)
    st6 = _core("tensorrt-llm", 6.0, False)
    assert metric(at, "Requests/s") == sig(st6.summary.requests_per_s)
    # the copy link spells out what the defaults resolved to
    d = open_page(PAGE, **BASE, fw="tensorrt-llm")
    assert d.session_state[_PAGE_LINK]["sv_reserve"] == "4"
    assert d.session_state[_PAGE_LINK]["sv_stream"] == "off"


def test_streaming_default_follows_the_mlperf_scenario():
    """MLPerf Server under TensorRT-LLM streams by default (NVIDIA's harness); Offline does
    not; vLLM in Server does not (no source read on its harness's streaming)."""
    q = {**BASE, "sv_requests": "60"}
    del q["sv_arrival"]
    at = open_page(PAGE, **q, fw="tensorrt-llm", sv_scenario="server", sv_target="0")
    assert not at.exception, [e.value for e in at.exception]
    assert "streaming on (the default: NVIDIA's MLPerf harness" in _captions(at)
    off = open_page(PAGE, **q, fw="tensorrt-llm", sv_scenario="offline")
    _clean(off, "offline")
    assert "streaming off (the default" in _captions(off)
    assert off.session_state[_PAGE_LINK]["sv_stream"] == "off"


def test_hostile_link_values_warn_and_use_the_defaults():
    for reserve, stream in (("-1", "maybe"), ("nan", "ON"), ("inf", ""), ("1e9", "1"),
                            ("4GiB", "true")):
        at = open_page(PAGE, **BASE, fw="tensorrt-llm", sv_reserve=reserve, sv_stream=stream)
        assert not at.exception, (reserve, [e.value for e in at.exception])
        warns = " ".join(w.value for w in at.warning)
        assert "`sv_reserve`" in warns, (reserve, warns)
        if stream:
            assert "`sv_stream`" in warns, (stream, warns)
        text = _captions(at)
        assert "runtime reserve 4 GiB (the stack default)" in text, reserve
        assert "streaming off (the default" in text, stream


def test_a_reserve_larger_than_the_device_is_explained():
    at = open_page(PAGE, **BASE, fw="tensorrt-llm", sv_reserve="100")
    assert not at.exception, [e.value for e in at.exception]
    assert any("runtime reserve of 100 GiB" in e.value for e in at.error)
    line = next(c for c in _captions(at).splitlines() if c.startswith("Memory per device"))
    assert "reserve 107 GB (100 GiB)" in line and "this deployment does not fit" in line


def test_the_readme_quotes_the_pages_memory_line():
    """The README's example memory line is what the page prints for it (8B FP16, H100,
    TensorRT-LLM defaults)."""
    import re
    from pathlib import Path
    from ui.serving_memory import memory_line
    hw, _ = with_stack(load_hardware("nvidia-h100-sxm"), "tensorrt-llm")
    m = serving.kv_memory_for(load_model("llama-3.1-8b"), hw, precision_preset("FP16"), None,
                              serving.engine_config("tensorrt-llm")[0])
    line = memory_line(m, "TP1·PP1·DP1").replace("\\", "")
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text(
        encoding="utf-8").split())
    quoted = re.search(r'"(capacity 85\.5 GB[^"]*)"', readme).group(1)
    assert line.endswith(quoted), (line, quoted)


def test_auto_fit_shows_why_one_device_was_not_enough():
    """vLLM's 0.9 of an H200's total cannot hold Llama-3.1-70B's FP16 weights: the page moves
    to TP 2 and shows both accountings, the single device's shortfall first."""
    at = open_page(PAGE, **{**BASE, "model": "llama-3.1-70b", "hardware": "nvidia-h200-sxm",
                            "sv_requests": "40"}, fw="vllm")
    _clean(at, "auto-fit")
    lines = [c for c in _captions(at).splitlines() if c.startswith("Memory per device")]
    assert len(lines) == 2, lines
    assert lines[0].startswith("Memory per device (TP1·PP1·DP1)")
    assert "KV budget −" in lines[0] and "does not fit" in lines[0]
    assert lines[1].startswith("Memory per device (TP2") and "tokens of" in lines[1]
