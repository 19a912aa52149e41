"""Plotly figure builders. Colours are mid-tone (legible on light and dark backgrounds); fonts,
backgrounds and grids are left to Streamlit's theme (``theme="streamlit"``)."""

from __future__ import annotations

import textwrap

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from llmpara_core.analysis import OpRow, Report
from llmpara_core.hardware import Hardware
from llmpara_core.operators import OpKind
from llmpara_core.precision import DType
from llmpara_core.roofline import attainable_flops_per_s, rates

from .format import fmt_bytes, fmt_flops, fmt_flops_per_s, fmt_time, sig
from .scenario import chart_config
from .tables import has_multiple_groups, op_label

KIND_COLORS: dict[str, str] = {
    OpKind.EMBEDDING.value: "#9D755D",
    OpKind.NORM.value: "#8C8C8C",
    OpKind.QKV.value: "#4C78A8",
    OpKind.ROPE.value: "#72B7B2",
    OpKind.ATTENTION.value: "#E45756",
    OpKind.KV_CACHE.value: "#FF9DA6",
    OpKind.OUT_PROJ.value: "#7E9FD6",
    OpKind.FFN.value: "#F58518",
    OpKind.MOE_ROUTER.value: "#EECA3B",
    OpKind.MOE_EXPERT.value: "#D6A02B",
    OpKind.SHARED_EXPERT.value: "#C2562B",
    OpKind.ELEMENTWISE.value: "#B279A2",
    OpKind.LM_HEAD.value: "#54A24B",
    OpKind.COMM.value: "#17BECF",
}
PHASE_SYMBOLS = {"prefill": "circle", "decode": "triangle-up"}
PHASE_COLORS = {"prefill": "#4C78A8", "decode": "#F58518"}
BYTE_PARTS = (("weight_bytes", "weights", "#4C78A8"), ("act_read_bytes", "activations read", "#72B7B2"),
              ("act_write_bytes", "activations written", "#54A24B"),
              ("kv_read_bytes", "KV cache read", "#E45756"),
              ("kv_write_bytes", "KV cache written", "#FF9DA6"))
DTYPE_DASH = {"fp32": "dot", "fp16": "solid", "fp8": "dash", "int8": "dashdot", "int4": "longdash",
              "fp4": "longdashdot"}


def show(fig: go.Figure, key: str, filename: str) -> None:
    """Render with the Streamlit theme and a PNG/SVG download on the camera button."""
    st.plotly_chart(fig, theme="streamlit", key=key, config=chart_config(filename))


def show_with_phone_legend(fig: go.Figure, key: str, filename: str) -> None:
    """``fig`` as it is on a wide screen, and on a phone (below 640 px) a copy with its legend
    below the plot: a legend of a few dozen entries at the side left the plot ~60 px wide
    there. CSS picks the copy (ui.narrow); the server cannot know the screen's width."""
    from .narrow import narrow_only, wide_only
    with wide_only(f"{key}_wide"):
        show(fig, key, filename)
    phone = go.Figure(fig)
    entries = sum(t.showlegend is not False for t in fig.data)
    title = fig.layout.title.text or ""
    phone.update_layout(height=420 + 14 * entries,      # a long title wraps (it was cut off)
                        title=dict(text="<br>".join(textwrap.wrap(title, 44)),
                                   font=dict(size=13)),
                        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0,
                                    font=dict(size=11)),
                        margin=dict(l=10, r=10, t=40, b=10))
    with narrow_only(f"{key}_narrow"):
        show(phone, f"{key}_phone", filename)


# Pixels of a vertical legend: one entry, one group title (with its gap), and the chart's
# margins, title and x axis that the legend cannot use (measured in Chromium at 1440 px).
LEGEND_ENTRY_PX, LEGEND_GROUP_PX, CHART_CHROME_PX = 20, 30, 170


