"""One-line diagnoses of a report (the shares come from the core's ``Phase``)."""

from __future__ import annotations

from llmpara_core.analysis import Phase, Report

from .format import escape_md, fmt_bytes, fmt_pct, fmt_times


def phase_line(phase: Phase) -> str:
    """E.g. 'decode is memory-bound: 98 % of its time is in memory-bound operators — 91 %
    weight streaming, 6 % KV cache traffic'."""
    if not phase.rows or phase.estimated_s <= 0:
        return f"{phase.name}: nothing to run"
    mem = phase.memory_bound_share()
    if mem >= 0.5:
        w, kv = phase.memory_traffic_shares()
        return (f"{phase.name} is memory-bound: {fmt_pct(mem)} of its time is in memory-bound "
                f"operators — {fmt_pct(w)} weight streaming, {fmt_pct(kv)} KV cache traffic")
    top = max(phase.rows, key=lambda r: r.estimated_s)
    return (f"{phase.name} is compute-bound: {fmt_pct(1 - mem)} of its time is in compute-bound "
            f"operators (largest: {top.name}, {fmt_pct(phase.time_share(top))})")


def diagnosis(report: Report) -> list[str]:
    lines = []
    if report.workload.prompt_len:
        lines.append(phase_line(report.prefill))
    if report.decode_steps:
        lines.append(phase_line(report.decode))
    return lines


IF_IT_FIT = "if it fit"


def fit_warning(memory, device: str, speeds: bool = True) -> str | None:
    """The warning of a scenario that does not fit (None if it fits): how much it needs, and
    that the speeds shown are what it would reach if it fit. ``memory`` is a
    ``MemoryFootprint`` (or a sharded stage's)."""
    if memory.fits:
        return None
    need, cap = memory.total_bytes, memory.capacity_bytes
    ratio = fmt_times(memory.utilisation) if memory.utilisation >= 10 else fmt_pct(
        memory.utilisation)
    text = (f"Does not fit: needs {fmt_bytes(need)} but {escape_md(device)} has "
            f"{fmt_bytes(cap)} ({ratio} of its memory).")
    if speeds:
        text += f" The speeds below are what it would reach *{IF_IT_FIT}*."
    return text + " Use fewer bits, a smaller batch or context, or more devices (Sharding)."
