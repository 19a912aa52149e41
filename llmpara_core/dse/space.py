"""The search space of the design-space explorer, as data: axes (values or ranges, log or
linear), the five presets of the reference tool, user files, and sampling (full grid, random,
Latin hypercube) with a seed.

Axis keys and display units (converted to SI only in ``llmpara_core.dse``):

    peak [TFLOP/s]  dense peak of the scenario's compute data type; ``peak_fp16``,
                    ``peak_fp8`` ... name the data type explicitly
    bw [GB/s], cap [GB] (GB = 1e9 bytes), sram [MB], tdp [W], price [USD]

A grid evaluates every value of every axis (the Cartesian product, never a stride through it:
the reference's stride skipped whole values, reference-tool §10 item 4). Random and Latin-
hypercube sampling draw each axis in [min, max] of its values, log-uniformly on a log axis.
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import ConfigError, did_you_mean, require_int
from ..limits import bound
from ..units import BYTES_PER_GB, FLOPS_PER_TFLOP
from ..precision import DType

METHODS = ("grid", "random", "lhs")
SCALES = ("log", "linear")
MAX_GRID_POINTS = 5_000_000      # a larger grid would not fit in memory: sample instead
MAX_SAMPLES = 10_000_000
MAX_AXIS_VALUES = 1000


@dataclass(frozen=True)
class AxisInfo:
    """What an axis key means: label, display unit and the accepted range of values."""
    label: str
    unit: str
    lo: float          # smallest accepted value (inclusive unless lo_open)
    hi: float
    lo_open: bool = True


def _from_limits(label: str, unit: str, name: str, to_si: float,
                 lo_open: bool = False) -> AxisInfo:
    """An axis whose range is the hardware bound ``limits.bound(name)`` in the axis's unit
    (issue 29: axes from a ranges file or a link skipped the hardware bounds; 1e-300 GB/s)."""
    b = bound(name)
    return AxisInfo(label, unit, b.lo / to_si, b.hi / to_si, lo_open=lo_open)


AXES: dict[str, AxisInfo] = {
    "peak": _from_limits("Peak compute", "TFLOP/s", "peak_flops_per_s", FLOPS_PER_TFLOP),
    "bw": _from_limits("Memory bandwidth", "GB/s", "bandwidth_bytes_per_s", BYTES_PER_GB),
    "cap": _from_limits("Memory capacity", "GB", "capacity_bytes", BYTES_PER_GB),
    "sram": AxisInfo("On-chip SRAM", "MB", 0.0, 1e6, lo_open=False),
    "tdp": _from_limits("TDP", "W", "tdp_w", 1.0),
    "price": _from_limits("Price", "USD", "price_usd", 1.0, lo_open=True),
}
PEAK_KEYS = tuple(f"peak_{d.value}" for d in DType)


def base_key(key: str) -> str:
    """'peak_fp16' -> 'peak'; other keys unchanged."""
    return "peak" if key in PEAK_KEYS else key


def key_dtype(key: str) -> DType | None:
    """The data type a ``peak_<dtype>`` key names (None for ``peak`` and the other axes)."""
    return DType(key.split("_", 1)[1]) if key in PEAK_KEYS else None


# Names people type for an axis (and the JSON column names), for the "did you mean" hint.
_SYNONYMS = {"bandwidth": "bw", "memory_bandwidth": "bw", "bw_gbps": "bw", "capacity": "cap",
             "memory_capacity": "cap", "memory": "cap", "cap_gb": "cap", "compute": "peak",
             "tflops": "peak", "peak_tflops": "peak", "power": "tdp", "tdp_w": "tdp",
             "cost": "price", "cost_usd": "price", "price_usd": "price", "sram_mb": "sram"}


def check_key(key: str, origin: str = "") -> str:
    if key in AXES or key in PEAK_KEYS:
        return key
    close = ([_SYNONYMS[str(key).lower()]] if str(key).lower() in _SYNONYMS else
             difflib.get_close_matches(str(key), list(AXES) + list(PEAK_KEYS), n=1, cutoff=0.5))
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = f"{origin}: " if origin else ""
    raise ConfigError(f"{where}unknown axis {key!r}{hint} (axes: {', '.join(AXES)}, "
                      f"{', '.join(PEAK_KEYS)})")


def check_value(key: str, v, origin: str = "") -> float:
    info = AXES[base_key(key)]
    where = f"{origin}: " if origin else ""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}axis {key}: values must be finite numbers, got {v!r}")
    v = float(v)
    if v < info.lo or (info.lo_open and v == info.lo) or v > info.hi:
        lo = f"> {info.lo:g}" if info.lo_open else f">= {info.lo:g}"
        raise ConfigError(f"{where}axis {key}: {v:g} {info.unit} is out of range "
                          f"(must be {lo} and <= {info.hi:g})")
    return v


@dataclass(frozen=True)
class Axis:
    """One swept parameter, in its display unit (``AXES``): the grid values (sorted, unique)
    and the continuous range [lo, hi] that sampling and NSGA-II use."""
    key: str
    values: tuple[float, ...]
    scale: str = "log"

    def __post_init__(self):
        check_key(self.key)
        if not self.values:
            raise ConfigError(f"axis {self.key}: at least one value is needed")
        if len(self.values) > MAX_AXIS_VALUES:
            raise ConfigError(f"axis {self.key}: at most {MAX_AXIS_VALUES} values")
        vals = tuple(sorted({check_value(self.key, v) for v in self.values}))
        object.__setattr__(self, "values", vals)
        if self.scale not in SCALES:
            raise ConfigError(f"axis {self.key}: scale must be 'log' or 'linear', got "
                              f"{self.scale!r}")
        if self.scale == "log" and vals[0] <= 0:
            raise ConfigError(f"axis {self.key}: a log axis needs values > 0")

    @property
    def lo(self) -> float:
        return self.values[0]

    @property
    def hi(self) -> float:
        return self.values[-1]

    @property
    def info(self) -> AxisInfo:
        return AXES[base_key(self.key)]

    @property
    def label(self) -> str:
        d = key_dtype(self.key)
        name = self.info.label + (f" ({d.value})" if d else "")
        return f"{name} [{self.info.unit}]"


def axis_range(key: str, lo: float, hi: float, count: int, scale: str = "log") -> Axis:
    """``count`` grid values from lo to hi, evenly spaced on the scale (both ends included)."""
    lo, hi = check_value(key, lo), check_value(key, hi)
    count = require_int(f"axis {key}: count", count, 1, MAX_AXIS_VALUES)
    if hi < lo:
        raise ConfigError(f"axis {key}: hi ({hi:g}) is below lo ({lo:g})")
    if scale not in SCALES:
        raise ConfigError(f"axis {key}: scale must be 'log' or 'linear', got {scale!r}")
    if scale == "log" and lo <= 0:
        raise ConfigError(f"axis {key}: a log axis needs lo > 0")
    if count == 1 or hi == lo:
        vals = (lo,) if count == 1 else (lo, hi)
    elif scale == "log":
        vals = tuple(float(v) for v in np.geomspace(lo, hi, count))
    else:
        vals = tuple(float(v) for v in np.linspace(lo, hi, count))
    return Axis(key, vals, scale)


def default_scale(values) -> str:
    vals = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    lo, hi = (min(vals), max(vals)) if vals else (1.0, 1.0)
    return "log" if lo > 0 and hi / lo > 10 else "linear"


_AXIS_TABLE_KEYS = ("lo", "hi", "count", "scale", "values")


def axis_from_spec(key: str, spec, origin: str = "") -> Axis:
    """An axis from a file's entry: a list of values, or {lo, hi, count, scale} / {values, scale}."""
    check_key(key, origin)
    where = f"{origin}: axis {key}"
    if isinstance(spec, (list, tuple)):
        return Axis(key, tuple(check_value(key, v, origin) for v in spec), default_scale(spec))
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a list of values or a table with lo, hi, count")
    for k in spec:
        if k not in _AXIS_TABLE_KEYS:
            raise ConfigError(f"{where}: unknown key {k!r}{did_you_mean(k, _AXIS_TABLE_KEYS, 1)}")
    if "values" in spec:
        if any(k in spec for k in ("lo", "hi", "count")):
            raise ConfigError(f"{where}: give either values or lo/hi/count, not both")
        vals = spec["values"]
        if not isinstance(vals, (list, tuple)):
            raise ConfigError(f"{where}: values must be a list")
        return Axis(key, tuple(check_value(key, v, origin) for v in vals),
                    spec.get("scale", default_scale(vals)))
    missing = [k for k in ("lo", "hi") if k not in spec]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    return axis_range(key, spec["lo"], spec["hi"], spec.get("count", 5), spec.get("scale", "log"))


