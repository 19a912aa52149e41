"""Energy per output token under load: a power model of busy and waiting devices, validated
on the published ML.ENERGY rows (``presets/tables/energy_measurements.csv``).

A run of time T (the model's own estimate, under the stack the row measured; tensor-parallel
rows timed by ``parallel.shard_analyze``) splits, on each of its N devices, into *host time*
T_h (the stack's fixed time per pass -- scheduler, sampling, host sync -- and its kernel
launches, when no kernel runs) and *busy time* T_b = T - T_h. With R = TDP - P_idle:

    busy:  P_b = P_idle + R k_active + k_dynamic (e_flop F + e_byte B) / (N T_b)
    host:  P_h = P_idle + R k_host

F and B are the run's FLOPs and memory bytes; e_flop (the compute type's energy per FLOP:
tensor-core work) and e_byte (main memory's energy per byte: memory streaming) are the device's
own technology constants of ``metrics.energy`` (``energy_params``: e_byte by memory technology,
e_flop calibrated so the device draws its TDP at the ridge of its roofline), so the dynamic
power grows with tensor-core utilisation and memory streaming at the device's own prices.
``k_active`` is the share of the idle-to-TDP range a device running kernels draws whatever they
do (clocks up, SMs and caches active), ``k_dynamic`` scales the technology energies,
``k_host`` is what a device clocked up but waiting for the host draws. The power cap: P_b > TDP
cannot be drawn, so the clock drops until the device draws its TDP and the busy time stretches
by P_b / TDP (the same energy over a longer time). Energy per output token = N (P_b T_b +
P_h T_h) / (batch x generated tokens), prefill folded in as ML.ENERGY does.

The three constants are device-independent, fitted on the batched rows (``energy_fit``,
``scripts/fit_energy.py``) and stored in ``presets/tables/energy_power.toml``; the fit's
figures are leave-one-device-out.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from ..error_stats import error_stats as _stats
from ..errors import ConfigError
from .energy import EnergyMeasurement, energy_params, op_launch_s, read_energy_measurements
from .power_model import PowerConstants, power_constants, recorded_fit  # noqa: F401

DATA = Path(__file__).resolve().parents[2] / "presets" / "tables" / "energy_measurements.csv"
ENERGY_TOLERANCE_MEDIAN = 0.15      # issue 27: batched energy per token within 15 % (median)


@dataclass(frozen=True)
class RowWork:
    """What the power model needs of one measurement: the modelled run and its work."""
    measurement: EnergyMeasurement
    devices: int
    stack: str
    time_s: float                   # modelled run (prefill + every decode step)
    flops: float                    # whole run, all devices
    memory_bytes: float             # whole run, all devices
    peak_flops_per_s: float         # one device, the compute type's dense peak
    bandwidth_bytes_per_s: float    # one device
    idle_w: float
    tdp_w: float
    host_s: float = 0.0             # the stack's per-pass fixed time (no kernel runs)
    flop_j: float = 0.0             # the device's energy per FLOP of the compute type
    byte_j: float = 0.0             # the device's energy per byte of main memory

    @property
    def dynamic_j(self) -> float:
        """Technology energy of the run's FLOPs and bytes, all devices [J]."""
        return self.flop_j * self.flops + self.byte_j * self.memory_bytes

    @property
    def busy_s(self) -> float:
        """Time the devices run kernels: the run less the stack's host time per pass."""
        return max(self.time_s - self.host_s, 0.0)

    @property
    def output_tokens(self) -> int:
        return self.measurement.batch * self.measurement.gen_len

    @property
    def compute_s(self) -> float:
        """FLOPs of one device at its dense peak [s]."""
        return self.flops / self.devices / self.peak_flops_per_s

    @property
    def memory_s(self) -> float:
        """Bytes of one device at its peak bandwidth [s]."""
        return self.memory_bytes / self.devices / self.bandwidth_bytes_per_s

    @property
    def compute_utilisation(self) -> float:
        """Tensor-core utilisation over the busy time (0 without busy time)."""
        return self.compute_s / self.busy_s if self.busy_s > 0 else 0.0

    @property
    def memory_utilisation(self) -> float:
        """Memory-streaming utilisation over the busy time (0 without busy time)."""
        return self.memory_s / self.busy_s if self.busy_s > 0 else 0.0

    @property
    def batched(self) -> bool:
        return self.measurement.batch > 1


