"""The Metrics page under streamlit.testing.v1.AppTest: every view renders clean, the
hardware comparison covers every preset (the ones that do not fit are marked, not dropped),
URL settings are applied, bad links warn instead of crashing, the reference model toggle and
the validation against published measurements are shown."""

import pytest
from apptest_util import metric as _metric
from apptest_util import open_page
from streamlit.testing.v1 import AppTest

from llmpara_core.presets import list_presets

PAGE = "app_pages/metrics_page.py"


def _page(**params) -> AppTest:
    return open_page(PAGE, **params)


def _number(text: str) -> float:
    return float(text.replace("$", "").replace(",", "").split()[0])


@pytest.fixture(scope="module")
def default_page():
    return _page()


def test_energy_view_renders(default_page):
    at = default_page
    assert not at.exception
    assert not at.error
    assert _metric(at, "Energy / output token").endswith(" J")
    assert _metric(at, "$ / M output tokens").startswith("$")
    assert _number(_metric(at, "gCO2e / M tokens")) > 0
    assert len(at.get("plotly_chart")) >= 3          # roofline, breakdown, operator bars
    assert any("Energy roofline" in h.value for h in at.subheader)


def test_every_view_renders_and_comparison_covers_every_preset(default_page):
    at = default_page
    for view in ("Cost & carbon", "Compare hardware", "Validation", "Energy"):
        at.segmented_control(key="m_view").set_value(view).run()
        assert not at.exception, view
        assert not at.error, view
        if view == "Compare hardware":
            df = at.dataframe[-1].value
            assert len(df) == len(list_presets("hardware"))
            assert df["error"].isna().all()
            assert (df["fits"] == "does not fit").any()      # kept and marked, not dropped
            assert df["j_per_token"].notna().all()
        if view == "Validation":
            assert _number(_metric(at, "Rows compared")) >= 30
            assert any("Tolerance" in md.value for md in at.markdown)
            # the power model under load: every ML.ENERGY row, the held-out figure shown
            from llmpara_core.metrics.energy_validation import recorded_fit
            held = _metric(at, "Batched rows, held out by device")
            assert held == f"{100 * recorded_fit()['batched']:.1f} %"
            assert any(len(d.value) == 60 for d in at.dataframe)


def test_url_settings_are_applied():
    world = _page()
    france = _page(m_region="France", m_pue="1.1")
    assert not france.exception
    assert france.selectbox(key="m_region").value == "france"
    assert france.number_input(key="m_pue").value == pytest.approx(1.1)
    assert _number(_metric(france, "gCO2e / M tokens")) < _number(_metric(world, "gCO2e / M tokens"))
    # energy per token does not depend on the grid
    assert _metric(france, "Energy / output token") == _metric(world, "Energy / output token")


def test_reference_tdp_fraction_toggle():
    at = _page(m_model="tdp-fraction", m_alpha="0.6")
    assert not at.exception
    assert any("TDP-fraction" in i.value for i in at.info)
    base = _page()
    assert _metric(at, "Energy / output token") != _metric(base, "Energy / output token")


def test_bad_link_values_warn_and_fall_back():
    at = _page(m_pue="abc", m_view="Nope", m_region="Atlantis", m_emb="-5")
    assert not at.exception
    warned = " ".join(w.value for w in at.warning)
    for key in ("m_pue", "m_view", "m_region", "m_emb"):
        assert key in warned
    assert at.number_input(key="m_pue").value == pytest.approx(1.25)


@pytest.mark.parametrize("hardware", ["cambricon-llm-chiplet", "apple-m4", "nvidia-h200-sxm",
                                      "8x-nvidia-h100-sxm-nvlink"])
def test_special_devices(hardware):
    """Tiered memory, no TDP (static power unknown), no price, cluster preset."""
    at = _page(hardware=hardware)
    assert not at.exception and not at.error
    at.segmented_control(key="m_view").set_value("Cost & carbon").run()
    assert not at.exception


def test_errors_are_messages_not_tracebacks():
    no_tdp = _page(hardware="apple-m4", m_model="tdp-fraction")
    assert not no_tdp.exception
    assert any("no TDP" in e.value for e in no_tdp.error)
    no_tokens = _page(gen="0")
    assert not no_tokens.exception
    assert any("no output tokens" in e.value for e in no_tokens.error)


def test_energy_constant_overrides():
    at = _page(m_static="0", m_pjflop="0", m_pjbyte="0")
    assert not at.exception
    assert _number(_metric(at, "Energy / output token")) == 0


def _log_span(axis: dict, values) -> float:
    """Decades a log axis spans: its explicit range, else the data's range."""
    import math
    if axis.get("range"):
        return abs(axis["range"][1] - axis["range"][0])
    v = [x for x in values if isinstance(x, (int, float)) and x > 0]
    return math.log10(max(v) / min(v))


def test_energy_roofline_axis_spans_the_data_not_10_to_the_ridge(default_page):
    """Defect: a vertical line at the time ridge (183 FLOP/B) drawn as a layout shape on a log
    axis was read as 10^183 and stretched the axis over 220 decades."""
    import json
    at = default_page
    at.segmented_control(key="m_view").set_value("Energy").run()
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert not fig["layout"].get("shapes")            # no log-axis shapes at all
    xs = [x for tr in fig["data"] if isinstance(tr.get("x"), list) for x in tr["x"]]
    assert _log_span(fig["layout"]["xaxis"], xs) <= 12
    marker = [tr for tr in fig["data"] if "time ridge" in " ".join(tr.get("text") or [""])]
    assert marker and 1 < marker[0]["x"][0] < 10_000  # the ridge, in FLOP/B, on the data's scale


def test_cost_view_shows_tco_per_eflop_kwh_and_gflops_per_dollar(default_page):
    at = default_page
    at.segmented_control(key="m_view").set_value("Cost & carbon").run()
    assert not at.exception
    assert _metric(at, "TCO per EFLOP").startswith("$")
    assert _number(_metric(at, "kWh / M output tokens")) > 0
    assert _number(_metric(at, "GFLOPS / $")) > 0


def test_operator_energy_controls_rerun_their_fragment():
    import json
    at = _page()
    at.segmented_control(key="m_phase").set_value("prefill").run()
    assert not at.exception
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = [f["layout"].get("xaxis", {}).get("title", {}).get("text") for f in figs]
    assert "J (prefill, whole batch)" in titles
