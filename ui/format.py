"""Display formatting with explicit units — the one formatter of every page. Display rounds
once, here: three significant digits, thousands separators up to 999,999, and above that a
power of ten ("8.50 × 10⁹") or the next human unit (min, h, days, years; k/M/B/T for counts),
so no absurd workload prints a 12-digit number.

GB = 10^9 bytes, GiB = 2^30 bytes (both always spelled out); kB/MB/TB decimal as well.
"""

from __future__ import annotations

import re

import math

from llmpara_core.units import (BYTES_PER_GB, BYTES_PER_GIB, BYTES_PER_KB, BYTES_PER_MB,
                                BYTES_PER_TB, HOURS_PER_YEAR, S_PER_HOUR, S_PER_MS, S_PER_NS,
                                S_PER_US)

DASH = "—"
PLAIN_LIMIT = 1e6          # from here on, numbers are written as a power of ten
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
S_PER_MIN = 60.0
S_PER_DAY = 24 * S_PER_HOUR
S_PER_YEAR = HOURS_PER_YEAR * S_PER_HOUR


def _bad(v) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def fmt_sci(v: float, digits: int = 3) -> str:
    """``v`` as mantissa × power of ten with ``digits`` significant digits: '8.50 × 10⁹'."""
    if _bad(v):
        return DASH
    if v == 0:
        return "0"
    exp = int(math.floor(math.log10(abs(v))))
    mant = v / 10 ** exp
    if round(abs(mant), digits - 1) >= 10:
        exp, mant = exp + 1, mant / 10
    return f"{mant:.{digits - 1}f} × 10{str(exp).translate(_SUPERSCRIPT)}"


def sig(v: float, digits: int = 3) -> str:
    """``v`` with ``digits`` significant digits, no exponent for everyday magnitudes (below
    10⁶, with thousands separators; tiny non-zero values below 10⁻⁴ and values from 10⁶ on
    as a power of ten)."""
    if _bad(v):
        return DASH
    if v == 0:
        return "0"
    a = abs(v)
    if a >= PLAIN_LIMIT or a < 1e-4:
        return fmt_sci(v, digits)
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
    """Seconds in years, days, h, min, s, ms, µs or ns (beyond 10⁶ years: a power of ten)."""
    if _bad(s):
        return DASH
    a = abs(s)
    for unit, scale in (("years", S_PER_YEAR), ("days", S_PER_DAY), ("h", S_PER_HOUR),
                        ("min", S_PER_MIN)):
        if a >= 2 * scale if unit != "years" else a >= scale:
            return f"{sig(s / scale)} {unit}"
    if a >= 1:
        return f"{sig(s)} s"
    for unit, scale in (("ms", S_PER_MS), ("µs", S_PER_US)):
        if a >= scale:
            return f"{sig(s / scale)} {unit}"
    return f"{sig(s / S_PER_NS)} ns" if a else "0 s"


def fmt_rate(tokens_per_s: float | None) -> str:
    """Tokens per second: '86.3 tok/s', '12,345 tok/s', '1.23 M tok/s'."""
    if _bad(tokens_per_s):
        return DASH
    if abs(tokens_per_s) >= PLAIN_LIMIT:
        return f"{fmt_count(tokens_per_s)} tok/s"
    return f"{sig(tokens_per_s)} tok/s"


def fmt_count(n: float | None) -> str:
    """Large counts: 8.03 B (billion), 350 M, 12.3 k."""
    if _bad(n):
        return DASH
    a = abs(n)
    if a >= 1e15:
        return fmt_sci(n)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{sig(n / scale)} {unit}"
    return f"{n:,.0f}" if float(n).is_integer() else sig(n)


def fmt_flops(f: float | None) -> str:
    if _bad(f):
        return DASH
    a = abs(f)
    for unit, scale in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6),
                        ("kFLOP", 1e3)):
        if a >= scale:
            return f"{sig(f / scale)} {unit}"
    return f"{sig(f)} FLOP"


def fmt_flops_per_s(f: float | None) -> str:
    return DASH if _bad(f) else fmt_flops(f) + "/s"


def fmt_bandwidth(b: float | None) -> str:
    return DASH if _bad(b) else fmt_bytes(b) + "/s"


def fmt_pct(x: float | None, digits: int = 0) -> str:
    """A fraction as a percentage ('41 %', '12.5 %'); from 1000 % on as a multiple
    ('3.80 × 10⁶ ×'), so an absurd ratio never prints nine digits of percent."""
    if _bad(x):
        return DASH
    if abs(x) >= 10:
        return fmt_times(x)
    return f"{100 * x:.{digits}f} %"


def fmt_times(x: float | None) -> str:
    """A ratio as a multiple: '2.5×', '1,234×', '3.80 × 10⁶ ×'."""
    return DASH if _bad(x) else f"{sig(x)}×" if abs(x) < PLAIN_LIMIT else f"{sig(x)} ×"


def fmt_int(n: int | None) -> str:
    """An exact integer with thousands separators ('486,475'); from 10⁹ on abbreviated."""
    if n is None:
        return DASH
    return f"{n:,}" if abs(n) < 1e9 else fmt_count(n)


def fmt_tokens(n: int | None) -> str:
    """A token count: '8,192 tokens'."""
    return DASH if n is None else f"{fmt_int(n)} tokens"


def escape_md(text: str) -> str:
    """Text safe to embed in Streamlit markdown: every markdown/HTML special character is
    backslash-escaped, so user-controlled strings render literally (no links, no HTML)."""
    specials = "\\`*_{}[]()<>#+-.!|~$&\"'="
    return "".join("\\" + c if c in specials else c for c in str(text))


_URL = re.compile(r"(?:https?://|www\.)[^\s<>()\[\]]*[^\s<>()\[\].,;:!?'\"]")


def escape_md_keep_urls(text: str) -> str:
    """``escape_md`` for everything but web addresses, which stay as written: Streamlit turns a
    bare address into a link and shows the backslashes ``escape_md`` would put in it
    (``nvidia\\.github\\.io``)."""
    text = str(text)
    out, at = [], 0
    for m in _URL.finditer(text):
        out.append(escape_md(text[at:m.start()]))
        out.append(m.group(0))
        at = m.end()
    out.append(escape_md(text[at:]))
    return "".join(out)
