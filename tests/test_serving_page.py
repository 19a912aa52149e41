"""The Serving page under streamlit.testing.v1.AppTest: every view renders clean, the numbers
are the core's, URL settings are applied, bad link values warn, impossible deployments give a
message (never a traceback)."""

import json

from apptest_util import metric, open_page

from llmpara_core import serving
from llmpara_core.calibration.stacks import with_stack
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from ui.format import sig

PAGE = "app_pages/serving_page.py"
BASE = dict(model="llama-3.1-8b", hardware="nvidia-h100-sxm", prompt="512", gen="128",
            sv_requests="150")


def _clean(at, what):
    assert not at.exception, (what, [e.value for e in at.exception])
    assert not at.error, (what, [e.value for e in at.error])


def test_default_view_matches_the_core():
    at = open_page(PAGE, **BASE, sv_search="false")
    _clean(at, "default")
    assert not at.warning, [w.value for w in at.warning]
    assert len(at.get("plotly_chart")) == 1                 # running batch / KV over time
    assert len(at.dataframe) >= 2                            # latency, capacity
    # no stack named: an H100's class default, vLLM (its profile and scheduler defaults)
    hw, stack = with_stack(load_hardware("nvidia-h100-sxm"))
    assert stack.name == "vllm"
    st = serving.serve(load_model("llama-3.1-8b"), hw, precision_preset("FP16"),
                       serving.RequestSpec(isl=512, osl=128, arrival="poisson", rate=1.0,
                                           requests=150),
                       serving.engine_config("vllm")[0], search=False)
    assert metric(at, "Requests/s") == sig(st.summary.requests_per_s)
    assert metric(at, "Max rate meeting SLO") == "–"
    cap = [d.value for d in at.dataframe if "plan" in d.value.columns][0]
    assert "saturation_rate" in cap.columns and "gpus" not in cap.columns   # no target rate


def test_url_settings_apply_and_views_render():
    at = open_page(PAGE, **BASE, sv_arrival="Max load", sv_maxbatch="32", sv_target="100",
                   sv_points="4")
    _clean(at, "max load")
    assert not at.warning, [w.value for w in at.warning]     # every link value was taken
    assert any("32 running requests" in c.value for c in at.caption)
    assert float(metric(at, "Mean running batch")) <= 32
    assert "req/s" in metric(at, "Max rate meeting SLO")
    assert any("GPUs** for 100 req/s" in c.value for c in at.caption)
    cap = [d.value for d in at.dataframe if "plan" in d.value.columns][0]
    assert cap["target_rate"].iloc[0] == 100 and cap["gpus"].iloc[0] >= 1
    for view, charts in (("Latency vs load", 2), ("Frontier", 1)):
        at.segmented_control(key="sv_view").set_value(view).run()
        _clean(at, view)
        assert len(at.get("plotly_chart")) == charts, view
        assert at.dataframe, view
        if view == "Latency vs load":      # p50/p90/p99 of TTFT, then of TPOT, each with its SLO
            figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
            for fig, m in zip(figs, ("TTFT", "TPOT")):
                names = [t.get("name") for t in fig["data"]]
                assert [f"{m} {q}" for q in ("p50", "p90", "p99")] == names[:3], names
                assert any(a.get("text") == f"SLO {m}" for a in fig["layout"]["annotations"])


def test_frontier_over_tensor_parallel_on_a_cluster():
    at = open_page(PAGE, **{**BASE, "sv_requests": "100"}, sv_view="Frontier",
                   sv_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)")
    _clean(at, "frontier")
    df = at.dataframe[0].value
    assert sorted(set(df.tp)) == [1, 2, 4, 8]
    assert df.on_front.any()


def test_disaggregated_view_on_a_cluster():
    at = open_page(PAGE, **{**BASE, "sv_requests": "100"}, sv_view="Disaggregated",
                   sv_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)", sv_dgpus="4")
    _clean(at, "disaggregated")
    assert len(at.dataframe[0].value) == 3                   # splits 1:3, 2:2, 3:1
    assert ":" in metric(at, "Best split (P:D)")
    at = open_page(PAGE, **{**BASE, "sv_requests": "50"}, sv_view="Disaggregated")
    assert not at.exception
    assert any("interconnect" in e.value for e in at.error)  # single device, no link


def test_bad_link_values_warn_and_fall_back():
    at = open_page(PAGE, **BASE, sv_rate="-3", sv_arrival="sometimes", sv_tp="zero",
                   sv_search="false")
    assert not at.exception
    texts = " ".join(w.value for w in at.warning)
    for key in ("sv_rate", "sv_arrival", "sv_tp"):
        assert key in texts, key
    assert metric(at, "Requests/s")


def test_impossible_deployments_give_messages():
    at = open_page(PAGE, **BASE, sv_tp="2", sv_search="false")        # no links
    assert not at.exception
    assert any("interconnect" in e.value for e in at.error)
    at = open_page(PAGE, **{**BASE, "prompt": "0"}, sv_search="false")
    assert not at.exception
    assert any("ISL" in e.value for e in at.error)


def test_a_small_kv_cache_shows_preemptions():
    # vLLM (the H100's default stack) takes the fraction of the device's total: 0.2 of 85.5 GB
    # leaves ~2,600 KV tokens beside the 16 GB of weights
    at = open_page(PAGE, **BASE, sv_arrival="Max load", sv_kvfrac="0.2", sv_search="false")
    _clean(at, "small KV")
    assert not at.warning, [w.value for w in at.warning]
    assert int(metric(at, "Preemptions").replace(",", "")) > 0
    fig = at.get("plotly_chart")[0].proto.spec
    assert "preemptions (cumulative)" in fig


