"""Serving: the sidebar's model behind an in-flight-batching engine under load -- throughput,
TTFT / TPOT / E2E percentiles, running batch and KV-cache use over time, the largest request
rate meeting an SLO, replicas and GPUs for a target rate with $/M tokens and J/token, latency
against load with the knee, and the throughput-latency frontier over deployments.

The prompt and generated lengths of the sidebar are each request's ISL and OSL, unless the
*Lengths* select picks a data set of real requests (MLPerf's OpenOrca or DeepSeek-R1) or an
uploaded CSV; the *Scenario* select applies an MLPerf scenario (arrivals and p99 limits)."""

import json
from dataclasses import asdict

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from llmpara_core import serving
from llmpara_core.errors import ConfigError
from llmpara_core.serving import lengths as length_sets, scenarios, stack_version, streaming
from llmpara_core.parallel import ParallelPlan
from llmpara_core.presets import list_presets, load_hardware
from llmpara_core.units import BYTES_PER_GB, BYTES_PER_GIB, S_PER_MS, S_PER_US
from ui.format import escape_md, escape_md_keep_urls, fmt_int, fmt_time, sig
from ui.narrow import first_on_narrow, narrow_only, record_table, wide_only
from ui.page_inputs import optional_number
from ui.serving_memory import memory_line
from ui.shared_results import shared
from ui.scenario import chart_config, get_scenario
from ui.devices import (SIDEBAR, cluster_slugs, device_select, override_banner,
                        same_device_clusters)
from ui.tables import download_csv, download_json, people_table
from ui.links import format_number
from ui.url_widgets import (register_link_param, url_number, url_segmented, url_selectbox,
                            url_toggle)

