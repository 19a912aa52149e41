"""Validation: predictions against published measurements (decode tokens/s, prefill tokens/s,
TTFT, batched decode throughput, static-batch output throughput), ideal and estimated, the
error by regime (batch 1, batched, prefill), stack and hardware class, the worst cases with the
likely reason, the fitted efficiency model, and an upload of your own measurements to check
or refit."""

import json

import pandas as pd
import streamlit as st

from llmpara_core import calibration
from llmpara_core.calibration import fitting, measurements as validation
from llmpara_core.calibration import summary as vs
from llmpara_core.efficiency_table import read_table
from llmpara_core.errors import ConfigError
from llmpara_core.units import S_PER_US
from ui.format import escape_md, fmt_pct, sig
from ui.scenario import (chart_config, try_scenario, url_number, url_segmented, url_toggle)
from ui.tables import download_csv, download_json
from ui.validation_charts import scatter

METRICS = {"Decode": "decode_tok_s", "Prefill": "prefill_tok_s", "TTFT": "ttft_ms",
           "Batched decode": "throughput_tok_s", "Static batch": "output_tok_s"}
SOURCES = ("Shipped", "Uploaded", "Both")
FITS = ("Shipped fit", "Refit on this data")
COLOR_BY = {"Class": "class", "Framework": "profile"}
UPLOAD_COLUMNS = ", ".join(validation.REQUIRED + validation.OPTIONAL)


@st.cache_data(max_entries=8, show_spinner="Predicting the measurements…")
def run(upload: bytes | None, source: str, refit: bool, refit_frameworks: bool) -> dict:
    """Everything the page shows, as plain data (raises the core's ConfigError)."""
    rows, skipped = ([], []) if source == "Uploaded" else validation.read_shipped()
    if upload is not None and source != "Shipped":
        more, more_skipped = validation.read_measurements(upload)
        rows, skipped = rows + more, skipped + more_skipped
    mapped, skipped = validation.map_all(rows, skipped)
    if not mapped:
        raise ConfigError(f"no row could be mapped to a scenario ({len(skipped)} skipped"
                          + (f"; first reason: {skipped[0].reason}" if skipped else "") + ")")
    table = calibration.default_table()
    if refit:
        table = fitting.fit_table(mapped, table, frameworks=refit_frameworks)
    preds, bad = validation.predict_all(mapped, table)
    fitted = set(fitting.fitted_classes(table))
    summary = vs.summarize(preds, skipped + bad, worst=len(preds), fitted_classes=fitted)
    return {"predictions": [vs.prediction_row(p) for p in preds],
            "groups": [vs.group_row(g) for g in summary.groups],
            "worst": [vs.prediction_row(w.prediction) | {"why": "; ".join(w.reasons)}
                      for w in summary.worst],
            "skipped": [vs.skipped_row(s) for s in summary.skipped],
            "summary": vs.summary_dict(summary) | {"refit": refit},
            "classes": _class_rows(table), "frameworks": _framework_rows(table),
            "memory_types": _memory_rows(table),
            "table_toml": calibration.table_to_toml(table), "headline": summary.headline}


def _class_rows(table) -> list[dict]:
    return [{"class": c.value, "memory (of peak BW)": e.memory,
             "kernel overhead [µs]": e.kernel_overhead_s / S_PER_US,
             "kv_read (of achieved BW)": e.kv_read, "compute (of dense peak)": e.compute,
             "rows fitted": int(table.class_rows.get(c, 0)),
             "values": "fitted" if table.class_rows.get(c) else "provisional (no data)"}
            for c, e in table.classes.items()]


def _framework_rows(table) -> list[dict]:
    return [{"framework": name, "memory ×": p.memory_scale, "overhead ×": p.overhead_scale,
             "compute ×": p.compute_scale,
             "values replaced": ", ".join(f"{k} = {sig(v)}" for k, v in p.absolute.items()),
             "native kernels": p.native_kernels, "rows": p.rows, "note": p.note}
            for name, p in table.frameworks.items()]


def _memory_rows(table) -> list[dict]:
    return [{"memory technology": k, "memory (of peak BW)": v.get("memory"),
             "rows fitted": int(table.memory_type_rows.get(k, 0))}
            for k, v in sorted(table.memory_types.items())]


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


PCT = {c: st.column_config.NumberColumn(c, format="percent") for c in (
    "ideal |err|", "generic |err|", "estimated |err|", "estimated bias", "p90 |err|",
    "within ±15 %", "error", "ideal error")}

st.title("Validation")
st.caption("Every prediction against published measurements (presets/tables/measurements.csv "
           "and batched_measurements.csv, each row with its source). error = predicted / measured − 1. **Ideal** = peak "
           "rates; **estimated** = the fitted efficiency model with the row's framework "
           "profile; **generic** = the class values alone (what every page uses by default).")

with st.expander("Your measurements: upload a CSV, then choose it below and refit"):
    st.caption(f"Same columns as the shipped file; needs {', '.join(validation.REQUIRED)}; "
               f"optional: {', '.join(validation.OPTIONAL)}. Rows that cannot be mapped are "
               "listed with the reason.")
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
    st.stop()

head = data["headline"]
s = data["summary"]
m1, m2, m3, m4 = st.columns(4)
m1.metric("Decode (batch 1), estimated", fmt_pct(head.median_abs, 1), help="median |error| of "
          "estimated decode tokens/s over every mapped batch-1 row")
dec = next((g for g in data["groups"] if (g["metric"], g["kind"]) == ("decode_tok_s", "all")),
           None)
m2.metric("Decode, ideal roofline", fmt_pct(dec and dec["ideal_median_abs_error"], 1),
          help="the same rows at peak rates (no efficiency model)")
