"""Memory tiers: the sidebar's model on a device whose memory is a hierarchy (SRAM / DRAM /
Flash or any editable list): placement per tier, per-tier streaming time, tokens/s against
precision (tier migration) and batch, per-operator effective bandwidth, energy per token, and
the check of the replaced reference tool's claims. All physics in llmpara_core.tiers."""

import json
from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from llmpara_core.errors import ConfigError, InfeasibleError
from llmpara_core.export import _plain
from llmpara_core.hardware import Hardware, MemoryTier
from llmpara_core.model import Model
from llmpara_core.precision import PRECISION_PRESETS, Precision
from llmpara_core.presets import list_presets, load_hardware, load_model
from llmpara_core.tiers import CATEGORIES, OVERLAPS, STRATEGIES, HeteroResult, hetero
from llmpara_core.tiers.formats import (TIER_COLUMNS, decode_tiers, encode_tiers, parse_pins,
                                   tier_table, tiers_from_table)
from llmpara_core.tiers.report import (batch_sweep, check_reference_claims, placement_rows,
                                       reference_estimate, result_to_dict, tier_migration,
                                       tier_rows)
from llmpara_core.units import BYTES_PER_GB, BYTES_PER_MB, J_PER_PJ, S_PER_MS, S_PER_US
from llmpara_core.workload import Workload
from ui import tier_charts, narrow
from ui.format import escape_md, fmt_bytes, fmt_gb, fmt_pct, fmt_rate, fmt_time, sig
from ui.scenario import add_warning, chart_config, get_scenario
from ui.tables import download_csv, download_json
from ui.url_widgets import (register_link_param, url_number, url_segmented, url_selectbox,
                            url_toggle)

SIDEBAR = "sidebar"
DEFAULT_TIERED = "cambricon-llm-chiplet"
VIEWS = ("Placement", "Time per tier", "Precision sweep", "Batch sweep", "Operators", "Energy",
         "Reference claims")
STRATEGY_HELP = {"greedy": "the reference tool's: whole layers into the first tier, then KV "
                           "cache and weights in model order through the others",
                 "hot-first": "most-read bytes into the fastest tiers; the embedding table "
                              "(only gathered) sinks to the slowest",
                 "pinned": "your pins first, then hot-first for the rest"}
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
TIERS_KEY = "mt_tiers"
COLUMN_CONFIG = {
    "name": st.column_config.TextColumn(
        "name", help="Unique; letters, digits, spaces, _ . + / ( ) -", max_chars=24),
    "capacity_GB": st.column_config.NumberColumn("capacity GB", help="10⁹ bytes", format="%g"),
    "bandwidth_GBps": st.column_config.NumberColumn("bandwidth GB/s", format="%g"),
    "energy_pJ_per_byte": st.column_config.NumberColumn(
        "pJ/B", format="%g", help="energy per byte read; blank = the hardware class default"),
    "latency_ns": st.column_config.NumberColumn("latency ns", format="%g",
                                                help="access latency; blank = 0"),
}


@st.cache_data(max_entries=4, show_spinner=False)
def tiered_slugs() -> list[str]:
    """Hardware presets that describe a memory hierarchy ([[memory_tiers]])."""
    return [i.slug for i in list_presets("hardware") if load_hardware(i.slug).memory_tiers]


@st.cache_data(max_entries=64, show_spinner=False)
def run(model: Model, hw: Hardware, precision: Precision, workload: Workload, kw: tuple
        ) -> HeteroResult:
    return hetero(model, hw, precision, workload, **dict(kw))


@st.cache_data(max_entries=32, show_spinner="Sweeping precision…")
def run_migration(model, hw, precision, workload, kw: tuple) -> tuple:
    return tier_migration(model, hw, precision, workload, **dict(kw))


@st.cache_data(max_entries=32, show_spinner="Sweeping the batch…")
def run_batches(model, hw, precision, workload, batches: tuple, kw: tuple) -> tuple:
    return batch_sweep(model, hw, precision, workload, batches, **dict(kw))


