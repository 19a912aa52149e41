"""Argparse types that take their range from the one bounds table (``llmpara_core.limits``):
``--weight-bits 1e-300`` or ``--rate 1e-12`` is refused where it is parsed, with the same
range a hardware file, a link or a dashboard box would give."""

from __future__ import annotations

import argparse
import math

from ..errors import ConfigError
from ..limits import bound, check_bound, is_int_quantity


def _g(x: float) -> str:
    """1e8 -> '1e8', 100000 -> '100,000', 0.5 -> '0.5' (bounds in messages)."""
    if float(x).is_integer() and abs(x) < 1e15:
        n = int(x)
        k = len(str(abs(n))) - 1
        return f"1e{k}" if n >= 10**6 and n == 10**k else f"{n:,}"
    return f"{x:g}"


def bounded(name: str, what: str | None = None, lo_open: bool = False):
    """An argparse type: a number within ``limits.bound(name)`` (an integer for counting
    quantities); ``lo_open`` also refuses the lower bound itself."""
    b = bound(name)
    is_int = is_int_quantity(name)
    label = what or name.replace("_", " ")

    def parse(s: str):
        try:
            v = int(s) if is_int else float(s)
        except ValueError:
            kind = "an integer" if is_int else "a number"
            raise argparse.ArgumentTypeError(f"expected {kind} ({label}), got {s[:40]!r}") from None
        if not is_int and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{label} must be finite, got {s[:40]}")
        try:
            v = check_bound(name, v, label)
        except ConfigError:
            unit = f" {b.unit}" if b.unit else ""
            raise argparse.ArgumentTypeError(
                f"{label} must be {'an integer' if is_int else 'a number'} in "
                f"{'(' if lo_open else '['}{_g(b.lo)}, {_g(b.hi)}]{unit}, "
                f"got {s[:40]}") from None
        if lo_open and v == b.lo:
            raise argparse.ArgumentTypeError(f"{label} must be above {_g(b.lo)}, got {s[:40]}")
        return v
    parse.bound_name = name             # the hostile-input suite generates cases from it
    return parse