def busy_power_w(w: RowWork, c: PowerConstants) -> float:
    """Power one device would draw while running kernels, before the cap [W] (no busy time:
    the busy share alone)."""
    dyn = c.dynamic * w.dynamic_j / w.devices / w.busy_s if w.busy_s > 0 else 0.0
    return w.idle_w + (w.tdp_w - w.idle_w) * c.active + dyn


def device_energy_j(w: RowWork, c: PowerConstants) -> float:
    """Energy of one device over the run [J] (the cap changes the time, not the energy)."""
    host_w = w.idle_w + (w.tdp_w - w.idle_w) * c.host
    busy_j = ((w.idle_w + (w.tdp_w - w.idle_w) * c.active) * w.busy_s
              + c.dynamic * w.dynamic_j / w.devices)
    return busy_j + host_w * w.host_s


def run_time_s(w: RowWork, c: PowerConstants) -> float:
    """The run's time under the power cap: the busy time stretched by P_b / TDP > 1."""
    return w.host_s + w.busy_s * max(1.0, busy_power_w(w, c) / w.tdp_w)


def device_power_w(w: RowWork, c: PowerConstants) -> float:
    """Average power of one device over the (capped) run [W]; never above its TDP."""
    t = run_time_s(w, c)
    return device_energy_j(w, c) / t if t > 0 else w.idle_w


def j_per_token(w: RowWork, c: PowerConstants | None = None) -> float:
    """Predicted energy per output token [J] (all devices, prefill folded in)."""
    c = c or power_constants()
    return w.devices * device_energy_j(w, c) / w.output_tokens


def component_j_per_token(w: RowWork) -> float:
    """The component model's J per output token (``metrics.energy``: static power over the
    run on every device + e_flop x FLOPs + e_byte x bytes, constants from technology and each
    device's TDP, none fitted on these rows), for comparison with the power model: every byte
    priced as a weight byte of main memory, no link energy."""
    from ..presets import load_hardware
    from ..precision import DType
    m = w.measurement
    p = energy_params(load_hardware(m.hardware_preset), DType.FP16)
    return (w.devices * p.static_w * w.time_s + p.flop_j * w.flops
            + p.weight_j_per_byte * w.memory_bytes) / w.output_tokens


def _interconnect(hw, n: int):
    """The link of an n-device tensor-parallel row, as the timing validation maps it."""
    from ..calibration.measurements import mapping_table
    from ..hardware import Interconnect, Topology
    from ..units import BYTES_PER_GB, S_PER_US
    links = mapping_table().get("link_for", {})
    link = mapping_table()["link"][links.get(hw.slug, links["default"])]
    return Interconnect(float(link["bandwidth_GBps"]) * BYTES_PER_GB,
                        float(link["latency_us"]) * S_PER_US, Topology(link["topology"]), n)


def _launch_s(rows, r) -> float:
    """Fixed cost of a pass's kernel launches (host dispatch; no kernel running)."""
    return sum(op_launch_s(o, r) for o in rows)