@st.cache_data(max_entries=2, show_spinner="Checking the reference's claims…")
def run_claims():
    return check_reference_claims(load_model("Llama-3 8B"), load_hardware(DEFAULT_TIERED),
                                  PRECISION_PRESETS["FP16"])


def show(fig: go.Figure, key: str) -> None:
    st.plotly_chart(fig, theme="streamlit", key=key, config=chart_config(key))


# ---- the tier editor ------------------------------------------------------------------------

def _reset_tiers() -> None:
    st.session_state["_mt_custom"] = None
    st.session_state["_mt_ver"] = st.session_state.get("_mt_ver", 0) + 1


def _load_link_tiers(base: Hardware) -> None:
    """Once per session: edited tiers from the link, validated (warning + preset otherwise)."""
    raw = st.query_params.get(TIERS_KEY)
    if not raw:
        return
    try:
        st.session_state["_mt_custom"] = encode_tiers(decode_tiers(raw))
    except ConfigError as e:
        add_warning(f"Link parameter `{TIERS_KEY}`: {escape_md(e)}; using the tiers of "
                    f"{escape_md(base.name)}.")
        del st.query_params[TIERS_KEY]


def tier_editor(base: Hardware, source_id: tuple) -> tuple[MemoryTier, ...] | None:
    """The editable tier table; returns validated tiers, or None after showing the error."""
    ss = st.session_state
    if ss.get("_mt_src") != source_id:
        first = "_mt_src" not in ss
        ss["_mt_src"], ss["_mt_custom"] = source_id, None
        ss["_mt_ver"] = ss.get("_mt_ver", -1) + 1
        if first:
            _load_link_tiers(base)
    key = f"mt_editor_{ss['_mt_ver']}"
    if key not in ss or "_mt_base" not in ss:
        custom = ss.get("_mt_custom")
        ss["_mt_base"] = tier_table(decode_tiers(custom) if custom else base.tiers)
    edited = st.data_editor(pd.DataFrame(ss["_mt_base"], columns=list(TIER_COLUMNS)), key=key,
                            num_rows="dynamic", hide_index=True, column_config=COLUMN_CONFIG)
    try:
        tiers = tiers_from_table(edited.to_dict("records"))
    except ConfigError as e:
        st.error(f"These tiers cannot be used: {escape_md(e)}")
        return None
    enc = encode_tiers(tiers)
    if enc == encode_tiers(base.tiers):
        ss["_mt_custom"] = None
        if TIERS_KEY in st.query_params:
            del st.query_params[TIERS_KEY]
    else:
        ss["_mt_custom"] = enc
        if st.query_params.get(TIERS_KEY) != enc:
            st.query_params[TIERS_KEY] = enc
        register_link_param(TIERS_KEY, enc)
    return tiers


# ---- inputs ---------------------------------------------------------------------------------

scn = get_scenario()
st.title("Memory tiers")
st.caption(escape_md(scn.label))

presets = tiered_slugs()
names = {s: load_hardware(s).name for s in presets}
default = SIDEBAR if scn.hardware.memory_tiers or not presets else (
    DEFAULT_TIERED if DEFAULT_TIERED in presets else presets[0])
c1, c2 = st.columns([2, 3])
with c1:
    src = url_selectbox(
        "Tiers of", [SIDEBAR] + presets, key="mt_hw", default=default,
        format_func=lambda s: "Sidebar hardware" if s == SIDEBAR else names[s],
        help="Start from the sidebar device or a tiered preset, then edit the table below.")
base_hw = scn.hardware if src == SIDEBAR else scn.on(load_hardware(src))
with c2:
    if not base_hw.memory_tiers:
        st.info(f"{escape_md(base_hw.name)} has no memory hierarchy: it is one main-memory tier. "
                "Add rows (fastest first) to build one, or pick a tiered preset.")
    else:
        st.caption(f"Tiers of {escape_md(base_hw.name)}, fastest first; its peak compute, "
                   "efficiency factors and power are used too. Capacity GB = 10⁹ bytes.")
