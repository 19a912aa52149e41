"""Metrics: energy roofline, energy per operator and per token, TCO and CO2e per million output
tokens, the same scenario on every hardware preset, and energy per token against published
measurements. Thin: widgets -> llmpara_core.metrics.energy / cost / carbon -> Plotly."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from llmpara_core import presets
from llmpara_core.analysis import analyze
from llmpara_core.metrics.carbon import grid_region, grid_regions
from llmpara_core.metrics.cost import (MetricsSettings, compare_hardware, cost_efficiency,
                                       metrics_to_dict, scenario_metrics)
from llmpara_core.metrics.energy import (energy_roofline, energy_table, estimated_rates,
                                 params_for_report, read_energy_measurements, reference_alpha,
                                 geometric_mean_ratio, tdp_fraction_roofline, validate_energy)
from llmpara_core.calibration.stacks import with_stack
from llmpara_core.errors import LLMParaError
from llmpara_core.units import BYTES_PER_GB, FLOPS_PER_TFLOP, J_PER_PJ
from ui.format import escape_md, escape_md_keep_urls, fmt_pct, fmt_time, sig
from ui.tables import csv_bytes
from ui.page_inputs import optional_number, optional_value, reset_button
from ui.scenario import chart_config, get_scenario
from ui.url_widgets import url_number, url_segmented, url_selectbox, url_toggle


def _cut(text: str, limit: int) -> str:
    """``text`` up to about ``limit`` characters, cut between words (never inside an address)."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "presets" / "tables" / "energy_measurements.csv"
REF_REGIONS = ("Global_Average", "US_Average", "US_California", "US_Texas", "EU_Average",
               "France", "Germany", "China", "Iceland")
VIEWS = ("Energy", "Cost & carbon", "Compare hardware", "Validation")
GIGA = 1e9


# ---------------------------------------------------------------------------- cached core calls

@st.cache_data(max_entries=64, show_spinner=False)
def _metrics(model, hardware, precision, workload, settings, overrides):
    report = analyze(model, hardware, precision, workload)
    params = params_for_report(report).with_overrides(**dict(overrides))
    m = scenario_metrics(report, settings, params)
    return report, m, cost_efficiency(report, m)


@st.cache_data(max_entries=16, show_spinner=False)
def _compare(model, precision, workload, settings, framework):
    """Every preset under the sidebar's stack ("default": each device's class default): the
    comparison rows and each device's stack label."""
    hws, stacks = zip(*(with_stack(presets.load_hardware(i.slug), framework)
                        for i in presets.list_presets("hardware")))
    return (compare_hardware(model, hws, precision, workload, settings),
            tuple(s.label for s in stacks))


@st.cache_data(max_entries=2, show_spinner=False)
def _validation(path: str):
    # the component model runs on one device; tensor-parallel rows: the power model below
    return validate_energy([m for m in read_energy_measurements(path) if m.devices == 1])


@st.cache_data(max_entries=1, show_spinner=False)
def _power_model_rows() -> tuple[list[dict], dict]:
    """The power model's predictions of every ML.ENERGY row and the fit's held-out figures."""
    from llmpara_core.metrics import energy_validation as ev
    rows = [{"row": p.work.measurement.row_id, "group": ev.group_of(p.work),
             "hardware": p.work.measurement.hardware_preset, "devices": p.work.devices,
             "model": p.work.measurement.model_preset, "batch": p.work.measurement.batch,
             "stack": p.work.stack, "measured_j_per_token": p.measured_j_per_token,
             "predicted_j_per_token": p.predicted_j_per_token, "error": p.error}
            for p in ev.predict_rows()]
    return rows, ev.recorded_fit()


def _power_fit_figure() -> str:
    from llmpara_core.metrics.power_model import recorded_fit
    f = recorded_fit().get("batched")
    return "—" if f is None else f"{float(f):.1%}"


def _csv_button(df: pd.DataFrame, name: str, key: str) -> None:
    st.download_button("Download CSV", csv_bytes(df), f"{name}.csv",
                       "text/csv", key=key, icon=":material/download:")


# ---------------------------------------------------------------------------- settings

scn = get_scenario()
st.title("Metrics: energy, cost and carbon")
st.caption(escape_md(scn.label))

