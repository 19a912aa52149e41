"""Overview: summary cards of the sidebar's scenario, each time estimated and ideal; a cluster
preset is evaluated on all its devices (the sharding engine's plan); the hardware's specs."""

import pandas as pd
import streamlit as st

from llmpara_core.errors import ConfigError
from llmpara_core.export import report_to_dict
from llmpara_core.memory import WINDOW_LIMIT
from llmpara_core.precision import DType
from llmpara_core.roofline import rates
from ui.compute import cluster_result
from ui.charts import share_bars, show
from ui.diagnosis import IF_IT_FIT, fit_warning, phase_line
from ui.format import (escape_md, fmt_bandwidth, fmt_bytes, fmt_count, fmt_flops,
                       fmt_flops_per_s, fmt_gib, fmt_int, fmt_pct, fmt_rate, fmt_time, sig)
from ui.narrow import narrow_only, wide_only
from ui.page import page_report
from ui.tables import download_csv, download_json, report_json

scn, rep = page_report("Overview")

summary = report_to_dict(rep, include_operators=False)
st.session_state["overview_numbers"] = summary   # read by tests (== CLI analyze --format json)

w, hw, model = rep.workload, rep.hardware, rep.model
est, ideal, mem, max_batch = rep.estimated, rep.ideal, rep.memory, rep.max_batch
cluster = None
if hw.interconnect is not None and hw.interconnect.devices > 1:
    n_dev = hw.interconnect.devices
    try:
        cluster = cluster_result(scn.model, scn.hardware, scn.precision, scn.workload)
    except ConfigError as e:
        st.warning(f"{escape_md(hw.name)} has {n_dev} devices, but no plan over all of them is "
                   f"valid ({escape_md(e)}); the figures below are for one device.")
if cluster is not None:
    sh = cluster.shard
    est, ideal, mem, max_batch = sh.estimated, sh.ideal, sh.worst_stage, sh.max_batch
    how = ("the sharding engine's lowest-TPOT plan over all of them" if cluster.how == "best"
           else "tensor parallelism over all of them (no plan fits)")
    with st.container(border=True, horizontal=True, vertical_alignment="center"):
        st.markdown(f":material/hub: **{escape_md(hw.name)}** is {sh.devices} devices: evaluated "
                    f"with **{escape_md(sh.plan.label)}**, {how}. Memory figures are per device "
                    f"(the fullest).")
        st.page_link("app_pages/sharding_page.py", label="Open in Sharding",
                     icon=":material/arrow_forward:")

device = (f"each of the {cluster.shard.devices} devices of {hw.name}" if cluster is not None
          else hw.name)
warn = fit_warning(mem, device)
if warn:
    st.warning(warn, icon=":material/warning:")
# The bound of each phase and where its time goes, side by side (on a cluster: one device of
# the plan, communication included).
phases = ((rep.prefill, rep.decode) if cluster is None
          else (cluster.shard.prefill[0], cluster.shard.decode[0]))
lines = [phase_line(p) for p, on in zip(phases, (w.prompt_len > 0, rep.decode_steps > 0)) if on]
left, right = st.columns([3, 2])
with left:
    for line in lines:
        st.info(escape_md(line[0].upper() + line[1:]) + ("" if cluster is None
                                                          else " (per device)") + ".",
                icon=":material/insights:")
with right:
    shares = pd.DataFrame([{"phase": c.phase, "category": c.kind.value, "share": c.time_share}
                           for p in phases for c in p.by_category() if c.time_share],
                          columns=["phase", "category", "share"])
    if not shares.empty:
        fig = share_bars(shares)
        # Names on the segments that have room (a legend of a dozen kinds outgrew the chart;
        # every segment names itself on hover)
        for t in fig.data:
            t.text = [t.name if x >= 12 else "" for x in t.x]
            t.textposition, t.insidetextanchor = "inside", "middle"
        fig.update_layout(title="Where the time goes (estimated)", height=190,
                          showlegend=False, margin=dict(l=10, r=24, t=35, b=10))
        # every quarter labelled, 100 % included (Plotly had left only "0 %" and "50 %")
        # (the labels are spelt out: Streamlit's chart theme drops a ticksuffix there)
        fig.update_xaxes(title=None, tickvals=[0, 25, 50, 75, 100],
                         ticktext=["0 %", "25 %", "50 %", "75 %", "100 %"])
        show(fig, "overview-shares", "overview-time-by-category")
