"""Design space: sweep hardware designs (peak compute, bandwidth, capacity, SRAM, TDP, price)
for the sidebar's model, precision and workload; Pareto fronts of the feasible designs, the
cloud of all designs, a tornado chart of one design's sensitivities, NSGA-II, and "open in
Overview". Thin: widgets -> llmpara_core.dse / dse_nsga -> Plotly."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from llmpara_core import dse
from llmpara_core.dse import physics as dse_physics, space as dse_space
from llmpara_core.metrics.carbon import grid_region, grid_regions
from llmpara_core.metrics.cost import MetricsSettings
from llmpara_core.errors import ConfigError
from llmpara_core.presets import load_hardware
from ui.format import escape_md, sig
from ui.links import OVERRIDES
from ui.opened_design import OPENED
from ui.scenario import (add_warning, chart_config, get_scenario, hardware_label, hardware_options,
                         preset_name)
from ui.shared_results import shared
from ui.tables import download_csv, download_json
from ui.url_widgets import (register_link_param, url_multiselect, url_number, url_segmented,
                            url_selectbox, url_toggle)

PRESET_BASE = "preset"
METHODS = {"Grid": "grid", "Random": "random", "Latin hypercube": "lhs", "NSGA-II": "nsga"}
CLOUD_MAX = 15_000              # designs drawn in the cloud (the front is always drawn whole)
WEBGL_ABOVE = 3_000             # SVG Plotly is slow beyond a few thousand points
PROGRESS_ABOVE = 50_000
FRONT_COLOR, FRONT_EDGE, CLOUD_COLOR, BAD_COLOR = "#4C78A8", "#F2CF5B", "#8C8C8C", "#E45756"
LOW_COLOR, HIGH_COLOR = "#F58518", "#54A24B"
DESIGN_LABELS = {"peak_tflops": "peak TFLOP/s", "bw_gbps": "bandwidth GB/s",
                 "cap_gb": "capacity GB", "memory": "memory", "sram_mb": "SRAM MB",
                 "tdp_w": "TDP W", "price_usd": "price USD", "area_mm2": "die mm²",
                 "embodied_kgco2e": "embodied kgCO2e"}
_APPLIED, _PICK = "_ds_applied", "ds_pick"
CACHE_ENTRIES = 8
DESIGN_NAME = OPENED        # the opened design's honest name (ui/opened_design.py)
OVERVIEW = "app_pages/overview_page.py"


def link_label(key: str) -> str:
    """An objective as the link format v=1 spells it (the URL-bound boxes show and write
    this, so links keep working): 'Decode tokens/s [tokens/s] ↑'."""
    o = dse.OBJECTIVES[key]
    return f"{o.label} [{o.unit}]" + (" ↑" if o.sense == "max" else " ↓")


def obj_label(key: str) -> str:
    """An objective on a chart or in a table: 'Decode tokens/s ↑', 'TTFT [s] ↓' (the unit in
    brackets unless the label names it)."""
    o = dse.OBJECTIVES[key]
    unit = "" if o.unit in o.label else f" [{o.unit}]"
    return f"{o.label}{unit}" + (" ↑" if o.sense == "max" else " ↓")


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values of a log axis from ``lo`` to ``hi``: 1-2-5 in each decade over up to four
    decades (an axis labelled only "1" and "10" for points at 0.45 … 44 said little), one per
    decade beyond."""
    import math
    if not (lo > 0 and hi > 0 and math.isfinite(lo) and math.isfinite(hi)):
        return []
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if b - a <= 4 else (1,)
    every = max(1, math.ceil((b - a) / 10))
    return [m * 10.0 ** e for e in range(a, b + 1, every if steps == (1,) else 1)
            for m in steps if lo / 1.0001 <= m * 10.0 ** e <= hi * 1.0001]


def _preset_name(slug: str) -> str:
    return dse_space.find_space(slug).name


def _reset_ranges() -> None:
    """Preset changed: the range editor starts from the new preset's axes."""
    st.session_state["ds_ranges"] = dse_space.axes_text(
        dse_space.find_space(st.session_state["ds_preset"]))


