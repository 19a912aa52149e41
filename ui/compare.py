"""The Compare page's decision view: one compact table (units in the headers, fit status, the
best value per column highlighted) and linked Altair bar charts (click a scenario in one chart,
it is picked out in all). Values come from the core's reports; this module only arranges and
formats them."""

from __future__ import annotations

import functools
import warnings
from typing import Sequence

import altair as alt
import pandas as pd
import streamlit as st

from llmpara_core.analysis import Report
from llmpara_core.units import BYTES_PER_GB, S_PER_MS

from .format import fmt_count, fmt_pct, fmt_times, sig

MAX_NAME = 18
LABEL_PX, CHART_PX = 230, 345       # fills a 1440 px window with the sidebar open (~975 px)
NARROW_LABEL_PX, NARROW_CHART_PX = 120, 180     # one chart a row in a 390 px phone (~356 px)
_VENDORS = ("NVIDIA ", "AMD ", "Apple ", "Intel ", "Google ", "Qualcomm ", "GeForce ")

# (column, higher is better) — the columns whose best value is highlighted.
BEST = {"TTFT (ms)": False, "TPOT (ms)": False, "tok/s per seq.": True,
        "tok/s aggregate": True, "memory (GB)": False, "max batch": True}
HIGHLIGHT = "background-color: rgba(84, 162, 75, 0.28); font-weight: 600"
NOT_FIT = "color: rgba(128, 128, 128, 0.9); font-style: italic"

COMPARE_COLUMNS = {
    "scenario": st.column_config.TextColumn("scenario", pinned=True),
    "fit": st.column_config.TextColumn("fit", help="weights + KV cache + activations vs the "
                                       "device's capacity"),
    "params": st.column_config.TextColumn("params", help="total parameters (B = 10⁹)"),
    "memory (GB)": st.column_config.NumberColumn(help="needed; GB = 10⁹ bytes"),
    "capacity (GB)": st.column_config.NumberColumn("device (GB)", help="device memory "
                                                   "capacity; GB = 10⁹ bytes"),
    "TTFT (ms)": st.column_config.NumberColumn(help="time to first token, estimated"),
    "TPOT (ms)": st.column_config.NumberColumn(help="time per output token, estimated"),
    # short headers: the table hid its last column at 1440 px
    "tok/s per seq.": st.column_config.NumberColumn("tok/s (seq.)", help="decode tokens/s of "
                                                    "one sequence (1 / TPOT), estimated"),
    "tok/s aggregate": st.column_config.NumberColumn("tok/s (batch)", help="decode tokens/s "
                                                     "of the whole batch, estimated"),
    "max batch": st.column_config.NumberColumn(help="largest batch that fits at this context"),
}


def _short(text: str) -> str:
    for v in _VENDORS:
        text = text.replace(v, "")
    return text if len(text) <= MAX_NAME else text[:MAX_NAME - 1].rstrip() + "…"


def short_label(i: int, model: str, hardware: str, precision: str) -> str:
    """A chart-sized scenario name: '1 · Llama-3 8B · H100 SXM5 80GB · FP16' (shortened)."""
    return f"{i + 1} · {_short(model)} · {_short(hardware)} · {precision}"


def compare_table(results: Sequence[tuple[str, Report]]) -> pd.DataFrame:
    """One row per scenario in display units (numbers stay numbers, for sorting)."""
    rows = []
    for label, rep in results:
        e, d, mem = rep.estimated, rep.ideal, rep.memory
        rows.append({
            "scenario": label, "fits": mem.fits,
            "fit": "fits" if mem.fits else f"no ({fmt_times(mem.utilisation)} capacity)"
            if mem.utilisation >= 10 else f"no ({fmt_pct(mem.utilisation)})",
            "params": fmt_count(rep.params.total),
            "memory (GB)": mem.total_bytes / BYTES_PER_GB,
            "capacity (GB)": mem.capacity_bytes / BYTES_PER_GB,
            "TTFT (ms)": e.ttft_s / S_PER_MS, "TPOT (ms)": e.tpot_s / S_PER_MS,
            "tok/s per seq.": e.decode_tokens_per_s,
            "tok/s aggregate": e.throughput_tokens_per_s,
            "max batch": rep.max_batch,
            "_ttft_ideal": d.ttft_s / S_PER_MS, "_tpot_ideal": d.tpot_s / S_PER_MS,
            "_tps_ideal": d.throughput_tokens_per_s,
        })
    return pd.DataFrame(rows)


def raw_compare_frame(results: Sequence[tuple[str, Report]]) -> pd.DataFrame:
    """The CSV: SI units, full precision, both estimated and ideal."""
    recs = []
    for label, rep in results:
        e, d, mem = rep.estimated, rep.ideal, rep.memory
        recs.append({
            "scenario": label, "model": rep.model.name, "hardware": rep.hardware.name,
            "precision": rep.precision.name, "params_total": rep.params.total,
            "params_active": rep.params.active, "weight_bytes": rep.weight_bytes,
            "memory_total_bytes": mem.total_bytes, "memory_capacity_bytes": mem.capacity_bytes,
            "fits_in_memory": mem.fits, "max_batch": rep.max_batch,
            "ttft_s": e.ttft_s, "ttft_s_ideal": d.ttft_s, "tpot_s": e.tpot_s,
            "tpot_s_ideal": d.tpot_s, "decode_tokens_per_s": e.decode_tokens_per_s,
            "throughput_tokens_per_s": e.throughput_tokens_per_s,
            "throughput_tokens_per_s_ideal": d.throughput_tokens_per_s})
    return pd.DataFrame(recs)