def row_work(m: EnergyMeasurement) -> RowWork:
    """Model one measurement: its run under the stack it measured (a row naming none: its
    class's default stack), timed on its devices, and the run's FLOPs and bytes."""
    from ..analysis import analyze, phase_rates
    from ..calibration import efficiency_for, framework_of_label
    from ..calibration.stacks import with_stack
    from ..precision import precision_preset
    from ..presets import load_hardware, load_model
    from ..workload import Workload
    if m.devices < 1:
        raise ConfigError(f"{m.row_id}: number of devices must be >= 1")
    hw = load_hardware(m.hardware_preset)
    fw = framework_of_label(m.framework) if m.framework else None
    if fw is None:
        hw_s, stack = with_stack(hw, None)
        eff, name = hw_s.effective_efficiency, stack.name
    else:
        eff, name = efficiency_for(hw, fw), fw
    model, prec = load_model(m.model_preset), precision_preset(m.precision_preset)
    wl = Workload(batch=m.batch, prompt_len=m.prompt_len, gen_len=m.gen_len)
    single = analyze(model, hw, prec, wl, efficiency=eff)
    if m.devices == 1:
        time_s = single.estimated.e2e_latency_s
    else:
        from ..parallel import ParallelPlan, shard_analyze
        sh = shard_analyze(model, replace(hw, interconnect=_interconnect(hw, m.devices)), prec,
                           wl, ParallelPlan(tp=m.devices), efficiency=eff)
        time_s = sh.estimated.e2e_latency_s
    flops = single.prefill.flops + single.decode.flops * single.decode_steps
    mem = single.prefill.memory_bytes + single.decode.memory_bytes * single.decode_steps
    pre_r, dec_r = phase_rates(hw, prec, wl, eff)
    host_s = ((pre_r.pass_overhead_s + _launch_s(single.prefill.rows, pre_r)
               if wl.prompt_len else 0.0)
              + (dec_r.pass_overhead_s + _launch_s(single.decode.rows, dec_r))
              * single.decode_steps)
    p = energy_params(hw, single.dtype_used)
    if hw.tdp_w is None or p.idle_w is None:
        raise ConfigError(f"{hw.name}: the power model needs a TDP and an idle power")
    return RowWork(m, m.devices, name, time_s, flops, mem, single.peak_flops_per_s,
                   single.bandwidth_bytes_per_s, float(p.idle_w), float(hw.tdp_w),
                   min(host_s, time_s), p.flop_j, p.main_j_per_byte)


@functools.lru_cache(maxsize=4)
def energy_rows(path: str | None = None) -> tuple[RowWork, ...]:
    """Every modellable J/token row of the measurement file (default: the shipped copy):
    the ML.ENERGY rows on devices with a TDP, single- and multi-device."""
    out = []
    for m in read_energy_measurements(path or DATA):
        if not m.row_id.startswith("E0") or "ML.ENERGY" not in m.source:
            continue
        out.append(row_work(m))
    return tuple(out)


@dataclass(frozen=True)
class EnergyPrediction:
    work: RowWork
    predicted_j_per_token: float
    held_out: bool                  # predicted with constants fitted without this device

    @property
    def measured_j_per_token(self) -> float:
        return self.work.measurement.measured_j_per_token

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted_j_per_token / self.measured_j_per_token - 1.0


def median_abs(preds) -> float | None:
    e = [abs(p.error) for p in preds]
    return statistics.median(e) if e else None


def group_of(w: RowWork) -> str:
    """The validation group of a row: batch 1, batched on one device, batched tensor parallel."""
    if not w.batched:
        return "batch 1"
    return "batched, 1 GPU" if w.devices == 1 else "batched, tensor parallel"


def predict_rows(rows=None, c: PowerConstants | None = None) -> tuple[EnergyPrediction, ...]:
    """In-sample predictions with the shipped (or given) constants."""
    c = c or power_constants()
    return tuple(EnergyPrediction(w, j_per_token(w, c), False)
                 for w in (energy_rows() if rows is None else rows))


def log_error(pred: float, measured: float) -> float:
    return abs(math.log(pred / measured))




def regime_rows() -> list[dict]:
    """The "energy" regime for the Validation page's "Error by regime and stack" table
    (``calibration.summary.group_row``'s keys; metric "J/token"): the shipped constants'
    predictions of the batched rows (all, one GPU, tensor parallel) and the batch-1 rows.
    Only "estimated" applies (the power model has no ideal or generic mode)."""
    preds = predict_rows()
    groups = [("energy (batched)", [p for p in preds if p.work.batched])] + [
        (f"energy / {g}", [p for p in preds if group_of(p.work) == g])
        for g in ("batched, 1 GPU", "batched, tensor parallel", "batch 1")]
    out = []
    for i, (name, ps) in enumerate(groups):
        row = {"metric": "J/token", "kind": "regime" if i == 0 else "regime-stack",
               "group": name, "n": len(ps)}
        errs = [p.error for p in ps]
        for mode, e in (("estimated", errs), ("ideal", []), ("generic", [])):
            row.update({f"{mode}_{k}": v for k, v in _stats(e).items()})
        out.append(row)
    return out
