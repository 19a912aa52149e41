"""Sharding: the sidebar's model over several devices (TP, PP, DP, EP) with per-device memory,
the time split into compute / memory / communication, scaling curves, a best-plan search and
the comparison with published tensor-parallel measurements."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from llmpara_core import parallel
from llmpara_core.calibration import tp_measurements
from llmpara_core.errors import ConfigError
from llmpara_core.export import _plain
from llmpara_core.hardware import Hardware, Topology
from llmpara_core.model import Model
from llmpara_core.parallel.plan import MAX_DEGREE
from llmpara_core.precision import DType, Precision
from llmpara_core.presets import list_presets, load_hardware
from llmpara_core.units import BYTES_PER_GB, S_PER_MS, S_PER_US
from llmpara_core.workload import Workload
from ui.format import escape_md, fmt_bytes, fmt_gb, fmt_int, fmt_pct, fmt_rate, fmt_time, sig
from ui.page_inputs import optional_number, optional_value, reset_button
from ui.scenario import chart_config, get_scenario
from ui.devices import device_select, override_banner, same_device_clusters
from ui.tables import download_csv, download_json, people_table
from ui.url_widgets import url_number, url_segmented, url_selectbox, url_toggle

SIDEBAR = "sidebar"
PRESET_TOPOLOGY = "preset"
LINK_BW_RANGE = (0.001, 1e6)        # GB/s per device and direction
LINK_LAT_RANGE = (0.0, 1e6)         # µs
VIEWS = ("Per device", "Scaling", "Best plan", "Published measurements")
PART_COLORS = {"compute": "#4C78A8", "memory": "#F58518", "kernel launches": "#8C8C8C",
               "communication": "#17BECF", "pipeline wait": "#E45756"}


def device_specs(h) -> tuple:
    """What tells one device from another here: bandwidth, capacity and 16-bit peak."""
    return (h.memory_bandwidth_bytes_per_s, h.memory_capacity_bytes,
            h.peak_flops_per_s_raw(DType.FP16))


@st.cache_data(max_entries=8, show_spinner=False)
def cluster_slugs() -> list[str]:
    """Hardware presets with an [interconnect] section."""
    return [i.slug for i in list_presets("hardware") if load_hardware(i.slug).interconnect]


@st.cache_data(max_entries=64, show_spinner=False)
def run_plan(model: Model, hw: Hardware, precision: Precision, workload: Workload,
             plan: parallel.ParallelPlan) -> parallel.ShardReport:
    return parallel.shard_analyze(model, hw, precision, workload, plan)


@st.cache_data(max_entries=32, show_spinner=False)
def run_scaling(model, hw, precision, workload, strategy) -> tuple:
    return parallel.scaling_curve(model, hw, precision, workload, strategy)


def run_search(model, hw, precision, workload, objective, max_devices, fill_batch) -> tuple:
    """Not st.cache_data (it would replay the progress bar): every plan's report is cached by
    the core, so a repeated search costs milliseconds."""
    bar = st.progress(0.0, text="Evaluating plans…")
    found = parallel.search_plans(model, hw, precision, workload, objective,
                                  max_devices=max_devices, fill_batch=fill_batch,
                                  progress=lambda f: bar.progress(min(1.0, f)))
    bar.empty()
    return found


@st.cache_data(max_entries=2, show_spinner="Predicting the published series…")
def run_published() -> tuple:
    table = tp_measurements.load_tp_measurements()
    return table, tp_measurements.compare_tp_measurements(table)


def show(fig: go.Figure, key: str) -> None:
    st.plotly_chart(fig, theme="streamlit", key=key, config=chart_config(key))


def use_plan(plan: parallel.ParallelPlan) -> None:
    """Callback of "Use this plan": writes the bound plan widgets (allowed in callbacks)."""
    st.session_state.update(sh_tp=plan.tp, sh_pp=plan.pp, sh_dp=plan.dp, sh_ep=plan.ep,
                            sh_mb=0, sh_view="Per device")


def edit_links(hw: Hardware) -> Hardware:
    """Link bandwidth, latency and topology of the cluster, editable on the page and kept in
    the link (``sh_linkbw`` GB/s, ``sh_linklat`` µs, ``sh_topo``); empty = the preset's."""
    ic = hw.interconnect
    edited = ic is not None and _links_edited()
    # Keyed: it stays open when its label changes; a link that edits the links opens it.
    with st.expander("Links: bandwidth, latency, topology" + (" (edited)" if edited else ""),
                     expanded=edited, key="_sh_links_expander"):
        if ic is None:
            st.caption("This device has no interconnect to edit.")
            return hw
        l1, l2, l3 = st.columns(3)
        with l1:
            bw = optional_number("Link bandwidth (GB/s per device and direction)", "sh_linkbw",
                                 *LINK_BW_RANGE, f"preset: {sig(ic.bandwidth_bytes_per_s / BYTES_PER_GB)}",
                                 help="Within a node (between nodes: the preset's value).")
        with l2:
            lat = optional_number("Link latency (µs)", "sh_linklat", *LINK_LAT_RANGE,
                                  f"preset: {sig(ic.latency_s / S_PER_US)}",
                                  help="Per message hop, within a node.")
        with l3:
            topo = url_selectbox("Topology", [PRESET_TOPOLOGY] + [t.value for t in Topology],
                                 key="sh_topo", default=PRESET_TOPOLOGY,
                                 format_func=lambda t: f"preset: {ic.topology.value}"
                                 if t == PRESET_TOPOLOGY else t)
        reset_button(("sh_linkbw", "sh_linklat"), key="_sh_links_reset",
                     label="Reset bandwidth and latency to the preset")
    changes = {}
    if bw is not None:
        changes["bandwidth_bytes_per_s"] = float(bw) * BYTES_PER_GB
    if lat is not None:
        changes["latency_s"] = float(lat) * S_PER_US
    if topo != PRESET_TOPOLOGY:
        changes["topology"] = Topology(topo)
    if not changes:
        return hw
    return replace(hw, name=f"{hw.name} (links edited)",
                   interconnect=replace(ic, **changes))


