"""Tables of report rows: a display frame (human units, sortable numbers) and a CSV/JSON-ready
raw frame (SI units, full precision, from ``llmpara_core.export``)."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from llmpara_core.analysis import OpRow, Report
from llmpara_core.export import csv_safe, report_to_dict, row_to_dict
from llmpara_core.op_notes import operator_note, operator_params
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


def category_frame(report: Report) -> pd.DataFrame:
    """Totals per operator kind and phase in display units (GFLOP, MB = 10^6 B, µs), with the
    share of the phase's estimated time (``Phase.by_category``)."""
    return pd.DataFrame.from_records([
        {"phase": c.phase, "category": c.kind.value, "GFLOP": c.flops / FLOPS_PER_GFLOP,
         "total MB": c.memory_bytes / BYTES_PER_MB, "estimated µs": c.estimated_s / S_PER_US,
         "share": c.time_share}
        for phase in (report.prefill, report.decode) for c in phase.by_category()],
        columns=["phase", "category", "GFLOP", "total MB", "estimated µs", "share"])


def operators_frame(report: Report) -> pd.DataFrame:
    """One row per operator and phase, in display units (GFLOP, MB = 10^6 B, µs). Prefill is
    one pass; decode is the mean per decode step. Share = share of the phase's estimated time."""
    multi = has_multiple_groups(report)
    model, flash = report.model, report.workload.flash_attention
    recs = []
    for phase in (report.prefill, report.decode):
        for r in phase.rows:
            ai = r.arithmetic_intensity
            recs.append({
                "phase": r.phase, "operator": op_label(r, multi), "category": r.kind.value,
                "note": operator_note(model, r.name, r.kind, r.group, flash),
                "count": r.count,
                "params": operator_params(model, r.name, r.kind) * r.count,
                "GFLOP": r.flops / FLOPS_PER_GFLOP,
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
                "share of phase time": phase.time_share(r),
            })
    return pd.DataFrame.from_records(recs)


OPERATOR_COLUMNS = {
    "operator": st.column_config.TextColumn("operator", pinned=True),
    "note": st.column_config.TextColumn("note", help="the architecture feature this operator "
                                        "implements", width="medium"),
    "count": st.column_config.NumberColumn("count", help="executions per pass (layers)"),
    "params": st.column_config.NumberColumn("params", format="compact",
                                            help="weight elements held, all executions"),
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


BOUND_STYLE = {"memory": "background-color: rgba(228, 87, 86, 0.18)",
               "compute": "background-color: rgba(76, 120, 168, 0.22)"}


NOTE_PX_PER_CHAR, NOTE_PX_PAD, NOTE_PX_MAX = 7, 24, 560   # data-grid text at its 14 px font


# The operator table's columns, the answer first: at 1440 px the grid shows about ten columns,
# and the time and its share sat past the right edge behind the byte breakdown (issue 28,
# item 9). The note (full text in the notes expander) and the counts come last.
OPERATOR_ORDER = ("operator", "phase", "category", "estimated µs", "share of phase time",
                  "GFLOP", "total MB", "intensity FLOP/B", "weights MB", "KV read MB",
                  "KV write MB", "act. read MB", "act. write MB", "ideal µs", "count", "params",
                  "note")


def operator_order(columns) -> list[str]:
    """``columns`` in OPERATOR_ORDER (any other column after them)."""
    cols = list(columns)
    return [c for c in OPERATOR_ORDER if c in cols] + [c for c in cols if c not in OPERATOR_ORDER]


def note_width_px(notes) -> int:
    """A note column as wide as its longest note (within bounds), so no note is cut off at
    the grid's fixed "medium" width (display layout only)."""
    longest = max((len(str(n)) for n in notes), default=0)
    return int(min(max(longest * NOTE_PX_PER_CHAR + NOTE_PX_PAD, 160), NOTE_PX_MAX))


def operator_columns(kind_colors: dict[str, str], notes=()) -> dict:
    """OPERATOR_COLUMNS with the category as a coloured badge (the chart colours) and the note
    column as wide as ``notes`` need."""
    kinds = list(kind_colors)
    note = st.column_config.TextColumn("note", help=OPERATOR_COLUMNS["note"].get("help"),
                                       width=note_width_px(notes))
    return {**OPERATOR_COLUMNS, "note": note, "category": st.column_config.MultiselectColumn(
        "category", options=kinds, color=[kind_colors[k] for k in kinds], disabled=True)}


def operator_notes(view: pd.DataFrame) -> pd.DataFrame:
    """Each operator of ``view`` once with its note (the notes' full text, for a table that
    wraps)."""
    notes = view[["operator", "category", "note"]].drop_duplicates("operator")
    return notes[notes["note"].astype(str).str.strip() != ""].reset_index(drop=True)


def styled_operators(view: pd.DataFrame):
    """The operator table as shown: the category as a badge (a one-item list for
    ``operator_columns``), intensity and bound cells tinted by the bound (memory: red, compute:
    blue), so the memory-bound operators stand out."""
    shown = view.assign(category=view["category"].map(lambda c: [c]))

    def tint(row: pd.Series) -> list[str]:
        style = BOUND_STYLE.get(row["bound"], "")
        return [style if c in ("intensity FLOP/B", "bound") else "" for c in row.index]

    return shown.style.apply(tint, axis=1)


def raw_operators_frame(report: Report) -> pd.DataFrame:
    """Every operator row in SI units, as ``llmpara analyze --format csv`` writes them."""
    return pd.DataFrame.from_records([row_to_dict(r) for r in all_rows(report)])


CSV_ENCODING = "utf-8-sig"
"""UTF-8 with a byte-order mark: Excel then reads 'µs', '≤' and '·' in headers correctly
(without it, Excel assumes the local code page and garbles them); Python, pandas and
LibreOffice skip the mark."""


def csv_bytes(df: pd.DataFrame) -> bytes:
    """The CSV every download button serves: UTF-8 with BOM, no index, text cells made
    formula-safe (``llmpara_core.export.csv_safe``)."""
    safe = df.copy()
    for col in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[col]):
            safe[col] = safe[col].map(csv_safe)
    safe.columns = [csv_safe(str(c)) for c in safe.columns]
    return safe.to_csv(index=False).encode(CSV_ENCODING)


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


