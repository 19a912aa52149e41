"""The efficiency model: what fraction of the roofline a real inference stack reaches.

The estimated time of every operator is (``roofline.op_time_s``)::

    max(FLOPs / (peak x compute), (bytes + KV reads x (1/kv_read - 1)) / (bandwidth x memory))
        + kernels x kernel_overhead

Four parameters per hardware class, each a piece of physics the measurements pin down:

* ``memory`` -- achievable fraction of peak DRAM bandwidth when a GEMV kernel streams weights
  (memory technology: GDDR, HBM, LPDDR unified memory; refresh, page misses and the memory
  controller's efficiency). Set by the slope of decode time vs weight bytes.
* ``kernel_overhead`` -- fixed cost per kernel: launch, dependency wait and the tail of a kernel
  too small to fill the chip. Set by the intercept (small or heavily quantised models on fast
  devices reach a lower share of peak bandwidth).
* ``kv_read`` -- batch-1 decode attention reads the KV cache per head in short strided rows,
  slower than weight streaming; set by how decode slows as the context grows (llama-bench
  tg512 -> tg8192).
* ``compute`` -- achievable fraction of the dense peak in prefill GEMMs (set by pp rows).

Classes are fitted on llama.cpp measurements (the one stack measured on every class), so a
class's values are its *generic* profile. A framework profile scales them (``memory_scale``,
``compute_scale``, ``overhead_scale``): CUDA graphs and fused kernels (gpt-fast, TensorRT-LLM)
cut per-kernel overhead; hand-tuned GEMV kernels (ExLlamaV2, MLC) stream closer to peak. A
device whose memory technology differs from its class (GDDR6 "datacenter" cards) uses the
class it behaves like (``[device]`` in the table). Values: ``presets/tables/efficiency.toml``,
written by ``scripts/fit_efficiency.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .. import efficiency_table
from ..errors import ConfigError, did_you_mean
from ..hardware import (
    CLASS_DEFAULTS,
    DEVICE_EFFICIENCY_CLASS,
    PROVISIONAL_EFFICIENCY,
    Efficiency,
    Hardware,
    HardwareClass,
)
from ..units import S_PER_US

# CLI names of the framework profiles (lower case) and how measurement rows spell them.
FRAMEWORKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "llama.cpp": ("llama.cpp", ("llama.cpp", "llamacpp", "ggml")),
    "gpt-fast": ("gpt-fast (PyTorch compile)", ("gpt-fast", "gptfast")),
    "vllm": ("vLLM", ("vllm",)),
    "tensorrt-llm": ("TensorRT-LLM", ("tensorrt", "trt-llm", "trtllm")),
    "mlc": ("MLC LLM", ("mlc",)),
    "exllamav2": ("ExLlamaV2", ("exllama",)),
    "mlx": ("Apple MLX", ("mlx",)),
}
GENERIC = "generic"
SCALE_KEYS = ("memory_scale", "compute_scale", "overhead_scale")


@dataclass(frozen=True)
class FrameworkProfile:
    """Multipliers a framework applies to the class values (1 = the generic profile)."""
    name: str
    label: str
    memory_scale: float = 1.0
    compute_scale: float = 1.0
    overhead_scale: float = 1.0
    rows: int = 0            # measurements the scales were fitted on (0 = not fitted)
    note: str = ""

    def apply(self, eff: Efficiency) -> Efficiency:
        return replace(eff, memory=min(1.0, eff.memory * self.memory_scale),
                       compute=min(1.0, eff.compute * self.compute_scale),
                       kernel_overhead_s=min(1.0, eff.kernel_overhead_s * self.overhead_scale))


@dataclass(frozen=True)
class EfficiencyTable:
    """Class efficiencies, device -> class mapping and framework profiles (one fit)."""
    classes: dict = field(hash=False)          # HardwareClass -> Efficiency
    devices: dict = field(hash=False)          # preset slug -> HardwareClass
    frameworks: dict = field(hash=False)       # CLI name -> FrameworkProfile
    class_rows: dict = field(default_factory=dict, hash=False)   # HardwareClass -> rows fitted
    source: str = ""

    def class_efficiency(self, hardware: Hardware) -> Efficiency:
        """The preset's own ``[efficiency]`` if it has one, else its (device-mapped) class's."""
        if hardware.efficiency is not None:
            return hardware.efficiency
        cls = self.devices.get(hardware.slug, hardware.hw_class)
        return self.classes.get(cls, CLASS_DEFAULTS[cls].efficiency)

    def efficiency_for(self, hardware: Hardware, framework: str | None = None) -> Efficiency:
        """Estimated-mode efficiency of ``hardware`` under ``framework`` (None = generic)."""
        eff = self.class_efficiency(hardware)
        if framework is None or framework == GENERIC:
            return eff
        return self.profile(framework).apply(eff)

    def profile(self, framework: str) -> FrameworkProfile:
        name = resolve_framework(framework)
        return self.frameworks.get(name) or FrameworkProfile(name, FRAMEWORKS[name][0])


def resolve_framework(name: str) -> str:
    """The CLI name of a framework profile (exact lower-case name or alias); ConfigError with
    close matches otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("framework name must be a non-empty string")
    key = name.strip().lower()
    if key in FRAMEWORKS:
        return key
    raise ConfigError(f"unknown framework {name!r}{did_you_mean(key, FRAMEWORKS)} "
                      f"(known: {', '.join(FRAMEWORKS)})")


def framework_of_label(label: str) -> str | None:
    """The profile a measurement's framework column belongs to ("llama.cpp (CUDA)" ->
    "llama.cpp"); None for stacks without a profile (T-MAC, QNN, ...)."""
    s = re.sub(r"\s+", "", str(label).lower())
    for name, (_, aliases) in FRAMEWORKS.items():
        if any(a.replace(" ", "") in s for a in aliases):
            return name
    return None