def _links_edited() -> bool:
    """Whether a link setting differs from the preset's, already right before the boxes are
    drawn (a shared link's first run)."""
    topo = st.session_state.get("sh_topo", st.query_params.get("sh_topo", PRESET_TOPOLOGY))
    return (optional_value("sh_linkbw", *LINK_BW_RANGE) is not None
            or optional_value("sh_linklat", *LINK_LAT_RANGE) is not None
            or topo in {t.value for t in Topology})


scn = get_scenario()
st.title("Sharding")
st.caption(escape_md(scn.label))

# ---- cluster and plan -----------------------------------------------------------------------
clusters = cluster_slugs()
# The sidebar's hardware; if it has no links, the smallest cluster preset of the same device.
own = scn.hardware.interconnect is not None
default_cluster = SIDEBAR if own or scn.custom_hardware else next(
    iter(same_device_clusters(scn.hardware, clusters)), SIDEBAR)
c1, c2 = st.columns([3, 2])
with c1:
    choice = device_select(
        scn, "sh_cluster", "Devices and links", clusters, default_cluster,
        help="Follows the sidebar's hardware (a cluster of the same device if the sidebar's "
             "has no links). A cluster preset is one device plus an [interconnect] section "
             "(link bandwidth per device and direction, latency, topology, device count). "
             "Sidebar overrides apply only to the sidebar hardware.")