tco_defaults = energy_table()["tco"]
regions = [r.key for r in grid_regions()]
with st.expander("Assumptions (energy model, grid, TCO)", expanded=False):
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        # a select (its values stay the link's): four segments ran past this
        # quarter-width column (cut off at 1440 px)
        model_kind = url_selectbox("Energy model", ["auto", "power", "components",
                                                    "tdp-fraction"], key="m_model",
                                   default="auto",
                                   help="Power: a busy device draws a fitted share of its "
                                        "idle-to-TDP range plus its energies per FLOP and per "
                                        "byte, a device waiting on the host less (fitted on the "
                                        "published batched ML.ENERGY rows; "
                                        "energy_power.toml). Components: static power x time + "
                                        "pJ/FLOP by data type + pJ/byte by memory (Choi et al. "
                                        "2013). TDP fraction: the reference tool's TDP x "
                                        "(alpha u_c + (1-alpha) u_m). Auto: power where the "
                                        "device has a TDP and an idle power, else components.")
        alpha = url_number("alpha (TDP-fraction model)", "m_alpha", 0.0, 1.0,
                           float(reference_alpha(scn.hardware)), step=0.05,
                           disabled=model_kind != "tdp-fraction",
                           help="Compute share of TDP; default = the reference's value for "
                                "this hardware class.")
        charge_idle = url_toggle("Charge idle hours to tokens", "m_idle", True,
                                 help="Energy drawn at idle power during the (1 - utilisation) "
                                      "share of the life is attributed to the tokens served.")
    with c2:
        region = url_selectbox("Grid region", regions, key="m_region", default="world",
                               format_func=lambda k: grid_region(k).name)
        pue = url_number("PUE", "m_pue", 1.0, 3.0, float(tco_defaults["pue"]), step=0.01,
                         help="Facility energy / IT energy. Hyperscale 1.10-1.18, industry "
                              "average 1.56 (energy.toml [pue.*]).")
    with c3:
        usd_kwh = url_number("Electricity (USD/kWh)", "m_kwh", 0.0, 2.0,
                             float(tco_defaults["usd_per_kWh"]), step=0.005, format="%.4f")
        life = url_number("Lifetime (years)", "m_life", 0.5, 15.0,
                          float(tco_defaults["lifetime_years"]), step=0.5)
    with c4:
        util = url_number("Utilisation (%)", "m_util", 1, 100,
                          int(round(100 * tco_defaults["utilisation"])), step=5)
        emb = optional_number("Embodied carbon (kgCO2e)", "m_emb", 0.0, 1e6,
                               "device default", help="Overrides the device's embodied carbon.")
        reset_button(["m_emb"], key="_m_emb_reset", label="Reset to the device default")
    st.caption("Device price and TDP come from the sidebar's hardware (override them there). "
               f"Defaults and sources: presets/tables/energy.toml; region data: "
               f"{escape_md_keep_urls(_cut(grid_region(region).source, 160))}.")
# (key, lo, hi) of the energy-constant boxes; the expander opens when a link sets one.
ENERGY_BOXES = (("m_static", 0.0, 1e5), ("m_pjflop", 0.0, 1e4), ("m_pjbyte", 0.0, 1e5))
with st.expander("Energy constants (override the device defaults)", key="_m_energy_expander",
                 expanded=any(optional_value(*b) is not None for b in ENERGY_BOXES)):
    e1, e2, e3 = st.columns(3)
    with e1:
        o_static = optional_number("Static power (W)", *ENERGY_BOXES[0], "device default")
    with e2:
        o_flop = optional_number("Dynamic energy (pJ/FLOP)", *ENERGY_BOXES[1], "device default")
    with e3:
        o_byte = optional_number("Memory energy (pJ/byte)", *ENERGY_BOXES[2], "device default",
                                 help="Applies to weights, KV and activations alike.")
    reset_button([b[0] for b in ENERGY_BOXES], key="_m_energy_reset",
                 label="Reset to the device defaults")

overrides = []
if o_static is not None:
    overrides.append(("static_w", float(o_static)))
if o_flop is not None:
    overrides.append(("flop_j", float(o_flop) * 1e-12))
if o_byte is not None:
    overrides += [(k, float(o_byte) * 1e-12) for k in
                  ("weight_j_per_byte", "kv_j_per_byte", "act_j_per_byte", "main_j_per_byte")]
# the override boxes are the component model's constants: "auto" then means that model
energy_model = "components" if model_kind == "auto" and overrides else model_kind

try:
    settings = MetricsSettings(region=region, pue=float(pue), usd_per_kwh=float(usd_kwh),
                               lifetime_years=float(life), utilisation=util / 100,
                               include_idle=bool(charge_idle), energy_model=energy_model,
                               alpha=float(alpha) if model_kind == "tdp-fraction" else None,
                               embodied_kgco2e=None if emb is None else float(emb))
    report, m, ce = _metrics(scn.model, scn.hardware, scn.precision, scn.workload, settings,
                         tuple(overrides))
