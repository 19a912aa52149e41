"""The core dashboard pages (Overview, Roofline, Operators, Memory, Compare) under
streamlit.testing.v1.AppTest: each runs clean with the default scenario and with a shared
link, renders its charts and tables; links reproduce the CLI's numbers; hostile links warn
instead of crashing; sidebar edits (hardware overrides, precision, pasted config.json) drive
the numbers and survive page switches."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from apptest_util import metric, open_page
from streamlit.testing.v1 import AppTest

from ui.format import fmt_count, fmt_rate, fmt_time

ROOT = Path(__file__).resolve().parent.parent
CORE_PAGES = ["app_pages/overview_page.py", "app_pages/roofline_page.py", "app_pages/operators_page.py",
              "app_pages/memory_page.py", "app_pages/compare_page.py"]
LINK = {"model": "mixtral-8x7b", "hardware": "nvidia-a100-sxm-80gb", "prec": "W4A16",
        "batch": "8", "prompt": "1024", "gen": "128"}


def run_app(page: str | None = None, **params) -> AppTest:
    return open_page(page, **params)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def cli_json(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "llmpara_core", "analyze", *args,
                          "--format", "json"], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("page", CORE_PAGES)
@pytest.mark.parametrize("link", [{}, LINK], ids=["default", "link"])
def test_page_renders_clean(page, link):
    at = run_app(page, **link)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert not at.warning, [w.value for w in at.warning]
    charts = at.get("plotly_chart")
    tables = at.dataframe
    if page.endswith("overview_page.py"):
        assert len(at.metric) >= 20
    elif page.endswith("compare_page.py"):      # Altair (linked selection), not Plotly
        spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
        assert len(spec["vconcat"]) == 2 and spec["params"][0]["name"] == "pick"
    else:
        assert len(charts) >= 2, page
    if page.endswith(("operators_page.py", "compare_page.py")):
        assert len(tables) >= 1
    if link:
        assert at.sidebar.selectbox(key="model").value == "mixtral-8x7b"
        assert at.sidebar.number_input(key="batch").value == 8


def test_overview_numbers_equal_cli_analyze():
    at = run_app(None, **LINK)
    shown = metrics(at)
    cli = cli_json("--model", "mixtral-8x7b", "--hardware", "nvidia-a100-sxm-80gb",
                   "--precision", "W4A16", "--batch", "8", "--prompt-len", "1024",
                   "--gen-len", "128")
    page = at.session_state["overview_numbers"]
    for key in ("params_total", "params_active", "weight_bytes", "kv_cache_bytes_per_token",
                "ttft_s", "tpot_s", "e2e_latency_s", "decode_tokens_per_s",
                "throughput_tokens_per_s", "prefill_tokens_per_s"):
        assert page[key] == pytest.approx(cli[key], rel=1e-12), key
    for key in ("ttft_s", "tpot_s", "decode_tokens_per_s"):
        assert page["ideal"][key] == pytest.approx(cli["ideal"][key], rel=1e-12), key
    # what the reader sees is the CLI's figure, formatted
    assert shown["TTFT · estimated"] == fmt_time(cli["ttft_s"])
    assert shown["TPOT · ideal"] == fmt_time(cli["ideal"]["tpot_s"])
    assert shown["Decode tok/s aggregate · estimated"] == fmt_rate(cli["throughput_tokens_per_s"])
    assert shown["Parameters (total)"] == fmt_count(cli["params_total"])


def test_link_batch_changes_the_numbers():
    one = metrics(run_app(None, **{**LINK, "batch": "1"}))
    many = metrics(run_app(None, **{**LINK, "batch": "64"}))
    key = "Decode tok/s aggregate · estimated"
    assert one[key] != many[key]
    assert float(many[key].split()[0].replace(",", "")) > float(one[key].split()[0].replace(",", ""))


HOSTILE = {"model": "\x00<script>alert(1)</script>", "batch": "-7", "prompt": "1e999",
           "hardware": "[x](javascript:alert(1))", "wbits": "nan", "flash": "maybe",
           "bw": "-1", "zzz_unknown": "1"}


@pytest.mark.parametrize("page", CORE_PAGES)
def test_hostile_link_warns_and_falls_back(page):
    at = run_app(page, **HOSTILE)
    assert not at.exception, [e.value for e in at.exception]
    warned = " ".join(w.value for w in at.warning)
    for key in ("model", "batch", "prompt", "hardware", "wbits", "flash", "bw"):
        assert f"`{key}`" in warned, key
    assert "zzz_unknown" not in warned            # unknown keys are ignored silently
    assert "<script>" not in warned               # quoted escaped, never raw HTML
    assert at.sidebar.number_input(key="batch").value == 1
    assert at.sidebar.number_input(key="prompt").value == 2048


def test_hardware_override_drives_the_numbers():
    base = run_app(None)
    hw = base.session_state["overview_numbers"]
    bw = run_app(None, bw="1675")                 # half the H100's 3350 GB/s
    slow = bw.session_state["overview_numbers"]
    assert not bw.exception
    # batch-1 decode is bandwidth-bound: half the bandwidth, twice the ideal TPOT (the
    # estimated one also carries a fixed kernel-launch overhead, so it grows less)
    assert slow["ideal"]["tpot_s"] / hw["ideal"]["tpot_s"] == pytest.approx(2.0, rel=0.01)
    assert 1.5 < slow["tpot_s"] / hw["tpot_s"] < 2.0
    assert "edited" in slow["scenario"]["hardware"]["name"]
    # the Roofline page sees the same edited device
    roof = run_app("app_pages/roofline_page.py", bw="1675")
    assert not roof.exception
    assert any("edited" in (c.value or "") for c in roof.caption)


def test_sidebar_edits_survive_page_switches():
    at = run_app(None)
    at.sidebar.number_input(key="batch").set_value(32).run()
    at.sidebar.selectbox(key="prec").set_value("W4A16").run()
    for page in CORE_PAGES[1:] + CORE_PAGES[:1]:
        at.switch_page(page)
        at.run()
        assert not at.exception, page
        assert at.sidebar.number_input(key="batch").value == 32
        assert at.sidebar.selectbox(key="prec").value == "W4A16"
    assert at.session_state["overview_numbers"]["scenario"]["workload"]["batch"] == 32


def test_precision_preset_fills_the_bits():
    at = run_app(None)
    at.sidebar.selectbox(key="prec").set_value("W4A16").run()
    assert at.sidebar.number_input(key="wbits").value == pytest.approx(4)
    assert at.sidebar.number_input(key="abits").value == pytest.approx(16)
    w16 = run_app(None).session_state["overview_numbers"]["weight_bytes"]
    # 4-bit linear layers; embedding and LM head stay 16-bit in W4A16 (as AWQ/GPTQ ship)
    assert 0.3 * w16 < at.session_state["overview_numbers"]["weight_bytes"] < 0.4 * w16


def test_copy_link_spells_out_every_key():
    at = run_app(None, batch="4")
    link = next(c.value for c in at.sidebar.code)
    for key in ("v=1", "model=", "hardware=", "batch=4", "prompt=2048", "gen=256", "wbits=",
                "abits=", "kvbits="):
        assert key in link, key


GPT2_CONFIG = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768,
               "n_layer": 12, "n_head": 12, "n_positions": 1024, "vocab_size": 50257,
               "n_inner": None, "activation_function": "gelu_new", "tie_word_embeddings": True}


def test_pasted_config_json_is_analysed():
    at = run_app(None)
    at.sidebar.radio(key="_model_source").set_value("config.json").run()
    at.sidebar.text_area(key="_config_text").set_value(json.dumps(GPT2_CONFIG))
    at.sidebar.text_input(key="_config_name").set_value("my-gpt2")
    at.sidebar.button[0].click()
    at.run()
    assert not at.exception
    numbers = at.session_state["overview_numbers"]
    # GPT-2 small: 124,439,808 parameters (tied embeddings counted once)
    assert numbers["params_total"] == 124_439_808
    assert any("learned" in c.value.lower() or "tied" in c.value.lower()
               for c in at.sidebar.caption)


def test_bad_pasted_config_is_a_message():
    at = run_app(None)
    at.sidebar.radio(key="_model_source").set_value("config.json").run()
    at.sidebar.text_area(key="_config_text").set_value('{"hidden_size": -3, ')
    at.sidebar.button[0].click()
    at.run()
    assert not at.exception
    assert at.sidebar.error or at.error


def test_compare_rows_add_and_remove():
    at = run_app("app_pages/compare_page.py")
    n = len(at.dataframe[0].value)
    at.selectbox(key="cmp_add_hw").set_value("amd-mi300x").run()
    at.selectbox(key="cmp_add_prec").set_value("FP8").run()
    at.button(key="cmp_add").click().run()
    assert len(at.dataframe[0].value) == n + 1
    remove = [b for b in at.button if b.key and b.key.startswith("cmp_rm_0_")]
    remove[0].click().run()
    assert len(at.dataframe[0].value) == n
    assert not at.exception


def test_compare_rows_from_link():
    at = run_app("app_pages/compare_page.py",
                 cmp=["llama-3-8b|nvidia-h100-sxm|FP16", "llama-3-8b|apple-m4|Q4_0",
                      "nope|x|y"])
    assert not at.exception
    df = at.dataframe[0].value
    assert len(df) == 2
    assert any("`cmp`" in w.value for w in at.warning)


def test_architecture_edits_drive_the_numbers_and_travel_in_the_link():
    base = run_app(None).session_state["overview_numbers"]
    at = run_app(None, a_layers="16", a_kv="32")
    assert not at.exception and not at.error
    edited = at.session_state["overview_numbers"]
    # Llama-3-8B with 16 of its 32 layers and MHA (32 KV heads): KV per token doubles
    # (16 layers x 2 x 32 x 128 x 2 B = 262,144 B)
    assert edited["kv_cache_bytes_per_token"] == 2 * 131_072
    assert edited["params_total"] < base["params_total"]
    assert "edited" in edited["scenario"]["model"]["name"]
    link = next(c.value for c in at.sidebar.code)
    assert "a_layers=16" in link and "a_kv=32" in link


def test_impossible_architecture_edit_is_a_message():
    # typed in the sidebar: the core's message as an error
    at = run_app(None)
    at.sidebar.number_input(key="a_heads").set_value(30).run()   # 30 heads, 8 KV heads
    assert not at.exception
    assert any("divisible" in e.value for e in at.error)
    # from a link: the edit is dropped with a warning naming it (issue 15, defect 9)
    link = run_app(None, a_heads="30")
    assert not link.exception and not link.error
    assert any("`a_heads=30`" in w.value and "divisible" in w.value for w in link.warning)
    assert link.session_state["overview_numbers"]["params_total"] > 8e9
    bad = run_app(None, a_layers="-3")
    assert not bad.exception
    assert any("`a_layers`" in w.value for w in bad.warning)


def test_no_legacy_pages_folder():
    """A pages/ folder next to the entrypoint puts the first run of every server process into
    Streamlit's legacy multipage mode ("Page not found" on deep links; streamlit_app.py)."""
    assert not (ROOT / "pages").exists()
    assert all((ROOT / p).is_file() for p in CORE_PAGES)