hw = scn.hardware if choice == SIDEBAR else scn.on(load_hardware(choice))
hw = edit_links(hw)
ic = hw.interconnect
override_banner(scn, hw, choice)
with c2:
    if choice == SIDEBAR:
        st.caption(f"Sidebar hardware: {escape_md(hw.name)}")
    if ic is None:
        st.warning(f"{escape_md(hw.name)} has no interconnect: only data parallelism (separate "
                   "replicas) is possible. Pick a cluster preset for TP, PP or EP.")
    else:
        link = (f"{sig(ic.bandwidth_bytes_per_s / BYTES_PER_GB)} GB/s per device and direction"
                f", {sig(ic.latency_s / S_PER_US)} µs, {ic.topology.value}, {ic.devices} devices")
        if ic.devices_per_node and ic.devices_per_node < ic.devices:
            link += (f"; {ic.devices_per_node} per node, between nodes "
                     f"{sig(ic.inter_node_bandwidth_bytes_per_s / BYTES_PER_GB)} GB/s, "
                     f"{sig((ic.inter_node_latency_s or 0) / S_PER_US)} µs")
        if ic.peer_bandwidth_bytes_per_s is not None:
            link += (f"; direct links, no switch: {sig(ic.peer_bandwidth_bytes_per_s / BYTES_PER_GB)}"
                     " GB/s between each pair, so a group of n devices reaches n − 1 times that")
        if ic.link is not None:
            link += f"; {ic.link.value} links"
        if ic.devices_per_socket is not None:
            link += (f"; {ic.devices_per_socket} per CPU socket, socket link "
                     f"{sig(ic.socket_bandwidth_bytes_per_s / BYTES_PER_GB)} GB/s (NCCL's figure)")
        if ic.host_cpu is not None:
            link += (f"; {ic.host_cpu.value.upper()} host: NCCL's default runs rings without "
                     "GPU peer-to-peer (through host memory) "
                     + ("above two GPUs" if ic.host_cpu.value == "amd" else "across host bridges"))
        st.caption(escape_md(link))

max_dev = ic.devices if ic else 1024
cols = st.columns(6)
with cols[0]:
    tp = url_number("TP", "sh_tp", 1, MAX_DEGREE, ic.devices if ic else 1, step=1, help="Tensor-parallel degree")
with cols[1]:
    pp = url_number("PP", "sh_pp", 1, MAX_DEGREE, 1, step=1, help="Pipeline stages")
with cols[2]:
    dp = url_number("DP", "sh_dp", 1, MAX_DEGREE, 1, step=1,
                    help="Data-parallel replicas; the sidebar batch is the global batch")
with cols[3]:
    ep = url_number("EP", "sh_ep", 1, MAX_DEGREE, 1, step=1,
                    help="Expert parallelism (MoE): divides TP x DP and the experts")
with cols[4]:
    mb = url_number("Microbatches", "sh_mb", 0, 100000, 0, step=1,
                    help="Pipeline microbatches; 0 = min(batch per replica, PP)")
with cols[5]:
    overlap = url_number("Comm. overlap", "sh_overlap", 0.0, 1.0, 0.0, step=0.1,
                         help="Share of communication hidden under compute (0 = none)")
vocab = url_toggle("Vocabulary-parallel embedding and LM head", "sh_vocab", True,
                   help="On: split embedding and LM head over TP (vLLM, Megatron). Off: "
                        "whole on every rank (gpt-fast)")
view = url_segmented("View", VIEWS, key="sh_view", default=VIEWS[0])

plan = report = None
try:
    plan = parallel.ParallelPlan(tp=int(tp), pp=int(pp), dp=int(dp), ep=int(ep),
                                 microbatches=int(mb) or None, overlap=float(overlap),
                                 vocab_parallel=bool(vocab))
    report = run_plan(scn.model, hw, scn.precision, scn.workload, plan)
except ConfigError as e:
    if view == "Per device":
        st.error(f"This plan cannot run: {escape_md(e)}")


