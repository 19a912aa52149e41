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
    fig.update_xaxes(type="log", title=f"measured [{unit}]", range=[math.log10(lo),
                                                                     math.log10(hi)])
    fig.update_yaxes(type="log", title=f"predicted [{unit}]", range=[math.log10(lo),
                                                                      math.log10(hi)])
    fig.update_layout(height=560, margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(groupclick="toggleitem"))
    return fig
