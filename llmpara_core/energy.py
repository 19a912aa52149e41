"""Energy of a scenario: per operator, per prefill, per decoded token, per request.

The model is the energy roofline of Choi, Bedard, Fowler & Vuduc ("A Roofline Model of Energy",
IPDPS 2013): every operator costs

    E = F * e_flop(dtype) + B_w * e_w + B_kv * e_kv + B_act * e_act + C * e_link + P_static * t

with F its FLOPs (priced at the compute data type actually used), B_* its bytes by kind (each
priced at the memory tier that holds that kind), C its communication bytes and t its *estimated*
time from the report (``OpRow.estimated_s``; this module never recomputes time).

Parameters (``energy_params``), each with its origin listed in ``EnergyParams.assumptions``:

* P_static = idle power + the active increment of the class (a busy device holds a context and
  clocks up). Idle power: the preset's ``idle_W``, else ``presets/tables/hardware_power.toml``,
  else the class fraction of TDP (``hardware.CLASS_DEFAULTS``), else the class fallback.
* e_byte per memory technology (``presets/tables/energy.toml``) plus on-chip delivery for
  off-chip memories; tiered devices use each tier's own ``energy_pJ_per_byte`` and a greedy
  fastest-first placement of activations, weights and KV cache.
* e_flop: with a TDP, calibrated so the device draws exactly its TDP at the ridge point of its
  *estimated* roofline, TDP = P_static + e_flop * P_eff + e_w * BW_eff. Then no operator's power
  exceeds TDP, and the per-dtype value follows the device's own peaks. Without a TDP, the
  class default per dtype from ``energy.toml``.

The reference's TDP-fraction model (power = TDP (alpha u_c + (1 - alpha) u_m), floored at 5 % of
TDP; reference-tool §4.1) is kept as ``model="tdp-fraction"`` for comparison, using the same
operator times. Reference defects fixed here (§10 items 15-16): energy is summed over operators
(not an unweighted mean of per-row efficiencies), decode is integrated over every generated
token, and the time is the roofline time of the operator, not FLOPs / peak.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from .analysis import OpRow, Report
from .errors import ConfigError
from .hardware import Efficiency, Hardware
from .operators import OpKind
from .precision import DType
from .presets import load_table
from .roofline import Rates, rates
from .units import J_PER_PJ

MODELS = ("components", "tdp-fraction")


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

    ``efficiency`` (default: the device's) sets the estimated roofline on which e_flop is
    calibrated to TDP; ``sizes`` = {"weight", "kv", "act": bytes} places data on tiered devices.
    """
    notes: list[str] = []
    cls = class_entry(hardware)
    idle = _idle_w(hardware, notes)
    static = (idle or 0.0) + (cls["active_increment_W"] if idle is not None else 0.0)
    if idle is not None and cls["active_increment_W"]:
        notes.append(f"static {static:g} W = idle + {cls['active_increment_W']:g} W active "
                     f"increment ({hardware.hw_class.value})")
    e_w, e_kv, e_act, e_main = _memory_j_per_byte(hardware, sizes, notes)
    eff = efficiency or hardware.effective_efficiency
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
    """``energy_params`` for the scenario of ``report`` (its efficiency and data sizes)."""
    mem = report.memory
    return energy_params(report.hardware, report.precision.compute_dtype, report.efficiency,
                         {"weight": mem.weight_bytes, "kv": mem.kv_cache_bytes,
                          "act": mem.activation_bytes})


# ------------------------------------------------------------------------------ per operator

@dataclass(frozen=True)
class OpEnergy:
    """Energy of one operator row (prefill: one pass; decode: mean per step). Joules."""
    phase: str
    name: str
    kind: OpKind
    group: str
    flops: float
    memory_bytes: float
    time_s: float
    compute_j: float
    memory_j: float
    comm_j: float
    static_j: float

    @property
    def total_j(self) -> float:
        return self.compute_j + self.memory_j + self.comm_j + self.static_j

    @property
    def power_w(self) -> float | None:
        return self.total_j / self.time_s if self.time_s > 0 else None

    @property
    def flops_per_j(self) -> float | None:
        return self.flops / self.total_j if self.total_j > 0 else None

    @property
    def arithmetic_intensity(self) -> float | None:
        return self.flops / self.memory_bytes if self.memory_bytes > 0 else None


