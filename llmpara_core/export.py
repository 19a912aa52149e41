"""Plain-data views of inputs and reports (JSON-ready dicts in SI units), shared by the CLI
and the app's downloads. No rounding or formatting here."""

from __future__ import annotations

import dataclasses
import math
from enum import Enum

from .analysis import OpRow, Phase, Report, Timing

SCHEMA_VERSION = 1


def _plain(v):
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


# A text cell starting with one of these is run as a formula by spreadsheets (OWASP "CSV
# injection"); every CSV writer passes its cells through csv_safe().
_FORMULA_START = ("=", "+", "-", "@", "\t", "\n")


def csv_safe(value):
    """``value`` for a CSV cell: text a spreadsheet would run as a formula gets a leading ``'``
    (numbers, and text that reads as a number such as "-3.5", are left alone). Carriage returns
    become "\n" (writers with "\n" line ends quote "\n" but not a lone "\r")."""
    if not isinstance(value, str):
        return value
    value = value.replace("\r\n", "\n").replace("\r", "\n")
    if not value.startswith(_FORMULA_START):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def row_to_dict(r: OpRow) -> dict:
    d = _plain(r)
    d["memory_bytes"] = r.memory_bytes
    d["arithmetic_intensity_flops_per_byte"] = r.arithmetic_intensity
    d["bound"] = r.bound
    return d


def timing_to_dict(t: Timing) -> dict:
    return _plain(t)


def phase_summary(p: Phase) -> dict:
    return {"flops": p.flops, "memory_bytes": p.memory_bytes, "ideal_s": p.ideal_s,
            "estimated_s": p.estimated_s,
            "arithmetic_intensity_flops_per_byte": p.arithmetic_intensity}


def scenario_to_dict(report: Report) -> dict:
    """The inputs of a report, complete enough to reproduce it."""
    return {
        "model": _plain(dataclasses.replace(report.model, warnings=())),
        "hardware": _plain(report.hardware),
        "precision": _plain(report.precision),
        "workload": _plain(report.workload),
    }


def report_to_dict(report: Report, include_operators: bool = True) -> dict:
    """The CLI's ``analyze --format json`` object: estimated figures at the top level, the same
    figures at peak rates under ``ideal``. SI units (s, bytes, FLOPs, tokens/s)."""
    est, pc, mem = report.estimated, report.params, report.memory
    out = {
        "schema_version": SCHEMA_VERSION,
        "model": report.model.name,
        "hardware": report.hardware.name,
        "params_total": pc.total,
        "params_active": pc.active,
        "weight_bytes": report.weight_bytes,
        "kv_cache_bytes_per_token": report.kv_cache_bytes_per_token,
        "kv_cache_bytes": mem.kv_cache_bytes,
        "activation_peak_bytes": mem.activation_bytes,
        "memory_total_bytes": mem.total_bytes,
        "memory_capacity_bytes": mem.capacity_bytes,
        "fits_in_memory": mem.fits,
        "max_batch": report.max_batch,
        "max_context": report.max_context,
        "max_context_memory": (report.context_limit.memory_tokens if report.context_limit
                               else report.max_context),
        "max_context_limit": (report.context_limit.binding if report.context_limit
                              else "memory"),
        **timing_to_dict(est),
        "ideal": timing_to_dict(report.ideal),
        "decode_steps": report.decode_steps,
        "compute_dtype": report.precision.compute_dtype.value,
        "compute_dtype_used": report.dtype_used.value,
        "peak_flops_per_s": report.peak_flops_per_s,
        "memory_bandwidth_bytes_per_s": report.bandwidth_bytes_per_s,
        "efficiency": _plain(report.efficiency),
        "prefill": phase_summary(report.prefill),
        "decode_per_step": phase_summary(report.decode),
        "notes": list(report.notes),
        "scenario": scenario_to_dict(report),
    }
    if include_operators:
        out["operators"] = [row_to_dict(r) for r in report.prefill.rows + report.decode.rows]
    return out