def test_inference_stack_profile_drives_the_numbers_and_travels_in_the_link():
    generic = run_app(None, fw="generic").session_state["overview_numbers"]
    trt = run_app(None, fw="tensorrt-llm")
    assert not trt.exception and not trt.warning
    fast = trt.session_state["overview_numbers"]
    cli = cli_json("--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm",
                   "--framework", "tensorrt-llm")
    assert fast["ttft_s"] == pytest.approx(cli["ttft_s"], rel=1e-12)
    assert fast["ttft_s"] < generic["ttft_s"]           # its fitted compute scale is > 1
    assert "edited" not in fast["scenario"]["hardware"]["name"]
    assert "fw=tensorrt-llm" in next(c.value for c in trt.sidebar.code)
    bad = run_app(None, fw="pytorch-eager")
    assert not bad.exception
    assert any("`fw`" in w.value for w in bad.warning)


MY_CHIP = '''name = "My Chip"
class = "asic"
source = "test fixture"
memory_bandwidth_GBps = 1000
memory_capacity_GB = 64
tdp_W = 300

[peak_TFLOPS]
fp16 = 400
'''


def test_hardware_toml_file_is_analysed():
    at = run_app(None)
    at.sidebar.radio(key="_hardware_source").set_value("TOML file").run()
    assert "[peak_TFLOPS]" in at.sidebar.text_area(key="_hw_text").value   # the preset's file
    at.sidebar.text_area(key="_hw_text").set_value(MY_CHIP)
    next(b for b in at.sidebar.button if b.label == "Use this hardware").click()
    at.run()
    assert not at.exception and not at.error
    numbers = at.session_state["overview_numbers"]
    assert numbers["scenario"]["hardware"]["name"] == "My Chip"
    assert numbers["memory_bandwidth_bytes_per_s"] == 1000e9
    link = next(c.value for c in at.sidebar.code)
    assert any("cannot travel in a link" in w.value for w in at.sidebar.warning), link