st.subheader("Tiers", divider="gray")
tiers = tier_editor(base_hw, (src, base_hw.name, encode_tiers(base_hw.tiers)))
edited = st.session_state.get("_mt_custom") is not None
with st.container(horizontal=True):
    st.button("Reset tiers", key="mt_reset", on_click=_reset_tiers, disabled=not edited,
              help="Back to the tiers of the chosen device")
    st.caption("Add or delete rows in the table; blank rows are ignored. Edited tiers travel "
               "in the link.")
if tiers is None:
    st.stop()
hw = replace(base_hw, memory_tiers=tiers,
             name=base_hw.name + (" (edited tiers)" if edited else ""))

c = st.columns([3, 2, 3, 2])
with c[0]:
    strategy = url_segmented("Placement", STRATEGIES, key="mt_strategy", default="greedy",
                             help="; ".join(f"{k}: {v}" for k, v in STRATEGY_HELP.items()))
with c[1]:
    overlap = url_segmented("Compute overlap", OVERLAPS, key="mt_overlap", default="operator",
                            help="operator: each operator takes max(compute, memory); step: "
                                 "compute hidden under the whole step's streaming")
with c[2]:
    prefetch = url_toggle("Prefetch predictable reads", "mt_prefetch", True,
                          help="On: only data-dependent reads (embedding gather, routed "
                               "experts) pay a tier's access latency. Off: every operator.")
with c[3]:
    zipf = 0.0
    if scn.model.moe is not None:
        zipf = url_number("Expert popularity (Zipf s)", "mt_zipf", 0.0, 10.0, 0.0, step=0.1,
                          help="0 = uniform routing; s > 0 = expert of rank r used ∝ 1/r^s, "
                               "so hot-first keeps popular experts in fast tiers")
pin_text = st.text_input(
    "Pins (SELECTOR=TIER; …)", key="mt_pins", max_chars=1000, bind="query-params",
    placeholder="embedding=Flash; attention@layers:0-7=SRAM; kv_cache=DRAM",
    help="Selectors: a category (" + ", ".join(CATEGORIES) + "), layers:A-B, "
         "CATEGORY@layers:A-B or an item key from the placement table. Pins are placed first "
         "with every strategy; 'pinned' places the rest hot-first.")
register_link_param("mt_pins", pin_text or "")
view = url_segmented("View", VIEWS, key="mt_view", default=VIEWS[0])

try:
    pins = parse_pins(pin_text)
except ConfigError as e:
    st.error(f"Pins: {escape_md(e)}. The pins (`mt_pins`) were dropped.")
    pins = ()
if strategy == "pinned" and not pins:
    st.info("No pins given: 'pinned' places everything hot-first.")
kw = (("strategy", strategy), ("pins", pins or None), ("overlap", overlap),
      ("prefetch", bool(prefetch)), ("expert_zipf_s", float(zipf)))
model, prec, wl = scn.model, scn.precision, scn.workload

# ---- headline -------------------------------------------------------------------------------
res = None
try:
    res = run(model, hw, prec, wl, kw)
except InfeasibleError as e:
    st.error(f"This scenario cannot be placed: {escape_md(e)}. The precision sweep shows "
             "where it would fit.")
except ConfigError as e:
    st.error(f"This placement cannot be made: {escape_md(e)}")
ref = reference_estimate(model, hw, prec, wl)
if res is not None:
    est, ideal = res.estimated, res.ideal
    m = st.columns(3) + st.columns(3)      # six across clipped the labels at 1440 px
    m[0].metric("Tokens/s per sequence", sig(est.decode_tokens_per_s),
                help=f"estimated (1 / TPOT); at peak rates {fmt_rate(ideal.decode_tokens_per_s)}")
    m[1].metric("Aggregate tokens/s", sig(est.throughput_tokens_per_s),
                help=f"batch {wl.batch}; at peak rates {fmt_rate(ideal.throughput_tokens_per_s)}")
    m[2].metric("TPOT", fmt_time(est.tpot_s), help=f"ideal {fmt_time(ideal.tpot_s)}")
    m[3].metric("TTFT", fmt_time(est.ttft_s), help=f"ideal {fmt_time(ideal.ttft_s)}")
    m[4].metric("Energy / token", f"{sig(res.energy.total_j / tier_charts.J_PER_MJ)} mJ",
                help="tier reads × pJ/B + compute + idle power × time, per generated token")
    m[5].metric("Reference formula, tok/s", sig(ref.decode_tokens_per_s),
                help=f"the replaced tool: whole model at the {escape_md(ref.bottleneck_tier)} "
                     "tier's bandwidth, no LM head or KV reads, divided by the batch (see "
                     "Reference claims)")
    for note in res.notes:
        st.caption("ℹ️ " + escape_md(note))