def legend_height(fig: go.Figure, height: int) -> int:
    """``height``, or more if the figure's vertical legend needs it: Plotly scrolls a legend
    taller than the plot, and the entries below the fold are missed (the roofline's decode
    operators were)."""
    shown = [t for t in fig.data if t.showlegend is not False]
    groups = {t.legendgroup for t in shown if t.legendgrouptitle and t.legendgrouptitle.text}
    return max(height, CHART_CHROME_PX + LEGEND_ENTRY_PX * len(shown)
               + LEGEND_GROUP_PX * len(groups))


def _log_layout(fig: go.Figure, x_title: str, y_title: str, height: int = 520) -> go.Figure:
    fig.update_xaxes(type="log", title=x_title, dtick=1, exponentformat="power")
    # d3's SI format: Plotly's own "SI" stops at T and wrote 10^15 beside 100T
    fig.update_yaxes(type="log", title=y_title, dtick=1, tickformat="~s")
    fig.update_layout(height=legend_height(fig, height), margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(groupclick="toggleitem"))
    return fig


def _op_hover(rows: Sequence[OpRow], multi: bool) -> tuple[list, str]:
    data = [[op_label(r, multi), r.phase, r.kind.value, fmt_flops(r.flops), fmt_bytes(r.memory_bytes),
             sig(r.arithmetic_intensity or 0), r.bound, fmt_time(r.estimated_s), fmt_time(r.ideal_s)]
            for r in rows]
    tmpl = ("<b>%{customdata[0]}</b> (%{customdata[1]}, %{customdata[2]})<br>"
            "FLOPs %{customdata[3]} · bytes %{customdata[4]}<br>"
            "intensity %{customdata[5]} FLOP/B · %{customdata[6]}-bound<br>"
            "time %{customdata[7]} estimated · %{customdata[8]} ideal<extra></extra>")
    return data, tmpl


def roofline_figure(hw: Hardware, report: Report, estimated: bool) -> tuple[go.Figure, dict]:
    """Log-log roofline: a ceiling per data type the hardware has, the bandwidth slope, ridge
    points, and every prefill and decode operator placed on the roof of the compute data type
    in use. Returns the figure and {"ridges": {dtype: FLOP/B}, "hidden": n operators without
    FLOPs (pure data movement)}."""
    used = rates(hw, report.precision.compute_dtype, estimated)
    rows = [r for r in report.prefill.rows + report.decode.rows
            if r.arithmetic_intensity and r.flops > 0]
    hidden = len(report.prefill.rows) + len(report.decode.rows) - len(rows)
    dtypes = [d for d in DType if hw.peak_flops_per_s_raw(d) is not None]
    all_rates = {d: rates(hw, d, estimated) for d in dtypes}
    ridges = {d.value: r.ridge_flops_per_byte for d, r in all_rates.items()}
    xs = [r.arithmetic_intensity for r in rows] + list(ridges.values())
    x_lo = 10 ** math.floor(math.log10(max(min(xs), 1e-3) / 2))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 3))
    grid = np.logspace(math.log10(x_lo), math.log10(x_hi), 200)

    fig = go.Figure()
    same_ridge: dict[tuple[float, float], list[str]] = {}
    for d, r in all_rates.items():
        same_ridge.setdefault((r.ridge_flops_per_byte, r.flops_per_s), []).append(d.value)
    labelled: set[tuple[float, float]] = set()
    for d, r in all_rates.items():
        is_used = d is used.dtype_used
        point = (r.ridge_flops_per_byte, r.flops_per_s)
        label = "" if point in labelled else (
            f"ridge {'/'.join(same_ridge[point])} {sig(r.ridge_flops_per_byte)}")
        labelled.add(point)
        fig.add_trace(go.Scatter(
            x=grid, y=attainable_flops_per_s(grid, r), mode="lines",
            name=f"{d.value} roof ({fmt_flops_per_s(r.flops_per_s)})" + (" · in use" if is_used else ""),
            line=dict(width=3 if is_used else 1.5, dash=DTYPE_DASH[d.value],
                      color="#7F7F7F" if not is_used else "#636EFA"),
            legendgroup="roofs", legendgrouptitle_text="Ceilings",
            hovertemplate=f"{d.value}: %{{y:.3s}}FLOP/s at %{{x:.3g}} FLOP/B<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=[r.ridge_flops_per_byte], y=[r.flops_per_s], mode="markers+text",
            marker=dict(symbol="diamond", size=9, color="#636EFA" if is_used else "#7F7F7F"),
            text=[label], textposition="top left",
            showlegend=False, legendgroup="roofs",
            hovertemplate=(f"ridge point ({d.value}): {sig(r.ridge_flops_per_byte)} FLOP/B"
                           "<extra></extra>")))
    multi = has_multiple_groups(report)
    for phase in ("prefill", "decode"):
        for kind in KIND_COLORS:
            pts = [r for r in rows if r.phase == phase and r.kind.value == kind]
            if not pts:
                continue
            x = np.array([r.arithmetic_intensity for r in pts])
            data, tmpl = _op_hover(pts, multi)
            fig.add_trace(go.Scatter(
                x=x, y=attainable_flops_per_s(x, used), mode="markers", name=kind,
                marker=dict(symbol=PHASE_SYMBOLS[phase], size=11, color=KIND_COLORS[kind],
                            line=dict(width=1, color="rgba(128,128,128,0.8)")),
                legendgroup=phase, legendgrouptitle_text=f"{phase} ({'●' if phase == 'prefill' else '▲'})",
                customdata=data, hovertemplate=tmpl))
    mode = "estimated (derated)" if estimated else "ideal (peak)"
    fig.update_layout(title=f"{hw.name} — {mode} rates")
    return _log_layout(fig, "Arithmetic intensity (FLOP/byte)", "Attainable FLOP/s"), {
        "ridges": ridges, "hidden": hidden, "used": used}


