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
  *estimated* roofline, TDP = P_static + e_flop * P_eff + e_w * BW_eff, with the device's own
  efficiency (its preset's, else its class and memory technology's), whatever the scenario's
  stack: a stack changes how long an operator takes, not the energy of a FLOP. The per-dtype
  value follows the device's own peaks. Without a TDP, the class default per dtype from
  ``energy.toml``.
* The stack's per-pass fixed time (scheduler, sampling, host sync: ``Rates.pass_overhead_s``),
  when no operator runs, is drawn at P_static (the TDP-fraction model: its idle floor).

The power model of ``metrics.energy_validation`` (``model="power"``: a busy device draws a
fitted share of its idle-to-TDP range plus its scaled technology energies per FLOP and per byte,
a device waiting on the host a smaller share; fitted and validated on the batched ML.ENERGY
rows) is applied per operator: an operator's kernel time at busy power, its kernel launches and
the pass's fixed time at host power. Summed over a run, it gives exactly the validation's
energy per token.

The reference's TDP-fraction model (power = TDP (alpha u_c + (1 - alpha) u_m), floored at 5 % of
TDP; reference-tool §4.1) is kept as ``model="tdp-fraction"`` for comparison, using the same
operator times. Reference defects fixed here (§10 items 15-16): energy is summed over operators
(not an unweighted mean of per-row efficiencies), decode is integrated over every generated
token, and the time is the roofline time of the operator, not FLOPs / peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..analysis import OpRow, Report, phase_rates
from .energy_params import (EnergyParams, class_entry, device_entry, energy_params,  # noqa: F401
                            energy_table, hardware_power_table, memory_technology_j_per_byte,
                            params_for_report)
from ..errors import ConfigError
from ..hardware import Hardware
from ..operators import OpKind
from ..roofline import Rates, launches, rates
from .power_model import power_constants, recorded_fit

MODELS = ("components", "tdp-fraction", "power")
# "auto": the fitted power model where the device has a TDP and an idle power (the model
# validated on the published batched rows), else the component model.
MODEL_CHOICES = ("auto",) + MODELS

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


def op_launch_s(row, r: Rates) -> float:
    """Time of an operator row's kernel launches (host dispatch, no kernel running) [s]."""
    return launches(row.count, False, r, row.name) * r.kernel_overhead_s


def power_op_energy(row: OpRow, p: EnergyParams, busy_w: float, host_w: float,
                    dynamic: float, launch_s: float) -> OpEnergy:
    """Power-model energy of one operator (``metrics.energy_validation``): its kernel time at
    ``busy_w`` plus ``dynamic`` x (e_flop F + e_main B), its launch time ``launch_s`` (host
    dispatch, no kernel running) at ``host_w``. Link energy is inside the fitted busy power."""
    t = row.estimated_s
    launch_s = min(launch_s, t)
    return OpEnergy(row.phase, row.name, row.kind, row.group, row.flops, row.memory_bytes, t,
                    dynamic * row.flops * p.flop_j,
                    dynamic * row.memory_bytes * p.main_j_per_byte, 0.0,
                    busy_w * (t - launch_s) + host_w * launch_s)


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
    model: str                         # "components", "power" or "tdp-fraction"
    params: EnergyParams
    prefill: tuple[OpEnergy, ...]
    decode: tuple[OpEnergy, ...]
    decode_steps: int
    batch: int
    prompt_len: int
    gen_len: int
    alpha: float | None = None
    assumptions: tuple[str, ...] = field(default=())
    # Per-pass fixed time of the stack (scheduler, sampling, host sync: the report's
    # ``pass_overhead_s``), when no operator runs: the prefill pass's and each decode step's,
    # drawn at ``fixed_w`` (static power; the TDP-fraction model's idle floor).
    prefill_fixed_s: float = 0.0
    decode_fixed_s: float = 0.0
    fixed_w: float = 0.0
    # power model only: what a device draws running kernels before its dynamic energy, and
    # the scale of the technology energies per FLOP and per byte (1 for the other models)
    busy_w: float | None = None
    dynamic_scale: float = 1.0

    @property
    def prefill_j(self) -> float:
        return sum(o.total_j for o in self.prefill) + self.fixed_w * self.prefill_fixed_s

    @property
    def decode_step_j(self) -> float:
        """Mean energy of one decode step of the whole batch."""
        return sum(o.total_j for o in self.decode) + self.fixed_w * self.decode_fixed_s

    @property
    def decode_total_j(self) -> float:
        return self.decode_step_j * self.decode_steps

    @property
    def total_j(self) -> float:
        """Energy of the whole run: prefill + every decode step (all sequences)."""
        return self.prefill_j + self.decode_total_j

    @property
    def decode_step_s(self) -> float:
        """Mean time of one decode step: its operators and the per-pass fixed time."""
        return sum(o.time_s for o in self.decode) + self.decode_fixed_s

    @property
    def total_time_s(self) -> float:
        return (sum(o.time_s for o in self.prefill) + self.prefill_fixed_s
                + self.decode_steps * self.decode_step_s)

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

    def whole_run_parts_j(self) -> dict[str, float]:
        """Energy of the whole run [J] by part: ``compute``, ``memory``, ``static`` and ``link``
        (prefill once + every decode step)."""
        def part(attr: str) -> float:
            return (sum(getattr(o, attr) for o in self.prefill)
                    + self.decode_steps * sum(getattr(o, attr) for o in self.decode))
        fixed_j = self.fixed_w * (self.prefill_fixed_s + self.decode_steps * self.decode_fixed_s)
        return {"compute": part("compute_j"), "memory": part("memory_j"),
                "static": part("static_j") + fixed_j, "link": part("comm_j")}