# ---- views ----------------------------------------------------------------------------------

def scenario_json(extra: dict) -> bytes:
    data = {"scenario": scn.query, "hardware": _plain(hw), "tiers_link": encode_tiers(tiers),
            **extra}
    return json.dumps(data, indent=2, allow_nan=False, default=str).encode("utf-8")


def need_result() -> bool:
    if res is None:
        st.info("Nothing to show: no placement of this scenario on these tiers (the message "
                "above says why).")
    return res is not None


def placement_view() -> None:
    show(tier_charts.placement_figure(res), "tiers-placement")
    trows = pd.DataFrame(tier_rows(res))
    # One byte formatter for every column (GB = 10^9 B), headers in words.
    shown = {"capacity": "capacity_bytes", "used": "used_bytes", "weights": "weight_bytes",
             "KV cache": "kv_cache_bytes", "activations": "activation_bytes",
             "read per decode step": "read_bytes_per_step"}
    narrow.by_rows_on_narrow(pd.DataFrame({"tier": trows.tier, **{
        h: trows[c].map(fmt_bytes) for h, c in shown.items()}}), "mt_tiers", "tier")
    prow = placement_rows(res.placement)
    pdf = pd.DataFrame([{"item": r["key"], "category": r["category"], "layer": r["layer"],
                         "stored_bytes": r["stored_bytes"], "read_density": r["read_density"],
                         **{f"{k} bytes": v for k, v in r["tiers"].items()}} for r in prow])
    with st.expander(f"Every item ({len(pdf)}) and where it sits"):
        st.caption("read density = bytes read per decode step / bytes stored (hot-first "
                   "sorts by it). Item keys can be pinned.")
        st.dataframe(pdf, hide_index=True, column_config={
            c: st.column_config.NumberColumn(format="%.4g") for c in pdf.columns
            if c.endswith("bytes") or c == "read_density"})
    with st.container(horizontal=True):
        download_csv(trows, "memory-tiers.csv", "Tiers CSV", key="dl_mt_tiers")
        download_csv(pdf, "memory-tiers-placement.csv", "Placement CSV", key="dl_mt_place")
        download_json(scenario_json(result_to_dict(res)), "memory-tiers.json", "Result JSON",
                      key="dl_mt_json")


def time_view() -> None:
    show(tier_charts.time_figure(res), "tiers-time")
    trows = tier_rows(res)
    share = ", ".join(f"{escape_md(r['tier'])} {fmt_pct(r['time_share'], 1)}" for r in trows)
    est = res.estimated
    st.markdown(f"Share of the streaming time per tier: {share}. Each tier streams its own "
                f"bytes at its own bandwidth (bytes ÷ bandwidth, summed over tiers); compute "
                f"overlaps with streaming ({res.overlap} overlap), so the bars do not add up to "
                f"the TPOT. {fmt_pct(est.compute_bound_share)} of the step is in compute-bound "
                "operators.")
    df = pd.DataFrame([{k: r[k] for k in ("tier", "read_bytes_per_step",
                                          "weight_read_bytes_per_step",
                                          "kv_read_write_bytes_per_step",
                                          "activation_bytes_per_step", "ideal_time_s_per_step",
                                          "estimated_time_s_per_step", "time_share")}
                       for r in trows])
    shown = pd.DataFrame({
        "tier": df.tier, "read MB": df.read_bytes_per_step / BYTES_PER_MB,
        "weights MB": df.weight_read_bytes_per_step / BYTES_PER_MB,
        "KV MB": df.kv_read_write_bytes_per_step / BYTES_PER_MB,
        "activations MB": df.activation_bytes_per_step / BYTES_PER_MB,
        "ideal ms": df.ideal_time_s_per_step / S_PER_MS,
        "estimated ms": df.estimated_time_s_per_step / S_PER_MS, "share": df.time_share})
    st.caption("Per decode step (mean over the generated tokens); MB = 10⁶ bytes.")
    st.dataframe(shown, hide_index=True, column_config={
        **{c: st.column_config.NumberColumn(format="%.4g") for c in shown.columns
           if c.endswith(("MB", "ms"))},
        "share": st.column_config.ProgressColumn(format="percent", min_value=0.0,
                                                 max_value=1.0,
                                                 help="of the streaming time (peak rates)")})
    download_csv(df, "memory-tiers-time.csv", "Time per tier CSV", key="dl_mt_time")


