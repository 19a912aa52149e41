"""Issue 28 (the first ten minutes) under streamlit.testing.v1.AppTest: the sidebar scenario
holds on the Serving page, Serving answers with the smallest deployment that fits, a missing
price reads "—" with its reason, tables show labels with units (never snake_case) and captions
show web addresses unescaped."""

from apptest_util import metric, open_page

PAGE = "app_pages/serving_page.py"
QUICK = dict(prompt="512", gen="64", sv_requests="40", sv_search="false")


def _clean(at, what):
    assert not at.exception, (what, [e.value for e in at.exception])
    assert not at.error, (what, [e.value for e in at.error])


def _infos(at) -> str:
    return " ".join(i.value for i in at.info).replace("\\", "")


def test_serving_picks_the_smallest_tp_that_fits():
    """70B at FP16 (140 GB of weights) on one H200 (141 GB): no room for a KV cache. The page
    says so, runs it at TP 2 on the 8×H200 preset of the same device and shows results."""
    at = open_page(PAGE, model="llama-3-70b", hardware="nvidia-h200-sxm", **QUICK)
    _clean(at, "auto TP")
    info = _infos(at)
    assert "does not fit on one NVIDIA H200" in info and "**TP 2**" in info, info
    assert "8x NVIDIA H200" in info, info
    assert float(metric(at, "Requests/s")) > 0
    cap = [d.value for d in at.dataframe if "plan" in d.value.columns][0]
    assert cap["gpus_per_replica"].iloc[0] == 2
    # an explicit TP is the reader's: no automatic choice then (and the error says why)
    at = open_page(PAGE, model="llama-3-70b", hardware="nvidia-h200-sxm", sv_tp="1", sv_pp="1",
                   sv_cluster="Sidebar hardware", **QUICK)
    assert "TP 2" in _infos(at)              # TP 1 is the default: still the automatic choice
    fits = open_page(PAGE, model="llama-3.1-8b", hardware="nvidia-h200-sxm", **QUICK)
    _clean(fits, "fits at TP 1")
    assert "does not fit" not in _infos(fits)


def test_a_missing_cluster_price_reads_dash_with_its_reason():
    at = open_page(PAGE, model="llama-3.1-8b", hardware="8x-nvidia-h200-sxm-nvlink", **QUICK)
    _clean(at, "no price")
    cap = [d for d in at.dataframe if "plan" in d.value.columns][0]
    assert cap.value["usd_per_million_tokens"].isna().all()          # unknown, not 0
    assert cap.proto.placeholder == "—"                               # shown as "—"
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "no sourced price" in captions and "sum of its devices' prices" in captions
    priced = open_page(PAGE, model="llama-3.1-8b", hardware="8x-nvidia-h100-sxm-nvlink", **QUICK)
    row = [d.value for d in priced.dataframe if "plan" in d.value.columns][0].iloc[0]
    assert row["replica_price_usd"] == 30000 * row["gpus_per_replica"]   # the sum of devices
    assert row["usd_per_million_tokens"] > 0
    # the phone's rendering: the same figures as label | value rows, dollars as dollars
    for page, want in ((at, "—"), (priced, "$")):
        rec = [d.value for d in page.dataframe if list(d.value.columns) == ["quantity", "value"]]
        assert len(rec) == 1
        shown = dict(zip(rec[0]["quantity"], rec[0]["value"]))
        assert shown["$ / M output tokens"].startswith(want), shown
        assert not any("e+" in v for v in shown.values()), shown
    assert shown["price / replica ($)"] == f"${30000 * row['gpus_per_replica']:,.2f}"


def test_serving_devices_follow_the_sidebar():
    at = open_page(PAGE, model="llama-3.1-8b", sv_cluster="8x NVIDIA H100 SXM5 80GB (NVLink)",
                   **QUICK)
    _clean(at, "cluster")
    at.sidebar.selectbox(key="hardware").set_value("nvidia-a100-sxm-80gb").run()
    _clean(at, "sidebar changed")
    assert at.selectbox(key="sv_cluster").value == "sidebar"
    at.selectbox(key="sv_cluster").set_value("8x-amd-mi300x-infinity-fabric").run()
    info = _infos(at)
    assert "runs on **8x AMD Instinct MI300X" in info and "sidebar's **NVIDIA A100" in info, info


def test_tables_have_labels_with_units_and_captions_unescaped_urls():
    at = open_page(PAGE, model="llama-3.1-8b", hardware="8x-nvidia-h100-sxm-nvlink",
                   fw="tensorrt-llm", sv_view="Frontier", **QUICK)
    _clean(at, "frontier")
    df = at.dataframe[0]
    labels = {c.label for c in _column_configs(df)}
    assert {"TPOT p50 (ms)", "output tokens/s per GPU"} <= labels, labels
    assert not [c for c in _shown_columns(df) if "_" in c and c not in _configured(df)]
    captions = " ".join(c.value for c in at.caption)
    assert "https://nvidia.github.io/TensorRT-LLM/" in captions
    assert "nvidia\\.github" not in captions