def styled_compare(table: pd.DataFrame):
    """The table as shown: SI-free display columns, the best value per column (among the
    scenarios that fit) highlighted, the speeds of scenarios that do not fit in grey."""
    shown = table[[c for c in table.columns if not c.startswith("_") and c != "fits"]]
    fits = table["fits"]

    def best(col: pd.Series) -> list[str]:
        ok = col[fits]
        if ok.empty or len(table) < 2:
            return [""] * len(col)
        target = ok.max() if BEST[col.name] else ok.min()
        return [HIGHLIGHT if f and v == target else "" for v, f in zip(col, fits)]

    def grey(row: pd.Series) -> list[str]:
        return [NOT_FIT if not fits[row.name] and c in BEST else "" for c in row.index]

    style = shown.style.apply(best, subset=list(BEST)).apply(grey, axis=1)
    return style.format({c: sig for c in BEST if c != "max batch"} |
                        {"memory (GB)": sig, "capacity (GB)": sig, "max batch": "{:,}"})


def phone_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table turned for a phone: one row per quantity, one column per scenario headed by
    its number (the rows above the table name them), values as the wide table shows them."""
    shown = table[[c for c in table.columns if not c.startswith("_") and c != "fits"]]
    cols = [c for c in shown.columns if c != "scenario"]
    out = {"quantity": [(COMPARE_COLUMNS.get(c) or {}).get("label") or c for c in cols]}
    for k, (_, row) in enumerate(shown.iterrows()):
        out[str(k + 1)] = [("{:,}".format(row[c]) if c == "max batch" else sig(row[c]))
                           if c in BEST or c in ("memory (GB)", "capacity (GB)") else str(row[c])
                           for c in cols]
    return pd.DataFrame(out)


def _bars(value: str, ideal: str | None, title: str, sel, log: bool,
          labels: bool, narrow: bool = False):
    """Horizontal bars of ``value`` per scenario (estimated), a tick at ``ideal``; only the
    left column of charts carries the scenario names (the rows are in the same order)."""
    scale = alt.Scale(type="log") if log else alt.Scale(zero=True)
    base = alt.Chart().encode(y=alt.Y("scenario:N", title=None, sort=None,
                                        axis=alt.Axis(labelLimit=NARROW_LABEL_PX if narrow
                                                      else LABEL_PX, labels=labels,
                                                      ticks=labels)))
    # No stacking (a stacked bar derives <field>_start/_end, whose extent is infinite when a
    # value is missing: Vega's "Infinite extent" warning) and only finite values reach a view
    # (positive ones on a log scale).
    valid = f"isValid(datum.{value}) && isFinite(datum.{value})" + (
        f" && datum.{value} > 0" if log else "")
    bars = base.mark_bar().transform_filter(valid).encode(
        x=alt.X(f"{value}:Q", title=title, scale=scale, stack=None,
                axis=alt.Axis(tickCount=5, format="~s")),
        color=alt.condition(sel, alt.Color("fit:N", legend=alt.Legend(title="memory",
                                                                      orient="top"),
                                           scale=alt.Scale(domain=["fits", "does not fit"],
                                                           range=["#4C78A8", "#9E9E9E"])),
                            alt.value("rgba(128,128,128,0.25)")),
        tooltip=["scenario:N", alt.Tooltip(f"{value}:Q", title=title, format=".3~s"),
                 "fit:N"])
    layers = [bars]
    if ideal:
        tick_ok = f"isValid(datum.{ideal}) && isFinite(datum.{ideal})" + (
            f" && datum.{ideal} > 0" if log else "")
        layers.append(base.mark_tick(color="#F58518", thickness=2, size=18).transform_filter(
            tick_ok).encode(
            x=alt.X(f"{ideal}:Q"),
            tooltip=["scenario:N", alt.Tooltip(f"{ideal}:Q", title=f"{title}, ideal",
                                             format=".3~s")]))
    return alt.layer(*layers).properties(height=alt.Step(26), title=title,
                                         width=NARROW_CHART_PX if narrow else CHART_PX)


def chart_data(table: pd.DataFrame) -> pd.DataFrame:
    """The rows the charts of :func:`compare_spec` draw (short column names)."""
    df = table.rename(columns={"TTFT (ms)": "ttft", "TPOT (ms)": "tpot",
                               "tok/s aggregate": "tps", "memory (GB)": "mem",
                               "capacity (GB)": "cap", "_ttft_ideal": "ttft_i",
                               "_tpot_ideal": "tpot_i", "_tps_ideal": "tps_i"})
    df["fit"] = df["fits"].map({True: "fits", False: "does not fit"})
    df = df.replace([float("inf"), float("-inf")], float("nan"))
    return df[["scenario", "fit", "ttft", "tpot", "tps", "mem", "cap", "ttft_i", "tpot_i",
               "tps_i"]]


@functools.lru_cache(maxsize=4)
def compare_spec(log: bool = False, narrow: bool = False) -> dict:
    """Four horizontal bar charts (Altair, as a Vega-Lite spec without data: the page passes
    :func:`chart_data` to ``st.vega_lite_chart``) with one shared selection: TTFT, TPOT,
    aggregate tokens/s and memory needed (capacity as a tick). Built once per scale: Altair
    takes about a second to serialise a chart, the data changes on every rerun."""
    sel = alt.selection_point(fields=["scenario"], name="pick")
    panels = [("ttft", "ttft_i", "TTFT (ms)"), ("tpot", "tpot_i", "TPOT (ms)"),
              ("tps", "tps_i", "Decode tokens/s (aggregate)"),
              ("mem", "cap", "Memory needed (GB), tick = capacity")]
    if narrow:      # a phone: one chart a row, each with its names (2 x 2 ran off the screen)
        rows = [alt.hconcat(_bars(v, i, t, sel, log, True, narrow=True)) for v, i, t in panels]
    else:
        rows = [alt.hconcat(*(_bars(v, i, t, sel, log, k == 0) for k, (v, i, t) in
                              enumerate(panels[j:j + 2]))) for j in (0, 2)]
    with warnings.catch_warnings():     # one selection shared by all views is the intent
        warnings.filterwarnings("ignore", "Automatically deduplicated selection")
        chart = alt.vconcat(*rows).add_params(sel).resolve_scale(color="shared")
        return _without_placeholder_data(chart.to_dict())


# (bar field, tick field) of each chart in compare_spec, in the order they are drawn.
_PANELS = (("ttft", "ttft_i"), ("tpot", "tpot_i"), ("tps", "tps_i"), ("mem", "cap"))


def x_domains(data: pd.DataFrame, log: bool) -> dict[str, list[float] | None]:
    """Each chart's x range, from the values it will draw (bar and tick; positive ones on a log
    scale): linear from 0 to 5 % past the largest, log from half the smallest to twice the
    largest. None where a chart has no finite value to draw."""
    out: dict[str, list[float] | None] = {}
    for bar, tick in _PANELS:
        vals = pd.concat([pd.to_numeric(data[bar], errors="coerce"),
                          pd.to_numeric(data[tick], errors="coerce")])
        vals = vals[vals.apply(lambda v: v == v and abs(v) != float("inf"))]
        if log:
            vals = vals[vals > 0]
        if vals.empty:
            out[bar] = None
        elif log:
            out[bar] = [float(vals.min()) / 2, float(vals.max()) * 2]
        else:
            top = float(vals.max())
            out[bar] = [min(0.0, float(vals.min())), top * 1.05 if top > 0 else 1.0]
    return out


def with_domains(spec: dict, data: pd.DataFrame, log: bool) -> dict | None:
    """``spec`` (from :func:`compare_spec`) with every x scale's domain set from ``data``.
    Streamlit draws a Vega-Lite chart once with no rows before it inserts the data; a domain
    left to Vega is then the extent of nothing ("Infinite extent for field …" in the console).
    A chart with no finite value to draw is left out; None if no chart has one."""
    domains = x_domains(data, log)
    fields = {f: bar for bar, tick in _PANELS for f in (bar, tick)}

    def fix(node):
        if isinstance(node, dict):
            node = {k: fix(v) for k, v in node.items()}
            x = node.get("encoding", {}).get("x") if isinstance(node.get("encoding"), dict) \
                else None
            if isinstance(x, dict) and x.get("field") in fields:
                x["scale"] = {**x.get("scale", {}), "domain": domains[fields[x["field"]]]}
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    def drawable(view) -> bool:
        layer = view.get("layer", [])
        return any(domains.get(lay.get("encoding", {}).get("x", {}).get("field")) is not None
                   for lay in layer)

    out = fix(spec)
    rows = []
    for row in out["vconcat"]:
        views = [v for v in row["hconcat"] if drawable(v)]
        if views and views[0] is not row["hconcat"][0]:    # the names go on the left chart
            views[0] = {**views[0], "layer": [
                {**lay, "encoding": {**lay["encoding"], "y": {
                    **lay["encoding"]["y"], "axis": {**lay["encoding"]["y"]["axis"],
                                                     "labels": True, "ticks": True}}}}
                for lay in views[0]["layer"]]}
        if views:
            rows.append({**row, "hconcat": views})
    if not rows:
        return None
    return {**out, "vconcat": rows}


def _without_placeholder_data(spec):
    """Altair gives data-less views an empty named dataset; removed, every view draws the data
    Streamlit attaches at the top."""
    if isinstance(spec, dict):
        return {k: _without_placeholder_data(v) for k, v in spec.items()
                if not (k == "data" and v == {"name": "empty"})
                and not (k == "datasets" and set(v) <= {"empty"})}
    if isinstance(spec, list):
        return [_without_placeholder_data(v) for v in spec]
    return spec
