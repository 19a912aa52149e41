"""The package's own exceptions. Faces (CLI, pages) catch these and show the message."""

import difflib


class LLMParaError(Exception):
    """Base class for every error raised on purpose by llmpara_core."""


class ConfigError(LLMParaError, ValueError):
    """An input (dataclass field, config file, preset, flag) is invalid. The message names the
    field and the value."""


class PresetNotFoundError(ConfigError):
    """A preset name or slug does not exist; the message lists close matches."""


class InfeasibleError(LLMParaError):
    """A scenario cannot run (e.g. the model does not fit anywhere); searches skip such points."""


def require_int(field: str, value, lo: int = 1, hi: int = 10**9) -> int:
    """Validate that ``value`` is an integer (not bool) in [lo, hi]; return it."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigError(f"{field} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(f"{field} must be in [{lo}, {hi}], got {value}")
    return value


def require_float(field: str, value, lo: float | None = None, hi: float | None = None,
                  lo_open: bool = False, allow_none: bool = False):
    """Validate a finite real number in [lo, hi] (or (lo, hi] with lo_open); return it as float."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{field} must be a number, got {value!r}")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(f"{field} must be finite, got {value}")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        bound = f"> {lo}" if lo_open else f">= {lo}"
        raise ConfigError(f"{field} must be {bound}, got {value}")
    if hi is not None and value > hi:
        raise ConfigError(f"{field} must be <= {hi}, got {value}")
    return value


def did_you_mean(name, options, n: int = 3, cutoff: float = 0.5,
                 ignore_case: bool = False) -> str:
    """"; did you mean 'a', 'b'?" naming the options closest to ``name`` ("" if none is).

    With ``ignore_case`` the comparison is case-insensitive and the options keep their case."""
    if ignore_case:
        by_lower = {str(o).lower(): str(o) for o in options}
        close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=cutoff)
        close = [by_lower[c] for c in close]
    else:
        close = difflib.get_close_matches(str(name), [str(o) for o in options], n=n,
                                          cutoff=cutoff)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