except LLMParaError as exc:
    st.error(f"Metrics unavailable for this scenario: {escape_md(exc)}")
    st.stop()

e, t, c = m.energy, m.tco, m.carbon
k1, k2, k3, k4, k5, k6 = st.columns(6)
k1.metric("Energy / output token", f"{sig(e.j_per_output_token)} J",
          help="All energy of the run (prefill included) / output tokens (ML.ENERGY's definition).")
k2.metric("Tokens per joule", sig(e.tokens_per_j))
k3.metric("Avg power", f"{sig(e.avg_power_w)} W", help="Device power while busy.")
k4.metric("$ / M output tokens", "—" if t.usd_per_million_tokens is None
          else f"${sig(t.usd_per_million_tokens)}",
          help="Capex amortised over lifetime x utilisation + electricity x PUE, at the "
               "scenario's throughput with its batch.")
k5.metric("gCO2e / M tokens", sig(c.total_g_per_million_tokens),
          help="Operational (energy x PUE x grid) + embodied (amortised).")
k6.metric("End-to-end tokens/s", sig(m.tokens_per_s),
          help="Output tokens / end-to-end time = batch x gen / (TTFT + decode), prefill "
               "included; the Overview's decode tokens/s (1 / TPOT) leaves prefill out, so it "
               "is higher.")
if not m.fits:
    st.warning(f"The scenario does not fit in {escape_md(scn.hardware.name)}'s memory; figures "
               f"are what it would cost if it did.")
st.caption({"power": "Energy: the fitted power model (held-out median error "
                    f"{_power_fit_figure()} on the published batched rows; Validation view).",
            "components": "Energy: the component model (static power x time + energy per FLOP "
                          "and per byte)" + ((" -- the energy constants set below are "
                                              "its own." if overrides else " -- the power "
                                              "model needs a TDP and an idle power, which this "
                                              "device lacks.") if model_kind == "auto"
                                             else "."),
            "tdp-fraction": "Energy: the reference tool's TDP-fraction model."}[e.model])
if model_kind == "tdp-fraction":
    st.info("Reference TDP-fraction model: power is a fraction of TDP set by the operator's "
            "position against the ridge, not by its FLOPs and bytes; the per-operator times are "
            "the same as in the component model.")

view = url_segmented("View", VIEWS, key="m_view", default="Energy")


# ---------------------------------------------------------------------------- energy view

def _ops_frame(rows, phase: str) -> pd.DataFrame:
    return pd.DataFrame([{
        "phase": phase, "operator": o.name, "kind": o.kind.value, "group": o.group,
        "flops": o.flops, "memory_bytes": o.memory_bytes,
        "intensity_flop_per_byte": o.arithmetic_intensity, "time_s": o.time_s,
        "compute_j": o.compute_j, "memory_j": o.memory_j, "comm_j": o.comm_j,
        "static_j": o.static_j, "total_j": o.total_j, "power_w": o.power_w,
        "gflop_per_j": None if o.flops_per_j is None else o.flops_per_j / GIGA} for o in rows])


def _ridge_marker(fig: go.Figure, x: float, text: str) -> None:
    """A dotted vertical line at ``x`` across the y range of the traces already drawn, as a
    trace: a shape or annotation on a log axis takes log10 coordinates, so ``add_vline(x=183)``
    would stretch the axis to 10^183. The label sits left of the line (the ridge lies to the
    right, and a label to its right ran off a phone's chart)."""
    ys = [v for tr in fig.data for v in (tr.y if tr.y is not None else ())
          if v is not None and v > 0]
    if not ys or not x or x <= 0:
        return
    fig.add_trace(go.Scatter(x=[x, x], y=[min(ys), max(ys)], mode="lines+text",
                             text=[f"{text} {sig(x)} FLOP/B", ""], textposition="top left",
                             line={"dash": "dot", "width": 1, "color": "#8C8C8C"},
                             hoverinfo="skip", showlegend=False))