def resolve_energy_model(model: str, hardware: Hardware, params: EnergyParams) -> str:
    """The model ``"auto"`` stands for on this device ("power" with a TDP and an idle power,
    else "components"); any other name is returned as it is."""
    if model != "auto":
        return model
    return ("power" if hardware.tdp_w is not None and params.idle_w is not None
            else "components")


def _power_fit_note() -> str:
    f = recorded_fit()
    try:
        return (f"{float(f['batched']):.1%} batched, {float(f['batch_1']):.1%} at batch 1 "
                f"(median, leave one device out)")
    except (KeyError, TypeError, ValueError):
        return "not recorded"


def energy_report(report: Report, params: EnergyParams | None = None,
                  model: str = "components", alpha: float | None = None) -> EnergyReport:
    """Energy of the scenario of ``report`` under the component model (default), the fitted
    power model (``"power"``) or the reference's TDP-fraction model (``alpha`` defaults to the
    reference's class value)."""
    if model not in MODEL_CHOICES:
        raise ConfigError(f"energy model must be one of {', '.join(MODEL_CHOICES)}, "
                          f"got {model!r}")
    p = params or params_for_report(report)
    model = resolve_energy_model(model, report.hardware, p)
    wl = report.workload
    notes = list(p.assumptions)
    pre_r, dec_r = phase_rates(report.hardware, report.precision, wl, report.efficiency)
    if model == "components":
        fn = lambda r: op_energy(r, p)   # noqa: E731
        used_alpha = None
    elif model == "power":
        c, tdp = power_constants(), report.hardware.tdp_w
        if tdp is None or p.idle_w is None:
            raise ConfigError(f"{report.hardware.name}: the power model needs a TDP and an "
                              f"idle power (choose the component model)")
        busy_w = p.idle_w + (tdp - p.idle_w) * c.active
        host_w = p.idle_w + (tdp - p.idle_w) * c.host

        def fn(r):
            rr = pre_r if r.phase == "prefill" else dec_r
            return power_op_energy(r, p, busy_w, host_w, c.dynamic, op_launch_s(r, rr))
        used_alpha = None
        notes = [f"power model (presets/tables/energy_power.toml, fitted on the batched "
                 f"ML.ENERGY rows): busy {busy_w:.3g} W + {c.dynamic:g} x technology energies, "
                 f"host wait {host_w:.3g} W; held-out error {_power_fit_note()}"]
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
    pre_fixed = pre_r.pass_overhead_s if wl.prompt_len else 0.0
    if model == "components":
        fixed_w, drawn = p.static_w, "static power"
    elif model == "power":
        fixed_w, drawn = host_w, "the host-wait power"
    else:
        fixed_w = energy_table()["tdp_fraction"]["idle_floor_fraction"] * report.hardware.tdp_w
        drawn = "the idle floor"
    if dec_r.pass_overhead_s or pre_fixed:
        notes.append(f"the stack's per-pass fixed time ({dec_r.pass_overhead_s * 1e3:.3g} ms "
                     f"per decode step: scheduler, sampling, host sync) is drawn at "
                     f"{fixed_w:.3g} W ({drawn})")
    e = EnergyReport(model, p, tuple(fn(r) for r in report.prefill.rows),
                     tuple(fn(r) for r in report.decode.rows), report.decode_steps,
                     wl.batch, wl.prompt_len, wl.gen_len, used_alpha, tuple(notes),
                     pre_fixed, dec_r.pass_overhead_s, fixed_w,
                     busy_w if model == "power" else None,
                     c.dynamic if model == "power" else 1.0)
    if model == "power" and (e.avg_power_w or 0.0) > tdp:
        # the validation's power cap: the clock drops, the same energy takes longer
        e = replace(e, assumptions=e.assumptions + (
            f"the run would draw {e.avg_power_w:.4g} W on average, over the {tdp:g} W TDP: "
            f"under its power cap the device runs about {e.avg_power_w / tdp:.3g}x longer for "
            f"the same energy (times and tokens/s here are the uncapped ones)",))
    return e


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
    limit = p.flop_j + p.static_w / r.flops_per_s
    with np.errstate(divide="ignore"):    # all-zero constants (user overrides): no energy
        curve = np.where(per_flop > 0, 1.0 / np.where(per_flop > 0, per_flop, 1.0), np.inf)
    bal = p.main_j_per_byte / p.flop_j if p.flop_j > 0 else None
    return EnergyRoofline(x, curve, 1.0 / limit if limit > 0 else math.inf,
                          r.ridge_flops_per_byte, bal)