def test_bad_hardware_toml_is_a_message():
    at = run_app(None)
    at.sidebar.radio(key="_hardware_source").set_value("TOML file").run()
    at.sidebar.text_area(key="_hw_text").set_value(MY_CHIP.replace("memory_capacity_GB",
                                                                   "memory_capacty_GB"))
    next(b for b in at.sidebar.button if b.label == "Use this hardware").click()
    at.run()
    assert not at.exception
    shown = [e.value.replace("\\", "") for e in at.sidebar.error]      # markdown-escaped
    assert any("did you mean 'memory_capacity_GB'" in m for m in shown), shown


# ---- issue 15 (dashboard polish, part A) -----------------------------------------------------

def test_bad_link_values_keep_warnings_and_copy_link():
    """Defect 9: a link with bad values still shows its warnings (naming each dropped value)
    and the Copy link box, on the Overview and on a Compare page with only bad rows."""
    at = run_app(None, a_heads="7", bw="0", cap="-1")
    text = " ".join(w.value for w in at.warning)
    assert not at.exception and not at.error
    for key in ("`bw`", "`cap`", "`a_heads=7`"):
        assert key in text, key
    assert "Copy link" in [e.label for e in at.sidebar.expander]
    assert at.sidebar.code[0].value.startswith("?v=1&")
    cmp = run_app("app_pages/compare_page.py", cmp=["bad|x|y", "also|bad"])
    assert not cmp.exception
    assert sum("`cmp`" in w.value for w in cmp.warning) == 2
    assert "Copy link" in [e.label for e in cmp.sidebar.expander]


