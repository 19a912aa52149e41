"""The Serving page's memory line: the core's accounting (``serving.kv_memory``) of the fullest
device of a replica, in one sentence a user can check — capacity (GB and GiB), weights,
activations, the stack's runtime reserve (in GB,
its GiB beside it, so the line adds up in one unit) and the KV-cache budget with the fraction's reading —
so it is plain why a model does or does not fit. Formatting only; every number is the core's."""

from __future__ import annotations

from llmpara_core.serving import KvMemory
from llmpara_core.units import BYTES_PER_GIB

from .format import escape_md, fmt_bytes, fmt_gb, fmt_gib, fmt_int

MINUS = " − "


def _gb(b: float) -> str:
    """GB with a real minus sign for a shortfall."""
    return fmt_gb(b).replace("-", "−", 1)


def memory_line(m: KvMemory, plan_label: str) -> str:
    """One line of markdown: where the memory of one device of ``plan_label`` goes."""
    head = f"Memory per device ({plan_label}"
    head += f", stage {m.stage + 1}): " if m.stage else "): "
    cap = f"capacity {fmt_gb(m.capacity_bytes)} ({fmt_gib(m.capacity_bytes)})"
    rest = (f"weights {fmt_gb(m.weight_bytes)}{MINUS}activations "
            f"{fmt_gb(m.activation_bytes)}{MINUS}reserve "
            f"{fmt_gb(m.runtime_reserve_bytes)} "
            f"({m.runtime_reserve_bytes / BYTES_PER_GIB:.4g} GiB)")
    f = f"{m.kv_memory_fraction:.4g}"
    if m.capacity_override:
        kv = f"KV cache set to {fmt_int(m.kv_capacity_tokens)} tokens"
        text = f"{cap}{MINUS}{rest}; {kv}"
        return escape_md(head + text)
    if m.kv_fraction_of_total:       # vLLM: the fraction of the total, everything inside it
        text = (f"{f} × {cap}{MINUS}{rest} = KV budget {_gb(m.kv_budget_bytes)} "
                f"(the fraction is of the total, as vLLM reads it)")
    else:
        left = m.kv_budget_bytes / m.kv_memory_fraction
        text = (f"{cap}{MINUS}{rest} = {_gb(left)} left × {f} = KV budget "
                f"{_gb(m.kv_budget_bytes)}")
    if m.fits:
        verdict = (f" → {fmt_int(m.kv_capacity_tokens)} tokens of "
                   f"{fmt_bytes(m.kv_bytes_per_token)}")
        return escape_md(head + text + verdict)
    return escape_md(head + text) + " → **" + escape_md(
        "nothing left for the KV cache: this deployment does not fit") + "**"