VIEWS = ("At this load", "Latency vs load", "Frontier", "Disaggregated")
ARRIVALS = {"poisson": "Poisson", "gamma": "Gamma (bursty)", "max-load": "Max load"}
TRI = ("default", "on", "off")
UPLOAD = "upload"
LENGTH_CHOICES = serving.LENGTHS + tuple(length_sets.NAMED) + (UPLOAD,)
CUSTOM = "custom"
# GiB; the core's bound on a runtime reserve (1e12 B), in whole GiB
RESERVE_GIB = (0.0, float(serving.config.MAX_RUNTIME_RESERVE_BYTES // BYTES_PER_GIB))

COLORS = {"p50": "#4C78A8", "p90": "#F58518", "p99": "#E45756", "batch": "#4C78A8",
          "kv": "#54A24B", "slo": "#8C8C8C", "knee": "#B279A2"}
MAX_PLOT_POINTS = 4000
CACHE_ENTRIES = 16


@st.cache_data(max_entries=32, show_spinner=False)
def fitting_deployment(_options, option_key, model, precision, cfg, tokens, flash):
    """serving.smallest_fitting over ``_options`` (cached by ``option_key``, the options'
    slugs and the sidebar's device)."""
    return serving.smallest_fitting(model, _options, precision, cfg, tokens, flash)


def show(fig: go.Figure, key: str) -> None:
    st.plotly_chart(fig, theme="streamlit", key=key, config=chart_config(key))


def cached(key: tuple, fn, text: str):
    """``fn(progress)`` once per distinct ``key`` on this server (shared by every session: a
    crowd opening the same link computes it once), with a progress bar while it runs."""
    def compute():
        bar = st.progress(0.0, text=text)
        try:
            return fn(lambda f: bar.progress(min(1.0, max(0.0, f)), text=text))
        finally:
            bar.empty()
    return shared("serving", CACHE_ENTRIES).get(key, compute)


scn = get_scenario()
with st.container(key="sv_head"):
    st.title("Serving")
    st.caption(escape_md(scn.label) + " · each request: ISL = the sidebar's prompt tokens, OSL = "
               "its generated tokens")

# ---- deployment -----------------------------------------------------------------------------
clusters = cluster_slugs()
# The inputs (in an expander), then the results; on a narrow screen (a phone) the results
# come first (CSS order: the server cannot know the screen's width) and the inputs' expander
# after them.
inputs = st.container(key="sv_inputs").expander(
    "Inputs: devices, requests, engine and SLO", expanded=True, icon=":material/tune:")
results = st.container(key="sv_results")
first_on_narrow(["sv_head", "sv_results"])
with inputs:
    c1, c2, c3 = st.columns([3, 1, 1])
with c1:
    choice = device_select(scn, "sv_cluster", "Devices", clusters, SIDEBAR,
                           help="Follows the sidebar's hardware. TP or PP > 1 needs a device "
                                "with links (a cluster preset).")
with c2:
    tp = url_number("TP", "sv_tp", 1, 1024, 1, step=1, help="Tensor-parallel degree")
with c3:
    pp = url_number("PP", "sv_pp", 1, 1024, 1, step=1, help="Pipeline stages")
hw = scn.hardware if choice == SIDEBAR else scn.on(load_hardware(choice))
stack = scn.stack if choice == SIDEBAR else scn.stack_of(load_hardware(choice))
with inputs:
    override_banner(scn, hw, choice)

# ---- requests -------------------------------------------------------------------------------
with inputs:
    st.markdown("**Requests, engine and SLO**")
    scenario = url_selectbox("Scenario", (CUSTOM,) + scenarios.SCENARIOS, key="sv_scenario",
                             default=CUSTOM,
                             help="custom = the settings below; offline = every request at "
                                  "once; server / interactive = Poisson arrivals reported at the "
                                  "largest rate whose p99 TTFT and TPOT meet the benchmark's "
                                  "limits (MLPerf LoadGen mlperf.conf)")
    fixed_load = scenario != CUSTOM
    cols = st.columns([2.6, 1, 1, 1, 1.4, 1])
with cols[0]:
    arrival = url_segmented("Arrivals", list(ARRIVALS), key="sv_arrival", default="poisson",
                            format_func=lambda k: ARRIVALS[k], disabled=fixed_load)
with cols[1]:
    rate = url_number("Rate (req/s)", "sv_rate", 0.001, 1e6, 1.0, step=1.0, format="%g",
                      disabled=arrival == "max-load" or fixed_load, help="Mean request rate")
with cols[2]:
    burst = url_number("Burstiness", "sv_burst", 0.01, 100.0, 1.0, step=0.1, format="%g",
                       disabled=arrival != "gamma" or fixed_load,
                       help="Gamma shape: 1 = Poisson, < 1 burstier")
with cols[3]:
    n_req = url_number("Requests", "sv_requests", 10, 20000, 500, step=100)
with cols[4]:
    lengths = url_selectbox("Lengths", LENGTH_CHOICES, key="sv_lengths", default="fixed",
                            help="fixed = every request ISL/OSL; uniform ±spread; lognormal "
                                 "(log-space sigma = spread) with mean ISL/OSL; a data set of "
                                 "real requests (MLPerf's OpenOrca, DeepSeek-R1) or your CSV of "
                                 "input_length,output_length: each request drawn from it")
with cols[5]:
    seed = url_number("Seed", "sv_seed", 0, 2**31 - 1, 0, step=1)


def length_table():
    """The length table the select names (None for fixed / uniform / lognormal); an upload
    that is missing or bad stops the page with a message."""
    if lengths in serving.LENGTHS:
        return None
    if lengths != UPLOAD:
        return length_sets.named(lengths)
    up = inputs.file_uploader("Lengths CSV (input_length,output_length)", type=["csv"],
                          key="sv_lengths_file",
                          help="one row per request; not kept in the link")
    if up is None:
        inputs.info("Upload a CSV of input_length,output_length to draw the requests from it.")
        st.stop()
    if up.size > length_sets.MAX_LENGTH_CSV_BYTES:
        results.error(f"Cannot read the lengths CSV: larger than "
                 f"{length_sets.MAX_LENGTH_CSV_BYTES:,} bytes.")
        st.stop()
    return length_sets.parse_csv(up.getvalue(), up.name, f"uploaded file {up.name}")

with inputs, st.expander("Engine (defaults: the sidebar's inference stack)"):
    e = st.columns(4)
    with e[0]:
        max_batch = url_number("Max running requests", "sv_maxbatch", 0, 100000, 0, step=32,
                               help="0 = the stack's default")
        spread = url_number("Length spread", "sv_spread", 0.0, 1.0, 0.5, step=0.1, format="%g")
    with e[1]:
        max_tokens = url_number("Token budget / iteration", "sv_maxtokens", 0, 1_000_000, 0,
                                step=1024, help="max-num-tokens; 0 = the stack's default")
        block = url_number("KV block (tokens)", "sv_block", 0, 4096, 0, step=16,
                           help="0 = the stack's default")
        stream_us = streaming.stream_s_per_token(hw) / S_PER_US
        mlperf_sc = scenario if fixed_load else None
        stream_default = streaming.default_streaming(mlperf_sc, stack.name)
        stream = url_selectbox(
            "Streaming", TRI, key="sv_stream", default="default",
            help=f"on: the engine returns a response for every sequence that produced a "
                 f"token, after each pass, before starting the next; each streamed token "
                 f"costs the stack's per-sequence host time per pass ({stream_us:.3g} µs "
                 f"for {stack.label}), so a pass of 256 decodes takes "
                 f"{256 * stream_us / 1000:.3g} ms longer and a busy engine serves fewer "
                 f"tokens/s. off: responses only as requests finish. default: "
                 f"{'on' if stream_default else 'off'} here "
                 f"({streaming.default_reason(mlperf_sc, stack.name)})")
    with e[2]:
        chunked = url_selectbox("Chunked prefill", TRI, key="sv_chunked", default="default")
        policy = url_selectbox("KV policy", ("default",) + serving.POLICIES, key="sv_policy",
                               default="default",
                               help="on-demand: allocate as tokens come, preempt by "
                                    "recompute; reserve: ISL + OSL at admission")
        sched = url_selectbox("Scheduler", ("default",) + serving.SCHEDULERS,
                              key="sv_sched", default="default",
                              help="mixed: decodes and prompt chunks share a pass (in-flight "
                                   "batching); prefill-first: vLLM V0's default with chunked "
                                   "prefill off -- a pass that runs prompts stalls the "
                                   "decodes")
    with e[3]:
        hit = url_number("Prefix-cache hit rate", "sv_hit", 0.0, 0.99, 0.0, step=0.05, format="%g")
        kv_frac = url_number("KV memory fraction", "sv_kvfrac", 0.0, 1.0, 0.0, step=0.05,
                             format="%g",
                             help="TensorRT-LLM and generic: share of the memory left after weights "
                                  "and activations; vLLM: share of the total, less weights "
                                  "and activations; 0 = the stack's default")
        reserve_default_gib = (serving.framework_defaults(stack.name).config
                               .runtime_reserve_bytes / BYTES_PER_GIB)
        reserve = optional_number(
            "Runtime reserve (GiB)", "sv_reserve", *RESERVE_GIB,
            f"stack default: {reserve_default_gib:g} GiB", step=0.5, format="%g",
            help="Device memory the runtime holds besides weights, activations and KV cache "
                 "(CUDA context, library workspaces, sampling buffers), per device, "
                 "GiB = 2³⁰ B. Empty = the stack's: TensorRT-LLM 4 GiB (fitted on its "
                 "max-load rows), vLLM and generic 0. A larger reserve leaves less KV cache.")
    release = url_selectbox("TensorRT-LLM release", ("pooled",) + stack_version.versions(),
                            key="sv_release", default="pooled",
                            retired={"0.11-0.12": "that range is now two, 0.11 and 0.12 "
                                     "(their rows were measured by different harnesses)"},
                            help="Releases differ on the same configuration (measured): each "
                                 "range's fitted factor on the compute time. Pooled = fitted "
                                 "on all releases. TensorRT-LLM stack only.")

preset_sc = None
if fixed_load:
    try:
        preset_sc = scenarios.preset(scenario, scn.model_slug)
    except ConfigError as err:
        results.error(f"Cannot apply the scenario: {escape_md(err)}")
        st.stop()
    inputs.caption(escape_md(preset_sc.note))
with inputs:
    s = st.columns(4)
with s[0]:
    slo_ttft = url_number("SLO TTFT (ms)", "sv_slo_ttft", 1.0, 1e7, 500.0, step=50.0, format="%g")
with s[1]:
    slo_tpot = url_number("SLO TPOT (ms)", "sv_slo_tpot", 0.1, 1e6, 50.0, step=5.0, format="%g")
with s[2]:
    slo_pct = url_number("SLO percentile", "sv_slo_pct", 1.0, 100.0, 90.0, step=1.0, format="%g")
with s[3]:
    target = url_number("Target rate (req/s)", "sv_target", 0.0, 1e9, 0.0, step=10.0, format="%g",
                        help="Fleet size for this rate; 0 = none")
with inputs:
    search = url_toggle("Search the largest rate meeting the SLO", "sv_search", True)
with results:
    view = url_segmented("View", VIEWS, key="sv_view", default=VIEWS[0])

release_scale = 1.0
if release != "pooled":
    if stack.name != "tensorrt-llm":
        results.warning(f"A TensorRT-LLM release applies to the TensorRT-LLM stack; this run "
                        f"uses {escape_md(stack.name)}, so the release is ignored.")
    else:
        release_scale = stack_version.range_scale(release, bool(scn.model.moe))
        inputs.caption(f"TensorRT-LLM {release}: compute time x {release_scale:g} "
                       "(serving.stack_version).")
try:
    table = length_table()
    cfg, cfg_source = serving.engine_config(
        stack.name, max_batch=int(max_batch) or None, max_num_tokens=int(max_tokens) or None,
        block_size=int(block) or None, kv_memory_fraction=float(kv_frac) or None,
        runtime_reserve_bytes=None if reserve is None else float(reserve) * BYTES_PER_GIB,
        chunked_prefill=None if chunked == "default" else chunked == "on",
        policy=None if policy == "default" else policy, prefix_hit_rate=float(hit),
        mixed_batches=None if sched == "default" else sched == "mixed")
    if fixed_load:
        arrival = "max-load"        # offline; server / interactive search from max load
    spec = serving.RequestSpec(isl=scn.workload.prompt_len, osl=scn.workload.gen_len,
                               arrival=arrival, rate=None if arrival == "max-load" else rate,
                               burstiness=float(burst), requests=int(n_req),
                               lengths=lengths if lengths in serving.LENGTHS else "fixed",
                               spread=float(spread), seed=int(seed), table=table)
    slo = serving.Slo(slo_ttft * S_PER_MS, slo_tpot * S_PER_MS, float(slo_pct))
    if preset_sc is not None and preset_sc.slo is not None:
        slo = preset_sc.slo
        slo_ttft, slo_tpot = slo.ttft_s / S_PER_MS, slo.tpot_s / S_PER_MS
    at_slo_rate = preset_sc is not None and preset_sc.slo is not None
    plan = ParallelPlan(tp=int(tp), pp=int(pp))
except ConfigError as err:
    results.error(f"Cannot simulate: {escape_md(err)}")
    st.stop()


def auto_fit():
    """With the sidebar's device and TP = PP = 1 left as they are: if one device cannot hold
    the model and one request's KV cache, the smallest tensor-parallel deployment of the same
    device that can (the sidebar's own links first, then cluster presets of the device);
    returns (hardware, stack, plan, message) or None."""
    if choice != SIDEBAR or int(tp) != 1 or int(pp) != 1:
        return None
    tokens = scn.workload.prompt_len + scn.workload.gen_len
    same = same_device_clusters(scn.hardware, clusters) if not scn.custom_hardware else []
    options = [(SIDEBAR, scn.hardware)] + [(c, scn.on(load_hardware(c))) for c in same]
    key = (scn.hardware, tuple(same))
    found = fitting_deployment(options, key, scn.model, scn.precision, cfg, tokens,
                               scn.workload.flash_attention)
    if found is None or (found[0] == SIDEBAR and found[2].tp == 1):
        return None
    slug, fit_hw, fit_plan = found
    fit_stack = stack if slug == SIDEBAR else scn.stack_of(load_hardware(slug))
    where = (f"the sidebar's {escape_md(fit_hw.name)}" if slug == SIDEBAR
             else f"the cluster preset {escape_md(fit_hw.name)}")
    msg = (f"{escape_md(scn.model.name)} does not fit on one {escape_md(scn.hardware.name)} "
           f"with one request's KV cache ({fmt_int(tokens)} tokens): this page runs it at "
           f"**TP {fit_plan.tp}** on {where}, the smallest tensor-parallel degree that fits. "
           "Set *TP* or *Devices* to choose another.")
    return fit_hw, fit_stack, fit_plan, msg


fit = auto_fit()
if fit is not None:
    hw, stack, plan, fit_msg = fit
    results.info(fit_msg, icon=":material/auto_fix_high:")
streams = (streaming.default_streaming(mlperf_sc, stack.name) if stream == "default"
           else stream == "on")           # (the stack may have followed the auto-fit)
cfg = streaming.with_streaming(cfg, streams, hw, release_scale)
# 'Copy link' spells out what the defaults resolved to (as it does the stack: fw=vllm, not
# fw=default), so a shared link keeps its numbers if a stack's default changes
register_link_param("sv_stream", "on" if streams else "off")
register_link_param("sv_reserve", format_number(cfg.runtime_reserve_bytes / BYTES_PER_GIB))
# where one device's memory goes: on the sidebar's device alone first when the auto-fit moved
# the model off it (why it did not fit), then on the deployment simulated
for mem_hw, mem_plan in ([(scn.hardware, ParallelPlan())] if fit is not None else []) + [
        (hw, plan)]:
    try:
        results.caption(memory_line(serving.kv_memory_for(
            scn.model, mem_hw, scn.precision, mem_plan, cfg,
            flash_attention=scn.workload.flash_attention, time_scale=release_scale),
            mem_plan.label))
    except ConfigError:
        pass            # the deployment itself is refused: the simulation says why
results.caption(escape_md_keep_urls(
    f"Stack: {stack.caption}. Engine: {cfg.max_batch} running requests, "
    f"{cfg.max_num_tokens}-token budget, chunked prefill "
    f"{'on' if cfg.chunked_prefill else 'off'}, "
    f"{'mixed' if cfg.mixed_batches else 'prefill-first'} scheduler, "
    f"{cfg.block_size}-token blocks, KV policy "
    f"{cfg.policy}, runtime reserve {cfg.runtime_reserve_bytes / BYTES_PER_GIB:g} GiB"
    f"{' (the stack default)' if reserve is None else ''}, streaming "
    + ("on" if streams else "off")
    + (f" (the default: {streaming.default_reason(mlperf_sc, stack.name)}"
       if stream == "default" else " (chosen")
    + (f"; {cfg.stream_s_per_token / S_PER_US:.3g} µs per streamed token)" if streams else ")")
    + "."))
# the sources behind each default are long; folded so the results stay near the inputs
with results.expander("Where the engine's defaults come from", icon=":material/menu_book:"):
    st.caption(escape_md_keep_urls(cfg_source))
if table is not None:
    sm_ = table.summary()
    results.caption(escape_md(f"Lengths: {sm_['name']} — {sm_['rows']:,} requests, input mean "
                         f"{sm_['input']['mean']:.0f} / median {sm_['input']['median']:g} / max "
                         f"{sm_['input']['max']:,}, output mean {sm_['output']['mean']:.0f} / "
                         f"median {sm_['output']['median']:g} / max {sm_['output']['max']:,} "
                         f"tokens. Source: {sm_['source']}"))
base_key = (scn.model, hw, scn.precision, scn.workload.flash_attention, plan, spec, cfg, slo,
            at_slo_rate, release_scale)


def run_study(curve_points: int) -> serving.ServeStudy:
    return cached(base_key + (float(target), bool(search), curve_points),
                  lambda p: serving.serve(scn.model, hw, scn.precision, spec, cfg, plan,
                                          slo=slo, target_rate=float(target) or None,
                                          flash_attention=scn.workload.flash_attention,
                                          search=bool(search) or at_slo_rate,
                                          curve_points=curve_points, progress=p,
                                          at_slo_rate=at_slo_rate,
                                          time_scale=release_scale),
                  "Simulating…")


# ---- views ----------------------------------------------------------------------------------

def headline(st_: serving.ServeStudy) -> None:
    sm = st_.summary
    m = st.columns(4)
    m[0].metric("Output tokens/s", sig(sm.output_tokens_per_s),
                help=f"{sig(sm.output_tokens_per_s_per_gpu)} per GPU, {sm.gpus} GPU(s)")
    m[1].metric("Requests/s", sig(sm.requests_per_s))
    m[2].metric("Mean running batch", sig(sm.mean_running_batch))
    m[3].metric("Goodput (req/s)", sig(sm.goodput_requests_per_s),
                help="requests meeting both SLO bounds per second")
    m = st.columns(4)
    m[0].metric("KV cache (tokens)", fmt_int(sm.kv_capacity_tokens))
    m[1].metric("Preemptions", fmt_int(sm.preemptions))
    m[2].metric("Max rate meeting SLO", "–" if st_.search is None
                else f"{sig(st_.search.max_rate)} req/s",
                help=f"p{sig(slo.percentile)} TTFT ≤ {sig(slo_ttft)} ms and TPOT ≤ "
                     f"{sig(slo_tpot)} ms; max load serves "
                     f"{sig(st_.saturation_requests_per_s)} req/s")
    m[3].metric("SLO met at this load", "–" if sm.slo_met is None else
                ("yes" if sm.slo_met else "no"))


def latency_table(sm: serving.ServeSummary) -> pd.DataFrame:
    rows = [{"metric": name, "p50_s": p.p50, "p90_s": p.p90, "p99_s": p.p99}
            for name, p in (("TTFT", sm.ttft_s), ("TPOT", sm.tpot_s), ("E2E", sm.e2e_s))]
    df = pd.DataFrame(rows)
    st.dataframe(df.assign(p50=df.p50_s.map(fmt_time), p90=df.p90_s.map(fmt_time),
                           p99=df.p99_s.map(fmt_time))[["metric", "p50", "p90", "p99"]],
                 hide_index=True)
    return df


def over_time(res: serving.SimResult) -> pd.DataFrame:
    """Running batch and KV-cache use at the start of every scheduling step."""
    log = res.log
    df = pd.DataFrame({"t_s": log["t_s"], "duration_s": log["dt_s"],
                       "iterations": log["iterations"], "running": log["running"],
                       "queued": log["waiting"], "kv_use": log["kv_used"],
                       "preemptions_cumulative": log["preemptions"]})
    shown = df.iloc[::max(1, len(df) // MAX_PLOT_POINTS)]
    fig = go.Figure()
    fig.add_scatter(x=shown.t_s, y=shown.running, name="running requests", mode="lines",
                    line=dict(color=COLORS["batch"], shape="hv"))
    fig.add_scatter(x=shown.t_s, y=100 * shown.kv_use, name="KV cache used (%)", mode="lines",
                    yaxis="y2", line=dict(color=COLORS["kv"], shape="hv"))
    if res.preemptions:
        fig.add_scatter(x=shown.t_s, y=shown.preemptions_cumulative, mode="lines",
                        name="preemptions (cumulative)", line=dict(color=COLORS["p99"],
                                                                   shape="hv", dash="dot"))
    fig.update_layout(xaxis_title="time (s)", yaxis=dict(title="running requests",
                                                         rangemode="tozero"),
                      yaxis2=dict(title="KV cache used (%)", overlaying="y", side="right",
                                  range=[0, 105], tickvals=[0, 20, 40, 60, 80, 100],
                                  showgrid=False),
                      height=360, margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(orientation="h", y=1.1))
    show(fig, "serving-over-time")
    st.caption(f"{fmt_int(res.iterations)} engine iterations in {fmt_int(len(df))} scheduling "
               f"steps (runs of pure decode are stepped together); {fmt_int(res.preemptions)} "
               f"preemptions by recompute.")
    return df


CAPACITY_COLUMNS = {
    "plan": ("plan (TP·PP·DP)", "text"), "gpus_per_replica": ("GPUs / replica", "int"),
    "max_rate_meeting_slo": ("max rate in SLO (req/s)", "req_s"),
    "saturation_rate": ("saturation (req/s)", "req_s"),
    "target_rate": ("target (req/s)", "req_s"), "replicas": ("replicas", "int"),
    "gpus": ("GPUs for target", "int"),
    "replica_price_usd": ("price / replica ($)", "usd"),
    "usd_per_million_tokens": ("$ / M output tokens", "usd"),
    "j_per_token": ("J / output token", "j"),
    "avg_power_w_per_gpu": ("avg power / GPU (W)", "w"),
}
FRONTIER_COLUMNS = {
    "tp": ("TP", "int"), "pp": ("PP", "int"), "max_batch": ("max running requests", "int"),
    "gpus": ("GPUs", "int"), "output_tokens_per_s_per_gpu": ("output tokens/s per GPU", "tok_s"),
    "tpot_p50_s": ("TPOT p50 (ms)", "ms"), "ttft_p50_s": ("TTFT p50 (ms)", "ms"),
    "on_front": ("on the frontier", "bool"), "note": ("note", "text"),
}
CURVE_COLUMNS = {
    "rate": ("rate (req/s)", "req_s"), "output_tokens_per_s": ("output tokens/s", "tok_s"),
    "requests_per_s": ("served (req/s)", "req_s"),
    **{f"{m}_{q}_s": (f"{m.upper()} {q} (ms)", "ms")
       for m, qs in (("ttft", ("p50", "p90", "p99")), ("tpot", ("p50", "p90", "p99")),
                     ("e2e", ("p90",))) for q in qs},
    "mean_running_batch": ("mean running batch", "num"), "slo_met": ("SLO met", "bool"),
}
SPLIT_COLUMNS = {
    "prefill_replicas": ("prefill replicas", "int"), "decode_replicas": ("decode replicas", "int"),
    "gpus": ("GPUs", "int"), "rate": ("rate in SLO (req/s)", "req_s"),
    "rate_per_gpu": ("rate per GPU (req/s)", "req_s"),
}


def capacity(st_: serving.ServeStudy) -> pd.DataFrame:
    sm = st_.summary
    row = {"plan": st_.cost.plan.label, "gpus_per_replica": sm.gpus,
           "max_rate_meeting_slo": None if st_.search is None else st_.search.max_rate,
           "saturation_rate": st_.saturation_requests_per_s,
           "target_rate": st_.target_rate, "replicas": st_.replicas,
           "gpus": st_.gpus_for_target,
           "replica_price_usd": None if hw.price_usd is None else hw.price_usd * sm.gpus,
           "usd_per_million_tokens": sm.usd_per_million_tokens,
           "j_per_token": sm.energy_j_per_token, "avg_power_w_per_gpu": sm.avg_power_w_per_gpu}
    if not st_.target_rate:         # no target rate asked for: no empty target columns
        row = {k: v for k, v in row.items() if k not in ("target_rate", "replicas", "gpus")}
    df = pd.DataFrame([row])
    st.subheader("Capacity and cost at this load")
    with wide_only("sv_cap_wide"):
        people_table(df, CAPACITY_COLUMNS)
    with narrow_only("sv_cap_narrow"):      # a phone: every figure in view ($ / M tokens last)
        record_table(row, CAPACITY_COLUMNS, key="sv_cap_record")
    if st_.target_rate and st_.replicas:
        st.caption(f"{fmt_int(st_.replicas)} replicas × {sm.gpus} GPU(s) = "
                   f"**{fmt_int(st_.gpus_for_target)} GPUs** for {sig(st_.target_rate)} req/s "
                   f"(each replica at its {'SLO' if st_.search else 'max-load'} rate).")
    for note in sm.notes:
        st.caption("ℹ️ " + escape_md(note))
    st.caption("A replica's price is the sum of its devices' prices (a multi-device preset is "
               "one device plus its [interconnect], so its price_USD is one device's: README, "
               "hardware format); "
               + ("—: this device has no sourced price; enter one in the sidebar (*Hardware "
                  "details* → *Edit hardware* → price) for $ / M tokens."
                  if hw.price_usd is None else
                  f"here {sm.gpus} × ${hw.price_usd:,.0f}."))
    return df


def at_this_load() -> None:
    st_ = run_study(0)
    headline(st_)
    lat = latency_table(st_.summary)
    ts = over_time(st_.result)
    cap = capacity(st_)
    ttft, tpot, e2e = serving.per_request(st_.result)
    req = pd.DataFrame({"arrival_s": st_.result.arrival_s, "isl": st_.result.isl,
                        "osl": st_.result.osl, "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e})
    with st.container(horizontal=True):
        download_csv(req, "serving-requests.csv", "Requests CSV", key="dl_sv_req")
        download_csv(ts, "serving-timeline.csv", "Timeline CSV", key="dl_sv_ts")
        download_csv(lat, "serving-latency.csv", "Latency CSV", key="dl_sv_lat")
        download_csv(cap, "serving-capacity.csv", "Capacity CSV", key="dl_sv_cap")
        d = serving.study_to_dict(st_, stack, cfg_source, streaming=streams)
        download_json(json.dumps({"scenario": scn.query, **d}, indent=2, allow_nan=False,
                                 default=str).encode("utf-8"),
                      "serving.json", "Result JSON", key="dl_sv_json")


def _latency_percentiles(df: pd.DataFrame, curve, metric: str, slo_ms: float) -> go.Figure:
    """p50/p90/p99 of ``metric`` ("ttft" or "tpot") against the request rate, in ms, with its
    SLO line and the knee of the curve."""
    fig = go.Figure()
    for q in ("p50", "p90", "p99"):
        fig.add_scatter(x=df.rate, y=df[f"{metric}_{q}_s"] / S_PER_MS,
                        name=f"{metric.upper()} {q}", mode="lines+markers",
                        line=dict(color=COLORS[q]))
    fig.add_hline(y=slo_ms, line_dash="dash", line_color=COLORS["slo"],
                  annotation_text=f"SLO {metric.upper()}")
    _knee(fig, curve)
    return fig


def latency_vs_load() -> None:
    points = url_number("Rates simulated", "sv_points", 3, 30, 10, step=1)
    st_ = run_study(int(points))
    curve = st_.curve
    df = pd.DataFrame([asdict(p) for p in curve.points])
    fig = _latency_percentiles(df, curve, "ttft", slo_ttft)
    top = max(4 * slo_ttft, float(df.ttft_p50_s.min()) * 4 / S_PER_MS)
    fig.update_layout(xaxis_title="request rate (req/s)", yaxis=dict(
        title="TTFT (ms)", range=[0, top]), height=380, margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "serving-ttft-vs-load")
    fig = _latency_percentiles(df, curve, "tpot", slo_tpot)
    fig.add_scatter(x=df.rate, y=df.output_tokens_per_s, name="output tokens/s", yaxis="y2",
                    mode="lines", line=dict(color="#72B7B2", dash="dot"))
    fig.update_layout(xaxis_title="request rate (req/s)",
                      yaxis=dict(title="TPOT (ms)", rangemode="tozero",
                                 range=[0, max(3 * slo_tpot, float(df.tpot_p99_s.max()) * 1.1
                                               / S_PER_MS)]),
                      yaxis2=dict(title="output tokens/s", overlaying="y", side="right",
                                  rangemode="tozero"),
                      height=380, margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "serving-tpot-vs-load")
    st.caption(f"Rates from 5 % to 110 % of the max-load rate ({sig(curve.saturation_requests_per_s)}"
               f" req/s), {int(n_req)} requests each. Knee = the last rate whose p90 TTFT is at "
               f"most {serving.sweeps.KNEE_TTFT_FACTOR:g}× its value at the lowest rate"
               + (f": {sig(curve.knee_rate)} req/s." if curve.knee_rate else "."))
    people_table(df, CURVE_COLUMNS)
    download_csv(df, "serving-load-curve.csv", "Load curve CSV", key="dl_sv_curve")


def _knee(fig: go.Figure, curve) -> None:
    if curve.knee_rate:
        fig.add_vline(x=curve.knee_rate, line_dash="dot", line_color=COLORS["knee"],
                      annotation_text="knee")


def frontier_view() -> None:
    ic = hw.interconnect
    n = ic.devices if ic else 1
    tps = [t for t in (1, 2, 4, 8, 16) if t <= n]
    caps = url_segmented("Batch caps", ("8-512", "32-2048"), key="sv_caps", default="8-512")
    batch_caps = (8, 32, 128, 512) if caps == "8-512" else (32, 128, 512, 2048)
    plans = [ParallelPlan(tp=t) for t in tps]
    pts = cached(base_key + ("frontier", tuple(tps), batch_caps),
                 lambda p: serving.frontier(scn.model, hw, scn.precision, cfg, spec, plans,
                                            batch_caps, progress=p),
                 "Simulating deployments…")
    df = pd.DataFrame([asdict(p) for p in pts])
    ok = df[df.note == ""]
    if ok.empty:
        st.warning("No deployment runs: " + escape_md("; ".join(sorted(set(df.note)))))
        return
    fig = go.Figure()
    for t, g in ok.groupby("tp"):
        fig.add_scatter(x=g.tpot_p50_s / S_PER_MS, y=g.output_tokens_per_s_per_gpu,
                        name=f"TP{t}", mode="markers+text", text=g.max_batch.map(str),
                        textposition="top center", marker=dict(size=10))
    front = ok[ok.on_front].sort_values("tpot_p50_s")
    fig.add_scatter(x=front.tpot_p50_s / S_PER_MS, y=front.output_tokens_per_s_per_gpu,
                    name="frontier", mode="lines", line=dict(color="#8C8C8C", dash="dash"))
    fig.add_vline(x=slo_tpot, line_dash="dot", line_color=COLORS["slo"],
                  annotation_text="SLO TPOT")
    fig.update_layout(xaxis=dict(title="median TPOT (ms)", rangemode="tozero"),
                      yaxis=dict(title="output tokens/s per GPU", rangemode="tozero"),
                      height=420, margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "serving-frontier")
    st.caption("Max load, labels = the cap on running requests. A frontier point has no other "
               "deployment with both more tokens/s per GPU and a lower median TPOT.")
    for note in sorted(set(df.note) - {""}):
        st.caption("ℹ️ " + escape_md(note))
    people_table(df, FRONTIER_COLUMNS)
    download_csv(df, "serving-frontier.csv", "Frontier CSV", key="dl_sv_frontier")


def disaggregated_view() -> None:
    c = st.columns(2)
    with c[0]:
        budget = url_number("GPU budget", "sv_dgpus", 2, 4096, 8, step=1,
                            help="GPUs split into prefill and decode replicas of this plan")
    with c[1]:
        link = url_number("KV link (GB/s per device)", "sv_kvlink", 0.0, 1e6, 0.0, step=10.0,
                          format="%g",
                          help="0 = the cluster's link (inter-node if it has one), derated")
    d = cached(base_key + ("disagg", int(budget), float(link)),
               lambda p: serving.disaggregate(
                   scn.model, hw, scn.precision, spec, cfg, slo, int(budget), plan,
                   kv_link_bytes_per_s=float(link) * BYTES_PER_GB or None, progress=p),
               "Searching both pools…")
    df = pd.DataFrame([asdict(s_) for s_ in d.splits])
    best = d.best
    m = st.columns(4)
    m[0].metric("Best split (P:D)", "–" if best is None
                else f"{best.prefill_replicas}:{best.decode_replicas}")
    m[1].metric("Disaggregated (req/s)", sig(best.rate if best else 0.0),
                help="largest rate meeting the SLO with the best split")
    m[2].metric("Colocated (req/s)", sig(d.colocated_rate),
                help=f"{d.gpu_budget // d.devices_per_replica} colocated replicas × "
                     f"{sig(d.colocated_rate_per_replica)} req/s")
    m[3].metric("KV transfer", fmt_time(d.kv_transfer_s), help="per request, ISL tokens")
    fig = go.Figure()
    fig.add_bar(x=[f"{r.prefill_replicas}:{r.decode_replicas}" for r in d.splits],
                y=df.rate, name="disaggregated", marker_color=COLORS["p50"])
    fig.add_hline(y=d.colocated_rate, line_dash="dash", line_color=COLORS["slo"],
                  annotation_text="colocated")
    fig.update_layout(xaxis_title="prefill : decode replicas",
                      yaxis=dict(title="requests/s meeting the SLO", rangemode="tozero"),
                      height=360, margin=dict(l=10, r=10, t=30, b=10))
    show(fig, "serving-disagg")
    st.caption(f"One prefill replica meets the TTFT bound up to "
               f"{sig(d.prefill_rate_per_replica)} req/s, one decode replica the TPOT bound "
               f"(transfer included) up to {sig(d.decode_rate_per_replica)} req/s; a split "
               f"serves the smaller of its two pools. Percentiles are judged per pool.")
    people_table(df, SPLIT_COLUMNS)
    download_csv(df, "serving-disaggregated.csv", "Splits CSV", key="dl_sv_disagg")


with results:
    try:
        if view == VIEWS[0]:
            at_this_load()
        elif view == VIEWS[1]:
            latency_vs_load()
        elif view == VIEWS[2]:
            frontier_view()
        else:
            disaggregated_view()
    except ConfigError as err:
        st.error(f"Cannot simulate: {escape_md(err)}")
