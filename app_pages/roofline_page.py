"""Roofline: every operator of prefill and decode against the hardware's ceilings, and the
batch size at which decode turns compute-bound."""

import pandas as pd
import streamlit as st

from llmpara_core.errors import ConfigError
from ui import charts
from ui.compute import decode_crossover, preset_hardware, report
from ui.format import escape_md, fmt_flops_per_s, fmt_int, fmt_pct, sig
from ui.scenario import get_scenario, hardware_label, hardware_options
from ui.tables import download_csv, download_json, report_json
from ui.url_widgets import url_segmented, url_selectbox

SIDEBAR = "sidebar"
CROSSOVER_LIMIT = 1 << 16

scn = get_scenario()
st.title("Roofline")

c1, c2 = st.columns([3, 2])
with c1:
    hw_choice = url_selectbox(
        "Hardware on this page", [SIDEBAR] + hardware_options(), key="rhw", default=SIDEBAR,
        format_func=lambda s: "Same as sidebar (with its edits)" if s == SIDEBAR else hardware_label(s),
        help="Switch the device here without changing the sidebar scenario.")
with c2:
    mode = url_segmented("Rates", ["estimated", "ideal"], key="rmode", default="estimated",
                         format_func=lambda m: {"estimated": "Estimated (derated)",
                                                "ideal": "Ideal (peak)"}[m])
try:
    hw = scn.hardware if hw_choice == SIDEBAR else scn.on(preset_hardware(hw_choice))
    rep = report(scn.model, hw, scn.precision, scn.workload)
except ConfigError as e:
    st.error(f"Cannot analyse this scenario: {escape_md(e)}")
    st.stop()

st.caption(escape_md(f"{scn.model.name} · {hw.name} · {scn.precision.name} · batch "
                     f"{scn.workload.batch} · prompt {scn.workload.prompt_len} · gen "
                     f"{scn.workload.gen_len}"))

fig, info = charts.roofline_figure(hw, rep, estimated=mode == "estimated")
charts.show_with_phone_legend(fig, "roofline_chart", "roofline")
if info["hidden"]:
    st.caption(f"{info['hidden']} operators move data without FLOPs (embedding gather, KV cache "
               "writes) and have no place on a log axis; the Operators page lists them.")

rows = rep.prefill.rows + rep.decode.rows
used = info["used"]
n_mem = sum(r.bound == "memory" for r in rows)
m = st.columns(5)
rate_kind = "derated" if mode == "estimated" else "peak"
m[0].metric(f"Ridge point ({used.dtype_used.value}, {rate_kind})",
            f"{sig(used.ridge_flops_per_byte)} FLOP/B",
            help="intensity where compute and memory time are equal, at the rates shown "
                 f"({rate_kind}); the sidebar gives it at peak rates")
m[1].metric(f"Compute rate ({rate_kind})", fmt_flops_per_s(used.flops_per_s),
            help=f"{used.dtype_used.value} matmul rate used for the roof")
m[2].metric("Memory-bound operators", f"{n_mem} of {len(rows)}")
m[3].metric("Prefill time memory-bound", fmt_pct(rep.prefill.memory_bound_share()))
m[4].metric("Decode time memory-bound", fmt_pct(rep.decode.memory_bound_share()))

st.subheader("Batch-size crossover")
with st.spinner("Searching the batch at which decode turns compute-bound…"):
    cross = decode_crossover(scn.model, hw, scn.precision, scn.workload, CROSSOVER_LIMIT)
fits = rep.max_batch
if cross.batch is None:
    st.info(f"Decode stays memory-bound up to batch {CROSSOVER_LIMIT:,} on {escape_md(hw.name)} "
            "at this context (KV cache reads grow with the batch as fast as the FLOPs).")
else:
    fit_txt = ("fits in memory" if cross.batch <= fits else
               f"but only batch {fmt_int(fits)} fits in memory at this context")
    st.info(f"Decode turns compute-bound at **batch {cross.batch:,}** ({fit_txt}). Smaller "
            "batches are limited by streaming weights and KV cache.")
charts.show(charts.crossover_figure(cross.samples, cross.batch, fits or None),
            "crossover_chart", "decode-crossover")

with st.expander("Roofline points (table)"):
    df = pd.DataFrame([{
        "phase": r.phase, "operator": r.name, "category": r.kind.value,
        "flops": r.flops, "memory_bytes": r.memory_bytes,
        "arithmetic_intensity_flops_per_byte": r.arithmetic_intensity, "bound": r.bound,
        "estimated_s": r.estimated_s, "ideal_s": r.ideal_s} for r in rows])
    st.dataframe(df, hide_index=True)
    sweep = pd.DataFrame(cross.samples, columns=["batch", "decode_memory_bound_share"])
    with st.container(horizontal=True):
        download_csv(df, "roofline-points.csv", "Points CSV", key="dl_roof_csv")
        download_csv(sweep, "decode-crossover.csv", "Crossover sweep CSV", key="dl_cross_csv")
        download_json(report_json(rep), "roofline-report.json", "Report JSON",
                      key="dl_roof_json")