@st.fragment
def operator_energy() -> None:
    """Energy per operator; its phase and count controls rerun only this fragment."""
    st.subheader("Energy per operator")
    c1, c2 = st.columns([1, 3])
    with c1:
        phase = url_segmented("Phase", ["decode", "prefill"], key="m_phase", default="decode",
                              format_func=lambda s: {"decode": "Decode step",
                                                     "prefill": "Prefill"}[s])
        top_n = url_number("Operators shown", "m_topn", 3, 80, 15, step=1)
    rows = e.decode if phase == "decode" else e.prefill
    df = _ops_frame(rows, phase).sort_values("total_j", ascending=False)
    top = df.head(int(top_n)).iloc[::-1]
    fig = go.Figure()
    for col, name in (("compute_j", "compute"), ("memory_j", "memory"), ("static_j", "static"),
                      ("comm_j", "link")):
        fig.add_trace(go.Bar(y=top["operator"], x=top[col], name=name, orientation="h",
                             hovertemplate="%{y}: %{x:.3g} J<extra>" + name + "</extra>"))
    fig.update_layout(barmode="stack", height=max(260, 22 * len(top) + 80), margin={"t": 10},
                      xaxis_title="J per decode step (whole batch)" if phase == "decode"
                      else "J (prefill, whole batch)", legend={"orientation": "h", "y": -0.15})
    with c2:
        st.plotly_chart(fig, key="m_opbars", config=chart_config("energy_per_operator"))


def energy_view() -> None:
    r_est = estimated_rates(report)
    p = e.params
    comp = energy_roofline(p, r_est)
    left, right = st.columns([3, 2])
    with left:
        st.subheader("Energy roofline")
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=comp.intensity, y=comp.flops_per_j / GIGA, mode="lines",
                                 name="components model",
                                 hovertemplate="AI=%{x:.3g} FLOP/B<br>%{y:.3g} GFLOP/J<extra></extra>"))
        if scn.hardware.tdp_w:
            a = e.alpha if e.alpha is not None else reference_alpha(scn.hardware)
            ref = tdp_fraction_roofline(scn.hardware.tdp_w, a, r_est)
            fig.add_trace(go.Scatter(x=ref.intensity, y=ref.flops_per_j / GIGA, mode="lines",
                                     line={"dash": "dash"}, name=f"TDP fraction (alpha={a:g})",
                                     hovertemplate="AI=%{x:.3g}<br>%{y:.3g} GFLOP/J<extra></extra>"))
        for phase, rows, symbol in (("prefill", e.prefill, "circle"),
                                    ("decode step", e.decode, "triangle-up")):
            pts = [o for o in rows if o.arithmetic_intensity and o.flops_per_j]
            if pts:
                fig.add_trace(go.Scatter(
                    x=[o.arithmetic_intensity for o in pts], y=[o.flops_per_j / GIGA for o in pts],
                    mode="markers", name=phase, marker={"symbol": symbol, "size": 9},
                    text=[o.name for o in pts], customdata=[[o.total_j, o.power_w or 0] for o in pts],
                    hovertemplate="%{text}<br>AI=%{x:.3g} FLOP/B<br>%{y:.3g} GFLOP/J<br>"
                                  "%{customdata[0]:.3g} J, %{customdata[1]:.0f} W<extra></extra>"))
        _ridge_marker(fig, comp.time_ridge, "time ridge")
        fig.update_xaxes(type="log", title="Arithmetic intensity (FLOP/byte)", dtick=1)
        fig.update_yaxes(type="log", title="Attainable GFLOP/J (= GFLOPS/W)", dtick=1)
        fig.update_layout(height=430, margin={"t": 10}, legend={"orientation": "h", "y": -0.2})
        st.plotly_chart(fig, key="m_eroof", config=chart_config("energy_roofline"))
        st.caption(f"Ceiling {sig(comp.ceiling_flops_per_j / GIGA)} GFLOP/J; energy balance "
                   f"(memory energy = FLOP energy) at {sig(comp.energy_balance)} FLOP/B; time "
                   f"ridge {sig(comp.time_ridge)} FLOP/B. Operators fall below the curve by their "
                   "kernel-launch overhead (static power over the extra time).")
    with right:
        st.subheader("Per token and per request")
        st.dataframe(pd.DataFrame([
            ("Energy / output token (with prefill)", f"{sig(e.j_per_output_token)} J"),
            ("Energy per decoded token (marginal)", f"{sig(e.decode_j_per_token)} J"),
            ("Energy per request (one sequence)", f"{sig(e.request_j)} J"),
            ("Prefill (whole batch)", f"{sig(e.prefill_j)} J"),
            ("One decode step (whole batch)", f"{sig(e.decode_step_j)} J"),
            ("Whole run", f"{sig(e.total_j)} J in {fmt_time(e.total_time_s)}"),
            ("Tokens per joule", sig(e.tokens_per_j)),
            *([("Power running kernels (+ FLOPs, bytes)", f"{sig(e.busy_w)} W"),
               ("Power waiting on the host", f"{sig(e.fixed_w)} W"),
               ("Energy per FLOP (fitted)",
                f"{sig(e.dynamic_scale * p.flop_j / J_PER_PJ)} pJ ({p.dtype_used.value})"),
               ("Energy per byte, main memory (fitted)",
                f"{sig(e.dynamic_scale * p.main_j_per_byte / J_PER_PJ)} pJ")]
              if e.model == "power" else
              [("Static power while busy", f"{sig(p.static_w)} W"),
               ("Dynamic energy per FLOP", f"{sig(p.flop_j / J_PER_PJ)} pJ ({p.dtype_used.value})"),
               ("Memory energy per byte (weights)",
                f"{sig(p.weight_j_per_byte / J_PER_PJ)} pJ")]),
        ], columns=["quantity", "value"]), hide_index=True,
            height=35 * (12 if e.model == "power" else 11) + 3)   # every row, no scroll bar
        # parts that draw energy (no empty 'link' row on a single device)
        names = ({"static": "running + host wait", "compute": "FLOPs", "memory": "bytes"}
                 if e.model == "power" else {})
        parts = {names.get(k, k): v for k, v in e.whole_run_parts_j().items() if v > 0}
        fig = go.Figure(go.Bar(x=list(parts.values()), y=list(parts), orientation="h",
                               hovertemplate="%{y}: %{x:.3g} J<extra></extra>"))
        fig.update_layout(height=200, margin={"t": 10, "b": 10}, xaxis_title="J (whole run)",
                          yaxis={"automargin": True})   # the longest part name in full
        st.plotly_chart(fig, key="m_parts", config=chart_config("energy_breakdown"))

    operator_energy()
    full = pd.concat([_ops_frame(e.prefill, "prefill"), _ops_frame(e.decode, "decode step")])
    with st.expander("Operator table"):
        st.dataframe(full, hide_index=True)
        _csv_button(full, "energy_per_operator", "m_ops_csv")
    with st.expander("Assumptions of this result"):
        for a in m.assumptions:
            st.markdown(f"- {escape_md(a)}")


