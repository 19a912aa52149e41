"""Coupled area, cost, memory-technology, power and embodied-carbon models of a design point,
vectorised over numpy arrays (formulas and sources: ``presets/tables/dse_physics.toml``).

These couple the axes so that a Pareto front is a real trade-off: compute costs die area, and
area costs money and carbon (dies per wafer, yield); bandwidth per GB of capacity decides the
memory technology, and with it the price per GB, the energy per byte and the carbon per GB;
power follows compute and bandwidth through the energy model of ``llmpara_core.metrics.energy``
(its class constants; no new power constants). The reference tool swept TDP and price
independently of the chip, so every optimum was the fastest chip at the lowest TDP and price
(reference-tool §10 item 3).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..metrics.energy_params import energy_table, memory_technology_j_per_byte
from ..errors import ConfigError
from ..hardware import CLASS_DEFAULTS, HardwareClass
from ..precision import DType
from ..presets import load_table
from ..units import J_PER_PJ

MM2_PER_CM2 = 100.0

# Infeasibility reasons (bit flags of ``Evaluation.reasons``), in display order.
REASON_MEMORY = 1        # the scenario does not fit in the capacity
REASON_AREA = 2          # die larger than the reticle
REASON_BANDWIDTH = 4     # no allowed memory technology delivers this bandwidth at this capacity
REASON_POWER = 8         # swept TDP below the power the design needs
REASON_PRICE = 16        # swept price below the die + memory cost
REASONS = {REASON_MEMORY: "memory", REASON_AREA: "area", REASON_BANDWIDTH: "bandwidth",
           REASON_POWER: "power", REASON_PRICE: "price"}
REASON_TEXT = {
    "memory": "the scenario does not fit in the memory capacity",
    "area": "die area exceeds the reticle",
    "bandwidth": "no memory technology of this class reaches this bandwidth at this capacity",
    "power": "TDP below the power the design draws at full load",
    "price": "price below the die + memory cost",
}


def reason_names(mask: int) -> list[str]:
    """Names of the reasons set in one point's bit mask (empty = feasible)."""
    return [name for bit, name in REASONS.items() if int(mask) & bit]


@dataclass(frozen=True)
class MemoryTech:
    name: str
    usd_per_gb: float
    kgco2e_per_gb: float
    max_gbps_per_gb: float
    max_gbps: float
    max_gb: float
    j_per_byte: float            # device access + on-chip delivery, as llmpara_core.metrics.energy


@dataclass(frozen=True)
class DieConstants:
    reticle_mm2: float
    wafer_diameter_mm: float
    wafer_usd: float
    defects_per_mm2: float
    kgco2e_per_mm2: float
    sram_mm2_per_mb: float
    mm2_per_tflops: tuple[tuple[DType, float], ...]

    def compute_mm2_per_tflops(self, dtype: DType) -> float:
        return dict(self.mm2_per_tflops)[dtype]


@dataclass(frozen=True)
class ClassPhysics:
    """Everything the coupled models need for one hardware class."""
    hw_class: HardwareClass
    memories: tuple[MemoryTech, ...]      # cheapest first
    uncore_mm2: float
    markup: float
    package_kgco2e: float
    active_increment_w: float
    idle_fraction_of_tdp: float
    flop_j: tuple[tuple[DType, float], ...]
    notes: tuple[str, ...] = ()

    def class_flop_j(self, dtype: DType) -> float:
        return dict(self.flop_j)[dtype]


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return load_table("dse_physics")


@functools.lru_cache(maxsize=1)
def die_constants() -> DieConstants:
    d = _table()["die"]
    per = d["mm2_per_TFLOPS"]
    return DieConstants(d["reticle_mm2"], d["wafer_diameter_mm"], d["wafer_usd"],
                        d["defect_density_per_cm2"] / MM2_PER_CM2,
                        d["kgco2e_per_cm2"] / MM2_PER_CM2,
                        d["sram_mm2_per_MB"], tuple((t, float(per[t.value])) for t in DType))


def _memory(name: str, hw_class: HardwareClass) -> MemoryTech:
    mems = _table()["memory"]
    if name not in mems:
        raise ConfigError(f"dse_physics.toml: unknown memory technology {name!r}")
    m = mems[name]
    tech = m["energy_technology"]
    e = memory_technology_j_per_byte(tech)
    if energy_table()["memory_technology"][tech]["offchip"]:
        e += energy_table()["class"][hw_class.value]["onchip_pJ_per_byte"] * J_PER_PJ
    return MemoryTech(name, m["usd_per_GB"], m["kgco2e_per_GB"], m["max_GBps_per_GB"],
                      m["max_GBps"], m["max_GB"], e)