def op_energy(row: OpRow, p: EnergyParams) -> OpEnergy:
    """Component-model energy of one operator (formula in the module docstring)."""
    mem_j = (row.weight_bytes * p.weight_j_per_byte
             + (row.kv_read_bytes + row.kv_write_bytes) * p.kv_j_per_byte
             + (row.act_read_bytes + row.act_write_bytes) * p.act_j_per_byte)
    return OpEnergy(row.phase, row.name, row.kind, row.group, row.flops, row.memory_bytes,
                    row.estimated_s, row.flops * p.flop_j, mem_j,
                    row.comm_bytes * p.link_j_per_byte, p.static_w * row.estimated_s)


def reference_alpha(hardware: Hardware) -> float:
    """The reference tool's compute-power fraction for the device's class."""
    return float(class_entry(hardware)["reference_alpha"])


def tdp_fraction_op_energy(row: OpRow, tdp_w: float, alpha: float, ridge: float) -> OpEnergy:
    """Reference-tool energy of one operator: P = max(TDP (alpha u_c + (1 - alpha) u_m),
    0.05 TDP) over the operator's estimated time; u_c = I/R, u_m = 1 below the ridge R,
    u_c = 1, u_m = R/I above it (reference §4.1). Split into compute / memory / floor parts."""
    floor = energy_table()["tdp_fraction"]["idle_floor_fraction"]
    i = row.arithmetic_intensity
    if i is None:
        u_c, u_m = (1.0, 0.0) if row.flops > 0 else (0.0, 0.0)
    elif i < ridge:
        u_c, u_m = i / ridge, 1.0
    else:
        u_c, u_m = 1.0, ridge / i
    t = row.estimated_s
    c, m = tdp_w * alpha * u_c * t, tdp_w * (1 - alpha) * u_m * t
    extra = max(0.0, floor * tdp_w * t - c - m)
    return OpEnergy(row.phase, row.name, row.kind, row.group, row.flops, row.memory_bytes,
                    t, c, m, 0.0, extra)


# ------------------------------------------------------------------------------ scenario

@dataclass(frozen=True)
class EnergyReport:
    """Energy of a whole scenario. Decode rows are means per decode step over the batch."""
    model: str                         # "components" or "tdp-fraction"
    params: EnergyParams
    prefill: tuple[OpEnergy, ...]
    decode: tuple[OpEnergy, ...]
    decode_steps: int
    batch: int
    prompt_len: int
    gen_len: int
    alpha: float | None = None
    assumptions: tuple[str, ...] = field(default=())

    @property
    def prefill_j(self) -> float:
        return sum(o.total_j for o in self.prefill)

    @property
    def decode_step_j(self) -> float:
        """Mean energy of one decode step of the whole batch."""
        return sum(o.total_j for o in self.decode)

    @property
    def decode_total_j(self) -> float:
        return self.decode_step_j * self.decode_steps

    @property
    def total_j(self) -> float:
        """Energy of the whole run: prefill + every decode step (all sequences)."""
        return self.prefill_j + self.decode_total_j

    @property
    def total_time_s(self) -> float:
        return (sum(o.time_s for o in self.prefill)
                + self.decode_steps * sum(o.time_s for o in self.decode))

    @property
    def output_tokens(self) -> int:
        return self.batch * self.gen_len

    @property
    def j_per_output_token(self) -> float | None:
        """All energy (prefill folded in) / output tokens: the ML.ENERGY definition."""
        return self.total_j / self.output_tokens if self.output_tokens else None

    @property
    def decode_j_per_token(self) -> float | None:
        """Marginal energy of one decoded token (decode step / batch); None without decode."""
        return self.decode_step_j / self.batch if self.decode_steps else None

    @property
    def tokens_per_j(self) -> float | None:
        j = self.j_per_output_token
        return 1.0 / j if j else None

    @property
    def request_j(self) -> float:
        """Energy of one request (one sequence of the batch)."""
        return self.total_j / self.batch

    @property
    def avg_power_w(self) -> float | None:
        t = self.total_time_s
        return self.total_j / t if t > 0 else None

    @property
    def seconds_per_output_token(self) -> float | None:
        """Device time per output token (batch shares the device)."""
        return self.total_time_s / self.output_tokens if self.output_tokens else None

    def rows(self) -> tuple[OpEnergy, ...]:
        return self.prefill + self.decode


