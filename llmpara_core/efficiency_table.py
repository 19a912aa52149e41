"""Reader of the fitted efficiency table ``presets/tables/efficiency.toml`` (stdlib only, so
that ``hardware`` can use it at import without an import cycle).

The table is written by ``scripts/fit_efficiency.py``; ``llmpara_core.calibration`` explains
every parameter. A missing file leaves the provisional constants of ``hardware.CLASS_DEFAULTS``
in force; a malformed one is a ``ConfigError`` naming the file and the key.
"""

from __future__ import annotations

import functools
import math
import tomllib
from pathlib import Path

from .errors import ConfigError

TABLE_PATH = Path(__file__).resolve().parent.parent / "presets" / "tables" / "efficiency.toml"
US_TO_S = 1e-6       # the table spells kernel overhead in microseconds (units.S_PER_US)
CLASS_KEYS = ("memory", "compute", "kernel_overhead_us", "kv_read")


@functools.lru_cache(maxsize=1)
def read_table(path: Path = TABLE_PATH) -> dict:
    """The raw table ({} when the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"{path.name}: not a valid efficiency table ({e})") from None


def _number(where: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"efficiency.toml: {where} must be a finite number, got {v!r}")
    return float(v)


OPTIONAL_US = {"step_overhead_us": "step_overhead_s", "seq_overhead_us": "seq_overhead_s"}


def parse_class_entry(name: str, entry) -> dict:
    """Keyword arguments of ``hardware.Efficiency`` from one ``[class.<name>]`` table."""
    if not isinstance(entry, dict):
        raise ConfigError(f"efficiency.toml: [class.{name}] must be a table")
    missing = [k for k in CLASS_KEYS if k not in entry]
    if missing:
        raise ConfigError(f"efficiency.toml: [class.{name}] lacks {', '.join(missing)}")
    out = {"memory": _number(f"class.{name}.memory", entry["memory"]),
           "compute": _number(f"class.{name}.compute", entry["compute"]),
           "kernel_overhead_s": _number(f"class.{name}.kernel_overhead_us",
                                        entry["kernel_overhead_us"]) * US_TO_S,
           "kv_read": _number(f"class.{name}.kv_read", entry["kv_read"])}
    for k in ("gemm_half_tokens", "attention_compute", "kv_reread", "act_quant_kernels",
              "quant_compute", "prompt_ubatch_tokens", "expert_half_tokens",
              "kquant_stream_bytes_per_cu_cycle", "kv_stream_bytes_per_cu_cycle"):
        if k in entry:
            out[k] = _number(f"class.{name}.{k}", entry[k])
    for k in ("gemm_fp16_acc16", "quant_gemm_int8"):      # the reference stack's GEMM units
        if k in entry:
            if not isinstance(entry[k], bool):
                raise ConfigError(f"efficiency.toml: class.{name}.{k} must be true or false, "
                                  f"got {entry[k]!r}")
            out[k] = entry[k]
    for k, field in OPTIONAL_US.items():
        if k in entry:
            out[field] = _number(f"class.{name}.{k}", entry[k]) * US_TO_S
    return out


def class_values(table: dict | None = None) -> dict[str, dict]:
    """Fitted classes: class name -> Efficiency keyword arguments."""
    t = read_table() if table is None else table
    classes = t.get("class", {})
    if not isinstance(classes, dict):
        raise ConfigError("efficiency.toml: [class] must be a table of classes")
    return {name: parse_class_entry(name, e) for name, e in classes.items()}


def _keyed_numbers(section: str, keys: tuple[str, ...], table: dict | None) -> dict[str, dict]:
    t = read_table() if table is None else table
    raw = t.get(section, {})
    if not isinstance(raw, dict):
        raise ConfigError(f"efficiency.toml: [{section}] must be a table")
    out = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"efficiency.toml: [{section}.{name}] must be a table")
        out[name.strip().lower()] = {k: _number(f"{section}.{name}.{k}", entry[k])
                                     for k in keys if k in entry}
    return out


def memory_type_values(table: dict | None = None) -> dict[str, dict]:
    """``[memory_type.<type>]``: lower-case memory technology -> {memory, kv_read} (the
    achieved fraction of peak bandwidth streaming weights, and of that reading the KV cache)."""
    return _keyed_numbers("memory_type", ("memory", "kv_read"), table)


def architecture_values(table: dict | None = None) -> dict[str, dict]:
    """``[architecture.<arch>]``: lower-case architecture -> {compute, legacy_kernel_factor}
    (GEMM fraction of the dense peak reached by the reference stack; the factor by which
    kernels written for an older generation fall short of this one's peak)."""
    return _keyed_numbers("architecture", ("compute", "legacy_kernel_factor")
                          + tuple(f"memory_factor_{f}" for f in ("lpddr", "gddr", "hbm", "ddr")),
                          table)


# The GEMM fractions of ``[stack_class.<class>]`` (``stack_class_values``).
STACK_CLASS_KEYS = ("compute", "attention_compute", "quant_compute", "expert_half_tokens")


def stack_class_values(table: dict | None = None) -> dict[str, dict]:
    """``[stack_class.<class>]``: class name -> the GEMM fractions (``STACK_CLASS_KEYS``) the
    stack profiles other than the reference stack apply to, where they differ from the
    class's own: those of the class fit with the reference stack's build rules off
    (``calibration.fitting``, "build rules")."""
    return _keyed_numbers("stack_class", STACK_CLASS_KEYS, table)


def device_classes(table: dict | None = None) -> dict[str, str]:
    """Preset slug -> class name whose efficiency that device uses."""
    t = read_table() if table is None else table
    devices = t.get("device", {})
    if not isinstance(devices, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in devices.items()):
        raise ConfigError("efficiency.toml: [device] must map preset slugs to class names")
    return dict(devices)