@functools.lru_cache(maxsize=None)
def class_physics(hw_class: HardwareClass) -> ClassPhysics:
    """The coupled-model constants of a class; the markup and package carbon are derived from
    the class's representative device when the table names one."""
    row = _table()["class"].get(hw_class.value)
    if row is None:
        raise ConfigError(f"dse_physics.toml has no entry for class {hw_class.value!r}")
    ecls = energy_table()["class"][hw_class.value]
    mems = tuple(sorted((_memory(n, hw_class) for n in row["memories"]),
                        key=lambda m: m.usd_per_gb))
    notes, markup, package = [], row.get("markup"), 0.0
    rep = row.get("representative")
    if rep is not None:
        mem = _memory(rep["memory"], hw_class)
        area = np.array([rep["die_mm2"]])
        bom = float(die_cost_usd(area)[0]) + rep["memory_GB"] * mem.usd_per_gb
        markup = rep["price_USD"] / bom
        made = float(die_kgco2e(area)[0]) + rep["memory_GB"] * mem.kgco2e_per_gb
        package = max(0.0, rep["embodied_kgCO2e"] - made)
        notes.append(f"price markup {markup:.3g} and package carbon {package:.3g} kgCO2e "
                     f"calibrated on {rep['name']}")
    else:
        notes.append(f"price markup {markup:g} (proxy); package carbon not counted "
                     f"({hw_class.value} has no representative device)")
    flop = tuple((t, ecls["pJ_per_flop"][t.value] * J_PER_PJ) for t in DType)
    return ClassPhysics(hw_class, mems, row["uncore_mm2"], float(markup), package,
                        float(ecls["active_increment_W"]),
                        CLASS_DEFAULTS[hw_class].idle_fraction_of_tdp, flop, tuple(notes))


# ---- die --------------------------------------------------------------------------------------

def die_area_mm2(peak_tflops, sram_mb, dtype: DType, cp: ClassPhysics):
    """uncore + compute + SRAM area [mm^2]."""
    d = die_constants()
    return cp.uncore_mm2 + d.compute_mm2_per_tflops(dtype) * peak_tflops + d.sram_mm2_per_mb * sram_mb


def dies_per_wafer(area_mm2):
    """Gross dies per wafer: pi r^2 / A - pi d / sqrt(2 A) (edge loss), at least 0."""
    d = die_constants().wafer_diameter_mm
    a = np.asarray(area_mm2, dtype=float)
    return np.maximum(math.pi * (d / 2) ** 2 / a - math.pi * d / np.sqrt(2.0 * a), 0.0)


def die_yield(area_mm2):
    """Poisson yield exp(-A D0)."""
    return np.exp(-np.asarray(area_mm2, dtype=float) * die_constants().defects_per_mm2)


def die_cost_usd(area_mm2, yield_=None):
    """Wafer price / good dies per wafer [USD] (inf when not one die fits)."""
    good = dies_per_wafer(area_mm2) * (die_yield(area_mm2) if yield_ is None else yield_)
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = die_constants().wafer_usd / good
    cost[~(good > 0)] = np.inf
    return cost


def die_kgco2e(area_mm2, yield_=None):
    """Manufacturing carbon of one good die: area / yield x carbon per area [kgCO2e]."""
    a = np.asarray(area_mm2, dtype=float)
    return a / (die_yield(a) if yield_ is None else yield_) * die_constants().kgco2e_per_mm2


# ---- memory, power ----------------------------------------------------------------------------

def choose_memory(bw_gbps, cap_gb, cp: ClassPhysics) -> tuple[np.ndarray, np.ndarray]:
    """(index into ``cp.memories`` of the cheapest technology that delivers ``bw_gbps`` at
    ``cap_gb``, feasible mask). Infeasible points get the most capable technology (last)."""
    bw = np.asarray(bw_gbps, dtype=float)
    cap = np.asarray(cap_gb, dtype=float)
    shape = np.broadcast(bw, cap).shape
    idx = np.full(shape, len(cp.memories) - 1, dtype=np.int8)
    ok = np.zeros(shape, dtype=bool)
    for i in range(len(cp.memories) - 1, -1, -1):     # cheapest last, so it wins
        m = cp.memories[i]
        fits = bw <= m.max_gbps_per_gb * cap
        fits &= bw <= m.max_gbps
        fits &= cap <= m.max_gb
        idx = np.where(fits, np.int8(i), idx)
        ok |= fits
    return idx, ok


def memory_violation(bw_gbps, cap_gb, cp: ClassPhysics):
    """How far the design is from the nearest allowed memory technology: min over the
    technologies of the largest relative excess (<= 0 when one of them fits). A continuous
    constraint for optimisers."""
    bw = np.asarray(bw_gbps, dtype=float)
    cap = np.asarray(cap_gb, dtype=float)
    best = None
    for m in cp.memories:
        v = np.maximum(np.maximum(bw / (m.max_gbps_per_gb * cap), bw / m.max_gbps), cap / m.max_gb)
        best = v if best is None else np.minimum(best, v)
    return best - 1.0


def required_tdp_w(peak_eff_flops_per_s, bw_eff_bytes_per_s, mem_j_per_byte, cp: ClassPhysics,
                   dtype: DType):
    """The TDP at which ``llmpara_core.metrics.energy_params``' calibration (TDP = P_static +
    e_flop P_eff + e_byte BW_eff, P_static = idle fraction x TDP + active increment) returns
    the class's own e_flop: TDP = (increment + e_flop P_eff + e_byte BW_eff) / (1 - idle)."""
    num = (cp.active_increment_w + cp.class_flop_j(dtype) * peak_eff_flops_per_s
           + mem_j_per_byte * bw_eff_bytes_per_s)
    return num / (1.0 - cp.idle_fraction_of_tdp)