m3.metric("Rows predicted", f"{s['rows_predicted']}")
m4.metric("Rows skipped", f"{s['rows_skipped']}", help="listed with the reason below")

c1, c2, c3, c4 = st.columns([2, 2, 2, 2])
with c1:
    metric_label = url_segmented("Metric", list(METRICS), key="v_metric", default="Decode")
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
else:
    st.subheader(f"Predicted vs measured: {metric_label}")
    st.plotly_chart(scatter(sub, metric, COLOR_BY[color_label], show_ideal), theme="streamlit",
                    key="v_scatter", config=chart_config(f"validation-{metric}"))
    st.subheader("Error by hardware class and framework")
    st.dataframe(stats_table(data["groups"], metric), hide_index=True, column_config=PCT)

    st.subheader("Worst cases (estimated), with the likely reason")
    unit = "ms" if metric == "ttft_ms" else "tokens/s"
    lines = [f"**{escape_md(w['row_id'])}** · {escape_md(w['model'])} on "
             f"{escape_md(w['hardware'])} · {escape_md(w['framework'] or 'framework not stated')}"
             f" · {escape_md(w['quant'])}" + (f" · {w['devices']} devices" if w["devices"] > 1
                                              else "")
             + f": measured {sig(w['measured'])} {unit}, estimated {sig(w['estimated'])} "
             f"({w['error']:+.0%}) — {escape_md(w['why'])}"
             for w in data["worst"] if w["metric"] == metric][:int(n_worst)]
    st.markdown("\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1)))

st.subheader("Error by regime and stack")
st.caption("batch-1 = one sequence decoding; batched = decode at a running batch > 1 "
           "(ML.ENERGY vLLM rows: batch x per-sequence tokens/s vs measured throughput) or a "
           "static batch's output tokens/s (TensorRT-LLM); prefill = prompt tokens/s and TTFT. "
           "`llmpara validate --regime R --loo` gives the leave-one-device-out figures.")
st.dataframe(regime_table(data["groups"]), hide_index=True, column_config=PCT)

if data["skipped"]:
    with st.expander(f"Skipped rows ({len(data['skipped'])}): why each could not be mapped"):
        st.dataframe(pd.DataFrame(data["skipped"]), hide_index=True)

st.subheader("The efficiency model" + (" (refitted on this data)" if fit == FITS[1] else ""))
st.markdown(
    "Estimated time per operator in a pass with M tokens in flight = max(FLOPs ÷ (peak × "
    "**compute** × M ÷ (M + **gemm_half_tokens**)), (bytes + KV reads × (1/**kv_read** − 1)) ÷ "
    "(bandwidth × **memory**)) + kernels × **kernel overhead**, plus per pass **step "
    "overhead** + batch × **seq overhead**. **memory**: fraction of peak DRAM bandwidth a "
    "weight-streaming kernel reaches, per memory technology (HBM, GDDR, LPDDR; class when the "
    "preset does not say); **kernel overhead**: fixed cost per kernel; **kv_read**: attention "
    "reading the KV cache (llama.cpp batch 1 is slow; paged attention near weight speed); "
    "**compute** and **gemm_half_tokens**: the GEMM fraction of the dense peak and the tokens "
    "in flight at which half of it is reached (tile/wave quantisation), per stack — the "
    "reference stack's is cut on Hopper by a cited legacy-kernel factor; **step / seq "
    "overhead**: scheduler and per-request CPU work of a serving engine. Classes and memory "
    "technologies are fitted on llama.cpp rows; a stack profile scales or replaces them. "
    "Every key is documented in presets/tables/efficiency.toml.")
st.dataframe(pd.DataFrame(data["classes"]), hide_index=True)
if data["memory_types"]:
    st.dataframe(pd.DataFrame(data["memory_types"]), hide_index=True)
st.dataframe(pd.DataFrame(data["frameworks"]), hide_index=True)
cv = read_table().get("fit", {}).get("leave_one_device_out", {})
if cv and fit == FITS[0]:
    st.caption("Leave-one-device-out (each device predicted by a fit without it), median "
               "|error|: " + " · ".join(f"{escape_md(k)} {fmt_pct(v, 1)}"
                                        for k, v in cv.items()))
scn, _ = try_scenario()
if scn is not None:
    table = calibration.default_table()
    rows = [{"profile": name, **{k: v for k, v in zip(
        ("memory", "kernel overhead [µs]", "kv_read", "compute", "gemm_half_tokens",
         "step overhead [µs]", "seq overhead [µs]"),
        (e.memory, e.kernel_overhead_s / S_PER_US, e.kv_read, e.compute, e.gemm_half_tokens,
         e.step_overhead_s / S_PER_US, e.seq_overhead_s / S_PER_US))}}
        for name in ("generic",) + tuple(calibration.FRAMEWORKS)
        for e in [table.efficiency_for(scn.hardware, name)]]
    with st.expander(f"Efficiency of the sidebar's hardware ({scn.hardware.name}) per "
                     "framework (`llmpara analyze --framework NAME`)"):
        st.dataframe(pd.DataFrame(rows), hide_index=True)

d1, d2, d3 = st.columns(3)
with d1:
    download_csv(pred, "validation_predictions.csv", "Predictions CSV", key="v_dl_csv")
with d2:
    download_json(json.dumps(data["summary"] | {"predictions": data["predictions"]}, indent=2,
                             allow_nan=False, default=str).encode(),
                  "validation_summary.json", "Summary JSON", key="v_dl_json")
with d3:
    st.download_button("Efficiency table (TOML)", data["table_toml"].encode(),
                       "efficiency.toml", "application/toml", key="v_dl_toml",
                       icon=":material/download:", on_click="ignore")