@dataclass(frozen=True)
class SearchSpace:
    """Swept axes plus fixed values (display units) around a base hardware preset."""
    name: str
    axes: tuple[Axis, ...]
    base_hardware: str = "custom-hardware"
    description: str = ""
    slug: str = ""
    fixed: tuple[tuple[str, float], ...] = field(default=())

    def __post_init__(self):
        if not self.axes:
            raise ConfigError(f"design space {self.name!r}: at least one axis is needed")
        seen: dict[str, str] = {}
        for a in self.axes:
            b = base_key(a.key)
            if b in seen:
                raise ConfigError(f"design space {self.name!r}: axes {seen[b]!r} and {a.key!r} "
                                  f"sweep the same parameter")
            seen[b] = a.key
        for k, v in self.fixed:
            check_value(check_key(k), v)
            if base_key(k) in seen:
                raise ConfigError(f"design space {self.name!r}: {k} is both swept and fixed")
        if not isinstance(self.base_hardware, str) or not self.base_hardware.strip():
            raise ConfigError("base_hardware must name a hardware preset or TOML file")

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(a.key for a in self.axes)

    def axis(self, key: str) -> Axis | None:
        b = base_key(key)
        return next((a for a in self.axes if base_key(a.key) == b), None)

    @property
    def grid_size(self) -> int:
        return math.prod(len(a.values) for a in self.axes)

    def with_axis(self, axis: Axis) -> "SearchSpace":
        """A copy with ``axis`` replacing the axis of the same parameter (or added)."""
        b = base_key(axis.key)
        kept = tuple(a for a in self.axes if base_key(a.key) != b)
        fixed = tuple((k, v) for k, v in self.fixed if base_key(k) != b)
        order = [base_key(a.key) for a in self.axes]
        axes = sorted(kept + (axis,), key=lambda a: (order.index(base_key(a.key))
                                                     if base_key(a.key) in order else 99))
        return replace(self, axes=tuple(axes), fixed=fixed, slug="")

    def without_axis(self, key: str) -> "SearchSpace":
        b = base_key(key)
        return replace(self, axes=tuple(a for a in self.axes if base_key(a.key) != b), slug="")

    def to_dict(self) -> dict:
        return {"name": self.name, "slug": self.slug, "base_hardware": self.base_hardware,
                "grid_size": self.grid_size, "fixed": dict(self.fixed),
                "axes": [{"key": a.key, "unit": a.info.unit, "scale": a.scale,
                          "values": list(a.values)} for a in self.axes]}