# ---- tables for people ----------------------------------------------------------------------
# One scale and one number format per quantity, wherever it is shown (issue 28, item 3): a
# table's column is (label with its unit, kind); the core's frame keeps its SI columns for the
# downloads and the tests, the table shows converted copies under the labels, and a missing
# value shows as "—".
KINDS = {
    "ms": (1e3, "%.1f"),            # seconds → ms (TTFT, TPOT, E2E)
    "s": (1.0, "%.2f"),
    "pct": (100.0, "%.1f"),         # fraction → %
    "tok_s": (1.0, "%.0f"),         # tokens/s
    "req_s": (1.0, "%.3g"),         # requests/s
    "usd": (1.0, "dollar"),         # $ ("$30,000.00"; "%.3g" read "3e+04")
    "j": (1.0, "%.3g"),             # J
    "w": (1.0, "%.0f"),             # W
    "gb": (1e-9, "%.1f"),           # bytes → GB (10⁹ B)
    "x": (1.0, "%.2f"),             # ratios (speedup ×)
    "int": (1.0, "%d"),
    "num": (1.0, "%.3g"),
}
MISSING = "—"


def people_table(df: pd.DataFrame, columns: dict[str, tuple[str, str]], **kwargs):
    """``df`` as a table for people: only ``columns`` (raw name → (label with unit, kind)), in
    that order; numbers converted and formatted by their kind (``KINDS``; "text" and "bool"
    as they are), "—" for a missing value. Extra keyword arguments go to ``st.dataframe``."""
    view = df.copy()
    order, config = [], {}
    for col, (label, kind) in columns.items():
        if col not in view.columns:
            continue
        if kind == "text":
            config[col] = st.column_config.TextColumn(label)
            order.append(col)
        elif kind == "bool":
            config[col] = st.column_config.CheckboxColumn(label)
            order.append(col)
        else:
            scale, fmt = KINDS[kind]
            shown = f"{col} ({kind})"
            view[shown] = pd.to_numeric(view[col], errors="coerce").astype(float) * scale
            config[shown] = st.column_config.NumberColumn(label, format=fmt)
            order.append(shown)
    kwargs.setdefault("hide_index", True)
    return st.dataframe(view, column_order=order, column_config=config, placeholder=MISSING,
                        **kwargs)