# ---- the run (cached in the session: a reduced summary, not every design) --------------------

def _summarise(ev: dse.Evaluation, front: np.ndarray, extra: dict) -> dict:
    rng = np.random.default_rng(0)
    cloud = np.arange(ev.n) if ev.n <= CLOUD_MAX else np.sort(rng.choice(ev.n, CLOUD_MAX, replace=False))
    counts = {name: int(np.count_nonzero(ev.reasons & bit))
              for bit, name in dse_physics.REASONS.items()}
    return {"n": ev.n, "feasible": int(ev.feasible.sum()), "counts": counts,
            "front": ev.take(front), "cloud": ev.take(cloud), **extra}


def run(ctx: dse.DesignContext, space, method: str, n: int, seed: int, objs: tuple,
        pop: int, gens: int) -> dict:
    key = (ctx, space, method, n if method in ("random", "lhs") else 0, seed, objs,
           (pop, gens) if method == "nsga" else None)
    return shared("design-space", CACHE_ENTRIES).get(key, lambda: _compute(
        ctx, space, method, n, seed, objs, pop, gens))


def _compute(ctx: dse.DesignContext, space, method: str, n: int, seed: int, objs: tuple,
             pop: int, gens: int) -> dict:
    big = method == "nsga" or (method != "grid" and n >= PROGRESS_ABOVE) or (
        method == "grid" and space.grid_size >= PROGRESS_ABOVE)
    bar = st.progress(0.0, text="Evaluating designs…") if big else None
    tick = (lambda f: bar.progress(min(1.0, f))) if bar else None
    if method == "nsga":
        from llmpara_core.dse.nsga import run_nsga
        res = run_nsga(ctx, space, objs, pop, gens, seed, progress=tick)
        out = _summarise(res.evaluation, res.front, {"hv": res.hv, "history": res.history})
        # every design NSGA-II evaluated (initial population + each generation's offspring),
        # not only the final population the summary holds
        out["evaluated"] = res.history[-1].evaluations if res.history else out["n"]
    else:       # the core keeps the front, the counts and a CLOUD_MAX sample, not every design
        res = dse.explore(ctx, space, method, n if method != "grid" else None, seed, objs,
                          with_hypervolume=len(objs) <= 3, progress=tick, keep_sample=CLOUD_MAX)
        ev = res.evaluation
        out = {"n": res.points_evaluated, "feasible": res.feasible_count,
               "counts": res.infeasible_counts(), "front": ev.take(res.front),
               "cloud": ev.take(res.sample), "hv": res.hypervolume, "history": ()}
        out["evaluated"] = out["n"]
    if bar:
        bar.empty()
    return out


# ---- figures -------------------------------------------------------------------------------

def _hover(ev: dse.Evaluation, objs) -> tuple[np.ndarray, str]:
    names = list(ev.memory_names)
    mem = np.array([names[int(i)] for i in ev["memory_index"]])
    cols = [ev["peak_tflops"], ev["bw_gbps"], ev["cap_gb"], mem, ev["tdp_w"], ev["price_usd"]]
    cols += [ev[o] for o in objs]
    tmpl = ("%{customdata[0]:.4g} TFLOP/s · %{customdata[1]:.4g} GB/s · %{customdata[2]:.4g} GB "
            "%{customdata[3]}<br>TDP %{customdata[4]:.4g} W · $%{customdata[5]:,.0f}")
    for j, o in enumerate(objs):
        tmpl += f"<br>{dse.OBJECTIVES[o].label}: %{{customdata[{6 + j}]:.4g}} {dse.OBJECTIVES[o].unit}"
    return np.column_stack(cols).astype(object), tmpl


def _axis_type(*cols) -> str:
    v = np.concatenate([np.asarray(c, dtype=float) for c in cols])
    v = v[np.isfinite(v)]
    return "log" if len(v) and v.min() > 0 and v.max() / v.min() > 30 else "linear"


