"""The Fleet page under AppTest: in the navigation, the traffic table and candidates come from
the link, a run gives the core's plan, a bad traffic row gives a warning, not a traceback."""

import json

from apptest_util import open_page

from llmpara_core.fleet import mix_from_dict, plan
from llmpara_core.presets import load_hardware

PAGE = "app_pages/fleet_page.py"
ROW = "tiny~Qwen2.5-0.5B~8.0~256~64~fixed~0.5~400.0~40.0~90.0"
HW = ["8x-nvidia-l40s-pcie", "8x-nvidia-h100-sxm-nvlink"]
LINK = dict(fl_w=[ROW], fl_hw=[load_hardware(h).name for h in HW],
            fl_prec=["FP8"], fl_fw=["vllm"], fl_tp=["1", "2"], fl_pp=["1"], fl_req="40")


def _clean(at, what):
    assert not at.exception, (what, [e.value for e in at.exception])
    assert not at.error, (what, [e.value for e in at.error])


def test_fleet_page_is_in_the_navigation():
    src = open("streamlit_app.py").read()
    assert '("Deployment", "app_pages/fleet_page.py", "Fleet"' in src


def test_default_view_shows_the_example_mix_and_the_ray_command():
    at = open_page(PAGE)
    _clean(at, "default")
    table = at.dataframe[0].value                # the traffic editor: the example mix
    assert table["model"].tolist() == ["Llama-3.1 8B", "Llama-3.1 70B", "Mixtral 8x7B",
                                       "DeepSeek-V3", "Qwen2.5 7B"]
    assert table["rate_rps"].tolist() == [50, 10, 5, 2, 20]
    assert any("--executor ray" in i.value for i in at.info)
    assert any(b.label == "Plan the fleet" for b in at.button)


def test_run_from_a_link_matches_the_core():
    at = open_page(PAGE, **LINK)
    _clean(at, "link")
    assert not at.warning, [w.value for w in at.warning]
    assert next(d.value for d in at.dataframe)["model"].tolist() == ["Qwen2.5 0.5B"]
    next(b for b in at.button if b.label == "Plan the fleet").click()
    at.run()
    _clean(at, "run")
    mix = mix_from_dict({"seed": 0, "requests": 40, "runners_up": 3,
                         "candidates": {"hardware": HW, "precisions": ["FP8"],
                                        "frameworks": ["vllm"], "tp": [1, 2], "pp": [1]},
                         "constraints": {"max_gpus_per_replica": 8},
                         "workload": [{"name": "tiny", "model": "Qwen2.5-0.5B", "rate_rps": 8.0,
                                       "isl": 256, "osl": 64, "lengths": "fixed", "spread": 0.5,
                                       "ttft_slo_ms": 400.0, "tpot_slo_ms": 40.0,
                                       "slo_percentile": 90.0}]})
    p = plan(mix)
    best = p.chosen[0]
    shown = next(d.value for d in at.dataframe if "Hardware" in d.value.columns)
    assert shown["Hardware"].tolist() == [best.hardware]
    assert shown["GPUs"].tolist() == [best.gpus]
    assert abs(shown["$/h"].iloc[0] - best.usd_per_hour) < 1e-9
    gpus = next(m for m in at.metric if m.label == "GPUs").value
    assert gpus == str(p.totals["gpus"])
    assert len(at.get("plotly_chart")) == 2                  # cost per workload, front


def test_bad_link_and_bad_row_warn():
    at = open_page(PAGE, fl_w=["not~a~row"], fl_hw=LINK["fl_hw"][:1], fl_prec=["FP8"],
                   fl_fw=["vllm"], fl_tp=["1"], fl_pp=["1"], fl_req="40")
    _clean(at, "bad link")
    assert any("fl_w" in w.value for w in at.warning), [w.value for w in at.warning]
    bad = dict(LINK, fl_w=["x~Qwen2.5-0.5B~-3~256~64~fixed~0.5~400~40~90"])
    at = open_page(PAGE, **bad)
    _clean(at, "bad row")
    assert any("rate_rps" in w.value for w in at.warning), [w.value for w in at.warning]
