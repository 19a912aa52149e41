"""Energy constants of a device: dynamic energy per FLOP by compute data type, energy per byte
by memory tier, static power. Sources and the calibration rule: ``llmpara_core.metrics.energy``
(module docstring), ``presets/tables/energy.toml`` and ``presets/tables/hardware_power.toml``.
Every choice made for a device is recorded in ``EnergyParams.assumptions``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

from ..analysis import Report
from ..errors import ConfigError
from ..hardware import Efficiency, Hardware
from ..precision import DType
from ..presets import load_table
from ..roofline import rates
from ..units import J_PER_PJ


# ------------------------------------------------------------------------------ tables

@functools.lru_cache(maxsize=1)
def energy_table() -> dict:
    """``presets/tables/energy.toml`` (memory technologies, class defaults, TCO/PUE choices)."""
    return load_table("energy")


@functools.lru_cache(maxsize=1)
def hardware_power_table() -> dict:
    """``presets/tables/hardware_power.toml``: per-preset idle W, embodied kgCO2e, memory type."""
    return load_table("hardware_power").get("hardware", {})


def class_entry(hardware: Hardware) -> dict:
    return energy_table()["class"][hardware.hw_class.value]


def device_entry(hardware: Hardware) -> dict:
    """The hardware_power.toml row of ``hardware`` (by slug), or {}."""
    return hardware_power_table().get(hardware.slug, {}) if hardware.slug else {}


def memory_technology_j_per_byte(name: str) -> float:
    techs = energy_table()["memory_technology"]
    if name not in techs:
        raise ConfigError(f"unknown memory technology {name!r}; known: {', '.join(techs)}")
    return techs[name]["pJ_per_byte"] * J_PER_PJ


def _tier_technology(tier_name: str) -> str | None:
    """Guess a technology from a tier name ("SRAM", "HBM3", "Flash", ...)."""
    n = tier_name.upper()
    for key in sorted(energy_table()["memory_technology"], key=len, reverse=True):
        if key in n:
            return key
    if "FLASH" in n:
        return "NAND"
    if "DRAM" in n or "DDR" in n:
        return "DDR5"
    return None


# ------------------------------------------------------------------------------ parameters

@dataclass(frozen=True)
class EnergyParams:
    """Energy constants of one device for one compute data type (SI: J, J/FLOP, J/B, W)."""
    hardware_name: str
    dtype_used: DType
    flop_j: float                      # dynamic energy per FLOP at dtype_used
    weight_j_per_byte: float
    kv_j_per_byte: float
    act_j_per_byte: float
    link_j_per_byte: float
    main_j_per_byte: float             # main memory (roofline curve, TDP calibration)
    static_w: float                    # constant power while busy (0 when unknown, see notes)
    idle_w: float | None               # bare idle power (for idle hours in TCO / carbon)
    tdp_w: float | None
    flop_j_by_dtype: tuple[tuple[DType, float], ...] = ()
    assumptions: tuple[str, ...] = field(default=())

    def with_overrides(self, **changes) -> "EnergyParams":
        """A copy with some constants replaced (e.g. from the page's editable fields)."""
        for k, v in changes.items():
            if v is not None and (not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v)):
                raise ConfigError(f"{k} must be a finite number >= 0, got {v!r}")
        note = "user override: " + ", ".join(f"{k}={v:g}" for k, v in changes.items() if v is not None)
        kept = {k: v for k, v in changes.items() if v is not None}
        return replace(self, **kept, assumptions=self.assumptions + ((note,) if kept else ()))


def _idle_w(hardware: Hardware, notes: list[str]) -> float | None:
    dev, cls = device_entry(hardware), class_entry(hardware)
    if hardware.idle_w is not None:
        notes.append(f"idle {hardware.idle_w:g} W from the hardware preset")
        return hardware.idle_w
    if "idle_W" in dev:
        notes.append(f"idle {dev['idle_W']:g} W from hardware_power.toml ({dev.get('source', '')})")
        return float(dev["idle_W"])
    if hardware.tdp_w is not None:
        w = hardware.tdp_w * hardware.defaults.idle_fraction_of_tdp
        notes.append(f"idle {w:g} W = class default {hardware.defaults.idle_fraction_of_tdp:g} x TDP "
                     f"(no published idle power for {hardware.name})")
        return w
    if "fallback_idle_W" in cls:
        notes.append(f"idle {cls['fallback_idle_W']:g} W: class fallback (no TDP or idle power "
                     f"for {hardware.name})")
        return float(cls["fallback_idle_W"])
    notes.append(f"no TDP or idle power for {hardware.name}: static power omitted, "
                 f"energy is a lower bound")
    return None


def _placement(hardware: Hardware, sizes: dict[str, float] | None) -> dict[str, list[tuple[float, int]]]:
    """Greedy fastest-first placement of activations, weights, KV cache across the tiers:
    kind -> [(fraction, tier index)]. Whatever does not fit goes to the last tier."""
    tiers = hardware.memory_tiers
    free = [t.capacity_bytes for t in tiers]
    out: dict[str, list[tuple[float, int]]] = {}
    for kind in ("act", "weight", "kv"):
        need = (sizes or {}).get(kind, 0.0)
        if need <= 0:   # nothing known: main tier = the one holding the first weight byte
            out[kind] = []
            continue
        parts, left = [], need
        for i, cap in enumerate(free):
            take = min(left, cap)
            if take > 0:
                parts.append((take / need, i))
                free[i] -= take
                left -= take
            if left <= 0:
                break
        if left > 0:
            parts.append((left / need, len(tiers) - 1))
        out[kind] = parts
    return out