def _sweep_frame(points) -> pd.DataFrame:
    names = [t.name for t in hw.tiers]
    recs = []
    for p in points:
        r = p.result
        rec = {"step": p.label, "weight_bits": p.weight_bits, "kv_bits": p.kv_bits,
               "batch": p.batch, "fits": p.feasible,
               "decode_tokens_per_s": r.estimated.decode_tokens_per_s if r else None,
               "throughput_tokens_per_s": r.estimated.throughput_tokens_per_s if r else None,
               "ideal_throughput_tokens_per_s": r.ideal.throughput_tokens_per_s if r else None,
               "reference_tokens_per_s": p.reference.decode_tokens_per_s if p.reference else None,
               "energy_j_per_token": r.energy.total_j if r else None,
               "compute_bound_share": r.estimated.compute_bound_share if r else None}
        w = p.tier_weight_bytes()
        for i, n in enumerate(names):
            rec[f"weights in {n} bytes"] = w[i] if w else None
        rec["note"] = p.reason or None
        recs.append(rec)
    return pd.DataFrame(recs)


def precision_view() -> None:
    pts = run_migration(model, hw, prec, wl, kw)
    land, tps = tier_charts.migration_figures(pts)
    show(land, "tiers-migration-land")
    show(tps, "tiers-migration-tokens")
    st.caption("Every weight (and the KV cache) at 16, 8, 4 and 2 bits, re-placed each time "
               f"with the {strategy} strategy. The reference tool's formula (dashed) streams "
               "every layer weight from the slowest tier holding any weight and ignores KV "
               "reads and the LM head.")
    df = _sweep_frame(pts)
    st.dataframe(df, hide_index=True)
    download_csv(df, "memory-tiers-precision-sweep.csv", "Precision sweep CSV",
                 key="dl_mt_mig")


def batch_view() -> None:
    top = url_number("Largest batch", "mt_maxb", 1, BATCHES[-1], 256, step=1,
                     help="Powers of two up to this batch (each re-placed: the KV cache grows "
                          "with the batch)")
    batches = tuple(b for b in BATCHES if b <= top) or (1,)
    pts = run_batches(model, hw, prec, wl, batches, kw)
    show(tier_charts.batch_figure(pts), "tiers-batch")
    st.caption("Weights are streamed once per step for the whole batch, so aggregate tokens/s "
               "rises with the batch until compute binds or the KV cache pushes data to a "
               "slower tier; the reference's formula multiplies the bytes by the batch and "
               "falls as 1/batch.")
    df = _sweep_frame(pts)
    st.dataframe(df, hide_index=True)
    download_csv(df, "memory-tiers-batch-sweep.csv", "Batch sweep CSV", key="dl_mt_batch")


