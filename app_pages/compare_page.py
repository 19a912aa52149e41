"""Compare: several (model, hardware, precision) scenarios side by side at the sidebar's
workload. Rows live in the URL as repeated ``cmp=model|hardware|precision``."""

import json

import streamlit as st

from llmpara_core.errors import ConfigError
from llmpara_core.export import report_to_dict
from llmpara_core.precision import PRECISION_PRESETS
from ui.compare import (COMPARE_COLUMNS, chart_data, compare_spec, compare_table,
                        phone_table, raw_compare_frame, short_label, styled_compare,
                        with_domains)
from ui.compute import preset_hardware, preset_model, report
from ui.format import escape_md
from ui.links import show_value
from ui.narrow import narrow_only, wide_only
from ui.scenario import (add_warning, apply_overrides, get_scenario, hardware_label,
                         hardware_options, model_label, model_options, preset_name)
from ui.tables import download_csv, download_json
from ui.url_widgets import register_link_param, url_toggle

ROWS = "_cmp_rows"
MAX_ROWS = 12
OTHER_HARDWARE = ("nvidia-a100-sxm-80gb", "nvidia-h200-sxm", "amd-mi300x")

scn = get_scenario()
st.title("Compare")
st.caption("Each row is a model × hardware × precision preset at the sidebar's workload "
           f"(batch {scn.workload.batch}, prompt {scn.workload.prompt_len}, "
           f"gen {scn.workload.gen_len}). Rows on the sidebar's hardware include its edits.")


def parse_row(text: str):
    parts = text.split("|")
    if len(parts) != 3:
        return None
    m, h, p = (s.strip() for s in parts)
    models, hws = set(model_options()), set(hardware_options())
    prec = next((k for k in PRECISION_PRESETS if k.lower() == p.lower()), None)
    return (m, h, prec) if m in models and h in hws and prec else None


def encode(row) -> str:
    return "|".join(row)


if ROWS not in st.session_state:
    rows = []
    for raw in st.query_params.get_all("cmp")[:MAX_ROWS]:
        row = parse_row(raw)
        if row is None:
            add_warning(f"Link parameter `cmp`: '{show_value(raw)}' is not "
                        "model\\|hardware\\|precision (preset slugs); row skipped.")
        elif row not in rows:
            rows.append(row)
    if not rows and not st.query_params.get_all("cmp"):
        base = (scn.model_slug, scn.hardware_slug, scn.precision_preset)
        other_prec = "W4A16" if scn.precision_preset != "W4A16" else "W8A8"
        rows = [base, (scn.model_slug, scn.hardware_slug, other_prec)]
        other = next((h for h in OTHER_HARDWARE if h != scn.hardware_slug
                      and h in hardware_options()), None)
        if other:
            rows.append((scn.model_slug, other, scn.precision_preset))
    st.session_state[ROWS] = rows
rows = st.session_state[ROWS]


def add_row() -> None:
    new = (st.session_state["cmp_add_model"], st.session_state["cmp_add_hw"],
           st.session_state["cmp_add_prec"])
    if new not in st.session_state[ROWS] and len(st.session_state[ROWS]) < MAX_ROWS:
        st.session_state[ROWS] = st.session_state[ROWS] + [new]


def remove_row(i: int) -> None:
    st.session_state[ROWS] = [r for j, r in enumerate(st.session_state[ROWS]) if j != i]


with st.expander("Add a scenario", expanded=not rows):
    a1, a2, a3, a4 = st.columns([3, 3, 2, 1], vertical_alignment="bottom")
    opts_m, opts_h, opts_p = model_options(), hardware_options(), list(PRECISION_PRESETS)
    a1.selectbox("Model", opts_m, index=opts_m.index(scn.model_slug) if scn.model_slug in opts_m
                 else 0, key="cmp_add_model", format_func=model_label)
    a2.selectbox("Hardware", opts_h, index=opts_h.index(scn.hardware_slug)
                 if scn.hardware_slug in opts_h else 0, key="cmp_add_hw",
                 format_func=hardware_label)
    a3.selectbox("Precision", opts_p, index=opts_p.index(scn.precision_preset)
                 if scn.precision_preset in opts_p else 0, key="cmp_add_prec",
                 help="Starts at the sidebar's precision preset.")
    a4.button("Add", key="cmp_add", on_click=add_row, disabled=len(rows) >= MAX_ROWS,
              icon=":material/add:")

