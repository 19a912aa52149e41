"""Fleet: the cheapest way to serve a traffic mix -- several models at their request rates,
lengths and SLOs -- searched over hardware x TP x PP x precision x serving stack (closed-form
prune, then the serving simulator's SLO rate search on the survivors). The page runs the plan
on this machine; the CLI runs the same plan on a Ray cluster."""

import json
import os

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from llmpara_core.errors import ConfigError, LLMParaError
from llmpara_core.fleet import (DEFAULT_FRAMEWORKS, DEFAULT_HARDWARE, DEFAULT_PRECISIONS,
                                load_traffic, make_executor, mix_from_dict, plan, plan_to_dict,
                                workload_row)
from llmpara_core.presets import PRESET_DIR, find_preset, list_presets, load_hardware
from ui.format import escape_md, sig
from ui.scenario import add_warning, chart_config
from ui.tables import download_csv, download_json
from ui.url_widgets import register_link_param, url_multiselect, url_number, write_url

EXAMPLE = PRESET_DIR / "fleet" / "example-mix.toml"
PRECISIONS = ("FP16", "FP8", "NVFP4", "W4A16", "W8A8")
FRAMEWORKS = ("vllm", "tensorrt-llm", "sglang")
DEGREES = (1, 2, 4, 8)
LENGTHS = ("fixed", "uniform", "lognormal")
COLUMNS = ("name", "model", "rate_rps", "isl", "osl", "lengths", "spread", "ttft_slo_ms",
           "tpot_slo_ms", "slo_percentile")
URL_KEY = "fl_w"          # one URL value per workload: the COLUMNS joined by "~"
STATE = "fleet_result"
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#BAB0AC", "#EECA3B")


@st.cache_data(max_entries=2, show_spinner=False)
def example_rows() -> list[dict]:
    return [workload_row(w) for w in load_traffic(EXAMPLE).workloads]


@st.cache_data(max_entries=2, show_spinner=False)
def model_names() -> list[str]:
    return [i.name for i in list_presets("models")]


@st.cache_data(max_entries=2, show_spinner=False)
def hardware_choices() -> dict[str, str]:
    """Cluster presets with a rental price (slug -> name): what a replica can run on."""
    from llmpara_core.fleet.search import _price_table
    prices = _price_table()
    return {i.slug: i.name for i in list_presets("hardware")
            if i.slug in prices and load_hardware(i.slug).interconnect}


def encode_row(r: dict) -> str:
    return "~".join(str(r.get(c, "")).replace("~", "-") for c in COLUMNS)


def decode_rows(raws: list[str]) -> list[dict] | None:
    """Workload rows from the URL values, or None if any is malformed."""
    rows = []
    for raw in raws[:64]:
        parts = raw.split("~")
        if len(parts) != len(COLUMNS):
            return None
        r = dict(zip(COLUMNS, parts))
        try:
            for k in ("rate_rps", "spread", "ttft_slo_ms", "tpot_slo_ms", "slo_percentile"):
                r[k] = float(r[k])
            for k in ("isl", "osl"):
                r[k] = int(r[k])
        except ValueError:
            return None
        rows.append(r)
    return rows or None


def preset_model_name(name: str) -> str:
    """The preset's display name of ``name`` (what the table's model column offers); the text
    itself if it is no preset (the core then says so)."""
    try:
        return find_preset("models", name).name
    except LLMParaError:
        return name


def traffic_rows() -> list[dict]:
    raws = st.query_params.get_all(URL_KEY)
    rows = None
    if raws:
        rows = decode_rows(raws)
        if rows is None:
            add_warning(f"Link parameter `{URL_KEY}`: not a traffic table; using the example "
                        f"mix.")
    rows = rows or example_rows()
    return [dict(r, model=preset_model_name(str(r["model"]))) for r in rows]


def clean_rows(df: pd.DataFrame) -> list[dict]:
    """The edited table as workload dicts (empty cells dropped, so the core names them)."""
    out = []
    for rec in df.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if v is None or (isinstance(v, float) and pd.isna(v)) or v == "":
                continue
            row[k] = v.item() if hasattr(v, "item") else v
        if row:
            out.append(row)
    return out


st.title("Fleet")
st.caption("The cheapest fleet for a traffic mix: per workload the device, TP × PP, precision, "
           "serving stack and replicas that meet its SLO at its request rate, with $/h, "
           "$/M output tokens, J/token and the headroom to the SLO.")

