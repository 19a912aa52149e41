"""The Speculative page under streamlit.testing.v1.AppTest: every view renders clean, link
settings are applied, bad link values and bad inputs give messages (never a traceback), MoE
targets, self-drafting heads, another draft device, the vocabulary warning and the comparison
with published measurements."""

import json

import pytest
from apptest_util import metric as _metric
from apptest_util import open_page
from streamlit.testing.v1 import AppTest

from llmpara_core.speculative.measurements import compare_measurements
from ui.scenario import hardware_label, model_label

PAGE = "app_pages/speculative_page.py"
VIEWS = ("Latency", "Batch", "Memory & energy", "Published measurements", "Speedup")


def _page(**params) -> AppTest:
    return open_page(PAGE, **params)


def _draft(slug: str) -> str:
    return f"Model · {model_label(slug)}"


def _speedup(at) -> float:
    return float(_metric(at, "Speedup").rstrip("×"))


def _clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture(scope="module")
def default_page():
    return _page()


def test_default_page_renders(default_page):
    at = default_page
    _clean(at)
    assert at.title[0].value == "Speculative decoding"
    # Llama-3 8B target: the default draft is the same-tokenizer Llama-3.2 1B
    assert at.selectbox(key="sp_draft").value == "llama-3.2-1b"
    assert _speedup(at) > 1
    assert float(_metric(at, "E tokens / step")) == pytest.approx(
        (1 - 0.8 ** 5) / (1 - 0.8), abs=0.01)                   # gamma 4, alpha 0.8
    assert len(at.get("plotly_chart")) == 3     # speedup vs gamma, E[tokens] vs gamma, heat map
    assert any("heat map" in h.value for h in at.subheader)
    assert not at.warning                                       # matching tokenizer


def test_every_view_renders(default_page):
    at = default_page
    for view in VIEWS:
        at.segmented_control(key="sp_view").set_value(view).run()
        _clean(at)
        assert at.get("plotly_chart"), view
        if view == "Batch":
            df = at.dataframe[0].value
            sp = list(df.speedup)                  # batch 1 .. 1024 (prompt 2048: KV-bound tail)
            assert sp[0] == max(sp) and sp[-1] < 0.85 * sp[0]
            assert list(df.batch) == sorted(df.batch) and not df.fits.iloc[-1]
        if view == "Published measurements":
            df = at.dataframe[0].value
            assert len(df) == len(compare_measurements())
            assert (df.status == "predicted").sum() >= 18
            assert any("Tolerance" in md.value for md in at.markdown)
            assert len(at.get("plotly_chart")) == 2              # scatter + MTP series


def test_url_settings_are_applied():
    at = _page(sp_gamma="6", sp_alpha="0.9", sp_draft=_draft("qwen2.5-0.5b"),
               model="qwen2.5-7b", sp_view="Latency")
    _clean(at)
    assert at.number_input(key="sp_gamma").value == 6
    assert at.number_input(key="sp_alpha").value == pytest.approx(0.9)
    assert at.selectbox(key="sp_draft").value == "qwen2.5-0.5b"
    assert at.segmented_control(key="sp_view").value == "Latency"
    assert float(_metric(at, "E tokens / step")) == pytest.approx(
        (1 - 0.9 ** 7) / (1 - 0.9), abs=0.01)


def test_bad_link_values_warn_and_fall_back():
    at = _page(sp_gamma="abc", sp_alpha="2", sp_draft="Nope", sp_view="Nope", sp_acc="zzz",
               sp_dhw="Atlantis")
    assert not at.exception
    warned = " ".join(w.value for w in at.warning)
    for key in ("sp_gamma", "sp_alpha", "sp_draft", "sp_view", "sp_acc", "sp_dhw"):
        assert key in warned, key
    assert at.number_input(key="sp_gamma").value == 4
    assert at.number_input(key="sp_alpha").value == pytest.approx(0.8)
    assert _speedup(at) > 1


def test_moe_target_with_heads_and_drafts():
    at = _page(model="mixtral-8x7b")                  # no small Mistral preset: EAGLE head
    _clean(at)
    assert at.selectbox(key="sp_draft").value == "eagle"
    assert _speedup(at) > 0
    for draft in ("mtp", "medusa", "ngram"):
        at.selectbox(key="sp_draft").set_value(draft).run()
        _clean(at)
    at.selectbox(key="sp_draft").set_value("mtp").run()
    at.segmented_control(key="sp_view").set_value("Latency").run()
    _clean(at)
    # the by-kind chart charges routed experts to the verification and to the MTP layer
    traces = {t["name"]: t["x"] for c in at.get("plotly_chart")
              for t in json.loads(c.proto.spec)["data"] if t.get("type") == "bar"
              and isinstance(t.get("x"), list) and t["x"] and isinstance(t["x"][0], str)}
    assert "moe_expert" in traces["verification"] and "moe_expert" in traces["draft"]
    deep = _page(model="deepseek-v3", sp_draft="Self-drafting head · DeepSeek MTP",
                 sp_view="Memory & energy")
    _clean(deep)


