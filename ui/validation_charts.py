"""Predicted-vs-measured chart of the Validation page (log-log, y = x, +-15 % band). Mid-tone
colours and translucent fills, so both Streamlit themes stay legible."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from llmpara_core.calibration.summary import BAND

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#EECA3B",
           "#9D755D", "#FF9DA6", "#17BECF")
UNITS = {"decode_tok_s": "tokens/s", "prefill_tok_s": "tokens/s", "ttft_ms": "ms",
         "throughput_tok_s": "tokens/s", "output_tok_s": "tokens/s"}


def _hover(df: pd.DataFrame, col: str) -> list[str]:
    return [f"{r.row_id} · {r.model} on {r.hardware}<br>{r.framework} · {r.quant}<br>"
            f"measured {r.measured:.4g} · predicted {getattr(r, col):.4g} "
            f"({getattr(r, col) / r.measured - 1:+.0%})" for r in df.itertuples()]


def log_ticks(lo: float, hi: float, most: int = 12) -> list[float]:
    """Tick values of a log axis over [lo, hi]: 1-2-5 steps, or decades only when that would
    give more than ``most`` ticks (Plotly's own minor labels overlap on short log ranges)."""
    if not (lo > 0 and hi > lo):
        return []
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for steps in ((1, 2, 5), (1,)):
        ticks = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in steps if lo <= m * 10.0 ** k <= hi]
        if len(ticks) <= most:
            return ticks
    return [10.0 ** k for k in range(k0, k1 + 1, max(1, (k1 - k0) // most + 1))]


def scatter(df: pd.DataFrame, metric: str, color_by: str, show_ideal: bool) -> go.Figure:
    """``df``: prediction rows of one metric (``validation_summary.prediction_row``)."""
    fig = go.Figure()
    cols = [df["measured"], df["estimated"]] + ([df["ideal"]] if show_ideal else [])
    lo = min(float(c.min()) for c in cols) / 1.5
    hi = max(float(c.max()) for c in cols) * 1.5
    xs = [lo * (hi / lo) ** (i / 40) for i in range(41)]
    fig.add_trace(go.Scatter(x=xs, y=[x * (1 - BAND) for x in xs], mode="lines",
                             line=dict(width=0), hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=xs, y=[x * (1 + BAND) for x in xs], mode="lines",
                             line=dict(width=0), fill="tonexty",
                             fillcolor="rgba(128,128,128,0.18)", hoverinfo="skip",
                             name=f"±{BAND:.0%}"))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x",
                             line=dict(color="#8C8C8C", dash="dash"), hoverinfo="skip"))
    if show_ideal:
        fig.add_trace(go.Scatter(
            x=df["measured"], y=df["ideal"], mode="markers", name="ideal (peak rates)",
            marker=dict(symbol="circle-open", color="#8C8C8C", size=7),
            hovertext=_hover(df, "ideal"), hoverinfo="text"))
    for i, (group, sub) in enumerate(df.groupby(color_by, sort=True)):
        fig.add_trace(go.Scatter(
            x=sub["measured"], y=sub["estimated"], mode="markers",
            name=f"estimated · {group}", legendgroup=str(group),
            marker=dict(color=PALETTE[i % len(PALETTE)], size=8, line=dict(width=0)),
            hovertext=_hover(sub, "estimated"), hoverinfo="text"))
    unit = UNITS[metric]
    ticks = log_ticks(lo, hi)
    for upd, title in ((fig.update_xaxes, f"measured [{unit}]"),
                       (fig.update_yaxes, f"predicted [{unit}]")):
        upd(type="log", title=title, range=[math.log10(lo), math.log10(hi)], tickvals=ticks,
            ticktext=[f"{t:,.4g}" for t in ticks])
    # the legend below the plot: at the side it took half a phone's width and the log axis
    # was left ~100 px for its labels
    fig.update_layout(height=600, margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(groupclick="toggleitem", orientation="h", yanchor="top",
                                  y=-0.14, x=0))
    return fig


def error_explorer(df: pd.DataFrame, color_by: str, metric: str):
    """Altair: median |error| per group (bars) linked to every row's error against the measured
    value (points). Clicking a bar (or its legend entry) highlights that group's rows; errors are
    fractions (``prediction_row``), shown as percentages."""
    import altair as alt

    data = df[["row_id", "model", "hardware", "framework", "quant", "measured", "estimated",
               "error", color_by]].copy()
    data["abs_error"] = data["error"].abs()
    data["group"] = data[color_by].astype(str)
    pick = alt.selection_point(fields=["group"], bind="legend")
    color = alt.Color("group:N", title=color_by, scale=alt.Scale(range=list(PALETTE)))
    bars = alt.Chart(data).mark_bar().encode(
        y=alt.Y("group:N", title=None, sort="-x"),
        x=alt.X("median(abs_error):Q", title="median |error|", axis=alt.Axis(format="%")),
        color=color, opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
        tooltip=[alt.Tooltip("group:N", title=color_by),
                 alt.Tooltip("median(abs_error):Q", title="median |error|", format=".1%"),
                 alt.Tooltip("count():Q", title="rows")],
    ).add_params(pick).properties(width=220, height=alt.Step(22))
    points = alt.Chart(data).mark_circle(size=55).encode(
        x=alt.X("measured:Q", title=f"measured [{UNITS[metric]}]", scale=alt.Scale(type="log"),
                axis=alt.Axis(values=log_ticks(float(data["measured"].min()),
                                               float(data["measured"].max()), 8),
                              format="~s")),
        y=alt.Y("error:Q", title="error (predicted / measured − 1)", axis=alt.Axis(format="%")),
        color=color, opacity=alt.condition(pick, alt.value(0.9), alt.value(0.08)),
        tooltip=["row_id", "model", "hardware", "framework", "quant",
                 alt.Tooltip("measured:Q", format=".4g"), alt.Tooltip("estimated:Q", format=".4g"),
                 alt.Tooltip("error:Q", format="+.1%")],
    ).properties(width=440, height=320)
    band = alt.Chart(pd.DataFrame({"lo": [-BAND], "hi": [BAND]})).mark_rect(
        opacity=0.12, color="#8C8C8C").encode(
        y=alt.Y("lo:Q", title="error (predicted / measured − 1)"), y2="hi:Q")
    return alt.hconcat(bars, band + points).resolve_scale(color="shared")