def plan_summary(report: parallel.ShardReport) -> None:
    """Headline figures of the plan (two rows of four)."""
    est, single = report.estimated, report.single_device
    m = st.columns(4)
    m[0].metric("Devices", fmt_int(report.devices), help=escape_md(report.plan.label))
    m[1].metric("TTFT", fmt_time(est.ttft_s), help=f"ideal {fmt_time(report.ideal.ttft_s)}")
    m[2].metric("TPOT", fmt_time(est.tpot_s), help=f"ideal {fmt_time(report.ideal.tpot_s)}")
    m[3].metric("Tokens/s per sequence", sig(est.decode_tokens_per_s), help="1 / TPOT")
    m = st.columns(4)
    m[0].metric("Aggregate tokens/s", sig(est.throughput_tokens_per_s),
                help="global batch / TPOT")
    m[1].metric("Tokens/s per device", sig(report.throughput_per_device))
    m[2].metric("Speedup vs 1 device", f"{sig(report.tpot_speedup)}×",
                help=f"TPOT ratio; single device: {fmt_time(single.tpot_s)}"
                     + ("" if report.single_device_fits else " (does not fit: hypothetical)"))
    m[3].metric("Parallel efficiency", fmt_pct(report.parallel_efficiency),
                help="aggregate throughput / (devices × single-device throughput)")
    if not report.fits:
        st.error(f"Does not fit: the fullest device needs {fmt_gb(report.worst_stage.total_bytes)}"
                 f" of {fmt_gb(report.worst_stage.capacity_bytes)}.")
    for note in report.notes:
        st.caption("ℹ️ " + escape_md(note))


# ---- views ---------------------------------------------------------------------------------