def test_number_boxes_show_integer_like_values_without_decimals():
    """The boxes print their values with their own format (Streamlit's float default "%0.2f"
    showed SLO TTFT as 500.00 and the percentile as 90.00): every box of the page, at its
    default, shows the value the way it reads ("500", "90", "0.5", "1")."""
    at = open_page(PAGE, **BASE, sv_search="false")
    _clean(at, "default")
    shown = {b.label: (b.proto.format or "%0.2f") % b.value for b in at.number_input
             if b.value is not None}
    assert shown["SLO TTFT (ms)"] == "500" and shown["SLO percentile"] == "90"
    assert shown["Rate (req/s)"] == "1" and shown["Length spread"] == "0.5"
    for label, text in shown.items():
        assert not text.endswith((".00", ".0")), (label, text)


def test_lengths_from_a_data_set_and_an_mlperf_scenario_from_the_link():
    at = open_page(PAGE, **{**BASE, "sv_requests": "120"}, sv_lengths="openorca",
                   sv_scenario="server")
    _clean(at, "openorca server")
    assert not at.warning, [w.value for w in at.warning]
    assert any("openorca — 24,576 requests" in c.value for c in at.caption)
    assert any("p99 TTFT" in c.value and "2000 ms" in c.value for c in at.caption)
    # the core's answer for the same settings: at the largest rate meeting the p99 limits
    hw, _ = with_stack(load_hardware("nvidia-h100-sxm"))
    spec = serving.RequestSpec(table=serving.lengths.named("openorca"), requests=120)
    st = serving.serve(load_model("llama-3.1-8b"), hw, precision_preset("FP16"), spec,
                       serving.engine_config("vllm")[0],
                       slo=serving.scenarios.preset("server", "llama-3.1-8b").slo,
                       at_slo_rate=True)
    assert metric(at, "Requests/s") == sig(st.summary.requests_per_s)


def test_uploaded_lengths_and_bad_uploads():
    at = open_page(PAGE, **BASE, sv_lengths="upload", sv_search="false")
    _clean(at, "upload, no file")
    assert any("Upload a CSV" in i.value for i in at.info)


def test_tensorrt_llm_release_select():
    """The release select scales the run by its range's factor on the TensorRT-LLM stack; on
    another stack it warns and is ignored."""
    from llmpara_core.serving import stack_version as V
    at = open_page(PAGE, **BASE, fw="tensorrt-llm", sv_arrival="Max load", sv_search="false",
                   sv_release="0.10")
    _clean(at, "release 0.10")
    assert not at.warning, [w.value for w in at.warning]
    scale = V.range_scale("0.10", False)
    assert any(f"compute time x {scale:g}" in c.value for c in at.caption)
    hw, _ = with_stack(load_hardware("nvidia-h100-sxm"), "tensorrt-llm")
    st = serving.serve(load_model("llama-3.1-8b"), hw, precision_preset("FP16"),
                       serving.RequestSpec(isl=512, osl=128, arrival="max-load", requests=150),
                       serving.engine_config("tensorrt-llm")[0], search=False,
                       time_scale=scale)
    assert metric(at, "Requests/s") == sig(st.summary.requests_per_s)
    other = open_page(PAGE, **BASE, fw="vllm", sv_search="false", sv_release="0.10")
    _clean(other, "release on vllm")
    assert any("release is ignored" in w.value for w in other.warning)


def test_retired_release_link():
    """A link from before 0.11 and 0.12 were split names the old range: the page says why it is
    gone and runs the pooled profile, as with no release -- not the generic 'not one of the
    options' warning, and not a guess at 0.11 or 0.12."""
    at = open_page(PAGE, **BASE, fw="tensorrt-llm", sv_arrival="Max load", sv_search="false",
                   sv_release="0.11-0.12")
    _clean(at, "retired release")
    warns = [w.value for w in at.warning]
    retired = "0\\.11\\-0\\.12' is retired"       # the value is shown md-escaped
    assert any(retired in w and "0.11 and 0.12" in w and "'pooled'" in w for w in warns), warns
    assert not any("not one of the options" in w for w in warns), warns
    pooled = open_page(PAGE, **BASE, fw="tensorrt-llm", sv_arrival="Max load",
                       sv_search="false")
    assert metric(at, "Requests/s") == metric(pooled, "Requests/s")
    bad = open_page(PAGE, **BASE, fw="tensorrt-llm", sv_arrival="Max load", sv_search="false",
                    sv_release="0.99-1.0")
    assert any("not one of the options" in w.value for w in bad.warning)


def test_scheduler_select():
    """The scheduler select runs the core's prefill-first engine and says so."""
    at = open_page(PAGE, **BASE, sv_arrival="Max load", sv_search="false",
                   sv_sched="prefill-first")
    _clean(at, "prefill-first")
    assert not at.warning, [w.value for w in at.warning]
    assert any("prefill\\-first scheduler" in c.value for c in at.caption)   # md-escaped
    hw, _ = with_stack(load_hardware("nvidia-h100-sxm"))
    cfg = serving.engine_config("vllm", mixed_batches=False)[0]
    st = serving.serve(load_model("llama-3.1-8b"), hw, precision_preset("FP16"),
                       serving.RequestSpec(isl=512, osl=128, arrival="max-load", requests=150),
                       cfg, search=False)
    assert metric(at, "Requests/s") == sig(st.summary.requests_per_s)