def _vline_log(fig: go.Figure, x: float, text: str, dash: str, color: str | None,
               y_top: float, label_y: float | None = None) -> None:
    """A vertical marker line on a log x axis, drawn as a trace: layout annotations on log axes
    take log10 coordinates, and ``add_vline(annotation_text=...)`` would stretch the axis to
    10**x. The label sits at the top, or at ``label_y`` (data units) to keep it off a curve."""
    line = dict(dash=dash, width=1.5, color=color or "#7F7F7F")
    if label_y is None:
        fig.add_trace(go.Scatter(x=[x, x], y=[0, y_top], mode="lines+text", text=["", text],
                                 textposition="top right" if color else "top left", line=line,
                                 hoverinfo="skip", showlegend=False))
        return
    fig.add_trace(go.Scatter(x=[x, x, x], y=[0, label_y, y_top], mode="lines+text",
                             # an en space keeps the label's first letter off the line
                             text=["", "\u2002" + text, ""], textposition="middle right",
                             line=line,
                             textfont=dict(color=color), hoverinfo="skip", showlegend=False))


def crossover_figure(samples: Sequence[tuple[int, float]], crossover: int | None,
                     max_batch_fit: int | None) -> go.Figure:
    b = [s[0] for s in samples]
    fig = go.Figure(go.Scatter(x=b, y=[100 * s[1] for s in samples], mode="lines+markers",
                               name="memory-bound share",
                               hovertemplate="batch %{x}: %{y:.1f} % of decode time memory-bound"
                                             "<extra></extra>"))
    # mid grey reads on light and dark backgrounds (the default black line vanishes in dark)
    fig.add_hline(y=50, line_dash="dot", line_color="#8C8C8C", line_width=1.5,
                  annotation_text="50 %", annotation_position="top left",
                  annotation_font_color="#8C8C8C")
    if crossover:
        _vline_log(fig, crossover, f"crossover {crossover:,}", "dash", None, 100)
    if max_batch_fit:
        # labelled low on the chart: the memory-bound share runs near the top
        _vline_log(fig, max_batch_fit, f"largest batch that fits: {max_batch_fit:,}", "dot",
                   "#E45756", 100, label_y=8)
    fig.update_xaxes(type="log", title="Batch size", dtick=math.log10(2) if len(b) < 8 else 1)
    fig.update_yaxes(title="Decode time in memory-bound operators (%)", range=[0, 110])
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=10), showlegend=False)
    return fig