# ---- files and presets ----------------------------------------------------------------------

_SPACE_KEYS = ("name", "description", "base_hardware", "axes", "fixed")


def space_from_dict(data: dict, origin: str, slug: str = "") -> SearchSpace:
    """A space from a TOML table: name, description, base_hardware, axes = {key = spec},
    fixed = {key = value} (strict: unknown keys are errors naming the closest valid one)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a table")
    for k in data:
        if k not in _SPACE_KEYS:
            raise ConfigError(f"{origin}: unknown key {k!r}{did_you_mean(k, _SPACE_KEYS, 1)}")
    axes_spec = data.get("axes")
    if not isinstance(axes_spec, dict) or not axes_spec:
        raise ConfigError(f"{origin}: an [axes] table with at least one axis is required")
    fixed = data.get("fixed", {})
    if not isinstance(fixed, dict):
        raise ConfigError(f"{origin}: fixed must be a table of axis = value")
    for k, v in data.items():
        if k in ("name", "description", "base_hardware") and not isinstance(v, str):
            raise ConfigError(f"{origin}: {k} must be a string")
    axes = tuple(axis_from_spec(k, v, origin) for k, v in axes_spec.items())
    fixed_t = tuple((check_key(k, origin), check_value(k, v, origin)) for k, v in fixed.items())
    return SearchSpace(data.get("name", slug or Path(origin).stem), axes,
                       data.get("base_hardware", "custom-hardware"),
                       data.get("description", ""), slug, fixed_t)


@functools.lru_cache(maxsize=1)
def presets() -> tuple[SearchSpace, ...]:
    """The five reference presets of ``presets/tables/dse_presets.toml``, in file order."""
    from ..presets import load_table
    table = load_table("dse_presets").get("preset", {})
    return tuple(space_from_dict(d, f"dse_presets.toml [preset.{slug}]", slug)
                 for slug, d in table.items())


def find_space(name: str) -> SearchSpace:
    """A preset by slug or name (case and punctuation ignored)."""
    from ..presets import normalize
    key = normalize(name)
    for s in presets():
        if key in (normalize(s.slug), normalize(s.name)):
            return s
    names = [s.name for s in presets()]
    hint = did_you_mean(name, names, n=2, cutoff=0.4)
    raise ConfigError(f"unknown design-space preset {name!r}{hint} (presets: "
                      f"{', '.join(s.slug for s in presets())})")


def axes_text(space: SearchSpace) -> str:
    """The axes (and fixed values) as the body of a file's ``[axes]`` table: one
    ``key = [values]`` line per axis, ``key = value`` for a fixed one (``fixed.`` prefix)."""
    lines = [f"{a.key} = [{', '.join(f'{v:.12g}' for v in a.values)}]" for a in space.axes]
    lines += [f"fixed.{k} = {v:.12g}" for k, v in space.fixed]
    return "\n".join(lines) + "\n"


def space_from_axes_text(text: str, base: SearchSpace) -> SearchSpace:
    """``base`` with the axes of ``text`` (the body of an ``[axes]`` table, as ``axes_text``
    writes it; ``fixed.key = value`` lines fix a value)."""
    from ..safeio import parse_toml
    if not isinstance(text, str) or len(text) > 20_000:
        raise ConfigError("axes: expected at most 20,000 characters of TOML")
    data = parse_toml(text, "axes")
    fixed = data.pop("fixed", {})
    return space_from_dict({"name": f"{base.name} (edited)", "axes": data, "fixed": fixed,
                            "base_hardware": base.base_hardware,
                            "description": base.description}, "axes")


def load_space_file(path: str) -> SearchSpace:
    """A user's ranges file (TOML, same keys as one preset table)."""
    from ..presets import _read_toml
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"ranges file not found: {path}")
    return space_from_dict(_read_toml(p), p.name, "")


