"""The Sharding page under streamlit.testing.v1.AppTest: every view renders clean on every
cluster preset and on a single device, URL settings are applied, bad link values and invalid
plans give messages (never tracebacks), "Use this plan" applies the best plan, and the
comparison with published TP measurements is shown."""

import pytest
from apptest_util import metric as _metric
from apptest_util import open_page
from streamlit.testing.v1 import AppTest

from llmpara_core.calibration import tp_measurements as P
from llmpara_core.presets import list_presets, load_hardware

PAGE = "app_pages/sharding_page.py"
CLUSTERS = [load_hardware(i.slug) for i in list_presets("hardware")
            if load_hardware(i.slug).interconnect]
VIEWS = ("Per device", "Scaling", "Best plan", "Published measurements")


def _page(**params) -> AppTest:
    return open_page(PAGE, **params)


def _errors(at) -> list[str]:
    """Error texts without the markdown escapes the page adds to core messages."""
    return [e.value.replace("\\", "") for e in at.error]


def _clean(at, what):
    assert not at.exception, (what, [e.value for e in at.exception])
    assert not at.error, (what, [e.value for e in at.error])


def test_there_are_seven_cluster_presets():
    assert len(CLUSTERS) >= 7
    assert {c.interconnect.topology.value for c in CLUSTERS} >= {"ring", "fully-connected"}
    assert any(c.interconnect.devices_per_node for c in CLUSTERS)      # a multi-node one


@pytest.mark.parametrize("hw", CLUSTERS, ids=lambda h: h.slug)
def test_every_view_renders_clean_on_every_cluster(hw):
    n = hw.interconnect.devices
    tp = max(d for d in (1, 2, 4, 8) if d <= n)
    at = _page(model="llama-3.1-8b", sh_cluster=hw.name, sh_tp=str(tp),
               sh_pp=str(n // tp), batch="4", prompt="512", gen="64")
    _clean(at, "Per device")
    assert not at.warning, [w.value for w in at.warning]
    assert _metric(at, "Devices") == str(n)
    assert len(at.get("plotly_chart")) == 2                  # memory, time breakdown
    assert at.dataframe[0].value["participants"].max() == tp  # collectives table
    for view in VIEWS[1:3]:
        at.segmented_control(key="sh_view").set_value(view).run()
        _clean(at, view)
        assert at.dataframe, view


def _banner(at) -> str:
    return " ".join(i.value for i in at.info).replace("\\", "")


def test_a_cluster_preset_says_it_replaces_the_sidebar_device():
    """Issue 28, item 1: an override of the sidebar's device is a visible banner naming both."""
    at = _page(hardware="nvidia-a100-sxm-80gb", model="llama-3.1-8b",
               sh_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)")
    _clean(at, "Per device")
    banner = _banner(at)
    assert "runs on **8x NVIDIA H100 SXM5 80GB (NVLink)**" in banner, banner
    assert "sidebar's **NVIDIA A100 SXM4 80GB**" in banner, banner
    same = _page(hardware="nvidia-h100-sxm", model="llama-3.1-8b",
                 sh_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)")
    assert "not on the sidebar" not in _banner(same)


def test_the_device_box_follows_the_sidebar():
    """Issue 28, item 1: the page opened first (H100 sidebar → the 8×H100 cluster), then the
    sidebar set to 8×H200: the page runs on the 8×H200, not on the H100s it started with."""
    at = _page(model="llama-3-70b")
    _clean(at, "Per device")
    assert at.selectbox(key="sh_cluster").value == "8x-nvidia-h100-sxm-nvlink"
    at.sidebar.selectbox(key="hardware").set_value("8x-nvidia-h200-sxm-nvlink").run()
    _clean(at, "Per device")
    assert at.selectbox(key="sh_cluster").value == "sidebar"
    assert not any("Does not fit" in e for e in _errors(at))
    assert "not on the sidebar" not in _banner(at)
    # a page that overrides stays overridden while the sidebar stays put, with the banner
    at.selectbox(key="sh_cluster").set_value("8x-amd-mi300x-infinity-fabric").run()
    assert "not on the sidebar's **8x NVIDIA H200" in _banner(at), _banner(at)


def test_single_device_preset_allows_dp_only():
    at = _page(hardware="nvidia-h100-sxm", model="llama-3.1-8b", sh_cluster="Sidebar hardware",
               sh_dp="2", batch="4")
    assert not at.exception and not at.error
    assert any("only data parallelism" in w.value for w in at.warning)
    assert _metric(at, "Devices") == "2"
    at.number_input(key="sh_tp").set_value(2).run()
    assert not at.exception
    assert any("no [interconnect] section" in e for e in _errors(at))
    for view in VIEWS[1:]:
        at.segmented_control(key="sh_view").set_value(view).run()
        assert not at.exception, view


def test_url_settings_are_applied_and_change_the_result():
    one = _page(model="llama-3.1-70b", sh_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)",
                sh_tp="2", batch="1")
    four = _page(model="llama-3.1-70b", sh_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)",
                 sh_tp="8", sh_overlap="0.5", sh_vocab="false", batch="1")
    for at in (one, four):
        _clean(at, "url")
    assert four.number_input(key="sh_tp").value == 8
    assert four.number_input(key="sh_overlap").value == pytest.approx(0.5)
    assert four.toggle(key="sh_vocab").value is False
    t2 = float(_metric(one, "TPOT").split()[0])
    t8 = float(_metric(four, "TPOT").split()[0])
    assert t8 < t2                                          # ms, both


