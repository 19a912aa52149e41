"""Validation: predictions against published measurements (decode tokens/s, prefill tokens/s,
TTFT), ideal and estimated, the error by hardware class and framework, the worst cases with the
likely reason, the fitted efficiency model, and an upload of your own measurements to check
or refit."""

import json

import pandas as pd
import streamlit as st

from llmpara_core import calibration
from llmpara_core.calibration import measurements as validation
from llmpara_core.calibration.stacks import default_stack
from llmpara_core.efficiency_table import read_table
from llmpara_core.errors import ConfigError
from llmpara_core.precision import DType
from llmpara_core.roofline import gemm_peaks
from llmpara_core.units import FLOPS_PER_TFLOP, S_PER_US
from ui.format import escape_md, fmt_pct, sig
from ui.scenario import chart_config, try_scenario
from ui.tables import download_csv, download_json
from ui.url_widgets import url_number, url_segmented, url_toggle
from ui import validation_data
from ui.validation_charts import error_explorer, scatter

METRICS = {"Decode": "decode_tok_s", "Prefill": "prefill_tok_s", "TTFT": "ttft_ms",
           "Batched decode": "throughput_tok_s", "Static batch": "output_tok_s"}
SOURCES = ("Shipped", "Uploaded", "Both")
FITS = ("Shipped fit", "Refit on this data")
COLOR_BY = {"Class": "class", "Framework": "profile"}
UPLOAD_COLUMNS = ", ".join(validation.REQUIRED + validation.OPTIONAL)


@st.cache_data(max_entries=8, show_spinner="Predicting the measurements…")
def run(upload: bytes | None, source: str, refit: bool, refit_frameworks: bool) -> dict:
    """Everything the page shows, as plain data (raises the core's ConfigError)."""
    return validation_data.normalised(validation_data.compute(upload, source, refit,
                                                              refit_frameworks))


def regime_table(groups: list[dict]) -> pd.DataFrame:
    """Errors by regime, and by stack and hardware class within each regime."""
    df = pd.DataFrame([g for g in groups if g["kind"].startswith("regime")])
    if df.empty:
        return df
    df["group"] = [g if k == "regime" else f"  {g}" for k, g in zip(df["kind"], df["group"])]
    cols = {"group": "regime / stack or class", "n": "rows",
            "estimated_median_abs_error": "estimated |err|",
            "estimated_median_error": "estimated bias", "estimated_p90_abs_error": "p90 |err|",
            "estimated_within_15pct": "within ±15 %", "ideal_median_abs_error": "ideal |err|"}
    return df[list(cols)].rename(columns=cols)


def stats_table(groups: list[dict], metric: str) -> pd.DataFrame:
    df = pd.DataFrame([g for g in groups if g["metric"] == metric and g["kind"] != "batch-1"])
    df["group"] = [g if k == "all" else f"{k}: {g}" for k, g in zip(df["kind"], df["group"])]
    cols = {"group": "group", "n": "rows", "ideal_median_abs_error": "ideal |err|",
            "generic_median_abs_error": "generic |err|",
            "estimated_median_abs_error": "estimated |err|",
            "estimated_median_error": "estimated bias", "estimated_p90_abs_error": "p90 |err|",
            "estimated_within_15pct": "within ±15 %"}
    return df[list(cols)].rename(columns=cols)


# The error tables' fraction columns, shown in percent with one decimal (Streamlit's "percent"
# format printed 48.64%, 16% and 0% in one column).
PCT = {c: st.column_config.NumberColumn(c, format="%.1f %%") for c in (
    "ideal |err|", "generic |err|", "estimated |err|", "estimated bias", "p90 |err|",
    "within ±15 %")}


def in_percent(df: pd.DataFrame) -> pd.DataFrame:
    """The PCT columns of ``df`` from fractions to percent (display only)."""
    # rounded as shown, then + 0.0: a bias of −0.0004 printed "−0.0 %"
    return df.assign(**{c: (100 * df[c]).round(1) + 0.0 for c in PCT if c in df.columns})


# The group names in full ("framework: other: Qualcomm …" was cut at the column's default width).
GROUP_COLUMNS = {"group": st.column_config.TextColumn("group", width="large"),
                 "regime / stack or class": st.column_config.TextColumn(
                     "regime / stack or class", width="large")}

st.title("Validation")
st.caption("Every prediction against published measurements (batch-1 and batched decode, "
           "prefill, TTFT), each row with its source. error = predicted / measured − 1; "
           "**estimated** = the fitted efficiency model with the row's stack profile (a row "
           "naming no stack: its hardware class's default stack, as elsewhere in the app), "
           "**generic** = the stack-agnostic class values, **ideal** = peak rates. Method and "
           "data: the expanders below.")

