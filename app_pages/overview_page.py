"""Overview: summary cards of the sidebar's scenario, each time estimated and ideal."""

import pandas as pd
import streamlit as st

from llmpara_core.export import report_to_dict
from ui.page import page_report
from ui.diagnosis import diagnosis
from ui.format import (escape_md, fmt_bytes, fmt_count, fmt_gb, fmt_gib, fmt_int, fmt_pct,
                       fmt_rate, fmt_time)
from ui.tables import download_csv, download_json, report_json

scn, rep = page_report("Overview")

summary = report_to_dict(rep, include_operators=False)
st.session_state["overview_numbers"] = summary   # read by tests (== CLI analyze --format json)

for line in diagnosis(rep):
    st.info(escape_md(line[0].upper() + line[1:]) + ".", icon=":material/insights:")

est, ideal, mem, pc = rep.estimated, rep.ideal, rep.memory, rep.params
w = rep.workload


def card(title: str, metrics: list[tuple[str, str, str | None]], columns: int) -> None:
    with st.container(border=True):
        st.markdown(f"**{title}**")
        cols = st.columns(columns)
        for i, (label, value, help_text) in enumerate(metrics):
            cols[i % columns].metric(label, value, help=help_text)


card("Model", [
    ("Parameters (total)", fmt_count(pc.total), f"{pc.total:,} parameters"),
    ("Parameters (active per token)", fmt_count(pc.active),
     f"{pc.active:,} (MoE: routed experts a token does not use are excluded)"),
    ("Weights (GB)", fmt_gb(rep.weight_bytes), "GB = 10⁹ bytes, at the weight bits"),
    ("Weights (GiB)", fmt_gib(rep.weight_bytes), "GiB = 2³⁰ bytes"),
    ("KV cache per token", fmt_bytes(rep.kv_cache_bytes_per_token),
     "one sequence, all layers; kB = 10³ bytes"),
    ("KV cache at full context", fmt_bytes(mem.kv_cache_bytes),
     f"batch {w.batch} × {w.max_context:,} tokens (prompt + generated); GB = 10⁹ bytes"),
], 3)

card("Latency — estimated (derated by efficiency factors) and ideal (peak rates)", [
    ("TTFT · estimated", fmt_time(est.ttft_s), "time to first token (prefill)"),
    ("TPOT · estimated", fmt_time(est.tpot_s), "time per output token, mean over the decode"),
    ("End-to-end · estimated", fmt_time(est.e2e_latency_s), "prefill + all decode steps"),
    ("TTFT · ideal", fmt_time(ideal.ttft_s), "at peak compute and bandwidth"),
    ("TPOT · ideal", fmt_time(ideal.tpot_s), "at peak compute and bandwidth"),
    ("End-to-end · ideal", fmt_time(ideal.e2e_latency_s), "at peak compute and bandwidth"),
], 3)

card("Throughput", [
    ("Decode tok/s per sequence · estimated", fmt_rate(est.decode_tokens_per_s), "1 / TPOT"),
    ("Decode tok/s aggregate · estimated", fmt_rate(est.throughput_tokens_per_s),
     f"batch {w.batch} / TPOT"),
    ("Prefill tok/s · estimated", fmt_rate(est.prefill_tokens_per_s),
     "batch × prompt / TTFT"),
    ("Decode tok/s per sequence · ideal", fmt_rate(ideal.decode_tokens_per_s), "1 / TPOT"),
    ("Decode tok/s aggregate · ideal", fmt_rate(ideal.throughput_tokens_per_s),
     f"batch {w.batch} / TPOT"),
    ("Prefill tok/s · ideal", fmt_rate(ideal.prefill_tokens_per_s), "batch × prompt / TTFT"),
], 3)

card("Memory fit", [
    ("Fits in memory", "yes" if mem.fits else "no",
     "weights + KV cache at full context + peak activations ≤ capacity"),
    ("Needed / capacity", f"{fmt_gb(mem.total_bytes)} / {fmt_gb(mem.capacity_bytes)}",
     f"{fmt_pct(mem.utilisation, 1)} of capacity; GB = 10⁹ bytes"),
    ("Largest batch that fits", fmt_int(rep.max_batch), f"at {w.max_context:,} tokens each"),
    ("Largest context that fits", fmt_int(rep.max_context), f"tokens per sequence at batch {w.batch}"),
], 4)

for note in rep.notes:
    st.caption("Note: " + escape_md(note))

flat = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
flat.update({f"ideal.{k}": v for k, v in summary["ideal"].items()})
with st.container(horizontal=True):
    download_json(report_json(rep), "llmpara-report.json", "Report JSON (with scenario)",
                  key="dl_overview_json")
    download_csv(pd.DataFrame({"quantity": list(flat), "value": list(flat.values())}),
                 "llmpara-summary.csv", "Summary CSV", key="dl_overview_csv")
