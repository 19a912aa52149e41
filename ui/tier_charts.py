"""Plotly figures of the Memory tiers page (heterogeneous memory: placement, per-tier time,
migration and batch sweeps, per-operator bandwidth, energy). Mid-tone colours, fonts and
backgrounds left to the Streamlit theme; every number comes from ``llmpara_core.tiers``.
GB = 10^9 bytes."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from llmpara_core.tiers import HeteroResult
from llmpara_core.tiers.report import SweepPoint
from llmpara_core.units import BYTES_PER_GB, S_PER_MS

from .format import fmt_bytes, fmt_time, sig

J_PER_MJ = 1e-3

CATEGORY_COLORS = {
    "activations": "#54A24B", "attention": "#4C78A8", "shared_expert": "#C2562B",
    "router": "#EECA3B", "norm": "#8C8C8C", "lm_head": "#72B7B2", "ffn": "#F58518",
    "moe_expert": "#D6A02B", "kv_cache": "#E45756", "embedding": "#9D755D", "other": "#B279A2",
}
TIER_PALETTE = ("#4C78A8", "#F58518", "#E45756", "#72B7B2", "#54A24B", "#B279A2", "#9D755D",
                "#EECA3B")
PART_COLORS = {"compute": "#8C8C8C", "access latency": "#B279A2",
               "kernel launches": "#BAB0AC"}
_MARGIN = dict(l=10, r=10, t=40, b=10)


def tier_color(i: int) -> str:
    return TIER_PALETTE[i % len(TIER_PALETTE)]


def placement_figure(result: HeteroResult) -> go.Figure:
    """What each tier holds, as a share of its capacity, stacked by category (hover: GB)."""
    p = result.placement
    caps = np.array([t.capacity_bytes for t in p.tiers])
    names = [f"{t.name}<br>{fmt_bytes(u)} of {fmt_bytes(c)}"
             for t, u, c in zip(p.tiers, p.used_bytes, caps)]
    fig = go.Figure()
    for cat, row in p.bytes_by_category().items():
        fig.add_bar(y=names, x=100 * row / caps, name=cat, orientation="h",
                    marker_color=CATEGORY_COLORS.get(cat, "#7F7F7F"),
                    customdata=[fmt_bytes(v) for v in row],
                    hovertemplate="%{customdata} · %{x:.3g} % of the tier<extra>" + cat
                                  + "</extra>")
    free = np.maximum(p.free_bytes, 0.0)
    fig.add_bar(y=names, x=100 * free / caps, name="free", orientation="h",
                marker=dict(color="rgba(127,127,127,0.15)",
                            line=dict(color="rgba(127,127,127,0.6)", width=1)),
                customdata=[fmt_bytes(v) for v in free],
                hovertemplate="%{customdata} free<extra></extra>")
    # the legend below the bars: at the side it took half of a phone's width
    fig.update_layout(barmode="stack", height=200 + 55 * len(names), margin=_MARGIN,
                      title="What each tier holds (share of its capacity)",
                      legend=dict(traceorder="normal", orientation="h", yanchor="top", y=-0.3,
                                  x=0))
    fig.update_xaxes(title="% of the tier's capacity", range=[0, 100])
    fig.update_yaxes(autorange="reversed")
    return fig


def time_figure(result: HeteroResult) -> go.Figure:
    """Per decode step (estimated rates): each tier's streaming time, compute time, exposed
    access latency and kernel launches, with the step time (TPOT) for reference."""
    est = result.estimated
    labels, values, colors = [], [], []
    for i, (t, s) in enumerate(zip(result.tiers, est.tier_memory_s)):
        labels.append(f"{t.name} streaming")
        values.append(s)
        colors.append(tier_color(i))
    for name, v in (("compute", est.compute_s), ("access latency", est.latency_s),
                    ("kernel launches", est.overhead_s)):
        labels.append(name)
        values.append(v)
        colors.append(PART_COLORS[name])
    ms = [v / S_PER_MS for v in values]
    fig = go.Figure(go.Bar(y=labels, x=ms, orientation="h", marker_color=colors,
                           text=[fmt_time(v) for v in values], textposition="auto",
                           hovertemplate="%{y}: %{text} per step<extra></extra>"))
    fig.add_vline(x=est.tpot_s / S_PER_MS, line_dash="dash",
                  annotation_text=f"TPOT {fmt_time(est.tpot_s)}", annotation_position="top")
    fig.update_layout(height=160 + 38 * len(labels), margin=_MARGIN, showlegend=False,
                      title="Where a decode step's time goes (estimated)")
    fig.update_xaxes(title="ms per decode step", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    return fig


def migration_figures(points: Sequence[SweepPoint]) -> tuple[go.Figure, go.Figure]:
    """(where the weights and KV cache land at each precision step, tokens/s per step)."""
    ok = [p for p in points if p.result is not None]
    land = go.Figure()
    if ok:
        names = [t.name for t in ok[0].result.tiers]
        for i, name in enumerate(names):
            w = [p.tier_weight_bytes()[i] / BYTES_PER_GB for p in ok]
            kv = [p.result.placement.bytes_by_category().get(
                "kv_cache", np.zeros(len(names)))[i] / BYTES_PER_GB for p in ok]
            land.add_bar(x=[p.label for p in ok], y=w, name=f"weights in {name}",
                         marker_color=tier_color(i), legendgroup=name,
                         hovertemplate="%{y:.3g} GB<extra>weights in " + name + "</extra>")
            land.add_bar(x=[p.label for p in ok], y=kv, name=f"KV cache in {name}",
                         marker=dict(color=tier_color(i), pattern_shape="/"), legendgroup=name,
                         hovertemplate="%{y:.3g} GB<extra>KV cache in " + name + "</extra>")
    land.update_layout(barmode="stack", height=380, margin=_MARGIN, legend_traceorder="reversed",
                       title="Where the model lands at each precision")
    land.update_yaxes(title="GB (10⁹ bytes)")
    return land, _tokens_figure(points, [p.label for p in points], "precision step", False)


def batch_figure(points: Sequence[SweepPoint]) -> go.Figure:
    return _tokens_figure(points, [p.batch for p in points], "batch size", True)


def _tokens_figure(points: Sequence[SweepPoint], xs: list, x_title: str,
                   log_x: bool) -> go.Figure:
    fig = go.Figure()
    series = (
        ("aggregate tokens/s (estimated)", lambda r: r.estimated.throughput_tokens_per_s,
         dict(color="#4C78A8", width=3)),
        ("aggregate tokens/s (peak rates)", lambda r: r.ideal.throughput_tokens_per_s,
         dict(color="#4C78A8", dash="dot")),
        ("tokens/s per sequence (estimated)", lambda r: r.estimated.decode_tokens_per_s,
         dict(color="#F58518")),
    )
    for name, get, line in series:
        ys = [get(p.result) if p.result is not None else None for p in points]
        fig.add_scatter(x=xs, y=ys, name=name, mode="lines+markers", line=line,
                        hovertemplate="%{x}: %{y:.4g} tok/s<extra>" + name + "</extra>")
    ref = [p.reference.decode_tokens_per_s if p.reference is not None else None
           for p in points]
    fig.add_scatter(x=xs, y=ref, name="reference tool's formula", mode="lines+markers",
                    line=dict(color="#E45756", dash="dash"),
                    hovertemplate="%{x}: %{y:.4g} tok/s<extra>reference tool</extra>")
    for x, p in zip(xs, points):
        if not p.feasible:        # a log axis' annotation takes log10 of the data coordinate
            fig.add_annotation(x=math.log10(x) if log_x else x, y=0.02, yref="paper",
                               text="does not fit", showarrow=False, textangle=-90,
                               yanchor="bottom", font=dict(color="#E45756"))
    fig.update_xaxes(title=x_title, type="log" if log_x else "category",
                     **({"dtick": math.log10(2)} if log_x else {}))
    fig.update_yaxes(title="tokens/s", type="log", tickformat=".3~g")
    fig.update_layout(height=400, margin=_MARGIN, title="Decode tokens/s")
    return fig


def operator_bandwidth_figure(result: HeteroResult) -> go.Figure:
    """Effective bandwidth of every decode operator (its bytes / its streaming time), coloured
    by the tier holding most of its bytes; dashed lines = each tier's peak bandwidth."""
    rows = [r for r in result.rows if r.effective_bandwidth_bytes_per_s]
    multi = len({r.group for r in rows if r.group != "model"}) > 1
    labels = [f"{r.name} [{r.group}]" if multi and r.group != "model" else r.name for r in rows]
    main = [int(np.argmax(r.tier_bytes)) for r in rows]
    fig = go.Figure()
    for i, t in enumerate(result.tiers):
        idx = [k for k, m in enumerate(main) if m == i]
        if not idx:
            continue
        fig.add_bar(y=[labels[k] for k in idx],
                    x=[rows[k].effective_bandwidth_bytes_per_s / BYTES_PER_GB for k in idx],
                    orientation="h", name=f"mostly in {t.name}", marker_color=tier_color(i),
                    customdata=[[fmt_bytes(rows[k].memory_bytes),
                                 fmt_time(rows[k].estimated_s), rows[k].bound] for k in idx],
                    hovertemplate="%{y}: %{x:.4g} GB/s<br>%{customdata[0]} per step · "
                                  "%{customdata[1]} · %{customdata[2]}-bound<extra></extra>")
    tier_gbps = [t.bandwidth_bytes_per_s / BYTES_PER_GB for t in result.tiers]
    for i, (t, x) in enumerate(zip(result.tiers, tier_gbps)):
        # a line shape takes data coordinates; a log axis' annotation takes log10 of them
        fig.add_vline(x=x, line_dash="dash", line_color=tier_color(i))
        fig.add_annotation(x=math.log10(x), y=1.0, yref="paper", yanchor="bottom",
                           text=t.name, showarrow=False)
    xs = [r.effective_bandwidth_bytes_per_s / BYTES_PER_GB for r in rows] + tier_gbps
    fig.update_xaxes(type="log", title="effective bandwidth, GB/s (log)", dtick=1,
                     range=[math.log10(min(xs) / 2), math.log10(max(xs) * 2)])
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1])
    fig.update_layout(height=200 + 24 * len(labels), margin=dict(l=10, r=10, t=60, b=10),
                      barmode="overlay",
                      title="Per-operator effective bandwidth (decode, peak rates)")
    return fig


def energy_figure(result: HeteroResult) -> go.Figure:
    """Energy per generated token: each tier's bytes x its energy per byte, compute, static."""
    en = result.energy
    parts = [(f"{t.name} reads", j, tier_color(i))
             for i, (t, j) in enumerate(zip(result.tiers, en.tier_j))]
    parts.append(("compute", en.compute_j, "#8C8C8C"))
    if en.static_j is not None:
        parts.append(("static (idle power × time)", en.static_j, "#BAB0AC"))
    fig = go.Figure()
    for name, j, color in parts:
        fig.add_bar(y=["per token"], x=[j / J_PER_MJ], name=name, orientation="h",
                    marker_color=color, customdata=[sig(j / J_PER_MJ)],
                    hovertemplate="%{customdata} mJ<extra>" + name + "</extra>")
    fig.update_layout(barmode="stack", height=230, margin=_MARGIN,
                      title="Energy per generated token")
    fig.update_xaxes(title="mJ per token", rangemode="tozero")
    return fig