# ---- traffic ---------------------------------------------------------------------------------
st.subheader("Traffic")
rows = traffic_rows()
models = model_names()
edited = st.data_editor(
    pd.DataFrame(rows, columns=list(COLUMNS)), num_rows="dynamic", width="stretch",
    key="fl_table", hide_index=True,
    column_config={     # widths sum to ~870 px: the ten columns fit the 1440 px page
        "name": st.column_config.TextColumn("Workload", max_chars=100, width=110),
        "model": st.column_config.SelectboxColumn("Model", options=models, required=True,
                                                  width=120),
        "rate_rps": st.column_config.NumberColumn("Rate [req/s]", min_value=0.001,
                                                  max_value=1e6, format="%.3g", width=100),
        "isl": st.column_config.NumberColumn("ISL", min_value=1, max_value=1_000_000,
                                             step=1, width=70,
                                             help="mean input (prompt) length, tokens"),
        "osl": st.column_config.NumberColumn("OSL", min_value=1, max_value=1_000_000,
                                             step=1, width=70,
                                             help="mean output length, tokens"),
        "lengths": st.column_config.SelectboxColumn("Lengths", options=list(LENGTHS),
                                                    width=95),
        "spread": st.column_config.NumberColumn("Spread", min_value=0.0, max_value=5.0,
                                                width=70,
                                                help="lognormal: log-space sigma; uniform: "
                                                     "± share of the mean"),
        "ttft_slo_ms": st.column_config.NumberColumn("TTFT [ms]", min_value=0.001, width=90,
                                                     help="time-to-first-token SLO, ms, at "
                                                          "the SLO percentile"),
        "tpot_slo_ms": st.column_config.NumberColumn("TPOT [ms]", min_value=0.001, width=90,
                                                     help="time-per-output-token SLO, ms, at "
                                                          "the SLO percentile"),
        "slo_percentile": st.column_config.NumberColumn("Pctl", min_value=1.0,
                                                        max_value=100.0, width=60,
                                                        help="SLO percentile (e.g. 99 = p99)"),
    })
table = clean_rows(edited)
encoded = [encode_row(r) for r in table]
example = [dict(r, model=preset_model_name(r["model"])) for r in example_rows()]
if encoded != [encode_row(r) for r in example]:
    if st.query_params.get_all(URL_KEY) != encoded:
        st.query_params[URL_KEY] = encoded
elif URL_KEY in st.query_params:
    del st.query_params[URL_KEY]
register_link_param(URL_KEY, encoded)

# ---- candidates ------------------------------------------------------------------------------
st.subheader("Candidates")
hw_names = hardware_choices()
c1, c2, c3 = st.columns([3, 1.5, 1.5])
with c1:
    hardware = url_multiselect("Hardware", list(hw_names), key="fl_hw",
                               default=[h for h in DEFAULT_HARDWARE if h in hw_names],
                               format_func=lambda s: hw_names.get(s, s),
                               help="Cluster presets with a rental price "
                                    "(presets/tables/gpu_rental_prices.toml)")
with c2:
    precisions = url_multiselect("Precisions", PRECISIONS, key="fl_prec",
                                 default=list(DEFAULT_PRECISIONS))
with c3:
    frameworks = url_multiselect("Stacks", FRAMEWORKS, key="fl_fw",
                                 default=list(DEFAULT_FRAMEWORKS))
c1, c2, c3, c4, c5, c6 = st.columns(6)
with c1:
    tps = url_multiselect("TP", DEGREES, key="fl_tp", default=list(DEGREES), format_func=str)
with c2:
    pps = url_multiselect("PP", DEGREES, key="fl_pp", default=list(DEGREES), format_func=str)
with c3:
    requests = url_number("Requests / simulation", "fl_req", 20, 5000, 200, step=50,
                          help="More: tighter latency tails, a slower search")
with c4:
    budget = url_number("GPU budget (0: none)", "fl_budget", 0, 100_000, 0, step=8)
with c5:
    power_kw = url_number("Power cap [kW] (0: none)", "fl_power", 0.0, 1e6, 0.0, step=10.0)
with c6:
    seed = url_number("Seed", "fl_seed", 0, 2**31 - 1, 0, step=1)

