"""The Design space page under streamlit.testing.v1.AppTest: Quick Scan renders with the core's
numbers, URL settings are applied, bad links warn instead of crashing, edited ranges, swept TDP
and price, NSGA-II, and "Open in Overview" carries the design to the Overview's numbers."""

import pytest
from apptest_util import metric as _metric
from apptest_util import open_page
from streamlit.testing.v1 import AppTest

from llmpara_core import dse
from llmpara_core.dse import space as dse_space
from llmpara_core.metrics.cost import MetricsSettings
from llmpara_core.precision import precision_preset
from llmpara_core.calibration.stacks import with_stack
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.workload import Workload

PAGE = "app_pages/design_space_page.py"


def _label(key: str) -> str:
    """An objective as the page shows it (and as its URL holds it)."""
    o = dse.OBJECTIVES[key]
    return f"{o.label} [{o.unit}]" + (" ↑" if o.sense == "max" else " ↓")


def _page(**params) -> AppTest:
    return open_page(PAGE, **params)


def _count(at, label: str) -> int:
    return int(_metric(at, label).replace(",", ""))


def _core(space, model="llama-3-8b", **kw):
    # designs share the base's class default stack (the sidebar names none): vLLM on an H100
    ctx = dse.DesignContext(load_model(model), precision_preset("FP16"), Workload(),
                            with_stack(load_hardware(space.base_hardware))[0], MetricsSettings())
    return ctx, dse.explore(ctx, space, **kw)


def _derived(slug):
    return dse_space.find_space(slug).without_axis("tdp").without_axis("price")


@pytest.fixture(scope="module")
def quick():
    return _page(ds_tdp="derived")


def test_quick_scan_renders_the_cores_front(quick):
    at = quick
    assert not at.exception and not at.error
    space = _derived("quick-scan")
    _, res = _core(space)
    assert _count(at, "Designs evaluated") == space.grid_size == res.points_evaluated
    assert _count(at, "Feasible") == int(res.evaluation.feasible.sum())
    assert _count(at, "On the Pareto front") == len(res.front)
    assert len(at.dataframe[-1].value) == len(res.front)       # the front table
    assert len(at.get("plotly_chart")) >= 2                      # scatter + tornado
    assert any(b.label == "Open this design in the Overview" for b in at.button)


def test_url_settings_are_applied():
    at = _page(ds_preset="Edge/Mobile", ds_method="Random", ds_n="2000", ds_seed="3", ds_tdp="derived",
               ds_obj=[_label("tokens_per_s"), _label("price_usd")], model="llama-3.2-1b")
    assert not at.exception and not at.error
    assert at.selectbox(key="ds_preset").value == "edge-mobile"
    assert _count(at, "Designs evaluated") == 2000
    assert at.multiselect(key="ds_obj").value == ["tokens_per_s", "price_usd"]
    _, res = _core(_derived("edge-mobile"), "llama-3.2-1b", method="random", samples=2000,
                   seed=3, objectives=("tokens_per_s", "price_usd"))
    assert _count(at, "On the Pareto front") == len(res.front)


def test_bad_link_values_warn_and_fall_back():
    at = _page(ds_preset="nope", ds_n="abc", ds_method="Bogus", ds_tdp="sometimes")
    assert not at.exception
    text = " ".join(w.value for w in at.warning)
    for key in ("ds_preset", "ds_n", "ds_method", "ds_tdp"):
        assert key in text
    # the default sweep covers all five axes (TDP and price swept), as the reference tool's
    assert _count(at, "Designs evaluated") == dse_space.find_space("quick-scan").grid_size


def test_edited_ranges_and_their_errors():
    at = _page(ds_edit="true", ds_ranges="peak = [1, 2]\nbw = [100, 200, 300]\ncap = [64]\n")
    assert not at.exception and not at.error
    assert _count(at, "Designs evaluated") == 6
    bad = _page(ds_edit="true", ds_ranges="peak = [1, 2\n")
    assert not bad.exception
    assert any("not valid TOML" in e.value for e in bad.error)
    worse = _page(ds_edit="true", ds_ranges="bandwidth = [1, 2]\n")
    assert any("did you mean" in e.value and "bw" in e.value for e in worse.error)


def test_a_space_without_feasible_designs_says_why():
    at = _page(ds_preset="Edge/Mobile")            # 16 GB at most: Llama-3 8B FP16 needs more
    assert not at.exception and not at.error
    assert _count(at, "Feasible") == 0
    assert any("No design of this space is feasible" in w.value for w in at.warning)


def test_swept_tdp_and_price_use_the_whole_reference_grid():
    at = _page(ds_tdp="swept")
    assert not at.exception and not at.error
    assert _count(at, "Designs evaluated") == dse_space.find_space("quick-scan").grid_size == 243


def test_nsga_option_runs_and_shows_its_hypervolume_history():
    at = _page(ds_preset="Datacenter GPU", ds_method="NSGA-II", ds_pop="16", ds_gen="3",
               ds_tdp="derived")
    assert not at.exception and not at.error
    # every design of the 3 generations, not only the final population of 16 (defect 11)
    from llmpara_core.dse.nsga import run_nsga
    ctx, _ = _core(_derived("datacenter-gpu"), method="grid")
    res = run_nsga(ctx, _derived("datacenter-gpu"), dse.DEFAULT_OBJECTIVES, 16, 3, 0)
    assert _count(at, "Designs evaluated") == res.history[-1].evaluations > 16
    assert _metric(at, "Hypervolume") != "—"
    assert len(at.get("plotly_chart")) >= 3                      # + the hypervolume history