want = [encode(r) for r in rows]
if st.query_params.get_all("cmp") != want:
    st.query_params["cmp"] = want
register_link_param("cmp", want)

if not rows:
    st.info("No scenarios yet: add one above.")
    st.stop()

def stack_label(slug: str) -> str:
    """The inference stack a row's device runs under (the sidebar's, or its class default)."""
    try:
        return scn.stack_of(preset_hardware(slug)).label
    except ConfigError:
        return "?"


results = []
with st.spinner("Analysing the scenarios…"):
    for i, (m, h, p) in enumerate(rows):
        label = short_label(i, preset_name("models", m), preset_name("hardware", h), p)
        try:
            hw = scn.on(preset_hardware(h))
            if h == scn.hardware_slug:
                hw = apply_overrides(hw, scn.overrides)
            rep = report(preset_model(m), hw, PRECISION_PRESETS[p], scn.workload)
        except ConfigError as e:
            results.append((label, None, str(e)))
            continue
        results.append((label, rep, None))

for i, (label, rep, err) in enumerate(results):
    # a horizontal container, not columns: a phone stacks columns (the ✕ fell below its name)
    line = st.container(horizontal=True, vertical_alignment="center", wrap=False)
    full = (f"{preset_name('models', rows[i][0])} · {preset_name('hardware', rows[i][1])} · "
            f"{rows[i][2]}")
    line.markdown(f"**{escape_md(label)}**" + (f" — {escape_md(full)}" if "…" in label else "")
                  + f" · {escape_md(stack_label(rows[i][1]))}"
                  + (f" — :red[{escape_md(err)}]" if err else ""), width="stretch")
    line.button("✕", key=f"cmp_rm_{i}_{encode(rows[i])}", on_click=remove_row, args=(i,),
                help="Remove this row")

ok = [(label, rep) for label, rep, err in results if rep is not None]
if not ok:
    st.stop()
table = compare_table(ok)
with wide_only("cmp_table_wide"):
    st.dataframe(styled_compare(table), hide_index=True, key="cmp_table",
                 column_config=COMPARE_COLUMNS)
with narrow_only("cmp_table_narrow"):        # a phone: one column per scenario, by its number
    st.dataframe(phone_table(table), hide_index=True)
n_out = int((~table["fits"]).sum())
st.caption("The best value of each column among the scenarios that fit is highlighted. "
           "ms = 10⁻³ s · GB = 10⁹ bytes · estimated = derated by the hardware's efficiency "
           "factors, ideal = peak rates.")
if n_out:
    st.warning(f"{n_out} of {len(table)} scenarios do not fit in memory: their speeds are what "
               "they would reach *if they fit* (shown in grey).", icon=":material/warning:")
with st.container(horizontal=True):
    download_csv(raw_compare_frame(ok), "compare.csv", "Table CSV (SI units)", key="dl_cmp_csv")
    download_json(json.dumps([report_to_dict(rep, include_operators=False) for _, rep in ok],
                             indent=2, allow_nan=False, default=str).encode("utf-8"),
                  "compare.json", "Reports JSON (with scenarios)", key="dl_cmp_json")

log = url_toggle("Log scale", key="cmp_log", value=False,
                 help="Linear unless the values span orders of magnitude.")
st.caption("Click a bar to pick out that scenario in every chart (shift-click for several; "
           "double-click to clear). Bars = estimated, ticks = ideal (peak rates).")
# The rows go inline into the spec (missing values as null, filtered per view), and every x
# scale gets its domain from them: Streamlit first draws the chart with no rows, and a domain
# left to Vega is then the extent of nothing ("Infinite extent" in the console).
# A phone gets its own spec (one chart a row): Vega-Lite's concatenated views keep their widths.
data = chart_data(table)
values = data.astype(object).where(data.notna(), None).to_dict("records")
for narrow_screen, box, key in ((False, wide_only, "cmp_charts"),
                                (True, narrow_only, "cmp_charts_narrow")):
    spec = with_domains(compare_spec(log, narrow_screen), data, log)
    with box(f"{key}_box"):
        if spec is None:
            st.info("No scenario has a finite value to chart.")
        else:
            st.vega_lite_chart({**spec, "data": {"values": values}}, key=key)