def tdp_fraction_roofline(tdp_w: float, alpha: float, r: Rates, intensity=None) -> EnergyRoofline:
    """Reference curve: min(I BW, P) / max(TDP (alpha u_c + (1 - alpha) u_m), 0.05 TDP)."""
    floor = energy_table()["tdp_fraction"]["idle_floor_fraction"]
    x = np.logspace(-2, 4, 241) if intensity is None else np.asarray(intensity, dtype=float)
    ridge = r.ridge_flops_per_byte
    u_c = np.where(x < ridge, x / ridge, 1.0)
    u_m = np.where(x < ridge, 1.0, ridge / x)
    power = np.maximum(tdp_w * (alpha * u_c + (1 - alpha) * u_m), floor * tdp_w)
    perf = np.minimum(x * r.bytes_per_s, r.flops_per_s)
    # compute-bound limit: power TDP alpha, never below the floor (alpha = 0 is valid: the
    # floor then sets the power; it divided by zero before, issue 29)
    return EnergyRoofline(x, perf / power, r.flops_per_s / (max(alpha, floor) * tdp_w), ridge,
                          None)


# ------------------------------------------------------------------------------ validation

def j_per_token_with_step_time(e: EnergyReport, s_per_step: float) -> float | None:
    """J per output token when every decode step takes ``s_per_step`` (e.g. a measured TPOT)
    instead of the model's time: static energy follows the given time, dynamic energy (FLOPs,
    bytes) is the model's. Isolates the power model from the time model in validation."""
    if not e.output_tokens:
        return None
    model_step_s = e.decode_step_s
    if e.model == "components":
        step_j = e.decode_step_j - e.params.static_w * model_step_s + e.params.static_w * s_per_step
    else:   # TDP-fraction: constant power over the step
        step_j = e.decode_step_j / model_step_s * s_per_step if model_step_s > 0 else 0.0
    return (e.prefill_j + e.decode_steps * step_j) / e.output_tokens