# ---------------------------------------------------------------------------- cost & carbon view

def _usd(v: float | None) -> str:
    return "—" if v is None else f"${sig(v)}"


def cost_cards() -> None:
    """$/M tokens with the reference tool's TCO cards beside it (llmpara_core.metrics.cost)."""
    q = st.columns(4)
    q[0].metric("$ / M output tokens", _usd(t.usd_per_million_tokens),
                help="Capex amortised over lifetime x utilisation + electricity x PUE.")
    q[1].metric("TCO per EFLOP", _usd(ce.usd_per_eflop),
                help=f"TCO per busy hour / FLOPs this workload executes per hour x 10^18 "
                     f"(achieved {sig(ce.achieved_flops_per_s / FLOPS_PER_TFLOP)} TFLOP/s on average; the "
                     "reference tool priced a peak EFLOP instead).")
    q[2].metric("kWh / M output tokens", sig(ce.kwh_per_million_tokens),
                help="Device energy x PUE per million output tokens (facility energy).")
    q[3].metric("GFLOPS / $", sig(ce.gflops_per_usd_peak),
                help=f"Peak GFLOP/s ({report.dtype_used.value}) per USD of device price; "
                     f"achieved by this workload: {sig(ce.gflops_per_usd_achieved)} GFLOPS/$.")