with st.expander("Data: the shipped measurements, or upload yours and refit"):
    st.caption(f"Same columns as the shipped file (presets/tables/measurements.csv); needs "
               f"{', '.join(validation.REQUIRED)}; optional: {', '.join(validation.OPTIONAL)}. "
               "Rows that cannot be mapped are listed with the reason.")
    up = st.file_uploader("Measurements CSV", type=["csv"], key="v_upload")
    pasted = st.text_area("… or paste CSV text (used when no file is uploaded)", key="v_paste",
                          height=120)
    c1, c2, c3 = st.columns([2, 2, 3])
    with c1:
        source = url_segmented("Data", SOURCES, key="v_data", default="Shipped")
    with c2:
        fit = url_segmented("Efficiency values", FITS, key="v_fit", default=FITS[0])
    with c3:
        refit_fw = url_toggle("Refit the framework profiles too (slower)", key="v_fitfw")
upload = up.getvalue() if up is not None else (pasted.encode() if pasted.strip() else None)
if source != "Shipped" and upload is None:
    st.info("No CSV uploaded yet: showing the shipped measurements.")
    source = "Shipped"
try:
    data = run(upload, source, fit == FITS[1], bool(refit_fw))
except ConfigError as e:
    st.error(f"Cannot use these measurements: {escape_md(e)}")
    data = None                   # no st.stop(): the link warnings and Copy link still render


def headline(data: dict) -> None:
    s = data["summary"]
    m1, m0, m2, m3, m4 = st.columns(5)
    m1.metric("Batch 1, estimated", fmt_pct(data["headline_median_abs"], 1),
              help="median |error| of estimated decode tokens/s over every mapped batch-1 row "
                   "(in sample: the shipped fit saw these rows)")
    loo = data["loo"].get("batch-1")
    m0.metric("Batch 1, held out", fmt_pct(loo, 1) if loo is not None else "—",
              help="leave-one-device-out: each device's rows predicted by a fit without them "
                   "(`llmpara validate --loo --regime batch-1`); shipped data and fit only")
    dec = next((g for g in data["groups"]
                if (g["metric"], g["kind"]) == ("decode_tok_s", "all")), None)
    m2.metric("Decode, ideal roofline", fmt_pct(dec and dec["ideal_median_abs_error"], 1),
              help="the same rows at peak rates (no efficiency model)")
    m3.metric("Rows predicted", f"{s['rows_predicted']}",
              help=("shipped" if source == "Shipped" else source.lower()) + " data, "
              + ("refitted" if fit == FITS[1] else "shipped fit"))
    m4.metric("Rows skipped", f"{s['rows_skipped']}", help="listed with the reason below")


def worst_table(data: dict, metric: str, n_worst: int) -> pd.DataFrame:
    """The ``n_worst`` largest estimated errors of ``metric``, one row each, for a table that
    wraps its text (display formatting only: the core ranked them and gave the reasons)."""
    unit = "ms" if metric == "ttft_ms" else "tok/s"
    rows = [{"row": w["row_id"], "model": w["model"],
             "device": w["hardware"] + (f" ×{w['devices']}" if w["devices"] > 1 else ""),
             "stack · weights": f"{w['framework'] or 'not stated'} · {w['quant']}",
             f"measured ({unit})": sig(w["measured"]),
             f"predicted ({unit})": sig(w["estimated"]),
             "error": f"{w['error']:+.0%}",
             "likely reason": w["reasons"]}
            for w in data["worst"] if w["metric"] == metric][:n_worst]
    return pd.DataFrame(rows)


def worst_cases(data: dict, metric: str, n_worst: int) -> None:
    st.subheader("Worst cases (estimated), with the likely reason")
    df = worst_table(data, metric, n_worst)
    if df.empty:
        st.caption("No predictions for this metric.")
        return
    cells = df.assign(**{c: df[c].map(escape_md) for c in df.columns if c != "likely reason"})
    cells["likely reason"] = df["likely reason"].map(    # one reason a line (markdown)
        lambda rs: "  \n".join(f"• {escape_md(r)}" for r in rs))
    st.table(cells.style.set_properties(**{"vertical-align": "top"})    # reasons get room
             .set_properties(subset=["likely reason"], **{"min-width": "26em"}),
             hide_index=True)
    st.caption("Largest |error| first; error = predicted / measured − 1. Every row with its "
               "source: the error explorer above, or the CSV download.")


