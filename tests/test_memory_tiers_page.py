"""The Memory tiers page under streamlit.testing.v1.AppTest: every view renders clean for every
tiered preset and for edited tiers (link and table edits), bad edits and bad links give
messages instead of tracebacks, and the numbers shown are the core's."""

import logging
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from llmpara_core.analysis import analyze
from llmpara_core.calibration.stacks import with_stack
from llmpara_core.presets import list_presets, load_hardware, load_model
from llmpara_core.precision import PRECISION_PRESETS
from llmpara_core.tiers import hetero
from llmpara_core.tiers.formats import decode_tiers, tier_table, tiers_from_table
from llmpara_core.tiers.report import check_reference_claims, tier_migration
from llmpara_core.workload import Workload
from ui.format import fmt_time, sig

logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").disabled = True
APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
PAGE = "app_pages/memory_tiers_page.py"
VIEWS = ("Placement", "Time per tier", "Precision sweep", "Batch sweep", "Operators", "Energy",
         "Reference claims")
TIERED = [i.slug for i in list_presets("hardware") if load_hardware(i.slug).memory_tiers]
EDITOR = "mt_editor_0"
FP16 = PRECISION_PRESETS["FP16"]


def _page(edits: dict | None = None, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    if edits is not None:      # the tier table's edit state, as the browser would send it
        at.session_state[EDITOR] = {"edited_rows": {}, "added_rows": [], "deleted_rows": [],
                                    **edits}
    at.run()
    at.switch_page(PAGE)
    at.run()
    return at


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _expected(at, hw, **kw):
    """The core's result for the page's sidebar scenario on ``hw``."""
    ss = at.session_state
    wl = Workload(int(ss["batch"]), int(ss["prompt"]), int(ss["gen"]), bool(ss["flash"]))
    return hetero(load_model(ss["model"]), hw, FP16, wl, **kw)


def test_tiered_presets_exist():
    assert {"cambricon-llm-chiplet", "flash-llm-nand-storage", "nand-pim-near-storage",
            "custom-heterogeneous"} <= set(TIERED)


@pytest.mark.parametrize("slug", TIERED)
def test_every_view_renders_for_every_tiered_preset(slug):
    hw = load_hardware(slug)
    at = _page(mt_hw=hw.name)
    _clean(at)
    assert at.selectbox(key="mt_hw").value == slug
    assert len(at.data_editor) == 1 and list(at.data_editor[0].value["name"]) == [
        t.name for t in hw.tiers]
    want = _expected(at, hw)
    assert _metric(at, "Tokens/s per sequence") == sig(want.estimated.decode_tokens_per_s)
    for view in VIEWS:
        at.segmented_control(key="mt_view").set_value(view).run()
        _clean(at)
        assert at.get("plotly_chart") or view == "Reference claims", view
    assert at.get("download_button")


def test_tiered_sidebar_device_is_the_default_source():
    at = _page(hardware="flash-llm-nand-storage")
    _clean(at)
    assert at.selectbox(key="mt_hw").value == "sidebar"
    hw = load_hardware("flash-llm-nand-storage")
    assert _metric(at, "Aggregate tokens/s") == sig(
        _expected(at, hw).estimated.throughput_tokens_per_s)


def test_device_without_tiers_is_one_tier_and_equals_the_plain_roofline():
    at = _page(hardware="nvidia-h100-sxm", **{"mt_hw": "Sidebar hardware"})
    _clean(at)
    assert any("no memory hierarchy" in i.value for i in at.info)
    ss = at.session_state
    # the sidebar names no stack: the H100 runs under its class default (vLLM)
    rep = analyze(load_model(ss["model"]), with_stack(load_hardware("nvidia-h100-sxm"))[0], FP16,
                  Workload(int(ss["batch"]), int(ss["prompt"]), int(ss["gen"])))
    assert _metric(at, "TPOT") == fmt_time(rep.estimated.tpot_s)


def test_edited_tiers_from_the_link():
    link = "SRAM:1:8000:1:1;HBM:24:1000:4:100;Flash:512:28:25:100000"
    at = _page(mt_tiers=link)
    _clean(at)
    assert list(at.data_editor[0].value["name"]) == ["SRAM", "HBM", "Flash"]
    hw = load_hardware("cambricon-llm-chiplet")
    edited = hw.with_overrides(memory_tiers=decode_tiers(link))
    assert _metric(at, "Tokens/s per sequence") == sig(
        _expected(at, edited).estimated.decode_tokens_per_s)
    assert _metric(at, "Tokens/s per sequence") != sig(
        _expected(at, hw).estimated.decode_tokens_per_s)
    share = " ".join(c.value for c in at.sidebar.code)
    assert "mt_tiers=" in share
    for view in VIEWS:
        at.segmented_control(key="mt_view").set_value(view).run()
        _clean(at)


@pytest.mark.parametrize("edits,n_tiers", [
    ({"edited_rows": {"1": {"capacity_GB": 32.0}}}, 3),                 # DRAM doubled
    ({"added_rows": [{"name": "CXL", "capacity_GB": 64.0, "bandwidth_GBps": 64.0}]}, 4),
    ({"deleted_rows": [0]}, 2),                                          # no SRAM
    ({"added_rows": [{}]}, 3),                                           # a blank row: ignored
])
def test_table_edits_are_applied(edits, n_tiers):
    at = _page(edits=edits)
    _clean(at)
    base = load_hardware("cambricon-llm-chiplet")
    rows = tier_table(base.tiers)                 # the table the page starts from
    for i, change in edits.get("edited_rows", {}).items():
        rows[int(i)].update(change)
    rows = [r for i, r in enumerate(rows) if i not in edits.get("deleted_rows", [])]
    rows += edits.get("added_rows", [])
    tiers = tiers_from_table(rows)
    assert len(tiers) == n_tiers
    edited = base.with_overrides(memory_tiers=tuple(tiers))
    assert _metric(at, "Tokens/s per sequence") == sig(
        _expected(at, edited).estimated.decode_tokens_per_s)
    if n_tiers != 3 or "edited_rows" in edits:
        assert at.button(key="mt_reset").disabled is False
        assert "mt_tiers=" in " ".join(c.value for c in at.sidebar.code)
    else:
        assert at.button(key="mt_reset").disabled is True


@pytest.mark.parametrize("edits,msg", [
    ({"edited_rows": {"0": {"bandwidth_GBps": -5.0}}}, "bandwidth"),
    ({"edited_rows": {"1": {"capacity_GB": None}}}, "capacity"),
    ({"edited_rows": {"2": {"name": "DRAM"}}}, "repeats"),
    ({"edited_rows": {"2": {"name": "Fl;ash"}}}, "name"),
    ({"added_rows": [{"name": "X", "bandwidth_GBps": 10.0}]}, "capacity"),
    ({"deleted_rows": [0, 1, 2]}, "at least one"),
    ({"edited_rows": {"0": {"latency_ns": 1e300}}}, "latency"),
])
def test_bad_table_edits_are_errors_not_tracebacks(edits, msg):
    at = _page(edits=edits)
    assert not at.exception
    assert any(msg in e.value.replace("\\", "") for e in at.error)
    assert not at.metric                     # nothing computed from invalid tiers


def test_bad_links_warn_and_fall_back():
    at = _page(mt_tiers="SRAM:abc:1:1:1", mt_view="Nope", mt_strategy="fastest",
               mt_hw="Atlantis", mt_prefetch="maybe", mt_overlap="both")
    assert not at.exception and not at.error
    warned = " ".join(w.value for w in at.warning)
    for key in ("mt_tiers", "mt_view", "mt_strategy", "mt_hw", "mt_prefetch", "mt_overlap"):
        assert key in warned
    assert list(at.data_editor[0].value["name"]) == ["SRAM", "DRAM", "Flash"]


def test_pins_and_bad_pins():
    at = _page(mt_strategy="pinned", mt_pins="embedding=Flash; kv_cache=SRAM")
    _clean(at)
    hw = load_hardware("cambricon-llm-chiplet")
    want = _expected(at, hw, strategy="pinned", pins=(("embedding", "Flash"), ("kv_cache", "SRAM")))
    assert _metric(at, "Tokens/s per sequence") == sig(want.estimated.decode_tokens_per_s)
    for pins, msg in (("foo=SRAM", "unknown selector"), ("embedding=HBM", "unknown tier"),
                      ("garbage", "SELECTOR=TIER"), ("ffn=SRAM", "does not fit")):
        bad = _page(mt_pins=pins)
        assert not bad.exception
        assert any(msg in e.value.replace("\\", "") for e in bad.error), pins


def test_infeasible_scenario_is_a_message_and_the_sweep_still_shows_where_it_fits():
    at = _page(model="llama-3-70b", mt_hw="Custom Heterogeneous", mt_view="Precision sweep")
    assert not at.exception
    assert any("does not fit" in e.value for e in at.error)
    df = at.dataframe[-1].value
    ss = at.session_state
    pts = tier_migration(load_model("llama-3-70b"), load_hardware("custom-heterogeneous"), FP16,
                         Workload(int(ss["batch"]), int(ss["prompt"]), int(ss["gen"])))
    assert list(df["fits"]) == [p.feasible for p in pts]
    assert not df["fits"].iloc[0] and df["fits"].iloc[-1]     # FP16 does not fit, 2 bits does
    at.segmented_control(key="mt_view").set_value("Placement").run()
    assert not at.exception and any("Nothing to show" in i.value for i in at.info)


def test_moe_model_with_skewed_experts():
    at = _page(model="mixtral-8x7b", mt_strategy="hot-first", mt_zipf="1.2",
               mt_view="Operators")
    _clean(at)
    hw = load_hardware("cambricon-llm-chiplet")
    want = _expected(at, hw, strategy="hot-first", expert_zipf_s=1.2)
    assert _metric(at, "Tokens/s per sequence") == sig(want.estimated.decode_tokens_per_s)


def test_reference_claims_panel_states_the_corrected_figures():
    at = _page(mt_view="Reference claims")
    _clean(at)
    c = check_reference_claims(load_model("Llama-3 8B"), load_hardware("cambricon-llm-chiplet"),
                               FP16)
    table = at.dataframe[-1].value
    fp16 = table[table["claim"] == "FP16 tokens/s"].iloc[0]
    assert fp16["reference code"] == sig(c.reference_fp16.decode_tokens_per_s)
    assert fp16["per-tier, greedy"].split()[0] == sig(c.greedy_fp16.ideal.decode_tokens_per_s)
    assert fp16["per-tier, hot-first"].split()[0] == sig(c.hot_first_fp16.ideal.decode_tokens_per_s)
    speed = table[table["claim"] == "INT4 speed-up over FP16"].iloc[0]
    assert speed["paper"] == "35×"
    assert speed["per-tier, greedy"] == f"{sig(c.greedy_int4_speedup)}×"
    text = " ".join(m.value for m in at.markdown)
    assert "1.40 GB" in text and "Why not" in text


def test_bad_pins_keep_the_page_and_the_copy_link():
    bad = _page(mt_pins="garbage")
    assert not bad.exception
    assert any("were dropped" in e.value for e in bad.error)
    assert any(e.label == "Copy link" for e in bad.sidebar.expander)
    assert _metric(bad, "Tokens/s per sequence")          # placed without the pins