def operators_view() -> None:
    show(tier_charts.operator_bandwidth_figure(res), "tiers-operators")
    names = [t.name for t in hw.tiers]
    raw = pd.DataFrame([{"operator": r.name, "group": r.group, "count": r.count,
                         "flops": r.flops, "memory_bytes": r.memory_bytes,
                         **{f"{n}_bytes": b for n, b in zip(names, r.tier_bytes)},
                         "effective_bandwidth_bytes_per_s": r.effective_bandwidth_bytes_per_s,
                         "bound": r.bound, "ideal_s": r.ideal_s, "estimated_s": r.estimated_s}
                        for r in res.rows])
    st.caption("Effective bandwidth = an operator's bytes ÷ its streaming time: the harmonic "
               "mix of the tiers it reads (mean decode step, all layers). MB = 10⁶ bytes.")
    shown = pd.DataFrame({
        "operator": raw.operator, "group": raw.group, "count": raw["count"],
        **{f"{n} MB": raw[f"{n}_bytes"] / BYTES_PER_MB for n in names},
        "GB/s": raw.effective_bandwidth_bytes_per_s / BYTES_PER_GB, "bound": raw.bound,
        "estimated µs": raw.estimated_s / S_PER_US})
    st.dataframe(shown, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.4g") for c in shown.columns
        if c.endswith(("MB", "GB/s", "µs"))})
    download_csv(raw, "memory-tiers-operators.csv", "Operators CSV", key="dl_mt_ops")


def energy_view() -> None:
    show(tier_charts.energy_figure(res), "tiers-energy")
    en = res.energy
    if en.assumed_tiers:
        st.warning(f"No energy per byte for {escape_md(', '.join(en.assumed_tiers))}: the "
                   f"{escape_md(hw.hw_class.value)} class default is used.")
    if en.static_j is None:
        st.caption("Static energy unknown (no idle power or TDP for this device).")
    df = pd.DataFrame([{"part": f"{t.name} reads", "j_per_token": j,
                        "pj_per_byte": (t.energy_j_per_byte / J_PER_PJ
                                        if t.energy_j_per_byte is not None else None)}
                       for t, j in zip(hw.tiers, en.tier_j)]
                      + [{"part": "compute", "j_per_token": en.compute_j},
                         {"part": "static", "j_per_token": en.static_j}])
    st.dataframe(df, hide_index=True)
    download_csv(df, "memory-tiers-energy.csv", "Energy CSV", key="dl_mt_energy")


def _tier_ms(r: HeteroResult) -> str:
    return " + ".join(f"{escape_md(t.name)} {fmt_time(s)}"
                      for t, s in zip(r.tiers, r.ideal.tier_memory_s) if s > 0)