def results(data: dict) -> None:
    """Chart and summary table first, then the error explorer and the worst cases."""
    # the five metrics on a row of their own: in a column, "Static batch" ran past the
    # control's box on a phone
    metric_label = url_segmented("Metric", list(METRICS), key="v_metric", default="Decode")
    c2, c3, c4 = st.columns([1.8, 1, 1.2])
    with c2:
        color_label = url_segmented("Colour by", list(COLOR_BY), key="v_color", default="Class")
    with c3:
        show_ideal = url_toggle("Show ideal", key="v_ideal", value=True)
    with c4:
        n_worst = url_number("Worst cases", "v_worst", 1, 100, 12)
    metric = METRICS[metric_label]
    pred = pd.DataFrame(data["predictions"])
    sub = pred[pred["metric"] == metric]
    if sub.empty:
        st.warning(f"No {metric_label.lower()} rows in this data.")
        return
    # lazy tabs (bound to the link): only the open one is computed and drawn
    chart_tab, explorer_tab = st.tabs(["Predicted vs measured", "Error explorer"],
                                      key="v_tab", bind="query-params")
    with chart_tab:
        if chart_tab.open:
            st.subheader(f"Predicted vs measured: {metric_label}")
            st.plotly_chart(scatter(sub, metric, COLOR_BY[color_label], show_ideal),
                            theme="streamlit", key="v_scatter",
                            config=chart_config(f"validation-{metric}"))
    with explorer_tab:
        if explorer_tab.open:
            st.subheader("Error explorer")
            st.altair_chart(error_explorer(sub, COLOR_BY[color_label], metric),
                            key="v_explorer")
            st.caption(f"Left: median |error| per {color_label.lower()}; click a bar or a "
                       "legend entry to highlight its rows on the right (grey band: ±15 %). "
                       "Hover a point for the row.")
    st.subheader("Error by hardware class and framework")
    stats = stats_table(data["groups"], metric)
    st.dataframe(in_percent(stats), hide_index=True, column_config={**PCT, **GROUP_COLUMNS},
                 height=min(560, 35 * (len(stats) + 1) + 3))
    st.subheader("Error by regime and stack")
    st.caption("batch-1 = one sequence decoding; batched = decode at a running batch > 1 "
               "(ML.ENERGY vLLM rows: batch × per-sequence tokens/s vs measured throughput) or "
               "a static batch's output tokens/s (TensorRT-LLM); prefill = prompt tokens/s and "
               "TTFT; speculative = speculative-decoding speedup on published batch sweeps, the "
               "acceptance fitted on each sweep's smallest batch and the other batches "
               "predicted (`llmpara validate --regime speculative`); energy = J per output "
               "token of the ML.ENERGY rows under the power model (`llmpara validate --regime "
               "energy`). `llmpara validate --regime R --loo` gives the leave-one-device-out "
               "figures (speculative: leave one sweep out).")
    st.dataframe(in_percent(regime_table(data["groups"])), hide_index=True,
                 column_config={**PCT, **GROUP_COLUMNS})
    held_out_note(data)
    worst_cases(data, metric, int(n_worst))


def held_out_note(data: dict) -> None:
    """The energy and speculative fits' held-out figures (written by their fit scripts)."""
    e, sp = data.get("loo_energy") or {}, data.get("loo_speculative") or {}
    parts = []
    if e.get("batched") is not None:
        parts.append(f"energy per token, batched rows held out by device: "
                     f"{fmt_pct(e['batched'], 1)} over {e.get('rows_batched', '?')} rows (one GPU "
                     f"{fmt_pct(e.get('batched_1gpu'), 1)}, tensor parallel "
                     f"{fmt_pct(e.get('batched_tp'), 1)}; batch 1, never fitted: "
                     f"{fmt_pct(e.get('batch_1'), 1)})")
    if sp.get("held_out") is not None:
        parts.append(f"speculative speedup, each sweep held out: {fmt_pct(sp['held_out'], 1)} over "
                     f"{sp.get('rows', '?')} rows of {sp.get('sweeps', '?')} sweeps")
    if parts:
        st.caption("Held out (median |error|): " + "; ".join(parts) + ".")


