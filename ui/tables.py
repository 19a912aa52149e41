"""Tables of report rows: a display frame (human units, sortable numbers) and a CSV/JSON-ready
raw frame (SI units, full precision, from ``llmpara_core.export``)."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from llmpara_core.analysis import OpRow, Report
from llmpara_core.export import csv_safe, report_to_dict, row_to_dict
from llmpara_core.units import BYTES_PER_MB, FLOPS_PER_GFLOP, S_PER_US

PHASES = ("prefill", "decode")


def op_label(row: OpRow, multi_group: bool) -> str:
    """Operator name, with its layer group when the model has several (Gemma local/global)."""
    if multi_group and row.group and row.group != "model":
        return f"{row.name} [{row.group}]"
    return row.name


def has_multiple_groups(report: Report) -> bool:
    groups = {r.group for r in report.prefill.rows + report.decode.rows if r.group != "model"}
    return len(groups) > 1


def all_rows(report: Report) -> tuple[OpRow, ...]:
    return report.prefill.rows + report.decode.rows


def operators_frame(report: Report) -> pd.DataFrame:
    """One row per operator and phase, in display units (GFLOP, MB = 10^6 B, µs). Prefill is
    one pass; decode is the mean per decode step. Share = share of the phase's estimated time."""
    multi = has_multiple_groups(report)
    recs = []
    for phase in (report.prefill, report.decode):
        total = phase.estimated_s
        for r in phase.rows:
            ai = r.arithmetic_intensity
            recs.append({
                "phase": r.phase, "operator": op_label(r, multi), "category": r.kind.value,
                "count": r.count, "GFLOP": r.flops / FLOPS_PER_GFLOP,
                "weights MB": r.weight_bytes / BYTES_PER_MB,
                "act. read MB": r.act_read_bytes / BYTES_PER_MB,
                "act. write MB": r.act_write_bytes / BYTES_PER_MB,
                "KV read MB": r.kv_read_bytes / BYTES_PER_MB,
                "KV write MB": r.kv_write_bytes / BYTES_PER_MB,
                "total MB": r.memory_bytes / BYTES_PER_MB,
                "intensity FLOP/B": ai,
                "bound": r.bound,
                "ideal µs": r.ideal_s / S_PER_US,
                "estimated µs": r.estimated_s / S_PER_US,
                "share of phase time": (r.estimated_s / total) if total else None,
            })
    return pd.DataFrame.from_records(recs)


OPERATOR_COLUMNS = {
    "count": st.column_config.NumberColumn("count", help="executions per pass (layers)"),
    "GFLOP": st.column_config.NumberColumn("GFLOP", format="%.4g", help="10^9 FLOPs"),
    "weights MB": st.column_config.NumberColumn(format="%.4g", help="MB = 10^6 bytes"),
    "act. read MB": st.column_config.NumberColumn(format="%.4g"),
    "act. write MB": st.column_config.NumberColumn(format="%.4g"),
    "KV read MB": st.column_config.NumberColumn(format="%.4g"),
    "KV write MB": st.column_config.NumberColumn(format="%.4g"),
    "total MB": st.column_config.NumberColumn(format="%.4g", help="MB = 10^6 bytes"),
    "intensity FLOP/B": st.column_config.NumberColumn(format="%.3g"),
    "ideal µs": st.column_config.NumberColumn(format="%.4g", help="at peak rates"),
    "estimated µs": st.column_config.NumberColumn(format="%.4g",
                                                  help="derated by the efficiency factors"),
    "share of phase time": st.column_config.ProgressColumn(
        format="percent", min_value=0.0, max_value=1.0, help="of the phase's estimated time"),
}


def raw_operators_frame(report: Report) -> pd.DataFrame:
    """Every operator row in SI units, as ``llmpara analyze --format csv`` writes them."""
    return pd.DataFrame.from_records([row_to_dict(r) for r in all_rows(report)])


def csv_bytes(df: pd.DataFrame) -> bytes:
    """The frame as CSV, with text cells made formula-safe (``llmpara_core.export.csv_safe``)."""
    safe = df.copy()
    for col in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[col]):
            safe[col] = safe[col].map(csv_safe)
    safe.columns = [csv_safe(str(c)) for c in safe.columns]
    return safe.to_csv(index=False).encode("utf-8")


def report_json(report: Report, include_operators: bool = True) -> bytes:
    """The report as the CLI's ``analyze --format json`` object (includes the scenario, so the
    file reproduces the numbers)."""
    return json.dumps(report_to_dict(report, include_operators), indent=2, allow_nan=False,
                      default=str).encode("utf-8")


def download_csv(df: pd.DataFrame, file_name: str, label: str = "Download CSV",
                 key: str | None = None) -> None:
    st.download_button(label, csv_bytes(df), file_name, "text/csv", key=key,
                       icon=":material/download:", on_click="ignore")


def download_json(data: bytes, file_name: str, label: str = "Download JSON",
                  key: str | None = None) -> None:
    st.download_button(label, data, file_name, "application/json", key=key,
                       icon=":material/data_object:", on_click="ignore")