def claims_view() -> None:
    try:
        c = run_claims()
    except (ConfigError, InfeasibleError) as e:
        st.error(f"The reference case cannot be evaluated: {escape_md(e)}")
        return
    g16, h16, g4, h4 = c.greedy_fp16, c.hot_first_fp16, c.greedy_int4, c.hot_first_int4
    dev = g16.hardware.name
    st.markdown(f"The reference's headline case: **{escape_md(g16.model.name)} FP16 on "
                f"{escape_md(dev)}**, batch {c.workload.batch}, prompt {c.workload.prompt_len}, "
                f"{c.workload.gen_len} generated tokens (its preset), independent of the "
                "sidebar. Tokens/s per sequence; peak rates as in the reference, estimated "
                "(device efficiency factors) in brackets. INT4 = every weight at 4 bits, KV "
                "cache still FP16.")

    def ours(r):
        return f"{sig(r.ideal.decode_tokens_per_s)} ({sig(r.estimated.decode_tokens_per_s)})"
    table = pd.DataFrame([
        {"claim": "FP16 tokens/s", "paper": f"{c.paper_fp16_tokens_per_s:g}",
         "reference code": sig(c.reference_fp16.decode_tokens_per_s),
         "per-tier, greedy": ours(g16), "per-tier, hot-first": ours(h16)},
        {"claim": "INT4 tokens/s", "paper": "—",
         "reference code": sig(c.reference_int4.decode_tokens_per_s),
         "per-tier, greedy": ours(g4), "per-tier, hot-first": ours(h4)},
        {"claim": "INT4 speed-up over FP16", "paper": f"{c.paper_int4_speedup:g}×",
         "reference code": f"{sig(c.reference_int4_speedup)}×",
         "per-tier, greedy": f"{sig(c.greedy_int4_speedup)}×",
         "per-tier, hot-first": f"{sig(c.hot_first_int4_speedup)}×"},
    ])
    st.dataframe(table, hide_index=True)
    last = g16.tiers[-1].name
    spilled = [r for r in placement_rows(g16.placement) if r["tiers"][last] > 0]
    spilled.sort(key=lambda r: -r["tiers"][last])
    spill_b = g16.placement.weight_bytes_per_tier()[-1]
    what = ", ".join(escape_md(r["key"]) for r in spilled[:3])
    emb = h16.placement.bytes_by_category().get("embedding")
    kv_read = g4.kv_bytes_per_step
    st.markdown(
        f"**Why not ≈ {c.paper_fp16_tokens_per_s:g} token/s.** With the reference's own "
        f"greedy placement {fmt_gb(spill_b)} of "
        f"{fmt_gb(g16.placement.weight_bytes)} of weights spill to "
        f"{escape_md(last)} ({what}: DRAM fills in model order after the KV cache). The reference then streams *every* layer weight "
        f"({fmt_gb(c.reference_fp16.bytes_per_token)} per token) at the bandwidth of the "
        f"slowest tier holding any weight ({escape_md(c.reference_fp16.bottleneck_tier)}), and "
        f"leaves out the LM head and the KV-cache reads. Charging each tier for its own bytes "
        f"gives {_tier_ms(g16)} per token at peak rates → "
        f"**{sig(g16.ideal.decode_tokens_per_s)} tokens/s** "
        f"({sig(g16.estimated.decode_tokens_per_s)} with the device's efficiency factors).")
    kv_last = h16.placement.bytes_by_category().get("kv_cache")
    kv_note = (f", plus {fmt_gb(kv_last[-1])} of the KV cache"
               if kv_last is not None and kv_last[-1] > 0 else "")
    if emb is not None:
        st.markdown(
            f"**Hot-first** keeps everything read on every step in the fast tiers and parks the "
            f"embedding table ({fmt_gb(h16.placement.category_bytes('embedding'))}; only the token's row is gathered) in "
            f"{escape_md(last)}{kv_note}: {_tier_ms(h16)} → "
            f"**{sig(h16.ideal.decode_tokens_per_s)} "
            f"tokens/s** ({sig(h16.estimated.decode_tokens_per_s)} estimated).")
    st.markdown(
        f"**Why not INT4 ≈ {c.paper_int4_speedup:g}×.** The paper's figure matches neither "
        f"its code ({sig(c.reference_int4_speedup)}×: its FP16 baseline is the Flash-bottleneck "
        f"figure and KV reads are ignored) nor per-tier streaming. At 4 bits the weights "
        f"({fmt_gb(g4.placement.weight_bytes)}) fit the fast tiers, but the "
        f"FP16 KV cache is still read every step ({fmt_gb(kv_read)} per token at the mean "
        f"context): {sig(g4.ideal.decode_tokens_per_s)} tokens/s = "
        f"{sig(c.greedy_int4_speedup)}× greedy FP16, {sig(c.hot_first_int4_speedup)}× "
        "hot-first FP16 (which already streams almost nothing from Flash).")
    download_json(json.dumps({"workload": _plain(c.workload), "claims": table.to_dict("records"),
                              "greedy_fp16": result_to_dict(g16, False, False),
                              "hot_first_fp16": result_to_dict(h16, False, False),
                              "greedy_int4": result_to_dict(g4, False, False),
                              "hot_first_int4": result_to_dict(h4, False, False)},
                             indent=2, allow_nan=False, default=str).encode("utf-8"),
                  "memory-tiers-reference-claims.json", "Claims JSON", key="dl_mt_claims")


VIEW_FUNCS = {"Placement": placement_view, "Time per tier": time_view,
              "Precision sweep": precision_view, "Batch sweep": batch_view,
              "Operators": operators_view, "Energy": energy_view,
              "Reference claims": claims_view}
NEEDS_RESULT = {"Placement", "Time per tier", "Operators", "Energy"}
if view not in NEEDS_RESULT or need_result():
    VIEW_FUNCS[view]()