def category_bars(df, value: str, title: str, y_title: str, log: bool = False,
                  barmode: str = "group") -> go.Figure:
    """Bars of ``value`` per category, one colour per phase (df: phase, category, value)."""
    fig = go.Figure()
    for phase in ("prefill", "decode"):
        sub = df[df["phase"] == phase]
        if sub.empty:
            continue
        fig.add_trace(go.Bar(x=sub["category"], y=sub[value], name=phase,
                             marker_color=PHASE_COLORS[phase],
                             hovertemplate="%{x}: %{y:.4g}<extra>" + phase + "</extra>"))
    fig.update_layout(title=title, barmode=barmode, height=380,
                      margin=dict(l=10, r=10, t=40, b=10))
    # powers of ten on a log axis: SI prefixes on a GFLOP axis read "100µ GFLOP"
    fig.update_yaxes(title=y_title, type="log" if log else "linear",
                     exponentformat="power" if log else "B")
    return fig


def share_bars(df) -> go.Figure:
    """Share of each phase's estimated time by category (horizontal 100 % stacked bars)."""
    fig = go.Figure()
    for kind in KIND_COLORS:
        sub = df[df["category"] == kind]
        if sub.empty:
            continue
        fig.add_trace(go.Bar(y=sub["phase"], x=100 * sub["share"], name=kind, orientation="h",
                             marker_color=KIND_COLORS[kind],
                             hovertemplate=kind + ": %{x:.1f} %<extra>%{y}</extra>"))
    fig.update_layout(barmode="stack", title="Share of estimated time by category",
                      height=legend_height(fig, 260), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="% of the phase's estimated time", range=[0, 100])
    return fig


def intensity_scatter(report: Report) -> go.Figure:
    """Arithmetic intensity vs FLOPs, log-log, coloured by category, marker by phase."""
    rows = [r for r in report.prefill.rows + report.decode.rows
            if r.arithmetic_intensity and r.flops > 0]
    multi = has_multiple_groups(report)
    fig = go.Figure()
    for phase in ("prefill", "decode"):
        for kind, color in KIND_COLORS.items():
            pts = [r for r in rows if r.phase == phase and r.kind.value == kind]
            if not pts:
                continue
            data, tmpl = _op_hover(pts, multi)
            fig.add_trace(go.Scatter(
                x=[r.arithmetic_intensity for r in pts], y=[r.flops for r in pts],
                mode="markers", name=kind, legendgroup=phase,
                legendgrouptitle_text=phase,
                marker=dict(symbol=PHASE_SYMBOLS[phase], size=10, color=color,
                            line=dict(width=1, color="rgba(128,128,128,0.8)")),
                customdata=data, hovertemplate=tmpl))
    fig.update_layout(title="Arithmetic intensity vs FLOPs (prefill: one pass; decode: per step)")
    return _log_layout(fig, "Arithmetic intensity (FLOP/byte)", "FLOPs", height=460)


def memory_bar(parts: Sequence[tuple[str, float, str]], capacity: float, unit: float,
               unit_name: str) -> go.Figure:
    """One horizontal stacked bar of memory parts with the capacity line."""
    fig = go.Figure()
    for name, value, color in parts:
        fig.add_trace(go.Bar(y=["footprint"], x=[value / unit], name=name, orientation="h",
                             marker_color=color,
                             hovertemplate=f"{name}: %{{x:.4g}} {unit_name}<extra></extra>"))
    fig.add_vline(x=capacity / unit, line_dash="dash", line_color="#E45756",
                  annotation_text=f"capacity {capacity / unit:.4g} {unit_name}",
                  annotation_position="top")
    # the legend below the axis: above the bar it ran into the capacity label on a phone
    fig.update_layout(barmode="stack", height=250, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.45, x=0))
    fig.update_xaxes(title=unit_name)
    fig.update_yaxes(showticklabels=False)
    return fig