def cost_view() -> None:
    cost_cards()
    left, right = st.columns(2)
    with left:
        st.subheader("Total cost of ownership")
        st.dataframe(pd.DataFrame([
            ("Device price", "—" if t.price_usd is None else f"${sig(t.price_usd)}"),
            ("Capex per hour (wall clock)", "—" if t.capex_usd_per_hour is None
             else f"${sig(t.capex_usd_per_hour)}"),
            ("Electricity per hour (wall clock, x PUE)", f"${sig(t.electricity_usd_per_hour)}"),
            ("Total per hour", "—" if t.usd_per_hour is None else f"${sig(t.usd_per_hour)}"),
            ("Lifetime TCO", "—" if t.lifetime_tco_usd is None else f"${sig(t.lifetime_tco_usd)}"),
            ("Electricity share of TCO", "—" if t.energy_fraction is None
             else f"{100 * t.energy_fraction:.1f} %"),
            ("$ per M output tokens", "—" if t.usd_per_million_tokens is None
             else f"${sig(t.usd_per_million_tokens)}"),
            ("TCO per EFLOP of this workload", _usd(ce.usd_per_eflop)),
            ("kWh per M output tokens (x PUE)", sig(ce.kwh_per_million_tokens)),
            ("Peak GFLOP/s per $", sig(ce.gflops_per_usd_peak)),
            ("Achieved GFLOP/s per $", sig(ce.gflops_per_usd_achieved)),
            ("Throughput used (end-to-end)", f"{sig(m.tokens_per_s)} tok/s, batch {e.batch}"),
        ], columns=["quantity", "value"]), hide_index=True, height=35 * 13 + 3)
        fig = go.Figure([go.Bar(name="capex", y=["$/M tokens"], orientation="h",
                                x=[t.capex_usd_per_million_tokens or 0]),
                         go.Bar(name="electricity", y=["$/M tokens"], orientation="h",
                                x=[t.electricity_usd_per_million_tokens or 0])])
        fig.update_layout(barmode="stack", height=170, margin={"t": 10, "b": 10},
                          xaxis_title="USD per million output tokens",
                          legend={"orientation": "h", "y": 1.25})
        st.plotly_chart(fig, key="m_tco", config=chart_config("tco"))
        if t.price_usd is None:
            st.warning("This device has no price: enter one in the sidebar (Hardware "
                       "overrides) to get capex and $/M tokens.")
    with right:
        st.subheader("CO2e per million output tokens")
        st.caption(f"Grid: {escape_md(grid_region(region).name)}, "
                   f"{sig(c.gco2e_per_kwh)} gCO2e/kWh ({escape_md(grid_region(region).basis)}).")
        names = [region] + [r for r in REF_REGIONS if grid_region(r).key != region]
        bars_x = [grid_region(n).name for n in names]
        op = [c.operational_at_g_per_million_tokens(grid_region(n).gco2e_per_kwh) for n in names]
        fig = go.Figure([go.Bar(name="operational", y=bars_x, x=op, orientation="h"),
                         go.Bar(name="embodied", y=bars_x, orientation="h",
                                x=[c.embodied_g_per_million_tokens or 0] * len(names))])
        fig.update_layout(barmode="stack", height=120 + 30 * len(names), margin={"t": 10},
                          xaxis_title="gCO2e per M output tokens",
                          yaxis={"autorange": "reversed"},
                          legend={"orientation": "h", "y": -0.2})
        st.plotly_chart(fig, key="m_co2", config=chart_config("co2e_by_region"))
        st.caption("First bar: the selected region; then the reference tool's nine regions "
                   "(operational carbon scales linearly with grid intensity).")
        if not c.embodied_known:
            st.warning("Embodied carbon unknown for this device: totals are operational only. "
                       "Enter a figure under Assumptions.")
    st.download_button("Download results (JSON)",
                       json.dumps(metrics_to_dict(m), indent=2, allow_nan=False, default=str),
                       "metrics.json", "application/json", key="m_json",
                       icon=":material/download:")


# ---------------------------------------------------------------------------- compare view

CMP_METRICS = {"j_per_token": "J / output token", "usd_per_million_tokens": "$ / M tokens",
               "co2e_g_per_million_tokens": "gCO2e / M tokens",
               "output_tokens_per_s": "output tokens/s", "tokens_per_j": "tokens / J"}