def test_head_of_a_given_size_changes_the_memory_overhead():
    small = _page(sp_draft="Self-drafting head · EAGLE-style", sp_head_m="100")
    large = _page(sp_draft="Self-drafting head · EAGLE-style", sp_head_m="2000")
    _clean(small)
    _clean(large)
    gb = [float(_metric(a, "Memory overhead").split()[0]) for a in (small, large)]
    # 1.9e9 more fp16 parameters = 3.8 GB more (GB = 1e9 B)
    assert gb[1] - gb[0] == pytest.approx(3.8, rel=0.05)
    assert _speedup(small) > _speedup(large)


def test_head_size_zero_shows_the_derived_size():
    """0 means "derived from the target": the page says how large that head is; a given size
    shows no such note."""
    from llmpara_core.presets import load_model
    from llmpara_core.speculative.drafts import head_draft
    derived = _page(sp_draft="Self-drafting head · EAGLE-style", model="llama-3-8b")
    _clean(derived)
    own_m = head_draft(load_model("llama-3-8b"), "eagle").own_params / 1e6
    notes = [c.value for c in derived.caption if c.value.startswith("0 = derived")]
    assert len(notes) == 1 and f"{own_m:.3g}" in notes[0].replace(",", ""), notes
    given = _page(sp_draft="Self-drafting head · EAGLE-style", sp_head_m="100")
    assert not [c for c in given.caption if c.value.startswith("0 = derived")]


def test_vocabulary_mismatch_warns():
    at = _page(sp_draft=_draft("gpt2-small"))
    assert not at.exception
    assert any("Vocabulary mismatch" in w.value for w in at.warning)


def test_draft_on_another_device_and_precision():
    base = _page(sp_draft=_draft("llama-3.2-3b"))
    other = _page(sp_draft=_draft("llama-3.2-3b"), sp_dhw=hardware_label("nvidia-b200"),
                  sp_dprec="W4A16")
    _clean(other)
    assert other.selectbox(key="sp_dhw").value == "nvidia-b200"
    assert _speedup(other) > _speedup(base)        # a 4-bit draft on a faster device


def test_acceptance_modes_and_bad_inputs():
    rates = _page(sp_acc="Per-position rates", sp_rates="0.9, 0.5", sp_gamma="2")
    _clean(rates)
    assert float(_metric(rates, "E tokens / step")) == pytest.approx(1 + 0.9 + 0.45, abs=0.01)
    bad = _page(sp_acc="Per-position rates", sp_rates="0.9, abc")
    assert not bad.exception
    assert any("not a comma-separated list" in e.value for e in bad.error)
    short = _page(sp_acc="Per-position rates", sp_rates="0.9", sp_gamma="4")
    assert not short.exception and any("give at least gamma" in e.value for e in short.error)
    big_e = _page(sp_acc="Measured E", sp_e="9", sp_gamma="4")
    assert not big_e.exception and any("is more than" in e.value for e in big_e.error)
    one_token = _page(gen="1")
    assert not one_token.exception and one_token.error
    zero = _page(sp_gamma="0")
    _clean(zero)
    assert _speedup(zero) == pytest.approx(1.0)


def test_target_is_selectable_on_the_page_and_defaults_to_the_sidebar_model(default_page):
    assert default_page.selectbox(key="sp_target").value == "sidebar"
    at = _page(sp_target=model_label("llama-3.1-70b"))
    _clean(at)
    assert at.selectbox(key="sp_target").value == "llama-3.1-70b"
    assert any("Llama-3.1 70B" in c.value.replace("\\", "") for c in at.caption)
    # a bigger target on the same device: slower plain decoding, the draft matters less
    assert _speedup(at) != _speedup(default_page)
    bad = _page(sp_target="Nope")
    assert not bad.exception
    assert any("sp_target" in w.value for w in bad.warning)


def test_expected_tokens_chart_follows_the_closed_form(default_page):
    at = default_page
    at.segmented_control(key="sp_view").set_value("Speedup").run()
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    e_fig = next(f for f in figs if "E[tokens" in json.dumps(f["layout"]))
    curve = next(t for t in e_fig["data"] if t.get("name") == "α = 0.8")
    for g, e in zip(curve["x"], curve["y"]):
        assert e == pytest.approx((1 - 0.8 ** (g + 1)) / 0.2, rel=1e-9)


def test_batch_charts_have_readable_axes(default_page):
    """Defect: the secondary log axis read "9, 1, 2, 4, 6, 1,042.633" and the sidebar-batch
    line was a log-axis shape (at 10^batch)."""
    at = default_page
    at.segmented_control(key="sp_view").set_value("Batch").run()
    _clean(at)
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(figs) == 2
    for f in figs:
        lay = f["layout"]
        assert "yaxis2" not in lay and not lay.get("shapes")
        assert lay["xaxis"]["ticktext"][:3] == ["1", "2", "4"]
    assert figs[1]["layout"]["yaxis"]["dtick"] == 1          # decades only on the log axis


def test_bad_rates_keep_the_link_warnings_and_copy_link():
    at = _page(sp_acc="Per-position rates", sp_rates="0.9, nope")
    assert not at.exception
    assert any("Acceptance per position" in e.value for e in at.error)
    assert any(e.label == "Copy link" for e in at.sidebar.expander)