def test_bad_link_values_warn_and_invalid_plans_are_errors():
    at = _page(sh_tp="abc", sh_view="Nope", sh_cluster="Atlantis", sh_overlap="7")
    assert not at.exception
    warned = " ".join(w.value for w in at.warning)
    for key in ("sh_tp", "sh_view", "sh_cluster", "sh_overlap"):
        assert key in warned
    bad = _page(model="llama-3.1-8b", sh_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)",
                sh_tp="3")
    assert not bad.exception
    assert any("cannot run" in e and "valid TP" in e for e in _errors(bad))
    moe = _page(model="llama-3.1-8b", sh_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)",
                sh_ep="2")
    assert any("mixture-of-experts" in e for e in _errors(moe)) and not moe.exception
    big = _page(model="llama-3.1-405b", sh_cluster="2x NVIDIA GeForce RTX 4090 (PCIe)",
                sh_tp="2")
    assert not big.exception
    assert any("Does not fit" in e for e in _errors(big))


def test_best_plan_view_and_use_this_plan():
    at = _page(model="llama-3.1-70b", sh_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)",
               sh_view="Best plan", batch="8")
    _clean(at, "best")
    assert any("Best:" in s.value and "TP8" in s.value for s in at.success)
    at.button(key="sh_use_best").click().run()
    _clean(at, "use")
    assert at.number_input(key="sh_tp").value == 8
    assert at.segmented_control(key="sh_view").value == "Per device"


def test_published_measurements_view_shows_the_comparison():
    at = _page(sh_view="Published measurements")
    _clean(at, "published")
    summary, rows = at.dataframe[0].value, at.dataframe[1].value
    assert set(summary["framework"]) == set(P.TP_TOLERANCES)
    assert summary["test tolerance"].str.contains("within").all()
    assert len(rows) == len(P.load_tp_measurements().rows)
    assert {"T0005", "T0006", "T0007"} <= set(rows["row_id"])     # Llama-2-70B on A100s
    assert len(at.get("plotly_chart")) == 2                      # one chart per framework


H100X8 = "8x NVIDIA H100 SXM5 80GB (NVLink)"


def test_link_bandwidth_latency_and_topology_are_editable_and_in_the_link():
    base = dict(model="llama-3.1-70b", sh_cluster=H100X8, sh_tp="8", batch="1")
    preset = _page(**base)
    slow = _page(**base, sh_linkbw="10", sh_linklat="50", sh_topo="ring")
    for at in (preset, slow):
        _clean(at, "links")
    assert slow.number_input(key="sh_linkbw").value == pytest.approx(10)
    assert slow.number_input(key="sh_linklat").value == pytest.approx(50)
    assert slow.selectbox(key="sh_topo").value == "ring"
    caption = " ".join(c.value for c in slow.caption).replace("\\", "")
    assert "10.0 GB/s per device" in caption and "50.0 µs" in caption and "ring" in caption
    assert float(_metric(slow, "TPOT").split()[0]) > float(_metric(preset, "TPOT").split()[0])
    bad = _page(**base, sh_linkbw="-3", sh_topo="hypercube")
    assert not bad.exception
    text = " ".join(w.value for w in bad.warning)
    assert "sh_linkbw" in text and "sh_topo" in text


def test_scaling_chart_is_log_log_and_efficiency_is_a_percentage():
    import json
    at = _page(model="llama-3.1-70b", sh_cluster=H100X8, sh_view="Scaling")
    _clean(at, "scaling")
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    speed, eff = figs[0]["layout"], figs[1]["layout"]
    assert speed["xaxis"]["type"] == "log" and speed["yaxis"]["type"] == "log"  # ideal = diagonal
    assert speed["xaxis"]["ticktext"][:4] == ["1", "2", "4", "8"]
    assert eff["yaxis"]["ticksuffix"] == " %" and eff["yaxis"]["range"][0] == 0
    assert "yaxis2" not in speed                    # no second axis under the legend