def kv_growth_figure(curve: Sequence[tuple[int, float]], weights: float, activations: float,
                     capacity: float, prompt: int, unit: float, unit_name: str) -> go.Figure:
    """Weights + activations (flat) + KV cache (growing with context) vs the capacity line."""
    ctx = [c for c, _ in curve]
    kv = np.array([b for _, b in curve]) / unit
    base = (weights + activations) / unit
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ctx, y=[weights / unit] * len(ctx), name="weights",
                             stackgroup="m", line=dict(color="#4C78A8"),
                             hovertemplate="weights %{y:.4g} " + unit_name + "<extra></extra>"))
    fig.add_trace(go.Scatter(x=ctx, y=[activations / unit] * len(ctx), name="activations (peak)",
                             stackgroup="m", line=dict(color="#54A24B"),
                             hovertemplate="activations %{y:.4g} " + unit_name + "<extra></extra>"))
    fig.add_trace(go.Scatter(x=ctx, y=kv, name="KV cache", stackgroup="m",
                             line=dict(color="#E45756"), customdata=kv + base,
                             hovertemplate=("context %{x}: KV %{y:.4g} " + unit_name +
                                            ", total %{customdata:.4g} " + unit_name +
                                            "<extra></extra>")))
    fig.add_hline(y=capacity / unit, line_dash="dash", line_color="#E45756",
                  annotation_text=f"device capacity {capacity / unit:.4g} {unit_name}",
                  annotation_position="top left")
    if 0 < prompt < ctx[-1]:
        # label at mid-height, left of the line: at the top it ran into the capacity label on
        # a phone, and the prompt usually ends near the right edge
        fig.add_vline(x=prompt, line_dash="dot", line_color="#8C8C8C",   # visible in dark too
                      annotation_text="end of prompt", annotation_position="left")
    fig.update_layout(title="Memory over the sequence (all sequences of the batch)", height=400,
                      margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="Context length (tokens per sequence)")
    fig.update_yaxes(title=unit_name, rangemode="tozero")
    return fig


def bytes_breakdown_figure(rows: Sequence[OpRow], multi: bool, unit: float,
                           unit_name: str, title: str) -> go.Figure:
    """Per-operator bytes stacked by kind (weights, activations read/written, KV read/written)."""
    labels = [op_label(r, multi) for r in rows]
    fig = go.Figure()
    for field, name, color in BYTE_PARTS:
        vals = [getattr(r, field) / unit for r in rows]
        if not any(vals):
            continue
        fig.add_trace(go.Bar(y=labels, x=vals, name=name, orientation="h", marker_color=color,
                             hovertemplate="%{y}: %{x:.4g} " + unit_name + "<extra>" + name +
                                           "</extra>"))
    fig.update_layout(barmode="stack", title=dict(text=title, y=0.99, yanchor="top"),
                      height=max(300, 26 * len(rows) + 150),
                      margin=dict(l=10, r=10, t=80, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title=unit_name)
    return fig


def compare_bars(labels: Sequence[str], est: Sequence[float], ideal: Sequence[float],
                 title: str, y_title: str, log: bool = False) -> go.Figure:
    fig = go.Figure([
        go.Bar(x=list(labels), y=list(est), name="estimated", marker_color="#4C78A8",
               hovertemplate="%{x}: %{y:.4g}<extra>estimated</extra>"),
        go.Bar(x=list(labels), y=list(ideal), name="ideal", marker_color="#72B7B2",
               hovertemplate="%{x}: %{y:.4g}<extra>ideal</extra>"),
    ])
    fig.update_layout(title=title, barmode="group", height=360, margin=dict(l=10, r=10, t=40, b=10))
    # powers of ten on a log axis: SI prefixes on a GFLOP axis read "100µ GFLOP"
    fig.update_yaxes(title=y_title, type="log" if log else "linear",
                     exponentformat="power" if log else "B")
    return fig