# ---- the table on disk ----------------------------------------------------------------------

def table_from_dict(data: dict, source: str = "") -> EfficiencyTable:
    """An EfficiencyTable from the TOML structure of ``presets/tables/efficiency.toml``;
    classes the table lacks keep the provisional constants of ``hardware.CLASS_DEFAULTS``."""
    classes = {c: CLASS_DEFAULTS[c].efficiency for c in HardwareClass}
    rows = {}
    for name, kwargs in efficiency_table.class_values(data).items():
        cls = _class(name)
        classes[cls] = Efficiency(**kwargs)
        rows[cls] = int(data["class"][name].get("rows", 0))
    devices = {slug: _class(c) for slug, c in efficiency_table.device_classes(data).items()}
    frameworks = {}
    raw = data.get("framework", {})
    if not isinstance(raw, dict):
        raise ConfigError("efficiency.toml: [framework] must be a table of profiles")
    for name, entry in raw.items():
        key = resolve_framework(name)
        if not isinstance(entry, dict):
            raise ConfigError(f"efficiency.toml: [framework.{name}] must be a table")
        scales = {k: efficiency_table._number(f"framework.{name}.{k}", entry.get(k, 1.0))
                  for k in SCALE_KEYS}
        if any(v <= 0 for v in scales.values()):
            raise ConfigError(f"efficiency.toml: [framework.{name}] scales must be > 0")
        frameworks[key] = FrameworkProfile(key, FRAMEWORKS[key][0], **scales,
                                           rows=int(entry.get("rows", 0)),
                                           note=str(entry.get("note", "")))
    return EfficiencyTable(classes, devices, frameworks, rows, source)


def _class(name: str) -> HardwareClass:
    try:
        return HardwareClass(name)
    except ValueError:
        raise ConfigError(f"efficiency.toml: unknown hardware class {name!r}") from None


def default_table() -> EfficiencyTable:
    """The fitted table shipped in ``presets/tables/efficiency.toml`` (the app's defaults)."""
    t = table_from_dict(efficiency_table.read_table(), "presets/tables/efficiency.toml")
    # hardware.py applied the same file at import; keep one truth if the file changed since
    return replace(t, devices={**DEVICE_EFFICIENCY_CLASS, **t.devices})


def efficiency_for(hardware: Hardware, framework: str | None = None) -> Efficiency:
    """Estimated-mode efficiency of ``hardware`` with the shipped table (``framework`` None =
    the class's generic profile)."""
    return default_table().efficiency_for(hardware, framework)


def provisional_table(devices: dict | None = None) -> EfficiencyTable:
    """The built-in provisional class values and identity framework profiles (where a fit
    starts); ``devices`` = the device -> class mapping to keep (default: the shipped one)."""
    return EfficiencyTable(dict(PROVISIONAL_EFFICIENCY),
                           dict(default_table().devices if devices is None else devices),
                           {}, {}, "provisional")


def _fmt(v: float) -> str:
    return f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.4e}"


def table_to_toml(table: EfficiencyTable, fit_info: dict | None = None) -> str:
    """The TOML text of ``table`` (the format of presets/tables/efficiency.toml)."""
    lines = ["# Efficiency profiles: what llmpara_core.calibration's parameters mean is in that",
             "# module's docstring. Written by `python scripts/fit_efficiency.py` on the",
             "# measurements named under [fit]; rerun the script instead of editing numbers.",
             "# kernel_overhead_us = fixed cost per kernel [us]; memory, compute = achieved",
             "# fractions of peak bandwidth / dense peak FLOP/s; kv_read = fraction of that",
             "# bandwidth reached by decode attention reading the KV cache.", ""]
    if fit_info:
        lines.append("[fit]")
        nested = {k: v for k, v in fit_info.items() if isinstance(v, dict)}
        for k, v in fit_info.items():
            if not isinstance(v, dict):
                lines.append(f"{k} = {_value(v)}")
        for k, d in nested.items():
            lines += ["", f"[fit.{k}]"] + [f'"{kk}" = {_value(vv)}' for kk, vv in d.items()]
        lines.append("")
    for cls in HardwareClass:
        if cls not in table.class_rows or not table.class_rows[cls]:
            continue
        e = table.classes[cls]
        lines += [f"[class.{cls.value}]", f"memory = {_fmt(e.memory)}",
                  f"compute = {_fmt(e.compute)}",
                  f"kernel_overhead_us = {_fmt(e.kernel_overhead_s / S_PER_US)}",
                  f"kv_read = {_fmt(e.kv_read)}", f"rows = {table.class_rows[cls]}", ""]
    lines.append("# Devices whose memory technology differs from their class (GDDR6 datacenter")
    lines.append("# cards stream like consumer GDDR cards): preset slug -> class profile used.")
    lines.append("[device]")
    lines += [f'{slug} = "{cls.value}"' for slug, cls in sorted(table.devices.items())]
    lines.append("")
    for name in FRAMEWORKS:
        p = table.frameworks.get(name)
        if p is None:
            continue
        lines += [f'[framework."{name}"]', f"memory_scale = {_fmt(p.memory_scale)}",
                  f"compute_scale = {_fmt(p.compute_scale)}",
                  f"overhead_scale = {_fmt(p.overhead_scale)}", f"rows = {p.rows}"]
        if p.note:
            lines.append(f"note = {_value(p.note)}")
        lines.append("")
    return "\n".join(lines)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v) if isinstance(v, int) else _fmt(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
