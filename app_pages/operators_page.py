"""Operators: the per-operator table (filterable, sortable), FLOPs/bytes by category, intensity
vs FLOPs, and each category's share of time."""

import streamlit as st

from llmpara_core.operators import OpKind
from ui import charts
from ui.page import page_report
from ui.format import escape_md
from ui.tables import (category_frame, download_csv, download_json, operator_columns,
                       operator_order,
                       operator_notes, operators_frame, raw_operators_frame, report_json,
                       styled_operators)
from ui.url_widgets import url_multiselect, url_segmented, url_toggle

scn, rep = page_report("Operators", " · prefill = one pass over the prompt; decode = mean per "
           "decode step over the generation")

df = operators_frame(rep)
present = [k.value for k in OpKind if k.value in set(df["category"])]
c1, c2 = st.columns([2, 3])
with c1:
    phase = url_segmented("Phase", ["all", "prefill", "decode"], key="ophase", default="all",
                          format_func=str.capitalize)
with c2:
    kinds = url_multiselect("Categories", present, key="okind", placeholder="All categories")
view = df
if phase != "all":
    view = view[view["phase"] == phase]
if kinds:
    view = view[view["category"].isin(kinds)]
st.dataframe(styled_operators(view), hide_index=True, column_order=operator_order(view.columns),
             column_config=operator_columns(charts.KIND_COLORS, view["note"]), key="ops_table")
st.caption(f"{len(view)} of {len(df)} rows · click a column header to sort · MB = 10⁶ bytes, "
           "GFLOP = 10⁹ FLOPs · intensity tinted red where memory-bound, blue where "
           "compute-bound")
with st.container(horizontal=True):
    download_csv(view, "operators-view.csv", "This view as CSV", key="dl_ops_view")
    download_csv(raw_operators_frame(rep), "operators.csv", "All operators CSV (SI units)",
                 key="dl_ops_raw")
    download_json(report_json(rep), "operators-report.json", "Report JSON", key="dl_ops_json")
notes = operator_notes(view)
if not notes.empty:
    with st.expander(f"Operator notes in full ({len(notes)} operators)",
                     icon=":material/notes:"):
        st.table(notes.map(escape_md), hide_index=True)

by_cat = category_frame(rep)
left, right = st.columns(2)
with left:
    log = url_toggle("Log scale", key="olog", value=True,
                     help="Prefill and decode differ by orders of magnitude.")
    charts.show(charts.category_bars(by_cat, "GFLOP", "FLOPs by category", "GFLOP", log=log),
                "flops_by_category", "flops-by-category")
with right:
    st.write("")
    st.write("")
    charts.show(charts.category_bars(by_cat, "total MB", "Memory traffic by category",
                                     "MB (10⁶ bytes)", log=log),
                "bytes_by_category", "bytes-by-category")
charts.show(charts.share_bars(by_cat), "time_share", "time-share")
charts.show_with_phone_legend(charts.intensity_scatter(rep), "intensity_vs_flops",
                              "intensity-vs-flops")
download_csv(by_cat, "operators-by-category.csv", "By-category CSV", key="dl_ops_cat")