@dataclass(frozen=True)
class EnergyMeasurement:
    """One published energy-per-output-token measurement mapped to presets."""
    row_id: str
    model_preset: str
    hardware_preset: str
    precision_preset: str
    batch: int
    prompt_len: int
    gen_len: int
    measured_j_per_token: float
    measured_s_per_step: float | None
    in_tolerance_test: bool
    hardware: str = ""
    model: str = ""
    source: str = ""
    notes: str = ""
    framework: str = ""      # the stack measured (its profile times the prediction)
    devices: int = 1         # GPUs of the run (> 1: tensor parallel; metrics.energy_validation)


def read_energy_measurements(path) -> tuple[EnergyMeasurement, ...]:
    """Rows of a CSV in the format of ``presets/tables/energy_measurements.csv`` ('#' lines are
    comments; J_per_output_token rows only)."""
    import csv
    out = []
    with open(path, encoding="utf-8") as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if r["metric"] != "J_per_output_token":
                continue
            step = r.get("measured_s_per_step") or ""
            out.append(EnergyMeasurement(
                r["row_id"], r["model_preset"], r["hardware_preset"], r["precision_preset"],
                max(1, round(float(r["avg_batch"]))), int(r["prompt_len_assumed"]),
                int(r["gen_len_used"]), float(r["value"]), float(step) if step else None,
                r["use_in_tolerance_test"].startswith("yes"), r["hardware"], r["model"],
                r["source"], r.get("mapping_notes", ""), r.get("framework", ""),
                int(r.get("num_devices") or 1)))
    return tuple(out)


@dataclass(frozen=True)
class EnergyValidation:
    """Predictions for one measurement (J per output token)."""
    measurement: EnergyMeasurement
    predicted_j_per_token: float
    predicted_with_measured_time_j_per_token: float | None
    tdp_fraction_j_per_token: float | None
    predicted_s_per_step: float
    fits: bool

    @property
    def ratio(self) -> float:
        """Predicted / measured (model time)."""
        return self.predicted_j_per_token / self.measurement.measured_j_per_token

    @property
    def ratio_with_measured_time(self) -> float | None:
        p = self.predicted_with_measured_time_j_per_token
        return None if p is None else p / self.measurement.measured_j_per_token


def geometric_mean_ratio(ratios) -> float | None:
    """Geometric mean of predicted / measured ratios (None for no ratios; every ratio > 0)."""
    logs = [math.log(x) for x in ratios if x is not None]
    return math.exp(sum(logs) / len(logs)) if logs else None


def validate_energy(measurements) -> tuple[EnergyValidation, ...]:
    """Predict every measurement with the presets it names, timed with the profile of the
    stack it measured (``framework``; none = the device's own values), under the component
    model (the TDP-fraction model alongside for comparison)."""
    from ..analysis import analyze
    from ..calibration import efficiency_for, framework_of_label
    from ..precision import precision_preset
    from ..presets import load_hardware, load_model
    from ..workload import Workload
    out = []
    for m in measurements:
        if m.devices != 1:
            raise ConfigError(f"{m.row_id}: validate_energy models one device; rows on "
                              f"{m.devices} GPUs are validated by metrics.energy_validation")
        hw = load_hardware(m.hardware_preset)
        stack = framework_of_label(m.framework) if m.framework else None
        r = analyze(load_model(m.model_preset), hw, precision_preset(m.precision_preset),
                    Workload(batch=m.batch, prompt_len=m.prompt_len, gen_len=m.gen_len),
                    efficiency=efficiency_for(hw, stack) if stack else None)
        e = energy_report(r)
        tdp = energy_report(r, model="tdp-fraction") if r.hardware.tdp_w else None
        measured_t = (None if m.measured_s_per_step is None
                      else j_per_token_with_step_time(e, m.measured_s_per_step))
        out.append(EnergyValidation(m, e.j_per_output_token, measured_t,
                                    None if tdp is None else tdp.j_per_output_token,
                                    r.estimated.tpot_s, r.memory.fits))
    return tuple(out)