def _tier_j_per_byte(hardware: Hardware, i: int, notes: list[str]) -> float:
    tier = hardware.memory_tiers[i]
    if tier.energy_j_per_byte is not None:
        return tier.energy_j_per_byte
    tech = _tier_technology(tier.name) or class_entry(hardware)["memory_technology"]
    e = memory_technology_j_per_byte(tech)
    if energy_table()["memory_technology"][tech]["offchip"]:
        e += class_entry(hardware)["onchip_pJ_per_byte"] * J_PER_PJ
    notes.append(f"tier {tier.name}: no energy in the preset, {tech} default used")
    return e


def _main_tier(hardware: Hardware) -> int:
    """Index of the tier whose bandwidth the plain roofline uses (else the first)."""
    for i, t in enumerate(hardware.memory_tiers):
        if t.bandwidth_bytes_per_s == hardware.memory_bandwidth_bytes_per_s:
            return i
    return 0


def _memory_j_per_byte(hardware: Hardware, sizes, notes) -> tuple[float, float, float, float]:
    """(weights, KV, activations, main memory) energy per byte. Main memory (the tier the
    plain roofline streams from) calibrates e_flop and draws the energy roofline."""
    if hardware.memory_tiers:
        place = _placement(hardware, sizes)
        per_tier = [_tier_j_per_byte(hardware, i, notes) for i in range(len(hardware.memory_tiers))]
        main = per_tier[_main_tier(hardware)]
        vals = []
        for kind in ("weight", "kv", "act"):
            parts = place[kind]
            vals.append(sum(f * per_tier[i] for f, i in parts) if parts else main)
        notes.append("memory energy per byte: greedy fastest-first placement over the tiers "
                     "(activations, then weights, then KV cache)")
        return vals[0], vals[1], vals[2], main
    dev, cls = device_entry(hardware), class_entry(hardware)
    tech = dev.get("memory_technology")
    if tech:
        notes.append(f"memory {tech} (hardware_power.toml)")
    else:
        tech = cls["memory_technology"]
        notes.append(f"memory technology unknown for {hardware.name}: class default {tech}")
    e = memory_technology_j_per_byte(tech)
    if energy_table()["memory_technology"][tech]["offchip"]:
        e += cls["onchip_pJ_per_byte"] * J_PER_PJ
    return e, e, e, e


def energy_params(hardware: Hardware, dtype: DType, efficiency: Efficiency | None = None,
                  sizes: dict[str, float] | None = None) -> EnergyParams:
    """Energy constants of ``hardware`` running matmuls in ``dtype``.

    ``efficiency`` (default: the device's own -- what every scenario uses, whatever its stack:
    ``Hardware.silicon_efficiency``, its class's GEMM fractions averaged over their waves)
    sets the estimated roofline on which e_flop is calibrated to TDP; ``sizes`` = {"weight",
    "kv", "act": bytes} places data on tiered devices.
    """
    notes: list[str] = []
    cls = class_entry(hardware)
    idle = _idle_w(hardware, notes)
    static = (idle or 0.0) + (cls["active_increment_W"] if idle is not None else 0.0)
    if idle is not None and cls["active_increment_W"]:
        notes.append(f"static {static:g} W = idle + {cls['active_increment_W']:g} W active "
                     f"increment ({hardware.hw_class.value})")
    e_w, e_kv, e_act, e_main = _memory_j_per_byte(hardware, sizes, notes)
    # the wave-averaged GEMM fractions, not the reference stack's within a full wave: e_flop
    # calibrated on the latter (class compute 0.38 -> 0.63 on datacenter GPUs) put the
    # component model 11.7 -> 15.6 % off the ML.ENERGY rows' J per token (branch prefill28)
    eff = efficiency or hardware.silicon_efficiency
    tdp = hardware.tdp_w
    by_dtype = []
    calibrated = False
    for d in DType:
        r = rates(hardware, d, estimated=True, efficiency=eff)
        budget = None if tdp is None else tdp - static - e_main * r.bytes_per_s
        if budget is not None and budget > 0:
            by_dtype.append((d, budget / r.flops_per_s))
            calibrated = True
        else:
            by_dtype.append((d, cls["pJ_per_flop"][r.dtype_used.value] * J_PER_PJ))
    if calibrated:
        notes.append("e_flop calibrated so the device draws its TDP at the ridge of its "
                     "estimated roofline: TDP = P_static + e_flop x P_eff + e_byte x BW_eff")
    else:
        notes.append(f"e_flop: {hardware.hw_class.value} class default per data type "
                     f"(energy.toml; no usable TDP)")
    used = rates(hardware, dtype, estimated=True, efficiency=eff).dtype_used
    flop_j = dict(by_dtype)[dtype]
    return EnergyParams(hardware.name, used, flop_j, e_w, e_kv, e_act,
                        cls["link_pJ_per_byte"] * J_PER_PJ, e_main, static, idle, tdp,
                        tuple(by_dtype), tuple(notes))


def params_for_report(report: Report) -> EnergyParams:
    """``energy_params`` for the scenario of ``report``: its data sizes, and e_flop calibrated
    on the device's own efficiency (its preset's, else its class and memory technology's), not
    the scenario's stack: energy per FLOP is the silicon's, so a stack changes the time an
    operator takes, not what each FLOP costs."""
    mem = report.memory
    return energy_params(report.hardware, report.precision.compute_dtype, None,
                         {"weight": mem.weight_bytes, "kv": mem.kv_cache_bytes,
                          "act": mem.activation_bytes})