def test_scenario_that_does_not_fit_warns_and_marks_speeds():
    """Defect 6: Llama-3 70B in FP16 on one 24 GB card."""
    at = run_app(None, model="llama-3-70b", hardware="nvidia-rtx-4090")
    assert not at.exception
    assert any(w.value.startswith("Does not fit") and "if it fit" in w.value
               for w in at.warning)
    titles = [m.value for m in at.markdown]
    assert any("Throughput (if it fit)" in t for t in titles), titles
    assert not any("does not fit" in i.value for i in at.info)     # not in the blue box


def test_largest_context_is_capped_by_the_context_window():
    """Defect 7: Llama-3 8B (trained for 8,192 tokens) on an H100 fits ~480k in memory."""
    at = run_app(None)
    assert metric(at, "Largest context that fits") == "8,192"
    assert any("context window" in c.value for c in at.caption)
    mem = run_app("app_pages/memory_page.py")
    assert metric(mem, "Max context") == "8,192"


def test_cluster_preset_is_evaluated_on_all_its_devices():
    """Defect 4: on 8x H100 the Overview uses the sharding engine's plan over all 8 devices
    (not one card) and links to Sharding, which starts with all devices in use."""
    single = run_app(None, model="llama-3-70b", hardware="nvidia-h100-sxm")
    assert any(w.value.startswith("Does not fit") for w in single.warning)
    at = run_app(None, model="llama-3-70b", hardware="8x-nvidia-h100-sxm-nvlink")
    assert not at.exception and not any(w.value.startswith("Does not fit") for w in at.warning)
    assert metric(at, "Fits in memory") == "yes"
    assert any("is 8 devices" in m.value and "TP8" in m.value for m in at.markdown)
    assert any(p.proto.page.endswith("sharding") or "sharding" in str(p.proto).lower()
               for p in at.get("page_link"))
    sh = run_app("app_pages/sharding_page.py", model="llama-3-70b",
                 hardware="8x-nvidia-h100-sxm-nvlink")
    assert metric(sh, "Devices") == "8"