def compare_view() -> None:
    st.subheader("The same scenario on every hardware preset")
    with st.spinner("Analysing every hardware preset…"):
        rows, stacks = _compare(scn.model, scn.precision, scn.workload, settings, scn.framework)
    df = pd.DataFrame([{
        "device": r.name, "slug": r.slug, "class": r.hw_class, "stack": stack,
        "fits": {True: "fits", False: "does not fit", None: "error"}[r.fits],
        "memory_needed_GB": None if r.memory_needed_bytes is None else r.memory_needed_bytes / BYTES_PER_GB,
        "capacity_GB": r.capacity_bytes / BYTES_PER_GB, "output_tokens_per_s": r.output_tokens_per_s,
        "j_per_token": r.j_per_token, "energy_model": r.energy_model,
        "tokens_per_j": r.tokens_per_j,
        "usd_per_million_tokens": r.usd_per_million_tokens,
        "co2e_g_per_million_tokens": r.co2e_g_per_million_tokens, "avg_power_w": r.avg_power_w,
        "price_usd": r.price_usd, "usd_per_gflops": r.usd_per_gflops,
        "ceiling_gflop_per_j": None if r.ceiling_flops_per_j is None else r.ceiling_flops_per_j / GIGA,
        "static_power_known": r.static_known, "embodied_known": r.embodied_known,
        "error": r.error} for r, stack in zip(rows, stacks)])
    n_fit = int((df["fits"] == "fits").sum())
    st.caption(f"{len(df)} devices, {n_fit} fit the scenario; devices that do not fit are kept "
               "and marked (figures are what they would be with enough memory). Preset hardware "
               "(sidebar overrides are not applied here), each under the sidebar's inference "
               "stack (the default: each device's class default; column stack). Cluster "
               "presets are one device. Energy: the energy model chosen under Assumptions "
               "(auto: the fitted power model where a device has a TDP and an idle power, "
               "else the component model; column energy model).")
    c1, c2 = st.columns([1, 3])
    with c1:
        metric = url_selectbox("Metric", list(CMP_METRICS), key="m_cmp",
                               default="j_per_token", format_func=CMP_METRICS.get)
        fit_only = url_toggle("Only devices that fit", "m_fitonly", False)
    shown = df[df["fits"] == "fits"] if fit_only else df
    shown = shown[shown[metric].notna()].sort_values(metric)
    fig = go.Figure(go.Bar(
        x=shown[metric], y=shown["device"], orientation="h",
        marker={"color": ["#2a9d8f" if f == "fits" else "#e76f51" for f in shown["fits"]]},
        customdata=shown[["fits", "class"]],
        hovertemplate="%{y}<br>%{x:.4g}<br>%{customdata[0]} · %{customdata[1]}<extra></extra>"))
    fig.update_layout(height=max(320, 18 * len(shown) + 80), margin={"t": 10},
                      xaxis_title=CMP_METRICS[metric], yaxis={"autorange": "reversed"})
    with c2:
        st.plotly_chart(fig, key="m_cmpbars", config=chart_config("hardware_comparison"))
        st.caption("Green: fits in memory. Orange: does not fit.")
    s1, s2 = st.columns(2)
    with s1:
        fig = go.Figure()
        for label, part in df[df["j_per_token"].notna()].groupby("fits"):
            fig.add_trace(go.Scatter(x=part["output_tokens_per_s"], y=part["j_per_token"],
                                     mode="markers", name=label, text=part["device"],
                                     hovertemplate="%{text}<br>%{x:.3g} tok/s<br>%{y:.3g} J/token"
                                                   "<extra></extra>"))
        fig.update_xaxes(type="log", title="Output tokens/s")
        fig.update_yaxes(type="log", title="J per output token")
        fig.update_layout(height=380, margin={"t": 30}, title="Speed vs energy")
        st.plotly_chart(fig, key="m_cmpscatter", config=chart_config("speed_vs_energy"))
    with s2:
        priced = df[df["usd_per_gflops"].notna() & df["tokens_per_j"].notna()]
        fig = go.Figure(go.Scatter(
            x=priced["usd_per_gflops"], y=priced["tokens_per_j"], mode="markers",
            text=priced["device"], customdata=priced[["ceiling_gflop_per_j"]],
            marker={"color": ["#2a9d8f" if f == "fits" else "#e76f51" for f in priced["fits"]]},
            hovertemplate="%{text}<br>%{x:.3g} $/GFLOPS<br>%{y:.3g} tokens/J<br>ceiling "
                          "%{customdata[0]:.3g} GFLOP/J<extra></extra>"))
        fig.update_xaxes(type="log", title="Price per peak GFLOP/s ($/GFLOPS)")
        fig.update_yaxes(type="log", title="Tokens per joule (this scenario)")
        fig.update_layout(height=380, margin={"t": 30}, title="Efficiency vs $/GFLOPS")
        st.plotly_chart(fig, key="m_effcost", config=chart_config("efficiency_vs_cost"))
        st.caption(f"{len(priced)} devices with a price; peak at the scenario's compute type.")
    st.dataframe(df, hide_index=True)
    _csv_button(df, "hardware_comparison", "m_cmp_csv")


# ---------------------------------------------------------------------------- validation view