def _column_configs(df):
    import json
    from types import SimpleNamespace
    cfg = json.loads(df.proto.columns or "{}")
    return [SimpleNamespace(name=k, label=v.get("label")) for k, v in cfg.items()]


def _configured(df) -> set[str]:
    return {c.name for c in _column_configs(df) if c.label}


def _shown_columns(df) -> list[str]:
    return list(df.proto.column_order) or list(df.value.columns)


def test_cli_model_name_of_a_config_path(tmp_path):
    """Issue 28, item 11: the JSON "model" of a config passed by path is the config's own
    name (``_name_or_path``), else the file's stem — never the parent folder's name."""
    import io
    import json
    from contextlib import redirect_stderr, redirect_stdout

    from llmpara_core.cli import main
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
           "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
           "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192}
    folder = tmp_path / "eval_configs"
    folder.mkdir()
    (folder / "tiny-llama.json").write_text(json.dumps(cfg))
    (folder / "named.json").write_text(json.dumps({**cfg, "_name_or_path": "org/Named-1B"}))

    def model_of(path) -> str:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["analyze", "--model", str(path), "--hardware", "H100",
                         "--format", "json"])
        assert code == 0, err.getvalue()
        return json.loads(out.getvalue())["model"]
    assert model_of(folder / "tiny-llama.json") == "tiny-llama"
    assert model_of(folder / "named.json") == "org/Named-1B"


def test_overview_has_bound_banners_and_a_chart_also_on_a_cluster():
    """Issue 28, item 6: the Overview shows where the time goes (a chart) and keeps the bound
    banners for a multi-GPU preset too."""
    for hw in ("nvidia-h100-sxm", "8x-nvidia-h100-sxm-nvlink"):
        at = open_page(None, model="llama-3.1-8b", hardware=hw)
        _clean(at, hw)
        infos = [i.value.replace("\\", "") for i in at.info]
        assert any(i.startswith("Prefill is ") and "-bound" in i for i in infos), (hw, infos)
        assert any(i.startswith("Decode is memory-bound") for i in infos), (hw, infos)
        assert at.get("plotly_chart"), hw


def test_design_space_axes_labels_and_front_table():
    """Issue 28, item 7: a log axis has readable ticks (not only "1" and "10"), no label
    repeats its unit, the front table starts with the objectives (J/token within the first
    screen), and the infeasible cloud has a full-strength legend entry."""
    import json
    at = open_page("app_pages/design_space_page.py")
    _clean(at, "design space")
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    scatter = next(f for f in figs if any(t.get("name") == "Pareto front" for t in f["data"]))
    for ax in ("xaxis", "yaxis"):
        lay = scatter["layout"][ax]
        title = lay["title"]["text"]
        assert "tokens/s [tokens/s]" not in title and title.count("[") <= 1, title
        if lay.get("type") == "log":
            assert len(lay["tickvals"]) >= 3, lay["tickvals"]
    legend = [t for t in scatter["data"] if t.get("showlegend") is not False
              and t.get("name") in ("infeasible designs", "feasible designs")]
    assert all(t["marker"].get("opacity", 1) == 1 for t in legend), legend
    front = at.dataframe[-1].value
    first = list(front.columns)[:8]
    assert any("Energy / output token" in c for c in first), first


def test_speculative_heat_map_reads_well():
    """Issue 28, item 8: one precision in every cell, black or white numbers by the cell's
    colour, and "no speedup" in the legend (not a label the curves draw over)."""
    import json
    import re
    at = open_page("app_pages/speculative_page.py")
    _clean(at, "speculative")
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    heat = next(f for f in figs if f["data"] and f["data"][0].get("type") == "heatmap")
    cells = [a for a in heat["layout"]["annotations"]]
    assert cells and all(re.fullmatch(r"\d+\.\d\d", a["text"]) for a in cells), cells[:3]
    assert {a["font"]["color"] for a in cells} == {"#FFFFFF", "#1F1F1F"}
    rows = len(heat["data"][0]["y"])              # each number in its own cell, every row
    assert sorted({a["y"] for a in cells}) == list(range(rows))
    gamma = next(f for f in figs if any(t.get("name") == "optimum" for t in f["data"]))
    assert any(t.get("name") == "no speedup (1×)" for t in gamma["data"])
    assert not any(a.get("text") == "no speedup" for a in gamma["layout"].get("annotations", []))


def test_readme_counts_the_measurements_the_validation_page_predicts():
    """Issue 28, item 9: the README said 456 measurements where the page predicts 584."""
    import re
    from pathlib import Path

    from ui.validation_data import compute
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    said = int(re.search(r"every prediction against (\d+) published measurements",
                         readme).group(1))
    assert said == compute(None, "Shipped", False, False)["summary"]["rows_predicted"]


def test_percentages_never_show_minus_zero():
    """Issue 28, item 9: Validation printed "−0.0 %" for a bias of −0.0004."""
    from ui.format import fmt_pct
    assert fmt_pct(-0.0004, 1) == "0.0 %" and fmt_pct(-0.0004) == "0 %"
    assert fmt_pct(-0.02, 1) == "-2.0 %"
    at = open_page("app_pages/validation_page.py")
    _clean(at, "validation")
    for df in at.dataframe:
        for col in df.value.columns:
            if df.value[col].dtype.kind == "f":
                v = df.value[col].dropna()
                assert not ((v == 0) & v.map(lambda x: str(x).startswith("-"))).any(), col