# ---- sampling -------------------------------------------------------------------------------

def sample(space: SearchSpace, method: str = "grid", n: int | None = None,
           seed: int = 0) -> dict[str, np.ndarray]:
    """Design points as {axis key: values in display units}. ``grid``: every combination of
    every axis value (``n`` ignored); ``random``: ``n`` independent draws; ``lhs``: a Latin
    hypercube of ``n`` points (each axis split in n equal-probability strata, one point per
    stratum, strata paired at random)."""
    if method not in METHODS:
        raise ConfigError(f"sampling method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "grid":
        size = space.grid_size
        if size > MAX_GRID_POINTS:
            raise ConfigError(f"the grid has {size:,} points (> {MAX_GRID_POINTS:,}); use "
                              f"random or lhs sampling with a number of samples")
        mesh = np.meshgrid(*[np.asarray(a.values) for a in space.axes], indexing="ij")
        return {a.key: m.ravel() for a, m in zip(space.axes, mesh)}
    n = require_int("samples", n, 1, MAX_SAMPLES)
    seed = require_int("seed", seed, 0, 2**63 - 1)
    rng = np.random.default_rng(seed)
    out = {}
    for a in space.axes:
        if method == "random":
            u = rng.random(n)
        else:
            u = rng.permutation(n).astype(float)
            u += rng.random(n)
            u /= n
        out[a.key] = unit_to_axis(a, u)
    return out


def unit_to_axis(a: Axis, u: np.ndarray) -> np.ndarray:
    """Map u in [0, 1] onto the axis range (log-uniform on a log axis), in place when possible."""
    if a.hi == a.lo:
        return np.full(u.shape, a.lo)
    if a.scale == "log":
        lo, hi = math.log(a.lo), math.log(a.hi)
        u *= hi - lo
        u += lo
        return np.exp(u, out=u)
    u *= a.hi - a.lo
    u += a.lo
    return u


def axis_to_unit(a: Axis, x: np.ndarray) -> np.ndarray:
    """Inverse of ``unit_to_axis`` (for optimisers that work in [0, 1])."""
    x = np.asarray(x, dtype=float)
    if a.hi == a.lo:
        return np.zeros(x.shape)
    if a.scale == "log":
        return (np.log(x) - math.log(a.lo)) / (math.log(a.hi) - math.log(a.lo))
    return (x - a.lo) / (a.hi - a.lo)