def _overview_matches(at, point):
    assert not at.exception
    numbers = at.session_state["overview_numbers"]              # set by the Overview page
    assert numbers["throughput_tokens_per_s"] == pytest.approx(point["tokens_per_s"], rel=1e-9)
    assert numbers["ttft_s"] == pytest.approx(point["ttft_s"], rel=1e-9)
    assert numbers["e2e_latency_s"] == pytest.approx(point["e2e_s"], rel=1e-9)


@pytest.mark.parametrize("params, base", [({"ds_tdp": "derived"}, "custom-hardware"),
                                           ({"ds_preset": "Datacenter GPU", "ds_tdp": "derived",
                                             "ds_method": "Latin hypercube", "ds_n": "500"},
                                            "nvidia-h100-sxm")])
def test_a_front_design_opens_in_the_overview(params, base):
    at = _page(**params)
    at.sidebar.radio(key="_chart_image_format").set_value("svg").run()   # a sidebar widget
    at.selectbox(key="ds_pick").set_value(1).run()
    lhs = "ds_preset" in params
    kw = {"method": "lhs", "samples": 500} if lhs else {}
    _, res = _core(_derived(dse_space.find_space(
        "datacenter-gpu" if lhs else "quick-scan").slug), **kw)
    point = res.evaluation.point(int(res.front[1]))
    at.button(key="ds_open").click().run()                      # one click: on the Overview
    assert not at.exception
    ss = at.session_state
    assert ss["hardware"] == base
    assert ss["bw"] == pytest.approx(point["bw_gbps"]) and ss["tdp"] == pytest.approx(
        point["tdp_w"])
    assert at.sidebar.radio(key="_chart_image_format").value == "svg"   # sidebar state kept
    assert at.sidebar.number_input(key="prompt").value == 2048
    assert any(t.value == "Overview" for t in at.title)
    opened = ss["_ds_opened_design"]              # the honest name, for the scenario label
    assert opened["name"].startswith("Design #2 (from ") and opened["hardware"] == base
    assert opened["overrides"]["bw"] == pytest.approx(point["bw_gbps"])
    # the Overview's scenario line names the design, not "<base> (edited)"
    captions = [c.value.replace("\\", "") for c in at.caption]      # markdown-escaped
    assert any(opened["name"] in c for c in captions), captions
    assert not any("(edited)" in c for c in captions)
    _overview_matches(at, point)


def test_bad_ranges_in_a_link_keep_the_page_the_warning_and_the_copy_link():
    """Defect 9: a bad ``ds_ranges`` blanked the page (no link warnings, no Copy link)."""
    at = _page(ds_edit="true", ds_ranges="peak = [1, 2\n")
    assert not at.exception
    assert any("ds_ranges" in e.value and "dropped" in e.value for e in at.error)
    assert any("ds_ranges" in w.value for w in at.warning)        # the link warning
    assert _count(at, "Designs evaluated") == dse_space.find_space("quick-scan").grid_size
    assert any(b.label == "Open this design in the Overview" for b in at.button)
    assert any(e.label == "Copy link" for e in at.sidebar.expander)


def test_co2_region_drives_the_carbon_objective():
    obj = [_label("tokens_per_s"), _label("gco2e_per_mtok")]
    world = _page(ds_tdp="derived", ds_obj=obj)
    iceland = _page(ds_tdp="derived", ds_obj=obj, ds_region="Iceland")
    assert not iceland.exception and not iceland.error
    assert iceland.selectbox(key="ds_region").value == "iceland"
    col = _label("gco2e_per_mtok")
    assert iceland.dataframe[-1].value[col].min() < world.dataframe[-1].value[col].min()


def test_designs_are_numbered_in_the_picker(quick):
    assert quick.selectbox(key="ds_pick").options[0].startswith("Design #1 · ")


def test_opened_design_name_holds_only_while_the_overrides_are_the_designs():
    from ui.opened_design import OPENED, opened_design_name
    state = {OPENED: {"name": "Design #3 (from NVIDIA H100 SXM5 80GB)",
                      "hardware": "nvidia-h100-sxm",
                      "overrides": {"peak_fp16": 500.0, "bw": 4000.0, "cap": 108.0,
                                    "tdp": 650.0, "price": 21000.0}}}
    same = (("peak_fp16", 500.0), ("bw", 4000.0), ("cap", 108.0), ("tdp", 650.0),
            ("price", 21000.0))
    assert opened_design_name(state, "nvidia-h100-sxm", same).startswith("Design #3")
    assert opened_design_name(state, "nvidia-a100-sxm-80gb", same) is None    # other base
    assert opened_design_name(state, "nvidia-h100-sxm", same[:-1]) is None    # edited after
    assert opened_design_name(state, "nvidia-h100-sxm", same + (("eff_memory", 0.5),)) is None
    assert opened_design_name({}, "nvidia-h100-sxm", same) is None


def test_sensitivity_multipliers_rerun_the_tornado(quick):
    import json
    at = quick
    at.segmented_control(key="ds_span").set_value("× 0.25 / × 4").run()
    assert not at.exception
    tornado = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert {t["name"] for t in tornado["data"]} >= {"× 0.25", "× 4"}


def test_base_hardware_default_reads_naturally():
    """The base-hardware box's default names the grid's own base device in words ("Custom
    Hardware (the grid's base)"), not "preset's: asic · Custom Hardware"."""
    at = _page(ds_preset="Datacenter GPU")
    assert not at.exception
    box = at.selectbox(key="ds_base")
    assert box.options[0] == "NVIDIA H100 SXM5 80GB (the grid's base)"
    assert not any(o.startswith("preset's") for o in box.options)