def method(data: dict) -> None:
    """The efficiency model, its fitted values and the per-framework profiles (expanders)."""
    with st.expander("Method: the efficiency model" + (" (refitted on this data)"
                                                       if fit == FITS[1] else "")):
        st.subheader("The efficiency model" + (" (refitted on this data)" if fit == FITS[1]
                                               else ""))
        st.markdown(
            "Estimated time per operator in a pass with M tokens in flight = max(FLOPs ÷ (peak × "
            "**compute** × M ÷ (M + **gemm_half_tokens**)), (bytes + KV reads × "
            "(1/**kv_read** − 1)) ÷ (bandwidth × **memory**)) + kernels × **kernel overhead**, plus per pass **step "
            "overhead** + batch × **seq overhead**. **memory**: fraction of peak DRAM bandwidth a "
            "weight-streaming kernel reaches, per memory technology (HBM, GDDR, LPDDR; class when the "
            "preset does not say); **kernel overhead**: fixed cost per kernel (GPUs: the class's "
            "value holds at a 2,000 MHz boost clock, a GPU at f MHz pays (2000 ÷ f)^0.5 times "
            "it); **kv_read**: attention "
            "reading the KV cache (llama.cpp batch 1 is slow; paged attention near weight speed); "
            "**compute** and **gemm_half_tokens**: the GEMM fraction of the dense peak and the tokens "
            "in flight at which half of it is reached (tile/wave quantisation), per stack — the "
            "reference stack's is cut on Hopper by a cited legacy-kernel factor; **step / seq "
            "overhead**: scheduler and per-request CPU work of a serving engine; **stage hop**: "
            "llama.cpp's cost per device boundary of its layer split; **act-quant kernels**: "
            "extra launches per matmul with quantised weights (llama.cpp on GPUs turns the "
            "activations into q8_1 in a kernel of their own first); **quantised GEMMs**: the "
            "share of the GEMM rate llama.cpp's matmuls with quantised weights reach in prefill "
            "(they unpack weight blocks inside the kernel; its 16-bit weights go to cuBLAS), "
            "fitted on devices measured with one model in both; **stream limit**: llama.cpp's "
            "matrix-vector kernels draw at most so many bytes per compute unit (SM) per clock "
            "cycle, for 16-bit and for quantised weights — it binds where memory is wide and the "
            "units few (an A100's HBM), not on GDDR cards; **kernel plan**: the operators a stack "
            "fuses or splits (gpt-fast: one Q/K/V matmul, gate and up as two, residual adds "
            "folded into the next norm). Classes and memory "
            "technologies are fitted on llama.cpp rows; a stack profile scales or replaces them. "
            "Every key is documented in presets/tables/efficiency.toml.")
        st.dataframe(pd.DataFrame(data["classes"]), hide_index=True)
        if data["memory_types"]:
            st.dataframe(pd.DataFrame(data["memory_types"]), hide_index=True)
        st.dataframe(pd.DataFrame(data["frameworks"]), hide_index=True)
        cv = read_table().get("fit", {}).get("leave_one_device_out", {})
        if cv and fit == FITS[0]:
            st.caption("Leave-one-device-out (each device predicted by a fit without it), "
                       "median |error|: " + " · ".join(f"{escape_md(k)} {fmt_pct(v, 1)}"
                                                       for k, v in cv.items()))
    scn, _ = try_scenario()
    if scn is not None:
        table = calibration.default_table()
        hw = scn.base_hardware or scn.hardware    # the preset: no stack applied yet
        default = default_stack(hw)
        rows = [{"profile": name, "default": default.reason if name == default.name else "",
                 **{k: v for k, v in zip(
            ("memory", "kernel overhead [µs]", "kv_read", "compute", "gemm_half_tokens",
             "step overhead [µs]", "seq overhead [µs]", "stage hop [µs]",
             "act-quant kernels", "quantised GEMMs (of compute on their unit)",
             "TP row-split copy [µs]", "speculating: host per seq [µs]",
             "16-bit GEMM peak [TFLOP/s]", "quantised GEMM unit (× that peak)"),
            (e.memory, e.kernel_overhead_s / S_PER_US, e.kv_read, e.compute, e.gemm_half_tokens,
             e.step_overhead_s / S_PER_US, e.seq_overhead_s / S_PER_US,
             e.stage_hop_s / S_PER_US, e.act_quant_kernels, e.quant_compute,
             e.tp_row_copy_s / S_PER_US,
             e.spec_host_seq_s / S_PER_US,
             peaks[0] / FLOPS_PER_TFLOP, peaks[2]))}}
            for name in ("generic",) + tuple(calibration.FRAMEWORKS)
            for e in [table.efficiency_for(hw, name)]
            for peaks in [gemm_peaks(hw, DType.FP16, e)]]
        with st.expander(f"Efficiency of the sidebar's hardware ({scn.hardware.name}) per "
                         "framework (`llmpara analyze --framework NAME`)"):
            st.dataframe(pd.DataFrame(rows), hide_index=True)
    if data["skipped"]:
        with st.expander(f"Skipped rows ({len(data['skipped'])}): why each could not be "
                         "mapped"):
            st.dataframe(pd.DataFrame(data["skipped"]), hide_index=True)


def downloads(data: dict) -> None:
    pred = pd.DataFrame(data["predictions"])
    d1, d2, d3 = st.columns(3)
    with d1:
        download_csv(pred, "validation_predictions.csv", "Predictions CSV", key="v_dl_csv")
    with d2:
        download_json(json.dumps(data["summary"] | {"predictions": data["predictions"]},
                                 indent=2, allow_nan=False, default=str).encode(),
                      "validation_summary.json", "Summary JSON", key="v_dl_json")
    with d3:
        st.download_button("Efficiency table (TOML)", data["table_toml"].encode(),
                           "efficiency.toml", "application/toml", key="v_dl_toml",
                           icon=":material/download:", on_click="ignore")


if data is not None:
    headline(data)
    results(data)
    method(data)
    downloads(data)