st.info("Larger searches run on a Ray cluster from the command line, with the same traffic "
        "file format (download it below):  \n"
        "`pip install 'llmpara[ray]'` then "
        "`llmpara plan --traffic mix.toml --executor ray --address auto --format json` "
        "(`--address ray://head:10001` for a remote cluster; without `--address` a local Ray "
        "starts). Each candidate is one Ray task; workers load the presets themselves.",
        icon=":material/hub:")

spec = {"seed": int(seed), "requests": int(requests), "runners_up": 3,
        "candidates": {"hardware": hardware, "precisions": precisions,
                       "frameworks": frameworks, "tp": sorted(tps), "pp": sorted(pps)},
        "constraints": {"max_gpus_per_replica": 8}, "workload": table}
if budget:
    spec["constraints"]["gpu_budget"] = int(budget)
if power_kw:
    spec["constraints"]["power_cap_kW"] = float(power_kw)

problem = None
if not table:
    problem = "Add at least one workload to the traffic table."
elif not (hardware and precisions and frameworks and tps and pps):
    problem = "Choose at least one hardware, precision, stack, TP and PP."
mix = None
if problem is None:
    try:
        mix = mix_from_dict(spec)
    except ConfigError as e:
        problem = f"Traffic table: {str(e).splitlines()[0]}"
if problem:
    st.warning(problem)
    st.stop()

toml_lines = [f"seed = {mix.seed}", f"requests = {mix.requests}", "", "[candidates]"]
for k, v in spec["candidates"].items():
    toml_lines.append(f"{k} = {json.dumps(list(v))}")
toml_lines += ["", "[constraints]"] + [f"{k} = {v}" for k, v in spec["constraints"].items()]
for r in (workload_row(w) for w in mix.workloads):
    toml_lines += ["", "[[workload]]"] + [f"{k} = {json.dumps(v)}" for k, v in r.items()]
traffic_toml = "\n".join(toml_lines) + "\n"

run_key = json.dumps(spec, sort_keys=True, default=str)
go_clicked = st.button("Plan the fleet", type="primary", icon=":material/play_arrow:")
st.download_button("Traffic file (TOML)", traffic_toml.encode("utf-8"), "traffic.toml",
                   "application/toml", icon=":material/download:", on_click="ignore")

stored = st.session_state.get(STATE)
if go_clicked:
    bar = st.progress(0.0, text="Bounding candidates…")

    def progress(done, total, stage):
        text = ("Bounding candidates" if stage == "bounds" else "Simulating survivors") \
            + f" ({done}/{total})"
        bar.progress(min(1.0, done / total) if total else 0.0, text=text)

    ex = make_executor("local", max(1, min(4, os.cpu_count() or 1)))
    try:
        result = plan(mix, ex, progress)
    except LLMParaError as e:
        bar.empty()
        st.error(str(e).splitlines()[0])
        st.stop()
    finally:
        ex.close()
    bar.empty()
    stored = st.session_state[STATE] = (run_key, result, mix)

if stored is None:
    st.caption("Press **Plan the fleet** to search.")
    st.stop()
run_for, result, run_mix = stored
if run_for != run_key:
    st.caption("The inputs changed since this plan: press **Plan the fleet** to search again.")

# ---- results ---------------------------------------------------------------------------------
st.subheader("Plan")
t, c = result.totals, result.counts
m = st.columns(5)
m[0].metric("GPUs", f"{t['gpus']:,}")
m[1].metric("Cost", f"${sig(t['usd_per_hour'], 3)}/h")
m[2].metric("$/M output tokens", "–" if t["usd_per_million_tokens"] is None
            else f"${sig(t['usd_per_million_tokens'], 3)}")
m[3].metric("J/token", "–" if t["j_per_token"] is None else sig(t["j_per_token"], 3))
m[4].metric("Workloads served", f"{t['workloads_served']}/{t['workloads']}")
st.caption(f"Search: {c['configurations']:,} configurations · {c['pruned_closed_form']:,} pruned "
           f"by closed forms (support, memory, latency floor, constraints) · "
           f"{c['skipped_by_cost_bound']:,} skipped by the cost bound · {c['simulated']:,} "
           f"simulated (SLO rate search; {c['stopped_by_cost']:,} stopped once they cost more "
           f"than the plans found).")
if result.cancelled:
    st.warning(escape_md(result.notes[-1]))