def energy_report(report: Report, params: EnergyParams | None = None,
                  model: str = "components", alpha: float | None = None) -> EnergyReport:
    """Energy of the scenario of ``report`` under the component model (default) or the
    reference's TDP-fraction model (``alpha`` defaults to the reference's class value)."""
    if model not in MODELS:
        raise ConfigError(f"energy model must be one of {', '.join(MODELS)}, got {model!r}")
    p = params or params_for_report(report)
    wl = report.workload
    notes = list(p.assumptions)
    if model == "components":
        fn = lambda r: op_energy(r, p)   # noqa: E731
        used_alpha = None
    else:
        tdp = report.hardware.tdp_w
        if tdp is None:
            raise ConfigError(f"{report.hardware.name} has no TDP: the TDP-fraction model "
                              f"needs one")
        used_alpha = reference_alpha(report.hardware) if alpha is None else float(alpha)
        if not 0 <= used_alpha <= 1:
            raise ConfigError(f"alpha must be in [0, 1], got {used_alpha}")
        ridge = estimated_rates(report).ridge_flops_per_byte
        fn = lambda r: tdp_fraction_op_energy(r, tdp, used_alpha, ridge)   # noqa: E731
        notes = [f"reference TDP-fraction model: alpha = {used_alpha:g}, TDP {tdp:g} W, "
                 f"5 % idle floor, operator times as in the component model"]
    if report.hardware.interconnect is not None and report.hardware.interconnect.devices > 1:
        notes.append("energy of the single device the plain analysis runs on (see Sharding "
                     "for the whole cluster)")
    return EnergyReport(model, p, tuple(fn(r) for r in report.prefill.rows),
                        tuple(fn(r) for r in report.decode.rows), report.decode_steps,
                        wl.batch, wl.prompt_len, wl.gen_len, used_alpha, tuple(notes))


def estimated_rates(report: Report) -> Rates:
    return rates(report.hardware, report.precision.compute_dtype, estimated=True,
                 efficiency=report.efficiency)


# ------------------------------------------------------------------------------ rooflines

@dataclass(frozen=True)
class EnergyRoofline:
    """Attainable FLOP/J against arithmetic intensity (FLOP/B) for one device and model."""
    intensity: np.ndarray
    flops_per_j: np.ndarray
    ceiling_flops_per_j: float         # limit as intensity -> infinity
    time_ridge: float                  # P_eff / BW_eff [FLOP/B]
    energy_balance: float | None       # e_byte / e_flop [FLOP/B]: memory energy = FLOP energy


def energy_roofline(p: EnergyParams, r: Rates, intensity=None) -> EnergyRoofline:
    """Choi et al. (2013): FLOP/J(I) = 1 / (e_flop + e_byte / I + P_static max(1/P, 1/(I BW)))
    with the estimated rates ``r`` and main memory's energy per byte (no launch overhead, so
    every operator lies on or below the curve)."""
    x = np.logspace(-2, 4, 241) if intensity is None else np.asarray(intensity, dtype=float)
    per_flop = (p.flop_j + p.main_j_per_byte / x
                + p.static_w * np.maximum(1.0 / r.flops_per_s, 1.0 / (x * r.bytes_per_s)))
    ceiling = 1.0 / (p.flop_j + p.static_w / r.flops_per_s)
    bal = p.main_j_per_byte / p.flop_j if p.flop_j > 0 else None
    return EnergyRoofline(x, 1.0 / per_flop, ceiling, r.ridge_flops_per_byte, bal)


def tdp_fraction_roofline(tdp_w: float, alpha: float, r: Rates, intensity=None) -> EnergyRoofline:
    """Reference curve: min(I BW, P) / max(TDP (alpha u_c + (1 - alpha) u_m), 0.05 TDP)."""
    floor = energy_table()["tdp_fraction"]["idle_floor_fraction"]
    x = np.logspace(-2, 4, 241) if intensity is None else np.asarray(intensity, dtype=float)
    ridge = r.ridge_flops_per_byte
    u_c = np.where(x < ridge, x / ridge, 1.0)
    u_m = np.where(x < ridge, 1.0, ridge / x)
    power = np.maximum(tdp_w * (alpha * u_c + (1 - alpha) * u_m), floor * tdp_w)
    perf = np.minimum(x * r.bytes_per_s, r.flops_per_s)
    return EnergyRoofline(x, perf / power, r.flops_per_s / (alpha * tdp_w), ridge, None)