def memory_section(report: parallel.ShardReport) -> pd.DataFrame:
    """Stacked weights / KV cache / activations per pipeline stage against the capacity."""
    st.subheader("Memory per device")
    mem_df = pd.DataFrame([{"stage": s.stage, "first_layer": s.first_layer, "layers": s.layers,
                            "weight_bytes": s.weight_bytes, "kv_cache_bytes": s.kv_cache_bytes,
                            "activation_bytes": s.activation_bytes, "total_bytes": s.total_bytes,
                            "capacity_bytes": s.capacity_bytes, "fits": s.fits}
                           for s in report.memory])
    fig = go.Figure()
    labels = [f"stage {s.stage} (layers {s.first_layer}–{s.first_layer + s.layers - 1})"
              for s in report.memory]
    for col, name, color in (("weight_bytes", "weights", "#4C78A8"),
                             ("kv_cache_bytes", "KV cache", "#E45756"),
                             ("activation_bytes", "activations", "#54A24B")):
        fig.add_bar(y=labels, x=mem_df[col] / BYTES_PER_GB, name=name, orientation="h",
                    marker_color=color, hovertemplate="%{x:.3g} GB<extra>" + name + "</extra>")
    # the label beside its line, not on it
    fig.add_vline(x=hw.memory_capacity_bytes / BYTES_PER_GB, line_dash="dash",
                  annotation_text=f"capacity {sig(hw.memory_capacity_bytes / BYTES_PER_GB)} GB ",
                  annotation_position="top left", annotation_xanchor="right")
    fig.update_layout(barmode="stack", height=170 + 40 * len(labels),
                      xaxis_title="GB (10⁹ bytes) per device", margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    show(fig, "sharding-memory")
    st.caption(f"Largest global batch that fits at this context ({fmt_int(scn.workload.max_context)}"
               f" tokens): **{fmt_int(report.max_batch)}** (weights, every sequence's KV cache "
               f"and one microbatch's activations per device; GB = 10⁹ bytes).")
    return mem_df


def time_section(report: parallel.ShardReport) -> pd.DataFrame:
    """TTFT and TPOT split into compute, memory, launches, communication and pipeline wait."""
    est = report.estimated
    st.subheader("Where the time goes")
    parts = []
    for phase, bd, total in (("TTFT (prefill)", report.prefill_breakdown, est.ttft_s),
                             ("TPOT (one decode step)", report.decode_breakdown, est.tpot_s)):
        for name, v in (("compute", bd.compute_s), ("memory", bd.memory_s),
                        ("kernel launches", bd.overhead_s), ("communication", bd.communication_s),
                        ("pipeline wait", bd.pipeline_wait_s)):
            parts.append({"phase": phase, "part": name, "seconds": v,
                          "share": v / total if total > 0 else 0.0})
    parts_df = pd.DataFrame(parts)
    fig = go.Figure()
    for name, color in PART_COLORS.items():
        d = parts_df[parts_df.part == name]
        fig.add_bar(y=d.phase, x=100 * d.share, name=name, orientation="h", marker_color=color,
                    customdata=d.seconds / S_PER_MS,
                    hovertemplate="%{x:.1f} % · %{customdata:.4g} ms<extra>" + name + "</extra>")
    fig.update_layout(barmode="stack", height=260, xaxis_title="% of the phase time (estimated)",
                      margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    show(fig, "sharding-time")
    st.caption(f"Per device on the latency path (every stage once). Compute / memory = operator "
               f"time where FLOPs / bytes bind; communication is exposed collective time "
               f"(latency + bytes over the link); pipeline wait = other microbatches ahead. "
               f"Decode communication share {fmt_pct(report.decode_breakdown.communication_share, 1)}"
               f", prefill {fmt_pct(report.prefill_breakdown.communication_share, 1)}; pipeline "
               f"bubble {fmt_pct(report.decode_bubble_fraction)} (decode), "
               f"{fmt_pct(report.prefill_bubble_fraction)} (prefill).")
    return parts_df


def collectives_section(report: parallel.ShardReport) -> pd.DataFrame:
    """One row per collective of a device's pass (per stage and phase)."""
    st.subheader("Collectives per pass")
    coll_df = pd.DataFrame([{
        "phase": c.phase, "stage": c.stage, "collective": c.name, "kind": c.collective.value,
        "participants": c.participants, "nodes": c.nodes, "message_bytes": c.message_bytes,
        "sent_bytes": c.sent_bytes, "count": c.count, "ideal_s": c.ideal_s,
        "estimated_s": c.estimated_s, "estimated_total_s": c.estimated_s * c.count}
        for c in report.collectives])
    if coll_df.empty:
        st.caption("No communication: every device runs alone.")
    else:
        shown = coll_df.assign(message=coll_df.message_bytes.map(fmt_bytes),
                               each=coll_df.estimated_s.map(fmt_time),
                               **{"per pass": coll_df.estimated_total_s.map(fmt_time)})
        st.dataframe(shown[["phase", "stage", "collective", "kind", "participants", "nodes",
                            "message", "count", "each", "per pass"]], hide_index=True)
    return coll_df


def per_device_view(report: parallel.ShardReport) -> None:
    """Plan summary, memory per device, time breakdown, collectives and downloads."""
    plan_summary(report)
    mem_df = memory_section(report)
    parts_df = time_section(report)
    coll_df = collectives_section(report)
    with st.container(horizontal=True):
        download_csv(mem_df, "sharding-memory.csv", "Memory CSV", key="dl_sh_mem")
        download_csv(parts_df, "sharding-time.csv", "Time breakdown CSV", key="dl_sh_time")
        download_csv(coll_df, "sharding-collectives.csv", "Collectives CSV", key="dl_sh_coll")
        download_json(json.dumps({"scenario": scn.query, "cluster": hw.name,
                                  **parallel.shard_report_to_dict(report, True)},
                                 indent=2, allow_nan=False, default=str).encode("utf-8"),
                      "sharding.json", "Result JSON", key="dl_sh_json")


def _devices_axis(devices) -> dict:
    """A log2 device-count axis with a tick at every device count shown (1, 2, 4, 8 ...)."""
    ticks = sorted({int(d) for d in devices})
    return dict(title="devices", type="log", tickvals=ticks, ticktext=[str(t) for t in ticks])


def scaling_figure(df: pd.DataFrame, ok: pd.DataFrame) -> go.Figure:
    """Speedup against devices on log-log axes: ideal scaling is the diagonal (on a linear y
    over a doubling x axis it would look exponential)."""
    fig = go.Figure()
    fig.add_scatter(x=df.devices, y=df.ideal_speedup, name="ideal (= devices)",
                    mode="lines", line=dict(dash="dash", color="#8C8C8C"))
    fig.add_scatter(x=ok.devices, y=ok.speedup, name="modelled", mode="lines+markers",
                    line=dict(color="#4C78A8"), text=ok.plan,
                    hovertemplate="%{x} devices · %{text}<br>speedup %{y:.3g}×<extra></extra>")
    ys = [v for v in list(df.ideal_speedup) + list(ok.speedup) if v and v > 0]
    fig.update_layout(xaxis=_devices_axis(df.devices),
                      yaxis=dict(title="speedup of aggregate tokens/s vs one device",
                                 type="log", tickvals=_doublings(ys), tickformat="~g"),
                      height=420, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def _doublings(values) -> list[float]:
    """Powers of two spanning ``values`` (tick positions of a log speedup axis)."""
    if not values:
        return [1]
    lo, hi = min(values), max(values)
    ticks, t = [], 2.0 ** int(np.floor(np.log2(lo)))
    while t <= hi * 1.01:
        ticks.append(t)
        t *= 2
    return ticks


def efficiency_figure(ok: pd.DataFrame) -> go.Figure:
    """Parallel efficiency (0-100 %) against devices."""
    fig = go.Figure()
    fig.add_scatter(x=ok.devices, y=100 * ok.efficiency, name="parallel efficiency",
                    mode="lines+markers", line=dict(color="#F58518"),
                    hovertemplate="%{x} devices<br>efficiency %{y:.0f} %<extra></extra>")
    fig.update_layout(xaxis=_devices_axis(ok.devices) if len(ok) else dict(title="devices"),
                      yaxis=dict(title="parallel efficiency (%)", dtick=20,
                                 range=[0, max([105.0] + [105 * e for e in ok.efficiency])],
                                 ticksuffix=" %"),
                      height=420, margin=dict(l=10, r=10, t=40, b=10), showlegend=False)
    return fig


def scaling_view() -> None:
    """Modelled vs ideal speedup and parallel efficiency over the device count."""
    strategies = {"tp": "Tensor parallel", "pp": "Pipeline parallel",
                  "dp": "Data parallel (weak: batch × devices)", "ep": "Expert parallel (TP = EP)",
                  "best-tpot": "Best plan for TPOT", "best-throughput": "Best plan per device"}
    strategy = url_segmented("Strategy", list(strategies), key="sh_strategy", default="tp",
                             format_func=lambda k: strategies[k])
    try:
        with st.spinner("Sweeping the device count…"):
            pts = run_scaling(scn.model, hw, scn.precision, scn.workload, strategy)
    except ConfigError as e:
        st.error(escape_md(e))
        return
    df = pd.DataFrame([{**{k: v for k, v in _plain(p).items() if k != "plan"},
                        "plan": p.plan.label if p.plan else None} for p in pts])
    ok = df[df.speedup.notna()]
    left, right = st.columns(2)
    with left:
        show(scaling_figure(df, ok), "sharding-scaling")
    with right:
        show(efficiency_figure(ok), "sharding-efficiency")
    for _, row in df[df.speedup.isna()].iterrows():
        st.caption(f"{row.devices} devices: {escape_md(row.note)}")
    people_table(df, SCALING_COLUMNS)
    download_csv(df, f"sharding-scaling-{strategy}.csv", "Scaling CSV", key="dl_sh_scaling")


SCALING_COLUMNS = {
    "devices": ("devices", "int"), "plan": ("plan", "text"), "tpot_s": ("TPOT (ms)", "ms"),
    "ttft_s": ("TTFT (ms)", "ms"), "throughput_tokens_per_s": ("aggregate tokens/s", "tok_s"),
    "speedup": ("speedup (×)", "x"), "efficiency": ("parallel efficiency (%)", "pct"),
    "communication_share": ("communication (% of time)", "pct"), "fits": ("fits", "bool"),
    "note": ("note", "text"),
}
PLAN_COLUMNS = {
    "plan": ("plan", "text"), "devices": ("devices", "int"), "batch": ("batch", "int"),
    "tpot_s": ("TPOT (ms)", "ms"), "ttft_s": ("TTFT (ms)", "ms"),
    "throughput_per_device": ("tokens/s per device", "tok_s"),
    "memory_bytes_per_device": ("memory per device (GB)", "gb"),
    "communication_share": ("communication (% of time)", "pct"),
    "parallel_efficiency": ("parallel efficiency (%)", "pct"),
}


def best_plan_view() -> None:
    """The plans that fit, best first for the chosen objective."""
    objectives = {"min_tpot": "Lowest TPOT", "max_throughput_per_device":
                  "Highest throughput per device"}
    c1, c2, c3 = st.columns([2, 1, 1])
    with c1:
        objective = url_segmented("Objective", list(objectives), key="sh_objective",
                                  default="min_tpot", format_func=lambda k: objectives[k])
    with c2:
        limit = url_number("Max devices", "sh_maxdev", 1, max_dev, max_dev, step=1)
    with c3:
        fill = url_toggle("Largest batch that fits", "sh_fill", False,
                          help="Run each plan at the largest global batch that fits (≤ 1024) "
                               "instead of the sidebar batch")
    try:
        found = run_search(scn.model, hw, scn.precision, scn.workload, objective, int(limit),
                           bool(fill))
    except ConfigError as e:
        st.error(escape_md(e))
        return
    if not found:
        st.warning("No valid plan fits in memory on this cluster.")
        return
    best = found[0]
    st.success(f"Best: **{escape_md(best.plan.label)}** on {best.plan.devices} devices, batch "
               f"{best.batch}: TPOT {fmt_time(best.tpot_s)}, "
               f"{fmt_rate(best.throughput_per_device)} per device.")
    st.button("Use this plan", key="sh_use_best", on_click=use_plan, args=(best.plan,))
    df = pd.DataFrame([{"plan": c.plan.label, "devices": c.plan.devices, "batch": c.batch,
                        "tpot_s": c.tpot_s, "ttft_s": c.ttft_s,
                        "throughput_tokens_per_s": c.throughput_tokens_per_s,
                        "throughput_per_device": c.throughput_per_device,
                        "memory_bytes_per_device": c.memory_per_device_bytes,
                        "communication_share": c.communication_share,
                        "parallel_efficiency": c.parallel_efficiency} for c in found])
    people_table(df.head(25), PLAN_COLUMNS)
    st.caption(f"{len(found)} plans fit (power-of-two degrees and the full cluster; EP options "
               "for MoE). Ties: fewer devices first for TPOT, lower TPOT for throughput.")
    download_csv(df, f"sharding-best-{objective}.csv", "Plans CSV", key="dl_sh_best")


PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#9D755D",
           "#EECA3B", "#FF9DA6", "#BAB0AC"]


def comparison_frame(cmp: tuple) -> pd.DataFrame:
    return pd.DataFrame([{"row_id": c.measurement.row_id, "framework": c.framework,
                          "series": c.series, "tp": c.measurement.tp, "pp": c.measurement.pp,
                          "devices": c.measurement.devices,
                          "measured_tokens_per_s": c.measurement.decode_tokens_per_s,
                          "predicted_tokens_per_s": c.predicted_tokens_per_s, "error": c.error,
                          "measured_speedup": c.measured_speedup,
                          "predicted_speedup": c.predicted_speedup,
                          "speedup_error": c.speedup_error,
                          "superlinear_series": c.superlinear_series,
                          "published_metric": c.measurement.metric,
                          "published_value": c.measurement.value,
                          "source": c.measurement.source} for c in cmp])


def comparison_summary(df: pd.DataFrame) -> None:
    """Median and worst errors per framework next to the tolerance the tests assert."""
    summary = []
    for fw, tol in tp_measurements.TP_TOLERANCES.items():
        g = df[df.framework == fw]
        rel = g[(g.measured_speedup != 1.0) & ~g.superlinear_series]
        summary.append({
            "framework": fw, "rows": len(g),
            "speedup error, median |·|": fmt_pct(rel.speedup_error.abs().median(), 1),
            "speedup error, worst |·|": fmt_pct(rel.speedup_error.abs().max(), 1),
            "tokens/s error, median": fmt_pct(g.error.median(), 1),
            "tokens/s error, worst |·|": fmt_pct(g.error.abs().max(), 1),
            "test tolerance": tol.describe()})
    st.dataframe(pd.DataFrame(summary), hide_index=True)
    odd = ", ".join(sorted(df[df.superlinear_series].series.map(escape_md).unique())) or "none"
    st.markdown("Dots: measured; crosses (joined when the series is TP only): modelled, same "
                "colour = same series. Error = modelled / measured − 1. Speedups are within a "
                "series (same framework, model, precision, batch and lengths), relative to its "
                "row with the fewest devices. Speedup statistics leave out series whose "
                f"measurement scales superlinearly somewhere (an outlier base row): {odd}. "
                "The tolerances are asserted by `tests/test_parallel_validation.py`.")


def comparison_chart(df: pd.DataFrame, framework: str) -> None:
    """Measured and modelled speedups of every multi-row series of one framework."""
    multi = df[df.framework == framework].groupby("series").filter(lambda x: len(x) > 1)
    if multi.empty:
        return
    fig = go.Figure()
    for i, (series, s_df) in enumerate(multi.groupby("series", sort=False)):
        color, s_df = PALETTE[i % len(PALETTE)], s_df.sort_values("devices")
        label = series.split(" · ", 1)[1]
        fig.add_scatter(x=s_df.devices, y=s_df.measured_speedup, name=label, mode="markers",
                        marker=dict(color=color, size=10), legendgroup=series,
                        showlegend=False, text=s_df.row_id,
                        hovertemplate="%{text}: %{x} devices<br>measured %{y:.3g}×"
                                      "<extra></extra>")
        fig.add_scatter(x=s_df.devices, y=s_df.predicted_speedup, name=label,
                        marker=dict(symbol="x", size=8), line=dict(color=color),
                        mode="lines+markers" if s_df.pp.nunique() == 1 else "markers",
                        legendgroup=series,
                        hovertemplate="%{x} devices<br>modelled %{y:.3g}×<extra></extra>")
    fig.update_layout(title=framework, xaxis=dict(title="devices (TP × PP)", type="log",
                                                  dtick=0.30103),
                      yaxis_title="tokens/s per sequence vs the series' first row",
                      height=560, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.15, font=dict(size=11)))
    show(fig, f"sharding-published-{framework.lower()}")


def published_view() -> None:
    """Predictions against the published TP / PP measurements."""
    table, cmp = run_published()
    df = comparison_frame(cmp)
    st.caption(escape_md(table.note) + " Predictions use the setups listed below (not the "
               "plan controls above).")
    comparison_summary(df)
    for fw in tp_measurements.TP_TOLERANCES:
        comparison_chart(df, fw)
    st.dataframe(df.assign(measured=df.measured_tokens_per_s.map(fmt_rate),
                           modelled=df.predicted_tokens_per_s.map(fmt_rate),
                           err=df.error.map(lambda e: fmt_pct(e, 1)),
                           speedup_err=df.speedup_error.map(lambda e: fmt_pct(e, 1)))[
        ["row_id", "series", "tp", "pp", "measured", "modelled", "err", "measured_speedup",
         "predicted_speedup", "speedup_err", "source"]], hide_index=True)
    with st.expander("Setups (cluster and links per benchmark)"):
        for key, su in table.setups.items():
            eff = su.hardware.effective_efficiency
            profile = (f"the {su.efficiency_profile} efficiency profile" if su.efficiency_profile
                       else "the hardware class's generic efficiency")
            st.markdown(f"**{escape_md(key)}** ({escape_md(su.framework)}): "
                        f"{escape_md(su.hardware.name)} links, "
                        f"{su.hardware.interconnect.devices} devices; {escape_md(profile)} "
                        f"(memory {sig(eff.memory)}, compute {sig(eff.compute)}, "
                        f"{sig(eff.kernel_overhead_s / S_PER_US)} µs per kernel). "
                        f"{escape_md(su.note)}")
    download_csv(df, "sharding-published-tp.csv", "Comparison CSV", key="dl_sh_pub")

if view == "Per device":
    if report is not None:
        per_device_view(report)
elif view == "Scaling":
    scaling_view()
elif view == "Best plan":
    best_plan_view()
else:
    published_view()