def test_compare_is_a_decision_view():
    """Defect 5: the add form starts at the sidebar's precision; the table has units, a fit
    column, readable parameter counts and the best value per column highlighted."""
    at = run_app("app_pages/compare_page.py", prec="W4A16",
                 cmp=["llama-3-8b|nvidia-h100-sxm|FP16", "llama-3-70b|nvidia-rtx-4090|FP16"])
    assert at.selectbox(key="cmp_add_prec").value == "W4A16"
    df = at.dataframe[0].value
    assert {"fit", "params", "TTFT (ms)", "TPOT (ms)", "memory (GB)"} <= set(df.columns)
    assert list(df["fit"])[0] == "fits" and list(df["fit"])[1].startswith("no")
    assert list(df["params"]) == ["8.03 B", "70.6 B"]
    styles = str(at.dataframe[0].proto.arrow_data.styler.styles)
    assert "background-color" in styles
    assert any("do not fit" in w.value for w in at.warning)


def test_csv_downloads_open_in_excel():
    """Defect 13: UTF-8 with a byte-order mark, so 'µs' survives Excel."""
    import pandas as pd

    from ui.tables import csv_bytes
    data = csv_bytes(pd.DataFrame({"estimated µs": [1.5]}))
    assert data.startswith(b"\xef\xbb\xbf")
    assert data.decode("utf-8-sig").splitlines()[0] == "estimated µs"


def test_architecture_editor_features_travel_in_the_link():
    """MoE on a dense preset, plain FFN, LayerNorm and RoPE theta from a_* link keys drive
    the numbers; MLA ranks apply to an MLA model; the editor shows the MoE/MLA/RoPE fields."""
    base = run_app(None).session_state["overview_numbers"]
    at = run_app(None, a_experts="8", a_topk="2", a_ffn_kind="plain", a_norm="layernorm",
                 a_rope_theta="1000000")
    assert not at.exception and not at.error and not at.warning
    moe = at.session_state["overview_numbers"]
    # 8 experts of 2 matrices (plain FFN) of 4096 x 14336 in 32 layers: ~7.5e9 more params
    assert moe["params_total"] > base["params_total"] + 5e9
    assert moe["params_active"] < moe["params_total"]
    assert "MoE" in " ".join(c.value for c in at.sidebar.caption)
    ops = run_app("app_pages/operators_page.py", a_rope_theta="1000000", a_norm="layernorm")
    notes = set(ops.dataframe[0].value["note"])
    assert "RoPE theta = 1e+06" in notes and any(n.startswith("LayerNorm") for n in notes)
    ds = run_app(None, model="deepseek-v2-lite", a_kv_rank="256")
    ds_base = run_app(None, model="deepseek-v2-lite")
    kv = ds.session_state["overview_numbers"]["kv_cache_bytes_per_token"]
    assert kv < ds_base.session_state["overview_numbers"]["kv_cache_bytes_per_token"]
    labels = {w.label for w in ds.sidebar.number_input}
    assert {"KV latent rank (MLA)", "RoPE theta"} <= labels
    bad = run_app(None, a_ffn_kind="swiglu", a_kv_rank="64")   # bad choice; no MLA in Llama
    text = " ".join(w.value for w in bad.warning)
    assert "`a_ffn_kind`" in text and "`a_kv_rank=64`" in text and not bad.error


def test_operator_notes_are_readable_in_full():
    """The grid's note column is as wide as the longest note (it was cut at 'medium'), and the
    notes also read in full, each operator once, in a wrapping table below the grid."""
    ops = run_app("app_pages/operators_page.py", model="deepseek-v3")
    assert not ops.exception and not ops.error
    grid = ops.dataframe[0]
    notes = [n for n in grid.value["note"] if n]
    width = json.loads(grid.proto.columns)["note"]["width"]
    assert isinstance(width, int) and width >= 7 * max(len(n) for n in notes)
    full = [t.value for t in ops.table if "note" in t.value.columns]
    assert len(full) == 1
    table = full[0].map(lambda cell: cell.replace("\\", ""))     # markdown escapes off
    assert list(table["operator"]) == list(dict.fromkeys(
        o for o, n in zip(grid.value["operator"], grid.value["note"]) if n))
    assert max(notes, key=len) in set(table["note"])
