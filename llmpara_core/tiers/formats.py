"""Memory tiers in the units people type (GB, GB/s, pJ/B, ns): the rows of an editable tier
table, a compact one-line form for links, and pin lists written as text.

Like the preset loader (:mod:`~llmpara_core.hardware_io`), this is an edge of the core: it
converts to SI once and validates everything, so a hostile table cell or link value gives a
:class:`~llmpara_core.errors.ConfigError` naming the row and the field, never a wrong number.

Compact form (one tier per ``;``-separated group, fields in :data:`TIER_COLUMNS` order, an
empty field = unknown)::

    SRAM:0.5:8000:1:1;DRAM:16:512:3.7:100;Flash:256:14:25:100000

GB = 10^9 bytes.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Mapping

from ..errors import ConfigError
from ..hardware import MemoryTier
from ..units import BYTES_PER_GB, J_PER_PJ, S_PER_NS

TIER_COLUMNS = ("name", "capacity_GB", "bandwidth_GBps", "energy_pJ_per_byte", "latency_ns")
MAX_TIERS = 8
MAX_NAME_CHARS = 24
MAX_TEXT_CHARS = 1000
MAX_PINS = 32
# Names appear in links and pin lists, so no ':', ';', '=' or ','.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.+/()-]*")

# (column, SI factor, upper bound in the column's unit, required). Bounds reject typos and
# hostile values: 1 PB, 100 PB/s, 1 uJ per byte, 10 s per access.
_NUMERIC = (
    ("capacity_GB", BYTES_PER_GB, 1e6, True),
    ("bandwidth_GBps", BYTES_PER_GB, 1e8, True),
    ("energy_pJ_per_byte", J_PER_PJ, 1e6, False),
    ("latency_ns", S_PER_NS, 1e10, False),
)


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (
        isinstance(v, str) and not v.strip())


def _number(where: str, col: str, v, hi: float, required: bool) -> float | None:
    if _blank(v):
        if required:
            raise ConfigError(f"{where}: {col} is empty")
        return None
    if isinstance(v, bool):
        raise ConfigError(f"{where}: {col} must be a number, got {v!r}")
    try:
        x = float(v.strip() if isinstance(v, str) else v)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {col} must be a number, got {str(v)[:40]!r}") from None
    if not math.isfinite(x):
        raise ConfigError(f"{where}: {col} must be finite, got {x}")
    if required and x <= 0:
        raise ConfigError(f"{where}: {col} must be > 0, got {x:g}")
    if x < 0:
        raise ConfigError(f"{where}: {col} must be >= 0, got {x:g}")
    if x > hi:
        raise ConfigError(f"{where}: {col} must be <= {hi:g}, got {x:g}")
    return x


def _name(where: str, v) -> str:
    if _blank(v):
        raise ConfigError(f"{where}: name is empty")
    name = str(v).strip()
    if len(name) > MAX_NAME_CHARS or not _NAME_RE.fullmatch(name):
        raise ConfigError(f"{where}: name {name[:40]!r} must be 1-{MAX_NAME_CHARS} letters, "
                          "digits, spaces or _ . + / ( ) - (starting with a letter or digit)")
    return name


def _tier(where: str, row: Mapping) -> MemoryTier:
    name = _name(where, row.get("name"))
    where = f"{where} ({name})"
    vals = [_number(where, col, row.get(col), hi, req) for col, _, hi, req in _NUMERIC]
    si = [None if v is None else v * f for v, (_, f, _, _) in zip(vals, _NUMERIC)]
    return MemoryTier(name, si[0], si[1], si[2], si[3])


def tiers_from_table(rows: Iterable[Mapping]) -> tuple[MemoryTier, ...]:
    """Tiers (fastest first, as listed) from table rows keyed by :data:`TIER_COLUMNS`
    (display units). Entirely blank rows (a freshly added table row) are skipped. Raises
    ConfigError naming the row and field: empty or non-numeric cells, capacity or bandwidth
    <= 0, negative energy or latency, out-of-range values, bad or repeated names, no tier or
    more than :data:`MAX_TIERS`."""
    out: list[MemoryTier] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise ConfigError(f"tier row {i}: expected a table row, got {type(row).__name__}")
        if all(_blank(row.get(c)) for c in TIER_COLUMNS):
            continue
        tier = _tier(f"tier row {i}", row)
        key = tier.name.lower()
        if key in seen:
            raise ConfigError(f"tier row {i}: name {tier.name!r} repeats row {seen[key]}")
        seen[key] = i
        out.append(tier)
        if len(out) > MAX_TIERS:
            raise ConfigError(f"at most {MAX_TIERS} memory tiers, got more")
    if not out:
        raise ConfigError("at least one memory tier is needed (name, capacity, bandwidth)")
    return tuple(out)


def _fmt(v: float | None, factor: float) -> str:
    return "" if v is None else format(v / factor, ".12g")


def tier_table(tiers: Iterable[MemoryTier]) -> list[dict]:
    """Rows in display units (None where a tier does not say), the inverse of
    :func:`tiers_from_table` up to float rounding at 12 significant digits."""
    rows = []
    for t in tiers:
        si = (t.capacity_bytes, t.bandwidth_bytes_per_s, t.energy_j_per_byte, t.latency_s)
        row = {"name": t.name}
        for (col, f, _, _), v in zip(_NUMERIC, si):
            row[col] = None if v is None else float(_fmt(v, f))
        rows.append(row)
    return rows


def encode_tiers(tiers: Iterable[MemoryTier]) -> str:
    """The compact one-line form (see the module docstring)."""
    parts = []
    for t in tiers:
        si = (t.capacity_bytes, t.bandwidth_bytes_per_s, t.energy_j_per_byte, t.latency_s)
        parts.append(":".join([t.name, *(_fmt(v, f) for (_, f, _, _), v in zip(_NUMERIC, si))]))
    return ";".join(parts)


def decode_tiers(text: str) -> tuple[MemoryTier, ...]:
    """Tiers from the compact form; ConfigError on anything malformed."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("the tier list is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise ConfigError(f"the tier list is longer than {MAX_TEXT_CHARS} characters")
    rows = []
    for i, group in enumerate(text.strip().strip(";").split(";"), start=1):
        fields = group.split(":")
        if len(fields) != len(TIER_COLUMNS):
            raise ConfigError(f"tier {i} {group[:40]!r}: expected {len(TIER_COLUMNS)} fields "
                              f"separated by ':' ({':'.join(TIER_COLUMNS)})")
        rows.append(dict(zip(TIER_COLUMNS, fields)))
    return tiers_from_table(rows)


def parse_pins(text: str) -> tuple[tuple[str, str], ...]:
    """``SELECTOR=TIER`` pairs separated by ``;`` or new lines (e.g. ``embedding=Flash;
    attention@layers:0-7=SRAM``). Selectors and tier names are checked by the placement."""
    if text is None or not str(text).strip():
        return ()
    text = str(text)
    if len(text) > MAX_TEXT_CHARS:
        raise ConfigError(f"the pin list is longer than {MAX_TEXT_CHARS} characters")
    pins = []
    for part in re.split(r"[;\n]", text):
        if not part.strip():
            continue
        sel, sep, tier = part.rpartition("=")
        if not sep or not sel.strip() or not tier.strip():
            raise ConfigError(f"pin {part.strip()[:40]!r}: expected SELECTOR=TIER, e.g. "
                              "embedding=Flash")
        pins.append((sel.strip(), tier.strip()))
    if len(pins) > MAX_PINS:
        raise ConfigError(f"at most {MAX_PINS} pins, got {len(pins)}")
    return tuple(pins)


def format_pins(pins: Iterable[tuple[str, str]]) -> str:
    return "; ".join(f"{s}={t}" for s, t in pins)