iff = "" if mem.fits else f" ({IF_IT_FIT})"


def card(title: str, groups: list[list[tuple[str, str, str | None]]]) -> None:
    """A bordered card of metrics, one column per group. A phone stacks the columns, so the
    figures of a group (a quantity estimated and ideal, the parameters, the FLOPs) stay
    together there (issue 28, item 10)."""
    with st.container(border=True):
        st.markdown(f"**{title}**")
        for col, group in zip(st.columns(len(groups)), groups):
            for label, value, help_text in group:
                col.metric(label, value, help=help_text)


pc = rep.params
heads, kv_heads = model.num_attention_heads, model.num_key_value_heads
attn = (f"MLA (latent KV rank {model.mla.kv_lora_rank})" if model.mla is not None else
        f"{heads} / {kv_heads}" + (f" (GQA {model.gqa_group}:1)" if model.gqa_group > 1 else ""))
card("Model", [
    [("Parameters (total)", fmt_count(pc.total), f"{pc.total:,} parameters"),
     ("Parameters (active per token)", fmt_count(pc.active),
      f"{pc.active:,} (MoE: routed experts a token does not use are excluded)"),
     ("Weights", fmt_bytes(rep.weight_bytes),
      f"GB = 10⁹ bytes ({fmt_gib(rep.weight_bytes)}), at the weight bits")],
    [("Attention heads / KV heads", attn, "query heads / key-value heads per layer"),
     ("KV cache per token", fmt_bytes(rep.kv_cache_bytes_per_token),
      "one sequence, all layers; kB = 10³ bytes"),
     ("KV cache at full context", fmt_bytes(rep.memory.kv_cache_bytes),
      f"batch {w.batch} × {w.max_context:,} tokens (prompt + generated); GB = 10⁹ bytes")],
    [("FLOPs per request", fmt_flops(rep.total_flops),
      "prefill + every decode step, all sequences of the batch"),
     ("Prefill FLOPs", fmt_flops(rep.prefill.flops), f"one pass over {w.prompt_len:,} tokens"),
     ("Decode FLOPs", fmt_flops(rep.decode_flops_total),
      f"{rep.decode_steps:,} decode steps; {fmt_flops(rep.decode.flops)} per step")],
])

card("Latency — estimated (derated by efficiency factors) and ideal (peak rates)" + iff, [
    [("TTFT · estimated", fmt_time(est.ttft_s), "time to first token (prefill)"),
     ("TTFT · ideal", fmt_time(ideal.ttft_s), "at peak compute and bandwidth")],
    [("TPOT · estimated", fmt_time(est.tpot_s), "time per output token, mean over the decode"),
     ("TPOT · ideal", fmt_time(ideal.tpot_s), "at peak compute and bandwidth")],
    [("End-to-end · estimated", fmt_time(est.e2e_latency_s), "prefill + all decode steps"),
     ("End-to-end · ideal", fmt_time(ideal.e2e_latency_s), "at peak compute and bandwidth")],
])

card("Throughput" + iff, [
    [("Decode tok/s per sequence · estimated", fmt_rate(est.decode_tokens_per_s), "1 / TPOT"),
     ("Decode tok/s per sequence · ideal", fmt_rate(ideal.decode_tokens_per_s), "1 / TPOT")],
    [("Decode tok/s aggregate · estimated", fmt_rate(est.throughput_tokens_per_s),
      f"batch {w.batch} / TPOT"),
     ("Decode tok/s aggregate · ideal", fmt_rate(ideal.throughput_tokens_per_s),
      f"batch {w.batch} / TPOT")],
    [("Prefill tok/s · estimated", fmt_rate(est.prefill_tokens_per_s),
      "batch × prompt / TTFT"),
     ("Prefill tok/s · ideal", fmt_rate(ideal.prefill_tokens_per_s), "batch × prompt / TTFT")],
])

lim = rep.context_limit
if cluster is not None:
    ctx_value, ctx_help = "—", "per-device context limits of a sharded plan: see Sharding"