def test_operator_table_shows_the_time_before_the_byte_breakdown():
    """Issue 28, item 9: at 1440 px the operator table cut its time columns; they now come
    right after the operator's name, phase and category."""
    at = open_page("app_pages/operators_page.py")
    _clean(at, "operators")
    order = list(at.dataframe[0].proto.column_order)
    assert order[:5] == ["operator", "phase", "category", "estimated µs", "share of phase time"]
    assert order.index("note") > order.index("params") > order.index("total MB")


def test_compare_charts_never_leave_a_domain_to_an_empty_first_draw():
    """Item 12: Streamlit draws a Vega-Lite chart once before it inserts the rows, so every x
    scale carries its domain from the data (else Vega logs "Infinite extent"); a chart with
    no finite value is left out, and no chart at all if no panel has one."""
    import json
    import math

    import pandas as pd

    from ui.compare import chart_data, compare_spec, with_domains

    at = open_page("app_pages/compare_page.py",
                   cmp=["llama-3-8b|nvidia-h100-sxm|FP16", "llama-3-70b|nvidia-rtx-4090|FP16"])
    _clean(at, "compare")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    xs = [lay["encoding"]["x"] for row in spec["vconcat"] for view in row["hconcat"]
          for lay in view["layer"]]
    assert len(xs) == 8
    for x in xs:
        lo, hi = x["scale"]["domain"]
        assert math.isfinite(lo) and math.isfinite(hi) and lo <= 0 < hi, x
    shown = at.dataframe[0].value                   # the bars lie inside their domain
    for x, col in zip(xs[::2], ["TTFT (ms)", "TPOT (ms)", "tok/s aggregate", "memory (GB)"]):
        assert 0 < shown[col].max() <= x["scale"]["domain"][1], (x, shown[col].max())
    table = pd.DataFrame({"scenario": ["a", "b"], "fits": [True, False],
                          "TTFT (ms)": [float("nan")] * 2, "TPOT (ms)": [2.0, 4.0],
                          "tok/s aggregate": [10.0, float("inf")], "memory (GB)": [1.0, 9.0],
                          "capacity (GB)": [8.0, 8.0], "_ttft_ideal": [None, None],
                          "_tpot_ideal": [1.0, 2.0], "_tps_ideal": [20.0, 30.0]})
    data = chart_data(table)
    lin = with_domains(compare_spec(False), data, False)
    fields = [[v["layer"][0]["encoding"]["x"]["field"] for v in r["hconcat"]]
              for r in lin["vconcat"]]
    assert fields == [["tpot"], ["tps", "mem"]]            # no TTFT chart: nothing finite
    assert lin["vconcat"][0]["hconcat"][0]["layer"][0]["encoding"]["y"]["axis"]["labels"]
    log = with_domains(compare_spec(True), data, True)
    dom = {v["layer"][0]["encoding"]["x"]["field"]: v["layer"][0]["encoding"]["x"]["scale"]
           ["domain"] for r in log["vconcat"] for v in r["hconcat"]}
    assert dom["tpot"] == [0.5, 8.0] and dom["mem"] == [0.5, 18.0]
    empty = data.assign(**{c: float("nan") for c in data.columns if c not in ("scenario", "fit")})
    assert with_domains(compare_spec(False), empty, False) is None
    # a phone (item 10): one chart a row that fits 390 px, and the table turned, one column
    # per scenario by its number
    phone = json.loads(at.get("vega_lite_chart")[1].proto.spec)
    assert [len(r["hconcat"]) for r in phone["vconcat"]] == [1, 1, 1, 1]
    for r in phone["vconcat"]:
        view = r["hconcat"][0]
        label_px = view["layer"][0]["encoding"]["y"]["axis"]["labelLimit"]
        assert view["width"] + label_px <= 330 and view["layer"][0]["encoding"]["x"]["scale"][
            "domain"][1] > 0
    turned = at.dataframe[1].value
    assert list(turned.columns) == ["quantity", "1", "2"]
    assert "TPOT (ms)" in list(turned["quantity"]) and not turned.isna().any().any()


def test_design_sensitivity_names_infeasible_changes_below_the_chart():
    """A change that leaves no valid design: a short label right of zero in the chart (its
    reason ran off a phone's screen and over the axis names), the reason in a caption."""
    import json
    at = open_page("app_pages/design_space_page.py")
    _clean(at, "design space")
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    tornado = next(f for f in figs if f["layout"].get("barmode") == "group")
    notes = [a for a in tornado["layout"].get("annotations", [])
             if "no valid design" in a.get("text", "")]
    captions = [c.value.replace("\\", "") for c in at.caption
                if c.value.startswith("No valid design: ")]
    assert notes and len(notes) == len(captions), (notes, captions)
    assert all(a["xanchor"] == "left" and len(a["text"]) <= 26 for a in notes), notes
    assert all(" × " in c and len(c.split(": ", 2)) == 3 for c in captions), captions