def validation_view() -> None:
    st.subheader("Predicted energy per token vs published measurements")
    if not MEASUREMENTS.is_file():
        st.warning("The measurement file presets/tables/energy_measurements.csv is missing.")
        return
    with st.spinner("Predicting every measurement…"):
        vs = _validation(str(MEASUREMENTS))
    df = pd.DataFrame([{
        "row": v.measurement.row_id, "model": v.measurement.model_preset,
        "hardware": v.measurement.hardware_preset, "stack": v.measurement.framework,
        "batch": v.measurement.batch,
        "measured_j_per_token": v.measurement.measured_j_per_token,
        "predicted_j_per_token": v.predicted_j_per_token, "ratio": v.ratio,
        "predicted_with_measured_time": v.predicted_with_measured_time_j_per_token,
        "ratio_with_measured_time": v.ratio_with_measured_time,
        "tdp_fraction_j_per_token": v.tdp_fraction_j_per_token,
        "predicted_tpot_s": v.predicted_s_per_step,
        "measured_s_per_step": v.measurement.measured_s_per_step,
        "in_tolerance_test": v.measurement.in_tolerance_test, "fits": v.fits,
        "source": v.measurement.source, "notes": v.measurement.notes} for v in vs])
    used = df[df["in_tolerance_test"]]
    c1, c2, c3 = st.columns(3)
    tested = [v for v in vs if v.measurement.in_tolerance_test]
    c1.metric("Rows compared", len(used))
    c2.metric("Geo-mean predicted / measured", sig(geometric_mean_ratio(v.ratio for v in tested)))
    c3.metric("… with the measured step time",
              sig(geometric_mean_ratio(v.ratio_with_measured_time for v in tested)))
    fig = go.Figure()
    lo, hi = 0.02, 20
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x",
                             line={"dash": "dot"}))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[2 * lo, 2 * hi], mode="lines", name="x2 / x0.5",
                             line={"dash": "dash", "width": 1}, showlegend=True))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo / 2, hi / 2], mode="lines", showlegend=False,
                             line={"dash": "dash", "width": 1}))
    for col, name in (("predicted_j_per_token", "model time"),
                      ("predicted_with_measured_time", "measured step time"),
                      ("tdp_fraction_j_per_token", "TDP fraction (ref.)")):
        part = used[used[col].notna()]
        fig.add_trace(go.Scatter(x=part["measured_j_per_token"], y=part[col], mode="markers",
                                 name=name, text=part["row"] + " " + part["model"] + " b="
                                 + part["batch"].astype(str),
                                 hovertemplate="%{text}<br>measured %{x:.3g} J<br>predicted "
                                               "%{y:.3g} J<extra></extra>"))
    fig.update_xaxes(type="log", title="Measured J per output token")
    fig.update_yaxes(type="log", title="Predicted J per output token")
    fig.update_layout(height=460, margin={"t": 10})
    st.plotly_chart(fig, key="m_valid", config=chart_config("energy_validation"))
    st.markdown(
        "**Tolerance (tests/test_energy.py):** given the measured time per step, every "
        "prediction within a factor of 2 (geometric mean in [0.5, 1.25]); with the model's own "
        "estimated time, also within a factor of 2 (geometric mean in [0.6, 1.25]). Each row "
        "is timed with the profile of the stack it measured (vLLM 0.4: `vllm-legacy`); the "
        "full prediction runs high at large batches on the H100, where the modelled static "
        "batch's TPOT exceeds vLLM's measured one. The batch-1 HF-eager rows (E0273/E0274) "
        "are timed by that stack's per-kernel cost, which is fitted on their own measured "
        "time per token (no other rows measure HF eager), so for them only the power model "
        "is checked. "
        "Sources: ML.ENERGY Leaderboard v2.0 and v1 (GPU energy via Zeus/NVML, no PUE); "
        "nothing in the energy model's power constants was fitted to these rows.")
    st.dataframe(df, hide_index=True)
    _csv_button(df, "energy_validation", "m_val_csv")
    power_model_view()


def power_model_view() -> None:
    """Energy under load (issue 27): the utilisation power model on every ML.ENERGY row."""
    st.subheader("Under load: power from utilisation, every ML.ENERGY row")
    rows, fit = _power_model_rows()
    pm = pd.DataFrame(rows)
    batched = pm[pm["group"] != "batch 1"]
    c1, c2, c3 = st.columns(3)
    c1.metric("Batched rows, held out by device", fmt_pct(fit.get("batched"), 1),
              help="Median |predicted / measured − 1| of J per output token, each device's "
                   "rows predicted with power constants fitted without them "
                   "(`llmpara validate --regime energy --loo`).")
    c2.metric("… one GPU / tensor parallel",
              f"{fmt_pct(fit.get('batched_1gpu'), 1)} / {fmt_pct(fit.get('batched_tp'), 1)}")
    c3.metric("Batched rows, shipped fit", fmt_pct(batched["error"].abs().median(), 1))
    st.caption(
        "While kernels run, each device draws its idle power, a share of its idle-to-TDP "
        "range and the energy of the run's FLOPs (tensor cores) and bytes (memory streaming) "
        "at its own pJ/FLOP and pJ/byte; while the stack's host work runs (per-pass fixed "
        "time, launches), its idle power and a small share. Above its TDP the clock drops and "
        "the busy time stretches (`metrics/energy_validation.py`; three constants fitted on "
        "the batched rows, `scripts/fit_energy.py`). Batch-1 rows are never fitted "
        f"(held out {fmt_pct(fit.get('batch_1'), 1)}).")
    st.dataframe(pm, hide_index=True)
    _csv_button(pm, "energy_power_model", "m_pm_csv")


{"Energy": energy_view, "Cost & carbon": cost_view, "Compare hardware": compare_view,
 "Validation": validation_view}[view]()