def scatter(s: dict, x: str, y: str, objs) -> go.Figure:
    cloud, front = s["cloud"], s["front"]
    fig = go.Figure()
    ok = cloud.feasible
    small = cloud.n <= WEBGL_ABOVE      # few designs: larger, opaque markers stay legible
    styles = ((~ok, "infeasible designs", BAD_COLOR, 0.5 if small else 0.18, 7 if small else 4),
              (ok, "feasible designs", CLOUD_COLOR, 0.8 if small else 0.45, 8 if small else 5))
    for mask, name, color, op, size in styles:
        if not mask.any():
            continue
        sub = cloud.take(np.flatnonzero(mask))
        data, tmpl = _hover(sub, (x, y))
        trace = go.Scattergl if sub.n > WEBGL_ABOVE else go.Scatter
        fig.add_trace(trace(x=sub[x], y=sub[y], mode="markers", name=name, customdata=data,
                            hovertemplate=tmpl + "<extra>%{fullData.name}</extra>",
                            marker=dict(size=size, color=color, opacity=op),
                            legendgroup=name, showlegend=False))
        # the legend's dot at full strength: a faint cloud's own dot vanished on a dark theme
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                 legendgroup=name, marker=dict(size=10, color=color)))
    if front.n:
        order = np.argsort(front[x], kind="stable")
        data, tmpl = _hover(front, tuple(dict.fromkeys((x, y) + tuple(objs))))
        trace = go.Scattergl if front.n > WEBGL_ABOVE else go.Scatter
        fig.add_trace(trace(x=front[x][order], y=front[y][order], name="Pareto front",
                            mode="markers+lines" if len(objs) == 2 and {x, y} == set(objs)
                            else "markers", customdata=data[order],
                            hovertemplate=tmpl + "<extra>front</extra>",
                            marker=dict(size=10, color=FRONT_COLOR, symbol="diamond",
                                        line=dict(width=1.5, color=FRONT_EDGE)),
                            line=dict(color=FRONT_COLOR, width=1)))
    for key, upd in ((x, fig.update_xaxes), (y, fig.update_yaxes)):
        kind = _axis_type(cloud[key], front[key])
        extra = {}
        if kind == "log":
            v = np.concatenate([np.asarray(cloud[key], float), np.asarray(front[key], float)])
            v = v[np.isfinite(v) & (v > 0)]
            ticks = log_ticks(float(v.min()), float(v.max())) if len(v) else []
            extra = dict(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
        upd(title=obj_label(key), type=kind, **extra)
    fig.update_layout(height=520, margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(orientation="h", y=1.08))
    return fig


def infeasible_changes(sens: dse.Sensitivity, objective: str, low: float,
                       high: float) -> list[str]:
    """'<axis> × <m>: <reason>' for every one-axis change that leaves no valid design (the
    gaps of :func:`tornado`)."""
    out = []
    for k, pairs in sens.relative(objective).items():
        for m in (low, high):
            if dict(pairs).get(m) is not None:
                continue
            i = sens.pairs.index((k, m))
            why = "; ".join(dse_physics.REASON_TEXT.get(n, n) for n in
                            dse_physics.reason_names(sens.evaluation.reasons[i]))
            out.append(f"{dse_space.AXES[k].label} × {m:g}: {why}")
    return out


def tornado(sens: dse.Sensitivity, objective: str, low: float, high: float) -> go.Figure:
    """Change of ``objective`` [%] when one axis is multiplied by ``low`` or ``high``; an
    infeasible change is a gap labelled "no valid design" right of zero (its reason is in the
    caption: in the chart it ran off a phone's screen and over the axis names)."""
    rel = sens.relative(objective)
    keys = list(rel)
    labels = [dse_space.AXES[k].label for k in keys]
    fig = go.Figure()
    widest = 0.0
    for m, color in ((low, LOW_COLOR), (high, HIGH_COLOR)):
        vals = [None if dict(rel[k]).get(m) is None else (dict(rel[k])[m] - 1) * 100
                for k in keys]
        widest = max([widest, *(abs(v) for v in vals if v is not None)])
        fig.add_trace(go.Bar(y=labels, x=vals, orientation="h", name=f"× {m:g}",
                             marker_color=color, textposition="outside", cliponaxis=False,
                             text=["" if v is None else "no change" if abs(v) < 0.05
                                   else f"{v:+.3g} %" for v in vals],
                             hovertemplate="%{y}: %{x:+.3g} %<extra>× " + f"{m:g}</extra>"))
        for k, lab, v in zip(keys, labels, vals):
            if v is None:
                fig.add_annotation(y=lab, x=0, text=f"× {m:g}: no valid design",
                                   showarrow=False, xanchor="left", xshift=4,
                                   yshift=10 if m > 1 else -10, font=dict(size=11))
    fig.update_layout(barmode="group", height=140 + 60 * max(1, len(keys)),
                      margin=dict(l=10, r=40, t=30, b=10), legend=dict(orientation="h", y=1.12))
    # Symmetric about 0 with room for the labels: both multipliers' sides stay visible (an
    # axis ending at 0 pushed the "× 2" labels out of the chart).
    half = 1.6 * max(widest, 10.0)
    fig.update_xaxes(title=f"change of {dse.OBJECTIVES[objective].label} [%]", zeroline=True,
                     range=[-half, half])
    return fig


def front_frame(front: dse.Evaluation, objs) -> pd.DataFrame:
    rows = []
    for i in range(front.n):
        p = front.point(i)
        # objectives first (J/token was off-screen at 1440 px behind the design's columns)
        row = {obj_label(o): p[o] for o in dict.fromkeys((*objs, *dse.OBJECTIVES))}
        row.update({DESIGN_LABELS[k]: p[k] for k in DESIGN_LABELS})
        rows.append(row)
    return pd.DataFrame(rows)


# ---- open a design in the Overview -----------------------------------------------------------

def design_label(i: int, point: dict) -> str:
    """Design #k of the front (1-based) with every swept quantity."""
    return f"Design #{i + 1} · {dse.design_name(point)}"


def use_design(point: dict, base_slug: str, dtype: str, name: str = "") -> None:
    """Callback: the sidebar's hardware becomes the base preset with the design's peak,
    bandwidth, capacity, TDP and price as overrides (every page then analyses it); the page
    body then switches to the Overview."""
    ss = st.session_state
    if ss.get("hardware") != base_slug:
        ss["hardware"] = base_slug
    for o in OVERRIDES:
        ss[o.key] = None
    ss.update({f"peak_{dtype}": point["peak_tflops"], "bw": point["bw_gbps"],
               "cap": point["cap_gb"], "tdp": point["tdp_w"], "price": point["price_usd"]})
    ss[_APPLIED] = dse.design_name(point)
    ss[DESIGN_NAME] = {"name": name, "hardware": base_slug,
                       "overrides": {k: ss[k] for k in (f"peak_{dtype}", "bw", "cap", "tdp",
                                                        "price")}}


def pick_from_chart() -> None:
    """Chart click: a point of the front trace selects that design."""
    sel = st.session_state.get("ds_chart")
    pts = (sel or {}).get("selection", {}).get("points", []) if isinstance(sel, dict) else []
    for p in pts:
        data = p.get("customdata")
        if data and st.session_state.get("_ds_front_keys"):
            k = tuple(round(float(v), 9) for v in (data[0], data[1], data[2], data[4], data[5]))
            idx = st.session_state["_ds_front_keys"].get(k)
            if idx is not None:
                st.session_state[_PICK] = idx
                return


# ---- page ------------------------------------------------------------------------------------

scn = get_scenario()
st.title("Design space")
st.caption(escape_md(scn.label) + " · what hardware should this scenario run on?")

spaces = {s.slug: s for s in dse_space.presets()}
c1, c2, c3, c4 = st.columns([3, 3, 2, 2])
with c1:
    slug = url_selectbox("Preset", list(spaces), key="ds_preset", default="quick-scan",
                         format_func=_preset_name, on_change=_reset_ranges,
                         help="The reference tool's five grids (every value of every axis is "
                              "evaluated here).")
preset = spaces[slug]
with c2:
    base_choice = url_selectbox(
        "Base hardware", [PRESET_BASE] + hardware_options(), key="ds_base", default=PRESET_BASE,
        format_func=lambda s: (f"{preset_name('hardware', preset.base_hardware)} (the grid's "
                               "base)") if s == PRESET_BASE else hardware_label(s),
        help="Gives the class (efficiency, energy constants, allowed memories) and the values "
             "of the axes that are not swept.")
with c3:
    tdp_mode = url_segmented("TDP and price", ["swept", "derived"], key="ds_tdp",
                             default="swept",
                             help="derived: from the power and cost models of each design; "
                                  "swept (default; all five axes, as the reference tool): "
                                  "the preset's values, as constraints (a design must not "
                                  "need more power, its price must cover its cost).")
with c4:
    method_label = url_selectbox("Search method", list(METHODS), key="ds_method",
                                 default="Grid", help="Grid: every value of every axis; "
                                 "random / Latin hypercube: seeded samples of the ranges; "
                                 "NSGA-II: a genetic search for the front (pymoo).")
method = METHODS[method_label]

s1, s2, s3, s4, s5 = st.columns(5)
with s1:
    n = url_number("Designs (random / LHS)", "ds_n", 100, 1_000_000, 20_000, step=1000,
                   disabled=method not in ("random", "lhs"))
with s2:
    seed = url_number("Seed", "ds_seed", 0, 1_000_000, 0, step=1, disabled=method == "grid")
with s3:
    pop = url_number("NSGA-II population", "ds_pop", 8, 1000, 100, step=10,
                     disabled=method != "nsga")
with s4:
    gens = url_number("NSGA-II generations", "ds_gen", 1, 500, 40, step=5,
                      disabled=method != "nsga")
with s5:
    region = url_selectbox("CO2 grid region", [r.key for r in grid_regions()], key="ds_region",
                           default="world", format_func=lambda k: grid_region(k).name,
                           help="Grid carbon intensity of the gCO2e objective (operational "
                                "part); 170 regions, presets/tables/grid_carbon_intensity.toml.")
objs = url_multiselect("Pareto objectives (2-4)", list(dse.OBJECTIVES), key="ds_obj",
                       default=dse.DEFAULT_OBJECTIVES, format_func=link_label, max_selections=4)

with st.expander("Axes of the space", expanded=False):
    edit = url_toggle("Edit the ranges", "ds_edit", False,
                      help="TOML, as the [axes] table of a `llmpara dse --ranges` file: "
                           "`bw = [100, 500]` or `bw = { lo = 100, hi = 5000, count = 6, "
                           "scale = \"log\" }`; `fixed.sram = 50` fixes a value.")
    space = preset
    if edit:
        st.session_state.setdefault("ds_ranges", dse_space.axes_text(preset))
        text = st.text_area("Axes (TOML)", key="ds_ranges", height=170, bind="query-params")
        register_link_param("ds_ranges", text)
        try:
            space = dse_space.space_from_axes_text(text, preset)
        except ConfigError as e:
            st.error(f"These axes cannot be used: {escape_md(e)}. The edited ranges "
                     f"(`ds_ranges`) were dropped; the preset's axes are used.")
            add_warning(f"Link parameter `ds_ranges` dropped: {escape_md(e)}; using the "
                        f"{escape_md(preset.name)} preset's axes.")
    if tdp_mode == "derived":
        for k in ("tdp", "price"):
            if space.axis(k) is not None and len(space.axes) > 1:
                space = space.without_axis(k)
    st.dataframe(pd.DataFrame([{"axis": a.label, "values": ", ".join(f"{v:g}" for v in a.values),
                                "scale": a.scale} for a in space.axes]), hide_index=True)
    st.caption(f"{escape_md(preset.description)} Grid: {space.grid_size:,} designs. "
               "Derived TDP = the power at which the energy model's calibration gives the "
               "class's own pJ/FLOP; derived price = class markup × (die + memory cost). "
               "Constants and sources: presets/tables/dse_physics.toml.")

def explore_section(objs: tuple):
    """Run the search; (context, summary, base slug) or None after showing why not."""
    base_slug = preset.base_hardware if base_choice == PRESET_BASE else base_choice
    try:
        ctx = dse.DesignContext(scn.model, scn.precision, scn.workload,
                                scn.on(load_hardware(base_slug)),
                                MetricsSettings(region=region))
        summary = run(ctx, space, method, int(n), int(seed), objs, int(pop), int(gens))
    except ConfigError as e:
        st.error(f"This design space cannot be explored: {escape_md(e)}")
        return None
    return ctx, summary, base_slug


def summary_section(ctx, summary: dict, objs: tuple) -> None:
    """Headline counts, the objective-space chart and the NSGA-II history."""
    front = summary["front"]
    m = st.columns(5)
    m[0].metric("Designs evaluated", f"{summary['evaluated']:,}",
                help="NSGA-II: the initial population and every generation's offspring; the "
                     f"chart and front are its final population of {summary['n']:,}."
                if method == "nsga" else "Every design of the grid or sample.")
    m[1].metric("Feasible", f"{summary['feasible']:,}")
    m[2].metric("On the Pareto front", f"{front.n:,}")
    hv = summary["hv"]
    m[3].metric("Hypervolume", sig(hv.value) if hv else "—",
                help="Of the front, in objective space normalised by the feasible designs' best "
                     "and worst values; reference point = worst + 10 % of the range."
                if method != "nsga" else "Reference: the feasible designs of a seeded "
                "Latin hypercube of the space; point = their worst + 10 % of the range.")
    top = max(summary["counts"], key=summary["counts"].get)
    m[4].metric("Most common infeasibility", top if summary["counts"][top] else "none",
                help="; ".join(f"{k}: {v:,} ({dse_physics.REASON_TEXT[k]})"
                               for k, v in summary["counts"].items()))

    x0, y0 = st.columns(2)
    with x0:
        x = url_selectbox("Chart x", list(dse.OBJECTIVES), key="ds_x", default=objs[0],
                          format_func=link_label)
    with y0:
        y = url_selectbox("Chart y", list(dse.OBJECTIVES), key="ds_y", default=objs[1],
                          format_func=link_label)
    st.session_state["_ds_front_keys"] = {
        tuple(round(float(front[c][i]), 9) for c in ("peak_tflops", "bw_gbps", "cap_gb", "tdp_w",
                                                      "price_usd")): i for i in range(front.n)}
    st.plotly_chart(scatter(summary, x, y, objs), theme="streamlit", key="ds_chart",
                    config=chart_config("design-space"), on_select=pick_from_chart,
                    selection_mode="points")
    cap = (f"Cloud: {summary['cloud'].n:,} of {summary['n']:,} designs (a seeded sample)"
           if summary["cloud"].n < summary["n"] else "Cloud: every design")
    st.caption(f"{cap}; the front is drawn whole. Front of: "
               f"{escape_md(', '.join(dse.OBJECTIVES[o].label for o in objs))}. Click a front "
               "point to pick it below. Assumptions: " + escape_md("; ".join(ctx.physics.notes)))
    if summary["history"]:
        h = summary["history"]
        fig = go.Figure(go.Scatter(x=[g.generation for g in h], y=[g.hypervolume for g in h],
                                   mode="lines+markers", name="hypervolume"))
        fig.update_layout(height=260, margin=dict(l=10, r=10, t=30, b=10),
                          xaxis_title="generation", yaxis_title="hypervolume (normalised)")
        st.plotly_chart(fig, theme="streamlit", key="ds_hv", config=chart_config("nsga-hv"))


def front_section(ctx, summary: dict, objs: tuple, base_slug: str):
    """The front table, downloads and "open in Overview"; the picked design's point."""
    front = summary["front"]
    st.subheader("The front")
    df = front_frame(front, objs)
    st.dataframe(df, hide_index=True, height=min(400, 38 + 35 * len(df)),
                 column_config={c: st.column_config.NumberColumn(c, format="%.4g")
                                for c in df.columns if c != "memory"})
    with st.container(horizontal=True):
        download_csv(df, "design-space-front.csv", "Front CSV", key="ds_csv")
        download_json(json.dumps({"space": space.to_dict(), "objectives": list(objs),
                                  "points_evaluated": summary["evaluated"],
                                  "pareto": [front.point(i) for i in range(front.n)]},
                                 indent=2, allow_nan=False, default=str).encode(),
                      "design-space-front.json", "Front JSON", key="ds_json")

    pick = st.selectbox("Design", list(range(front.n)), key=_PICK,
                        format_func=lambda i: design_label(i, front.point(i)))
    point = front.point(pick)
    name = f"Design #{pick + 1} (from {ctx.base.name})"
    st.button("Open this design in the Overview", key="ds_open", icon=":material/open_in_new:",
              on_click=use_design, args=(point, base_slug, ctx.dtype.value, name),
              help="Sets the sidebar hardware to the base preset with this design's peak, "
                   "bandwidth, capacity, TDP and price as overrides, for every page. Times and "
                   "tokens/s are the same there; energy, cost and carbon use the preset's idle "
                   "power and embodied carbon instead of the design's models.")
    if st.session_state.pop(_APPLIED, None):
        # bound page keys cannot be carried by switch_page; the sidebar's are re-added by the app
        st.switch_page(OVERVIEW, query_params={})
    return point


@st.fragment
def sensitivity_section(ctx, point: dict) -> None:
    """One-at-a-time sensitivity (tornado) of the picked design; its controls rerun only this
    fragment (not the sweep chart above)."""
    st.subheader("Sensitivity of this design")
    t1, t2 = st.columns([2, 1])
    with t1:
        t_obj = url_selectbox("Objective", list(dse.OBJECTIVES), key="ds_tornado",
                              default="tokens_per_s", format_func=link_label)
    with t2:
        span = url_segmented("Multipliers", ["× 0.5 / × 2", "× 0.25 / × 4"], key="ds_span",
                             default="× 0.5 / × 2")
    low, high = (0.5, 2.0) if span.startswith("× 0.5") else (0.25, 4.0)
    base_design = {"peak": point["peak_tflops"], "bw": point["bw_gbps"], "cap": point["cap_gb"],
                   "sram": point["sram_mb"]}
    if space.axis("tdp") is not None:
        base_design["tdp"] = point["tdp_w"]
    if space.axis("price") is not None:
        base_design["price"] = point["price_usd"]
    sens = dse.sensitivity(ctx, base_design)
    st.plotly_chart(tornado(sens, t_obj, low, high), theme="streamlit", key="ds_tornado_chart",
                    config=chart_config("design-sensitivity"))
    st.caption("One axis at a time, the others held; a missing bar = that change makes the design "
               "infeasible. Derived TDP and price follow the changed design.")
    for line in infeasible_changes(sens, t_obj, low, high):
        st.caption("No valid design: " + escape_md(line))


def results(objs: tuple) -> None:
    if len(objs) < 2:
        st.warning("Pick at least two Pareto objectives.")
        return
    found = explore_section(objs)
    if found is None:
        return
    ctx, summary, base_slug = found
    summary_section(ctx, summary, objs)
    if summary["front"].n == 0:
        counts = summary["counts"]
        top = max(counts, key=counts.get)
        st.warning("No design of this space is feasible for this scenario (most common "
                   f"reason: {dse_physics.REASON_TEXT[top]}). Widen the axes or change the "
                   "preset.")
        return
    point = front_section(ctx, summary, objs, base_slug)
    sensitivity_section(ctx, point)


results(tuple(objs))
