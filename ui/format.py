"""Display formatting with explicit units. Display rounds once, here.

GB = 10^9 bytes, GiB = 2^30 bytes (both always spelled out); kB/MB/TB decimal as well.
"""

from __future__ import annotations

import math

from llmpara_core.units import (BYTES_PER_GB, BYTES_PER_GIB, BYTES_PER_KB, BYTES_PER_MB,
                                BYTES_PER_TB, S_PER_MS, S_PER_NS, S_PER_US)

DASH = "—"


def _bad(v) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def sig(v: float, digits: int = 3) -> str:
    """``v`` with ``digits`` significant digits, no exponent for everyday magnitudes."""
    if _bad(v):
        return DASH
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10 ** digits:
        return f"{v:,.0f}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(a))))
    return f"{v:.{decimals}f}"


def fmt_bytes(b: float | None) -> str:
    """Decimal bytes: B, kB, MB, GB, TB (1 GB = 10^9 B)."""
    if _bad(b):
        return DASH
    a = abs(b)
    for unit, scale in (("TB", BYTES_PER_TB), ("GB", BYTES_PER_GB), ("MB", BYTES_PER_MB),
                        ("kB", BYTES_PER_KB)):
        if a >= scale:
            return f"{sig(b / scale)} {unit}"
    return f"{sig(b)} B"


def fmt_gb(b: float | None) -> str:
    return DASH if _bad(b) else f"{sig(b / BYTES_PER_GB)} GB"


def fmt_gib(b: float | None) -> str:
    return DASH if _bad(b) else f"{sig(b / BYTES_PER_GIB)} GiB"


def fmt_time(s: float | None) -> str:
    """Seconds in s, ms, µs or ns."""
    if _bad(s):
        return DASH
    a = abs(s)
    if a >= 1:
        return f"{sig(s)} s"
    for unit, scale in (("ms", S_PER_MS), ("µs", S_PER_US)):
        if a >= scale:
            return f"{sig(s / scale)} {unit}"
    return f"{sig(s / S_PER_NS)} ns" if a else "0 s"


def fmt_rate(tokens_per_s: float | None) -> str:
    return DASH if _bad(tokens_per_s) else f"{sig(tokens_per_s)} tok/s"


def fmt_count(n: float | None) -> str:
    """Large counts: 8.03 B (billion), 350 M, 12.3 k."""
    if _bad(n):
        return DASH
    a = abs(n)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{sig(n / scale)} {unit}"
    return f"{n:,.0f}"


def fmt_flops(f: float | None) -> str:
    if _bad(f):
        return DASH
    a = abs(f)
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6),
                        ("kFLOP", 1e3)):
        if a >= scale:
            return f"{sig(f / scale)} {unit}"
    return f"{sig(f)} FLOP"


def fmt_flops_per_s(f: float | None) -> str:
    return DASH if _bad(f) else fmt_flops(f) + "/s"


def fmt_bandwidth(b: float | None) -> str:
    return DASH if _bad(b) else fmt_bytes(b) + "/s"


def fmt_pct(x: float | None, digits: int = 0) -> str:
    return DASH if _bad(x) else f"{100 * x:.{digits}f} %"


def fmt_int(n: int | None) -> str:
    return DASH if n is None else f"{n:,}"


def escape_md(text: str) -> str:
    """Text safe to embed in Streamlit markdown: every markdown/HTML special character is
    backslash-escaped, so user-controlled strings render literally (no links, no HTML)."""
    specials = "\\`*_{}[]()<>#+-.!|~$&\"'="
    return "".join("\\" + c if c in specials else c for c in str(text))
