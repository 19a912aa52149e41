"""Memory: weights / KV cache / activations against capacity, KV growth over the sequence,
per-operator byte decomposition, and the largest batch and context that fit."""

import pandas as pd
import streamlit as st

from llmpara_core.units import BYTES_PER_GB, BYTES_PER_GIB, BYTES_PER_MB
from ui import charts
from ui.compute import kv_growth
from ui.page import page_report
from llmpara_core.memory import WINDOW_LIMIT
from ui.diagnosis import fit_warning
from ui.format import fmt_bytes, fmt_gib, fmt_int, fmt_pct
from ui.tables import download_csv, has_multiple_groups
from ui.url_widgets import url_number, url_segmented

scn, rep = page_report("Memory")

mem, w = rep.memory, rep.workload
unit_choice = url_segmented("Units", ["GB", "GiB"], key="munit", default="GB",
                            help="GB = 10⁹ bytes, GiB = 2³⁰ bytes")
unit = BYTES_PER_GB if unit_choice == "GB" else BYTES_PER_GIB
unit_name = "GB (10⁹ B)" if unit_choice == "GB" else "GiB (2³⁰ B)"

lim = rep.context_limit
binds = "context window" if lim and lim.binding == WINDOW_LIMIT else "memory"
m = st.columns(3)
m[0].metric("Weights", fmt_bytes(mem.weight_bytes), help=f"= {fmt_gib(mem.weight_bytes)}")
m[1].metric("KV cache", fmt_bytes(mem.kv_cache_bytes),
            help=f"at full context: batch {w.batch} × {w.max_context:,} tokens = "
                 f"{fmt_gib(mem.kv_cache_bytes)}")
m[2].metric("Activations", fmt_bytes(mem.activation_bytes),
            help="peak: the largest live activation set of one operator")
m = st.columns(3)
m[0].metric("Used", fmt_pct(mem.utilisation, 1),
            help=f"{fmt_bytes(mem.total_bytes)} of {fmt_bytes(mem.capacity_bytes)}")
m[1].metric("Max batch", fmt_int(rep.max_batch),
            help=f"largest batch that fits, at {w.max_context:,} tokens per sequence")
m[2].metric("Max context", fmt_int(rep.max_context),
            help=f"largest context that fits: tokens per sequence at batch {w.batch}; "
                 f"limited by the {binds}"
                 + (f" (memory alone: {fmt_int(lim.memory_tokens)})" if lim else ""))
if lim is not None:
    st.caption(f"Max context is limited by the **{binds}**: {fmt_int(lim.memory_tokens)} tokens "
               "would fit in memory; the model was trained for "
               + (f"{fmt_int(lim.window_tokens)}." if lim.window_tokens else
                  "an unknown window (none in its config)."))
warn = fit_warning(mem, scn.hardware.name, speeds=False)
if warn:
    st.warning(warn, icon=":material/warning:")

charts.show(charts.memory_bar([("weights", mem.weight_bytes, "#4C78A8"),
                               ("KV cache", mem.kv_cache_bytes, "#E45756"),
                               ("activations", mem.activation_bytes, "#54A24B")],
                              mem.capacity_bytes, unit, unit_name),
            "memory_breakdown", "memory-breakdown")

curve = kv_growth(scn.model, scn.precision, w.batch, w.max_context, 200)
charts.show_with_phone_legend(
    charts.kv_growth_figure(curve, mem.weight_bytes, mem.activation_bytes, mem.capacity_bytes,
                            w.prompt_len, unit, unit_name), "kv_growth", "kv-growth")
kv_df = pd.DataFrame(curve, columns=["context_tokens", "kv_cache_bytes"])

st.subheader("Bytes per operator")
c1, c2 = st.columns([2, 1])
with c1:
    phase = url_segmented("Phase", ["decode", "prefill"], key="mphase", default="decode",
                          format_func=lambda p: {"decode": "Decode (per step)",
                                                 "prefill": "Prefill (one pass)"}[p])
with c2:
    top = url_number("Operators shown (largest first)", key="mtop", min_value=1,
                     max_value=100, value=15, step=1)
rows = rep.decode.rows if phase == "decode" else rep.prefill.rows
largest = sorted(rows, key=lambda r: r.memory_bytes, reverse=True)[:int(top)]
charts.show_with_phone_legend(
    charts.bytes_breakdown_figure(largest, has_multiple_groups(rep), BYTES_PER_MB, "MB (10⁶ B)",
                                  f"Bytes moved per operator — {phase}"),
    "bytes_per_operator", f"bytes-per-operator-{phase}")
ops_df = pd.DataFrame([{"phase": r.phase, "operator": r.name, "group": r.group,
                        "weight_bytes": r.weight_bytes, "act_read_bytes": r.act_read_bytes,
                        "act_write_bytes": r.act_write_bytes, "kv_read_bytes": r.kv_read_bytes,
                        "kv_write_bytes": r.kv_write_bytes, "memory_bytes": r.memory_bytes}
                       for r in rows])
with st.container(horizontal=True):
    download_csv(kv_df, "kv-growth.csv", "KV growth CSV", key="dl_kv")
    download_csv(ops_df, f"bytes-per-operator-{phase}.csv", "Bytes per operator CSV",
                 key="dl_bytes")
    download_csv(pd.DataFrame([{"weight_bytes": mem.weight_bytes,
                                "kv_cache_bytes": mem.kv_cache_bytes,
                                "activation_bytes": mem.activation_bytes,
                                "total_bytes": mem.total_bytes,
                                "capacity_bytes": mem.capacity_bytes, "fits": mem.fits,
                                "max_batch": rep.max_batch, "max_context": rep.max_context}]),
                 "memory-footprint.csv", "Footprint CSV", key="dl_footprint")
