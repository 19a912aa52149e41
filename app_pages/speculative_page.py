"""Speculative: the sidebar model as the target of draft-verify speculative decoding. Draft
(preset, self-drafting head of a given size, Medusa, n-gram) on the same or another device;
speedup against gamma and acceptance, the step-time split, speedup against batch, memory and
energy, the vocabulary check, and predictions against published measurements.
Thin: widgets -> llmpara_core.speculative* -> Plotly."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from llmpara_core import speculative as spx
from llmpara_core.speculative import measurements as meas
from llmpara_core.speculative import views
from llmpara_core.errors import ConfigError, LLMParaError
from llmpara_core.precision import PRECISION_PRESETS, precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.units import BYTES_PER_GB, S_PER_MS
from ui import links, narrow
from ui.format import escape_md, fmt_gb, fmt_pct, fmt_rate, fmt_time, sig
from ui.scenario import (chart_config, get_scenario, hardware_label, hardware_options, model_label,
                         model_options)
from ui.tables import download_csv, download_json
from ui.url_widgets import register_link_param, url_number, url_segmented, url_selectbox

HEADS = {"eagle": "Self-drafting head · EAGLE-style", "eagle3": "Self-drafting head · EAGLE-3",
         "mtp": "Self-drafting head · DeepSeek MTP",
         "medusa": "Self-drafting head · Medusa", "ngram": "No network · n-gram lookup"}
SAME = "same"
SIDEBAR_TARGET = "sidebar"
VIEWS = ("Speedup", "Latency", "Batch", "Memory & energy", "Published measurements")
ACC_MODES = {"alpha": "Constant α", "rates": "Per-position rates", "measured": "Measured E"}
HEAT_ALPHAS = tuple(round(0.30 + 0.05 * i, 2) for i in range(14)) + (0.99,)
HEAT_GAMMAS = tuple(range(1, 17))
DEFAULT_RATES = "0.9, 0.8, 0.75, 0.7, 0.65, 0.6"
MTP_ROWS = ("S0055", "S0056", "S0057", "S0058", "S0059")


# ---- cached core calls ----------------------------------------------------------------------

@st.cache_data(max_entries=8, show_spinner=False)
def draft_choices() -> list[str]:
    return list(HEADS) + list(spx.draft_preset_slugs())


@st.cache_data(max_entries=64, show_spinner=False)
def default_choice(target) -> str:
    """The smallest matching-tokenizer draft preset of the target, else an EAGLE-style head."""
    return spx.default_draft_slug(target) or "eagle"


@st.cache_data(max_entries=64, show_spinner=False)
def run_report(setup: spx.Setup, spec: spx.Speculation, rates: tuple | None):
    report = spx.analyze_speculative(setup, spec)
    opt = None
    if spec.alpha is not None and spec.acceptance is None and spec.expected_tokens is None:
        opt = spx.optimal_gamma(setup, spec.alpha, max(16, spec.gamma))
    elif rates:
        opt = spx.optimal_gamma(setup, acceptance=rates, gamma_max=len(rates))
    even = spx.break_even_alpha(setup, spec.gamma) if spec.gamma else None
    return report, opt, even


@st.cache_data(max_entries=32, show_spinner=False)
def run_curves(setup, alphas, gamma_max):
    return views.gamma_curves(setup, alphas, gamma_max)


@st.cache_data(max_entries=32, show_spinner=False)
def run_grid(setup):
    return spx.speedup_grid(setup, HEAT_ALPHAS, HEAT_GAMMAS)


@st.cache_data(max_entries=32, show_spinner=False)
def run_batch(setup, spec, batches):
    return views.batch_rows(setup, spec, batches)


@st.cache_data(max_entries=2, show_spinner="Predicting the published measurements…")
def run_published():
    rows = meas.compare_measurements()
    return rows, meas.summarize(rows)


def show(fig: go.Figure, key: str) -> None:
    st.plotly_chart(fig, theme="streamlit", key=key, config=chart_config(key))


def _rates_input() -> tuple[float, ...] | None:
    """Per-position acceptance rates from a URL-bound text box; None (with an error) if bad."""
    raw = st.text_input("Acceptance per position (a1, a2, …)", DEFAULT_RATES, key="sp_rates",
                        bind="query-params", max_chars=400,
                        help="a1, a2, …: the probability that draft i is accepted given drafts "
                             "1..i-1 were (EAGLE-3 reports falling rates like these)")
    register_link_param("sp_rates", raw)
    try:
        rates = tuple(float(x) for x in raw.replace(";", ",").split(",") if x.strip())
        spx.Speculation(len(rates), acceptance=rates)       # validates [0, 1] and finiteness
    except (ValueError, ConfigError):
        st.error(f"Acceptance per position: '{links.show_value(raw)}' is not a comma-separated "
                 "list of numbers in [0, 1].")
        return None
    if not rates:
        st.error("Acceptance per position: give at least one rate.")
        return None
    return rates


# ---- inputs ---------------------------------------------------------------------------------

scn = get_scenario()
st.title("Speculative decoding")
t1, t2 = st.columns([3, 5])
with t1:
    target_choice = url_selectbox(
        "Target model", [SIDEBAR_TARGET] + model_options(), key="sp_target",
        default=SIDEBAR_TARGET,
        format_func=lambda m: f"Sidebar model · {scn.model.name}" if m == SIDEBAR_TARGET
        else model_label(m),
        help="The model whose decoding is sped up; the sidebar's hardware, precision and "
             "workload apply either way.")
target = scn.model if target_choice == SIDEBAR_TARGET else load_model(target_choice)
with t2:
    st.caption(f"Target = {escape_md(target.name)}"
               + (" (the sidebar model)" if target_choice == SIDEBAR_TARGET else "")
               + f" · {escape_md(scn.label)}")

choices = draft_choices()
c1, c2, c3 = st.columns([3, 2, 3])
with c1:
    choice = url_selectbox("Draft", choices, key="sp_draft", default=default_choice(target),
                           format_func=lambda c: HEADS.get(c) or f"Model · {model_label(c)}",
                           help="A separate draft model (any preset; the usual drafts first) "
                                "or a self-drafting head built on the target.")
with c2:
    dprec = url_selectbox("Draft precision", [SAME] + list(PRECISION_PRESETS), key="sp_dprec",
                          default=SAME, disabled=choice == "ngram",
                          format_func=lambda p: "Same as the target" if p == SAME else p)
with c3:
    dhw = url_selectbox("Draft device", [SAME] + hardware_options(), key="sp_dhw",
                        default=SAME, disabled=choice == "ngram",
                        format_func=lambda h: "Same device as the target" if h == SAME
                        else hardware_label(h),
                        help="Another device runs the draft; draft and verification still "
                             "alternate (no pipelining), each on its own memory.")
head_m, head_layers, head_size_note = 0.0, 1, None
if choice in ("eagle", "eagle3", "mtp"):
    h1, h2, _ = st.columns([2, 1, 5])
    with h1:
        head_m = url_number("Head size (M parameters)", "sp_head_m", 0.0, 100000.0, 0.0,
                            step=10.0,
                            help="Own parameters of the head (embedding and LM head are the "
                                 "target's). 0 = one target-shaped decoder layer (MTP: with "
                                 "the target's MoE).")
        head_size_note = st.empty()
    with h2:
        head_layers = url_number("Head layers", "sp_head_layers", 1, 8, 1, step=1)

a1, a2, a3, _ = st.columns([1, 3, 2, 2])
with a1:
    gamma = url_number("γ (draft tokens)", "sp_gamma", 0, 32, 4, step=1)
with a2:
    mode = url_segmented("Acceptance", list(ACC_MODES), key="sp_acc", default="alpha",
                         format_func=lambda m: ACC_MODES[m])
alpha, e_meas, rates = 0.8, 2.5, None
with a3:
    if mode == "alpha":
        alpha = url_number("α (per-token acceptance)", "sp_alpha", 0.0, 1.0, 0.8, step=0.01)
    elif mode == "measured":
        e_meas = url_number("Measured E (tokens / target pass)", "sp_e", 1.0, 33.0, 2.5,
                            step=0.1, help="Mean accepted length τ including the bonus token "
                                           "(at most γ + 1)")
    else:
        rates = _rates_input()
view = url_segmented("View", VIEWS, key="sp_view", default=VIEWS[0])


def build_setup() -> spx.Setup:
    dp = None if dprec == SAME or choice == "ngram" else precision_preset(dprec)
    dh = None if dhw == SAME or choice == "ngram" else scn.on(load_hardware(dhw))
    if choice in ("eagle", "eagle3", "mtp"):
        draft = spx.head_draft(target, choice, float(head_m) * 1e6 if head_m else None,
                               int(head_layers), precision=dp, hardware=dh)
    elif choice == "medusa":
        draft = spx.medusa_draft(dp, dh)
    elif choice == "ngram":
        draft = spx.ngram_draft()
    else:
        draft = spx.model_draft(load_model(choice), dp, dh)
    return spx.Setup(target, scn.hardware, scn.precision, scn.workload, draft)


def build_spec() -> spx.Speculation:
    g = int(gamma)
    if mode == "measured":
        if e_meas > g + 1:
            raise ConfigError(f"measured E = {sig(e_meas)} is more than γ + 1 = {g + 1} tokens "
                              "per target pass")
        return spx.Speculation(g, expected_tokens=float(e_meas))
    if mode == "rates":
        return spx.Speculation(g, acceptance=rates)
    return spx.Speculation(g, alpha=float(alpha))


report = None                       # no st.stop(): the link warnings and Copy link still render
if not (mode == "rates" and rates is None):    # (else the rates box already shows the error)
    try:
        setup, spec = build_setup(), build_spec()
        report, optimum, break_even = run_report(setup, spec, rates)
        if head_size_note is not None and not head_m and setup.draft.own_params:
            head_size_note.caption(f"0 = derived: {sig(setup.draft.own_params / 1e6)} M own "
                                   "parameters")
    except LLMParaError as exc:
        st.error(f"Speculative decoding cannot be analysed: {escape_md(exc)}")


# ---- headline -------------------------------------------------------------------------------

def headline() -> None:
    """The eight headline metrics, the fit and vocabulary warnings and the notes."""
    est, mem, energy = report.estimated, report.memory, report.energy
    m = st.columns(4) + st.columns(4)
    m[0].metric("Speedup", f"{sig(est.speedup)}×",
                help=f"Plain decode time / speculative decode time over the {scn.workload.gen_len} "
                     f"generated tokens (estimated rates); at peak rates {sig(report.ideal.speedup)}×")
    m[1].metric("E tokens / step", sig(report.expected_tokens_per_step),
                help="Accepted drafts + the target's own token per verification pass")
    m[2].metric("Tokens/s per sequence", fmt_rate(est.decode_tokens_per_s),
                delta=f"plain {fmt_rate(est.vanilla_decode_tokens_per_s)}", delta_color="off",
                delta_arrow="off")
    m[3].metric("Step time", fmt_time(est.step_s),
                help=f"draft {fmt_time(est.draft_s_per_step)} + verification "
                     f"{fmt_time(est.verify_s_per_step)}; plain decode step "
                     f"{fmt_time(est.vanilla_tpot_s)}")
    m[4].metric("Optimal γ", "—" if optimum is None else f"{optimum[0]} ({sig(optimum[1])}×)",
                help="γ with the largest speedup for this acceptance (constant α: γ ≤ max(16, γ); "
                     "per-position rates: γ ≤ their number)")
    m[5].metric("Break-even α", "—" if break_even is None else sig(break_even),
                help="Smallest constant α at which this γ is no slower than plain decoding "
                     "(— : never, even at α = 1)" if gamma else "γ = 0: nothing to break even")
    m[6].metric("Memory overhead", fmt_gb(mem.overhead_bytes),
                delta=fmt_pct(mem.overhead_fraction, 1), delta_color="off", delta_arrow="off",
                help="Draft weights + draft KV cache + γ speculative KV slots + verification "
                     "activations, against the target's weights + KV + activations (GB = 10⁹ B)")
    m[7].metric("Energy / token", f"{sig(energy.speculative_j_per_token)} J",
                delta=f"× {sig(energy.ratio)} of plain", delta_color="off", delta_arrow="off",
                help=f"Plain decoding {sig(energy.vanilla_j_per_token)} J per generated token; "
                     + escape_md(energy.method))

    vocab = report.vocab
    if vocab.compatible is False:
        st.warning(f"Vocabulary mismatch: {escape_md(vocab.message)}. The draft's tokens cannot be "
                   "verified directly; use a draft of the target's family or a self-drafting head.")
    elif vocab.compatible is None:
        st.info(f"Vocabulary: {escape_md(vocab.message)}.")
    if not mem.fits:
        cap = mem.target_capacity_bytes
        if mem.baseline_bytes > cap:
            what = f"The target alone ({fmt_gb(mem.baseline_bytes)}) does not fit in {fmt_gb(cap)}"
        elif mem.same_device:
            what = (f"Target + draft ({fmt_gb(mem.baseline_bytes + mem.overhead_bytes)}) do not fit "
                    f"in {fmt_gb(cap)}")
        else:
            what = "The target or the draft does not fit in its device's memory"
        st.warning(f"{what}; the figures are what it would take if it did.")
    if scn.hardware.interconnect is not None:
        st.caption(f"ℹ️ {escape_md(scn.hardware.name)} is a cluster preset: this page runs the "
                   "target on one of its devices (see Sharding for tensor/expert parallelism).")
    for note in report.notes:
        if note != vocab.message:
            st.caption("ℹ️ " + escape_md(note))


def result_json() -> bytes:
    d = spx.report_to_dict(report)
    d["optimal_gamma"] = (None if optimum is None
                          else {"gamma": optimum[0], "speedup": optimum[1]})
    d["break_even_alpha"] = break_even
    return json.dumps({"scenario": scn.query, "speculative": d}, indent=2, allow_nan=False,
                      default=str).encode("utf-8")


# ---- views ----------------------------------------------------------------------------------

def gamma_figure(curves) -> go.Figure:
    """Speedup against γ, one curve per α, with each optimum and this setting."""
    fig = go.Figure()
    for c in curves:
        mine = mode == "alpha" and c.alpha == float(alpha)
        fig.add_scatter(x=c.gammas, y=c.speedups, mode="lines+markers", name=f"α = {c.alpha:g}",
                        line=dict(width=4 if mine else 2), customdata=c.expected_tokens,
                        hovertemplate="γ %{x}: %{y:.3g}× (E = %{customdata:.3g})<extra>"
                                      f"α = {c.alpha:g}</extra>")
    fig.add_scatter(x=[c.best_gamma for c in curves], y=[c.best_speedup for c in curves],
                    mode="markers", name="optimum", marker=dict(symbol="diamond-open", size=14))
    fig.add_scatter(x=[int(gamma)], y=[est.speedup], mode="markers", name="this setting",
                    marker=dict(symbol="star", size=16))
    # the 1× line is named in the legend: a label on the line was drawn over by the curves
    fig.add_hline(y=1.0, line_dash="dot", line_color="#8C8C8C")
    fig.add_scatter(x=[None], y=[None], mode="lines", name="no speedup (1×)",
                    line=dict(dash="dot", color="#8C8C8C"))
    fig.update_layout(xaxis_title="γ (draft tokens per step)",
                      yaxis_title="speedup over plain decoding", height=420,
                      margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def expected_tokens_figure(curves) -> go.Figure:
    """E[tokens per verification step] against γ, one curve per α (the core's curves)."""
    fig = go.Figure()
    for c in curves:
        mine = mode == "alpha" and c.alpha == float(alpha)
        fig.add_scatter(x=c.gammas, y=c.expected_tokens, mode="lines+markers",
                        name=f"α = {c.alpha:g}", line=dict(width=4 if mine else 2),
                        hovertemplate="γ %{x}: E = %{y:.3g} tokens<extra>"
                                      f"α = {c.alpha:g}</extra>")
    fig.add_scatter(x=[int(gamma)], y=[report.expected_tokens_per_step], mode="markers",
                    name="this setting", marker=dict(symbol="star", size=16))
    fig.update_layout(xaxis_title="γ (draft tokens per step)",
                      yaxis_title="E[tokens per target pass]", height=420,
                      margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def speedup_view() -> None:
    alphas = list(spx.DEFAULT_ALPHAS)
    if mode == "alpha" and float(alpha) not in alphas:
        alphas = sorted(alphas + [float(alpha)])
    g_max = max(16, int(gamma))
    curves = run_curves(setup, tuple(alphas), g_max)
    left, right = st.columns(2)
    with left:
        st.subheader("Speedup against γ")
        show(gamma_figure(curves), "speculative-gamma")
    with right:
        st.subheader("Expected tokens per step against γ")
        show(expected_tokens_figure(curves), "speculative-expected-tokens")
    st.caption("Accepted drafts plus the target's own token per verification pass. With a "
               "constant α, E = (1 − α^(γ+1)) / (1 − α) (Leviathan et al. 2023): it saturates "
               "at 1 / (1 − α) however many drafts are proposed.")
    curve_df = pd.DataFrame([{"alpha": c.alpha, "gamma": g, "expected_tokens": e, "speedup": s}
                             for c in curves for g, s, e in
                             zip(c.gammas, c.speedups, c.expected_tokens)])
    st.caption(" · ".join(f"α {c.alpha:g}: best γ {c.best_gamma} ({sig(c.best_speedup)}×)"
                          for c in curves))

    st.subheader("Speedup heat map: α × γ")
    grid = run_grid(setup)
    ticks = [0.25, 0.5, 1, 2, 4, 8]
    z = np.log2(np.maximum(grid, 1e-6))
    text = [[f"{v:.2f}" for v in row] for row in grid]     # one precision for every cell
    fig = go.Figure(go.Heatmap(
        z=z, x=list(HEAT_GAMMAS), y=[f"{a:g}" for a in HEAT_ALPHAS],
        colorscale="RdBu", zmid=0.0, text=text,
        colorbar=dict(title="speedup", tickvals=np.log2(ticks), ticktext=[f"{t:g}×" for t in ticks]),
        hovertemplate="γ %{x}, α %{y}: %{text}×<extra></extra>"))
    # Each cell's number in black or white, whichever stands out on its colour (one colour for
    # all sat low-contrast on the mid-blue cells).
    # y = the row's index: a category axis reads a number as a position ("0.5" was taken as
    # half a row up from the first). All cells in one list: 240 add_annotation calls took 10 s
    # (Plotly re-validates the whole list on each).
    zmax = float(np.nanmax(np.abs(z))) or 1.0
    cells = [dict(x=g, y=i, text=text[i][j], showarrow=False,
                  font=dict(size=11, color="#FFFFFF" if abs(float(z[i][j])) / zmax > 0.45
                            else "#1F1F1F"))
             for i in range(len(HEAT_ALPHAS)) for j, g in enumerate(HEAT_GAMMAS)]
    fig.update_layout(xaxis_title="γ", yaxis_title="α", yaxis_type="category", height=520,
                      margin=dict(l=10, r=10, t=30, b=10), annotations=cells)
    with st.container(key="sp_heat"):
        show(fig, "speculative-heatmap")
    # a phone: 16 numbers a row do not fit in 390 px and ran into each other; the colours stay
    # (each cell's value on tap, all of them in the CSV)
    narrow.css(".st-key-sp_heat g.annotation { display: none; }")
    st.caption("Blue: faster than plain decoding; red: slower (white = 1×; colour on a log "
               "scale). On a narrow screen the numbers show on tap.")
    heat_df = pd.DataFrame([{"alpha": a, "gamma": g, "speedup": float(grid[i, j])}
                            for i, a in enumerate(HEAT_ALPHAS) for j, g in enumerate(HEAT_GAMMAS)])
    with st.container(horizontal=True):
        download_csv(curve_df, "speculative-gamma.csv", "Curves CSV", key="dl_sp_curves")
        download_csv(heat_df, "speculative-heatmap.csv", "Heat map CSV", key="dl_sp_heat")
        download_json(result_json(), "speculative.json", "Result JSON", key="dl_sp_json")


def latency_view() -> None:
    parts = views.step_breakdown(report)
    df = pd.DataFrame([asdict(p) for p in parts])
    st.subheader("Time per generated token")
    fig = go.Figure()
    e = report.expected_tokens_per_step
    rows = (("plain decoding", "vanilla decode", est.vanilla_tpot_s),
            (f"speculative (step / E = {sig(e)})", "draft", est.draft_s_per_step / e),
            (f"speculative (step / E = {sig(e)})", "verification", est.verify_s_per_step / e))
    for label, phase, v in rows:
        fig.add_bar(y=[label], x=[v / S_PER_MS], name=phase, orientation="h",
                    hovertemplate="%{x:.4g} ms<extra>" + phase + "</extra>")
    fig.update_layout(barmode="stack", height=220, xaxis_title="ms per generated token "
                      "(per sequence, estimated)", margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "speculative-per-token")
    st.subheader("One step by operator kind")
    fig = go.Figure()
    for phase in ("vanilla decode", "draft", "verification"):
        d = df[df.phase == phase] if not df.empty else df
        if len(d):
            fig.add_bar(x=d.kind, y=d.per_step_s / S_PER_MS, name=phase,
                        hovertemplate="%{x}: %{y:.4g} ms<extra>" + phase + "</extra>")
    fig.update_layout(barmode="group", height=380, yaxis_title="ms per step (estimated)",
                      margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "speculative-by-kind")
    draft_what = ("γ draft passes" if setup.draft.kind in (spx.DraftKind.MODEL, spx.DraftKind.HEAD)
                  else "one pass of γ heads" if setup.draft.kind is spx.DraftKind.MEDUSA
                  else "no draft network")
    st.caption(f"A step = {draft_what} + one target pass over γ + 1 = {spec.verified_tokens} "
               f"tokens (KV reads, LM head and the MoE experts those tokens touch included). "
               f"Verification costs {fmt_time(est.verify_s_per_step)} against "
               f"{fmt_time(est.vanilla_tpot_s)} for one plain decode step "
               f"(+{fmt_time(est.verify_overhead_s)}). Plain decoding: one step per token.")
    table = pd.DataFrame([
        ("draft (all passes of a step)", est.draft_s_per_step, report.ideal.draft_s_per_step),
        ("verification", est.verify_s_per_step, report.ideal.verify_s_per_step),
        ("step", est.step_s, report.ideal.step_s),
        ("plain decode step (TPOT)", est.vanilla_tpot_s, report.ideal.vanilla_tpot_s),
        ("speculative time per token", est.tpot_s, report.ideal.tpot_s),
        ("TTFT (target + draft prefill)", est.ttft_s, report.ideal.ttft_s),
        ("end-to-end latency", est.e2e_latency_s, report.ideal.e2e_latency_s),
        ("plain end-to-end latency", est.vanilla_e2e_latency_s,
         report.ideal.vanilla_e2e_latency_s)], columns=["quantity", "estimated_s", "ideal_s"])
    st.dataframe(table.assign(estimated=table.estimated_s.map(fmt_time),
                              ideal=table.ideal_s.map(fmt_time))[
        ["quantity", "estimated", "ideal"]], hide_index=True)
    with st.container(horizontal=True):
        download_csv(df, "speculative-step-by-kind.csv", "By kind CSV", key="dl_sp_kind")
        download_csv(table, "speculative-latency.csv", "Latency CSV", key="dl_sp_lat")
        download_json(result_json(), "speculative.json", "Result JSON", key="dl_sp_json")


def _batch_axis(batches) -> dict:
    """A log2 batch axis with a tick at every batch shown."""
    ticks = sorted({int(b) for b in batches})
    return dict(title="batch (sequences)", type="log", tickvals=ticks,
                ticktext=[str(t) for t in ticks])


def batch_speedup_figure(df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    ok, bad = df[df.fits], df[~df.fits]
    fig.add_scatter(x=df.batch, y=df.speedup, mode="lines", name="speedup",
                    line=dict(color="#4C78A8"), hoverinfo="skip", showlegend=False)
    fig.add_scatter(x=ok.batch, y=ok.speedup, mode="markers", name="fits",
                    marker=dict(color="#4C78A8", size=9),
                    hovertemplate="batch %{x}: %{y:.3g}×<extra></extra>")
    if len(bad):
        fig.add_scatter(x=bad.batch, y=bad.speedup, mode="markers", name="does not fit",
                        marker=dict(color="#4C78A8", size=9, symbol="circle-open"),
                        hovertemplate="batch %{x}: %{y:.3g}× (does not fit)<extra></extra>")
    hi = max(1.1, float(df.speedup.max()) * 1.1)
    fig.add_scatter(x=[df.batch.min(), df.batch.max()], y=[1.0, 1.0], mode="lines",
                    name="no speedup", line=dict(dash="dot", color="#8C8C8C", width=1),
                    hoverinfo="skip")
    b = scn.workload.batch          # a trace: shapes on a log axis take log10 coordinates
    fig.add_scatter(x=[b, b], y=[0, hi], mode="lines+text", text=["", f"sidebar batch {b}"],
                    textposition="bottom right", line=dict(dash="dash", color="#8C8C8C",
                                                           width=1),
                    hoverinfo="skip", showlegend=False)
    fig.update_layout(xaxis=_batch_axis(df.batch), yaxis=dict(title="speedup", range=[0, hi]),
                      height=420, margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def batch_throughput_figure(df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(x=df.batch, y=df.vanilla_throughput_tokens_per_s, mode="lines+markers",
                    name="plain decoding", line=dict(dash="dot", color="#F58518"),
                    hovertemplate="batch %{x}: %{y:,.4g} tokens/s<extra>plain</extra>")
    fig.add_scatter(x=df.batch, y=df.throughput_tokens_per_s, mode="lines+markers",
                    name="speculative", line=dict(dash="dash", color="#54A24B"),
                    hovertemplate="batch %{x}: %{y:,.4g} tokens/s<extra>speculative</extra>")
    fig.update_layout(xaxis=_batch_axis(df.batch),
                      yaxis=dict(title="aggregate tokens/s (all sequences)", type="log",
                                 dtick=1, tickformat="~s", minor=dict(showgrid=True)),
                      height=420, margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def batch_view() -> None:
    batches = tuple(sorted(set(views.DEFAULT_BATCHES) | {scn.workload.batch}))
    rows = run_batch(setup, spec, batches)
    df = pd.DataFrame([asdict(r) for r in rows])
    left, right = st.columns(2)
    with left:
        st.subheader("Speedup against batch")
        show(batch_speedup_figure(df), "speculative-batch")
    with right:
        st.subheader("Aggregate tokens/s against batch")
        show(batch_throughput_figure(df), "speculative-batch-throughput")
    st.caption("At small batch one verification of γ + 1 tokens costs about one decode step "
               "(weights are read once either way); as batch × (γ + 1) grows the weight "
               "matmuls turn compute-bound, verification costs up to (γ + 1)× a decode step and "
               "the rejected drafts are pure loss, so the speedup shrinks and can fall below 1. "
               "At long contexts the KV-cache reads stay memory-bound (verification reads each "
               "cached position once for all γ + 1 tokens), so part of the benefit survives.")
    st.dataframe(df.assign(verify=df.verify_s_per_step.map(fmt_time),
                           plain_step=df.vanilla_tpot_s.map(fmt_time),
                           plain=df.vanilla_throughput_tokens_per_s.map(fmt_rate),
                           speculative=df.throughput_tokens_per_s.map(fmt_rate))[
        ["batch", "speedup", "verify", "plain_step", "plain", "speculative", "fits"]].rename(
        columns={"plain_step": "plain step", "plain": "plain tokens/s",
                 "speculative": "speculative tokens/s"}),
                 hide_index=True,
                 column_config={"speedup": st.column_config.NumberColumn(format="%.3f×")})
    with st.container(horizontal=True):
        download_csv(df, "speculative-batch.csv", "Batch CSV", key="dl_sp_batch")
        download_json(result_json(), "speculative.json", "Result JSON", key="dl_sp_json")


def memory_energy_view() -> None:
    parts = pd.DataFrame([asdict(p) for p in views.memory_parts(mem)])
    st.subheader("Memory: plain vs speculative")
    fig = go.Figure()
    parts["bar"] = parts.scenario + " · " + parts.device + " device"
    for part in dict.fromkeys(parts.part):
        d = parts[parts.part == part]
        fig.add_bar(y=d.bar, x=d.bytes / BYTES_PER_GB, name=part, orientation="h",
                    hovertemplate="%{x:.4g} GB<extra>" + part + "</extra>")
    fig.add_vline(x=mem.target_capacity_bytes / BYTES_PER_GB, line_dash="dash",
                  annotation_text="target device capacity")
    if not mem.same_device:
        fig.add_vline(x=mem.draft_capacity_bytes / BYTES_PER_GB, line_dash="dot",
                      annotation_text="draft device capacity", annotation_position="bottom")
    fig.update_layout(barmode="stack", height=300, xaxis_title="GB (10⁹ bytes)",
                      margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=-0.3))
    show(fig, "speculative-memory")
    st.caption(f"Overhead {fmt_gb(mem.overhead_bytes)} = {fmt_pct(mem.overhead_fraction, 1)} of "
               f"the target's {fmt_gb(mem.baseline_bytes)} (KV caches at the full context of "
               f"{scn.workload.max_context} tokens, batch {scn.workload.batch}).")
    st.subheader("Energy per generated token")
    fig = go.Figure(go.Bar(x=["plain decoding", "speculative"],
                           y=[energy.vanilla_j_per_token, energy.speculative_j_per_token],
                           text=[f"{sig(energy.vanilla_j_per_token)} J",
                                 f"{sig(energy.speculative_j_per_token)} J"],
                           hovertemplate="%{x}: %{y:.4g} J<extra></extra>"))
    fig.update_layout(height=320, yaxis_title="J per generated token (decode phase)",
                      margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "speculative-energy")
    st.caption(f"{escape_md(energy.method)}. Rejected drafts and their verification are "
               f"included; ratio {sig(energy.ratio)}.")
    for a in energy.assumptions:
        st.caption("ℹ️ " + escape_md(a))
    edf = pd.DataFrame([{"scenario": "vanilla", "j_per_token": energy.vanilla_j_per_token},
                        {"scenario": "speculative", "j_per_token":
                         energy.speculative_j_per_token}])
    with st.container(horizontal=True):
        download_csv(parts.drop(columns="bar"), "speculative-memory.csv", "Memory CSV",
                     key="dl_sp_mem")
        download_csv(edf, "speculative-energy.csv", "Energy CSV", key="dl_sp_energy")
        download_json(result_json(), "speculative.json", "Result JSON", key="dl_sp_json")


def published_scatter(pred: pd.DataFrame) -> None:
    """Predicted against measured speedup, with the test's per-row tolerance band."""
    fig = go.Figure()
    for in_test, name, symbol in ((True, "in the tolerance test", "circle"),
                                  (False, "shown only", "x")):
        d = pred[pred.in_test == in_test]
        if len(d):
            fig.add_scatter(x=d.measured_speedup, y=d.predicted_speedup, mode="markers",
                            name=name, marker=dict(size=11, symbol=symbol),
                            text=d.row_id + " · " + d.method + "<br>" + d.target + " + "
                            + d.draft + "<br>" + d.hardware + " · γ " + d.gamma.astype(str),
                            hovertemplate="%{text}<br>measured %{x:.3g}×, predicted %{y:.3g}×"
                                          "<extra></extra>")
    hi = float(max(pred.measured_speedup.max(), pred.predicted_speedup.max())) * 1.1
    for f, dash, label in ((1.0, "solid", "predicted = measured"),
                           (1 + meas.TOLERANCE_EACH, "dot", f"±{fmt_pct(meas.TOLERANCE_EACH)}"),
                           (1 - meas.TOLERANCE_EACH, "dot", None)):
        fig.add_scatter(x=[0, hi], y=[0, hi * f], mode="lines", name=label or "",
                        showlegend=label is not None, hoverinfo="skip",
                        line=dict(dash=dash, color="#8C8C8C", width=1))
    fig.update_layout(xaxis=dict(title="measured speedup", range=[0, hi]),
                      yaxis=dict(title="predicted speedup (estimated rates)", range=[0, hi]),
                      height=480, margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "speculative-published")


def mtp_series(mtp: pd.DataFrame) -> None:
    st.subheader("DeepSeek-R1 + MTP on 8× B200 (TensorRT-LLM): speedup against γ")
    fig = go.Figure()
    fig.add_scatter(x=mtp.gamma, y=mtp.measured_speedup, mode="markers", name="measured",
                    marker=dict(size=12))
    fig.add_scatter(x=mtp.gamma, y=mtp.predicted_speedup, mode="lines+markers",
                    name="predicted (measured E per γ)")
    fig.update_layout(xaxis=dict(title="γ (MTP layers run per step)", dtick=1),
                      yaxis_title="speedup", height=320, margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "speculative-mtp")


def published_view() -> None:
    rows, summary = run_published()
    order = {"predicted": 0, "implied alpha": 1, "not modelled": 2, "error": 3}
    df = pd.DataFrame([{**asdict(c), "relative_error": c.relative_error} for c in rows])
    df["gamma"] = df.gamma.astype("Int64")
    df = df.iloc[sorted(range(len(df)), key=lambda i: (order.get(df.status[i], 9),
                                                          not df.in_test[i]))]
    st.subheader("Predicted against published speedups")
    published_scatter(df[df.status == "predicted"])
    st.markdown(
        f"**Tolerance (tests/test_speculative.py):** every one of the {summary.rows} rows with "
        f"target, draft, hardware, γ and a measured acceptance (α or mean accepted length) "
        f"within ±{fmt_pct(meas.TOLERANCE_EACH)}, median |error| ≤ "
        f"{fmt_pct(meas.TOLERANCE_MEDIAN)}, DeepSeek-R1 MTP rows within "
        f"±{fmt_pct(meas.TOLERANCE_MTP)}. Now: median {fmt_pct(summary.median_abs_error, 1)}, "
        f"worst {fmt_pct(summary.worst_abs_error, 1)} ({escape_md(summary.worst_row or '—')}). "
        "Known bias: large separate drafts on TPU v4 (T5-large) cost more than their bytes and "
        "kernel launches suggest, so those rows are over-predicted.")
    mtp = df[df.row_id.isin(MTP_ROWS) & (df.status == "predicted")].sort_values("gamma")
    if len(mtp):
        mtp_series(mtp)
    shown = df.assign(error=df.relative_error.map(lambda e: fmt_pct(e, 1)),
                      implied=df.implied_alpha.map(lambda a: "" if pd.isna(a) else sig(a)))
    st.dataframe(shown[["row_id", "status", "in_test", "method", "target", "draft", "hardware",
                        "batch", "gamma", "alpha", "mean_accepted_tokens", "measured_speedup",
                        "predicted_speedup", "error", "implied", "note", "source"]],
                 hide_index=True)
    st.caption("Sources: presets/tables/speculative_measurements.csv (Leviathan et al. 2023 "
               "Table 2; TensorRT-LLM DeepSeek-R1 MTP blog; llama.cpp; Spec-Bench; LM Studio / "
               "MLX issues; …). 'implied alpha' = the acceptance at which the model reproduces "
               "a speedup published without one; 'not modelled' rows say why.")
    download_csv(df, "speculative-published.csv", "Comparison CSV", key="dl_sp_pub")


if report is not None:
    est, mem, energy = report.estimated, report.memory, report.energy
    headline()
    {"Speedup": speedup_view, "Latency": latency_view, "Batch": batch_view,
     "Memory & energy": memory_energy_view, "Published measurements": published_view}[view]()