else:
    ctx_value = fmt_int(rep.max_context)
    ctx_help = (f"tokens per sequence at batch {w.batch}; memory alone allows "
                f"{fmt_int(lim.memory_tokens)}, the model was trained for "
                f"{fmt_int(lim.window_tokens) if lim.window_tokens else 'an unknown window'}")
card("Memory fit" + (" (per device)" if cluster is not None else ""), [
    [("Fits in memory", "yes" if mem.fits else "no",
      "weights + KV cache at full context + peak activations ≤ capacity"),
     ("Share of capacity used", fmt_pct(mem.utilisation, 1), "needed / capacity")],
    [("Memory needed", fmt_bytes(mem.total_bytes),
      f"{fmt_pct(mem.utilisation, 1)} of capacity; GB = 10⁹ bytes"),
     ("Device capacity", fmt_bytes(mem.capacity_bytes), "GB = 10⁹ bytes")],
    [("Largest batch that fits", fmt_int(max_batch), f"at {w.max_context:,} tokens each"),
     ("Largest context that fits", ctx_value, ctx_help)],
])
if cluster is None and lim is not None:
    binds = ("the model's context window" if lim.binding == WINDOW_LIMIT else "device memory")
    st.caption(f"Largest context: {escape_md(binds)} is the limit "
               f"({fmt_int(lim.memory_tokens)} tokens would fit in memory"
               + (f"; trained for {fmt_int(lim.window_tokens)})." if lim.window_tokens
                  else "; the config gives no context window)."))


def hardware_panel() -> None:
    """Peaks per data type (peak and derated), bandwidth, capacity, ridge points."""
    with st.container(border=True):
        st.markdown(f"**Hardware — {escape_md(hw.name)}**"
                    + (f" (one of {hw.interconnect.devices})" if cluster is not None else ""))
        cols = st.columns(4)
        used = rates(hw, rep.precision.compute_dtype, estimated=False)
        cols[0].metric("Memory bandwidth", fmt_bandwidth(hw.memory_bandwidth_bytes_per_s),
                       help="peak; GB/s = 10⁹ bytes per second")
        cols[1].metric("Memory capacity", fmt_bytes(hw.memory_capacity_bytes),
                       help=f"GB = 10⁹ B; {fmt_gib(hw.memory_capacity_bytes)} in GiB (2³⁰ B), "
                            "the unit the driver reports")
        cols[2].metric(f"Ridge point · peak ({used.dtype_used.value})",
                       f"{sig(used.ridge_flops_per_byte)} FLOP/B",
                       help="peak FLOP/s ÷ peak bandwidth; the Roofline page also shows it "
                            "at derated rates")
        cols[3].metric("TDP · price", f"{sig(hw.tdp_w)} W · "
                       + (f"${sig(hw.price_usd)}" if hw.price_usd else "—"))
        rows = []
        for d in DType:
            if hw.peak_flops_per_s_raw(d) is None:
                continue
            pk, dr = rates(hw, d, estimated=False), rates(hw, d, estimated=True)
            rows.append({"data type": d.value + (" · in use" if d is used.dtype_used else ""),
                         "peak": fmt_flops_per_s(pk.flops_per_s),
                         "derated": fmt_flops_per_s(dr.flops_per_s),
                         "ridge · peak (FLOP/B)": sig(pk.ridge_flops_per_byte),
                         "ridge · derated (FLOP/B)": sig(dr.ridge_flops_per_byte)})
        table = pd.DataFrame(rows)
        with wide_only("ov_hw_wide"):
            st.dataframe(table, hide_index=True, width="stretch")
        with narrow_only("ov_hw_narrow"):       # a phone: the columns that fit its width
            st.dataframe(table[["data type", "peak", "derated"]], hide_index=True,
                         width="stretch")


hardware_panel()

for note in rep.notes:
    st.caption("Note: " + escape_md(note))

flat = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
flat.update({f"ideal.{k}": v for k, v in summary["ideal"].items()})
with st.container(horizontal=True):
    download_json(report_json(rep), "llmpara-report.json", "Report JSON (with scenario)",
                  key="dl_overview_json")
    download_csv(pd.DataFrame({"quantity": list(flat), "value": list(flat.values())}),
                 "llmpara-summary.csv", "Summary CSV", key="dl_overview_csv")