for name, why in result.unserved:
    st.warning(f"{escape_md(name)}: {escape_md(why)}")
for n in result.notes[:-1] if result.cancelled else result.notes:
    st.caption(escape_md(n))


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame([{
        "Workload": r.workload, "Rank": r.rank, "Model": r.model, "Hardware": r.hardware,
        "TP×PP": f"{r.tp}×{r.pp}", "Precision": r.precision, "Stack": r.framework,
        "Replicas": r.replicas, "GPUs": r.gpus, "$/h": r.usd_per_hour,
        "$/Mtok": r.usd_per_million_tokens, "J/token": r.j_per_token,
        "Headroom %": 100.0 * r.headroom, "TTFT [ms]": 1e3 * r.ttft_s,
        "TPOT [ms]": None if r.tpot_s is None else 1e3 * r.tpot_s,
        "E2E p90 [s]": r.e2e_p90_s, "On front": r.on_front} for r in rows])


fmt = {"$/h": st.column_config.NumberColumn(format="$%.2f"),
       "$/Mtok": st.column_config.NumberColumn(format="$%.3f"),
       "J/token": st.column_config.NumberColumn(format="%.3g"),
       "Headroom %": st.column_config.NumberColumn(format="%.0f"),
       "TTFT [ms]": st.column_config.NumberColumn(format="%.3g"),
       "TPOT [ms]": st.column_config.NumberColumn(format="%.3g"),
       "E2E p90 [s]": st.column_config.NumberColumn(format="%.3g")}
chosen = frame(result.chosen)
all_rows = frame(result.rows)
if len(chosen):
    st.dataframe(chosen.drop(columns=["Rank", "On front"]), hide_index=True, width="stretch",
                 column_config=fmt, key="fl_plan")
    with st.expander("Runners-up"):
        st.dataframe(all_rows, hide_index=True, width="stretch", column_config=fmt,
                     key="fl_all")

    colors = {w: PALETTE[i % len(PALETTE)] for i, w in enumerate(dict.fromkeys(all_rows.Workload))}
    left, right = st.columns(2)
    with left:
        fig = go.Figure(go.Bar(x=chosen["Workload"], y=chosen["$/h"],
                               marker_color=[colors[w] for w in chosen["Workload"]],
                               text=[f"{h} ×{g}" for h, g in zip(chosen["Hardware"],
                                                                chosen["GPUs"])],
                               hovertemplate="%{x}<br>$%{y:.2f}/h<br>%{text}<extra></extra>"))
        fig.update_layout(title="Cost per workload", yaxis_title="$/h", height=380,
                          margin=dict(t=50, b=40))
        st.plotly_chart(fig, theme="streamlit", key="fl_cost", config=chart_config("fleet-cost"))
    with right:
        fig = go.Figure()
        for w, g in all_rows.groupby("Workload", sort=False):
            g = g.sort_values("$/h")
            front = g[g["On front"]]
            fig.add_trace(go.Scatter(
                x=g["$/h"], y=g["E2E p90 [s]"], mode="markers", name=w,
                marker=dict(color=colors[w], size=9, symbol=["star" if r == 0 else "circle"
                                                              for r in g["Rank"]]),
                text=[f"{h} TP{tp} {p} {s}" for h, tp, p, s in zip(g["Hardware"], g["TP×PP"],
                                                                    g["Precision"], g["Stack"])],
                hovertemplate="%{text}<br>$%{x:.2f}/h<br>p90 E2E %{y:.3g} s<extra></extra>"))
            fig.add_trace(go.Scatter(x=front["$/h"], y=front["E2E p90 [s]"], mode="lines",
                                     line=dict(color=colors[w], dash="dot"), showlegend=False,
                                     hoverinfo="skip"))
        fig.update_layout(title="Cost–latency front (★ chosen)", xaxis_title="$/h",
                          yaxis_title="p90 end-to-end latency [s]", height=380,
                          margin=dict(t=50, b=40))
        st.plotly_chart(fig, theme="streamlit", key="fl_front",
                        config=chart_config("fleet-front"))

d1, d2 = st.columns(2)
with d1:
    download_csv(all_rows, "fleet-plan.csv", key="fl_csv")
with d2:
    download_json(json.dumps(plan_to_dict(result, run_mix), indent=2, allow_nan=False,
                             default=str).encode("utf-8"), "fleet-plan.json", key="fl_json")
