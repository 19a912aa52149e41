"""Published tensor/pipeline-parallel measurements (presets/tables/tp_measurements.toml) and the
model's prediction for each: tokens/s per sequence and the speedup within each series.

Table format: ``[setup.<key>]`` = the cluster a benchmark ran on (a cluster preset, its device
count, and optional inter-node links), ``[model.<key>]`` = an inline model (name, source and an
HF-style ``[config]``) for models without a preset, and ``[[row]]`` = one published value:
``metric`` is ``decode_tokens_per_s`` (generated tokens / wall time of the whole request, as
gpt-fast reports it) or ``e2e_latency_ms`` (prefill + generation, as FasterTransformer reports
it); both are compared as tokens/s per sequence = gen_len / end-to-end time.

It lives in ``calibration`` (not ``parallel``) because a setup runs under a stack's fitted
efficiency profile: ``parallel`` is the sharding model and imports nothing of the calibration,
which builds on it (``stack_fit`` fits the stacks measured only here).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ..errors import ConfigError
from ..hardware import Hardware
from ..model import Model
from ..parallel import ParallelPlan, shard_timings
from ..precision import Precision, precision_preset
from ..units import BYTES_PER_GB, S_PER_MS, S_PER_US
from ..workload import Workload
from .efficiency import efficiency_for

METRICS = ("decode_tokens_per_s", "e2e_latency_ms")


@dataclass(frozen=True)
class Tolerance:
    """Largest |modelled / measured - 1| accepted per row (None = not asserted). Speedups are
    checked on series whose measurement scales at most linearly (a superlinear step, more
    than N x faster on N x the devices, means the series' base row is an outlier)."""
    speedup: float | None
    tokens_per_s: float | None
    median_speedup: float | None = None

    def describe(self) -> str:
        parts = [f"{what} within {100 * v:.0f} %" for what, v in
                 (("every speedup", self.speedup), ("median speedup", self.median_speedup),
                  ("every tokens/s", self.tokens_per_s)) if v is not None]
        return "; ".join(parts) or "not asserted"


# Tolerances asserted by tests/test_parallel_validation.py and shown on the Sharding page, per
# framework of the shipped table. gpt-fast (CUDA graphs, custom intra-node all-reduce): its
# absolute tokens/s is set by the single-device efficiency calibration, hence the looser bound.
# FasterTransformer runs under its own efficiency profile (calibration: fitted on these series
# -- per-kernel cost without CUDA graphs, about 11 us, which does not shrink as TP divides the
# work); its TP8-on-GPT-20B steps stay the hardest (up to ~60 % over-predicted speedup), the
# median speedup is within 10 %.
TP_TOLERANCES = {"gpt-fast": Tolerance(speedup=0.20, tokens_per_s=0.50, median_speedup=0.10),
                 "FasterTransformer": Tolerance(speedup=0.65, tokens_per_s=0.45,
                                                median_speedup=0.10)}


@dataclass(frozen=True)
class TPMeasurement:
    """One published value of one model at one plan on one setup."""
    row_id: str
    setup: str
    model: str               # model preset name, or a key of the table's [model] section
    precision: str           # precision preset name
    weight_bits: float | None
    batch: int
    prompt_len: int
    gen_len: int
    tp: int
    pp: int
    metric: str
    value: float
    source: str
    vocab_parallel: bool = True

    @property
    def decode_tokens_per_s(self) -> float:
        """Published tokens/s per sequence (gen_len / end-to-end latency for latency rows)."""
        if self.metric == "decode_tokens_per_s":
            return self.value
        return self.gen_len / (self.value * S_PER_MS)

    @property
    def devices(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class TPSetup:
    key: str
    hardware: Hardware       # one device with the cluster's links (and the profile's efficiency)
    framework: str
    note: str
    efficiency_profile: str = ""     # framework profile applied ("" = the class's generic one)


@dataclass(frozen=True)
class TPTable:
    setups: dict[str, TPSetup]
    models: dict[str, Model]
    rows: tuple[TPMeasurement, ...]
    note: str


@dataclass(frozen=True)
class TPComparison:
    """Prediction for one measurement. Speedups are relative to the row of the same series
    (setup, model, precision, batch, prompt and output length) with the fewest devices;
    error = predicted / measured tokens/s - 1."""
    measurement: TPMeasurement
    series: str
    framework: str
    predicted_tokens_per_s: float
    error: float
    measured_speedup: float
    predicted_speedup: float

    superlinear_series: bool = False     # the measured series scales superlinearly somewhere

    @property
    def speedup_error(self) -> float:
        return self.predicted_speedup / self.measured_speedup - 1.0


def _setup(key: str, d: dict) -> TPSetup:
    from ..presets import load_hardware
    hw = load_hardware(str(d["cluster"]))
    if hw.interconnect is None:
        raise ConfigError(f"tp_measurements: setup {key}: {hw.name} has no [interconnect]")
    ic = replace(hw.interconnect, devices=int(d.get("devices", hw.interconnect.devices)))
    if "devices_per_node" in d:
        ic = replace(ic, devices_per_node=int(d["devices_per_node"]),
                     inter_node_bandwidth_bytes_per_s=float(d["inter_node_bandwidth_GBps"])
                     * BYTES_PER_GB,
                     inter_node_latency_s=float(d["inter_node_latency_us"]) * S_PER_US)
    hw = replace(hw, interconnect=ic)
    profile = str(d.get("efficiency_profile", ""))
    if profile:
        hw, profile = _with_profile(hw, profile)
    return TPSetup(key, hw, str(d.get("framework", "")), str(d.get("note", "")), profile)


def _with_profile(hw: Hardware, profile: str) -> tuple[Hardware, str]:
    """``hw`` with the efficiency of an inference stack's profile."""
    return replace(hw, efficiency=efficiency_for(hw, profile)), profile


def _row(r: dict) -> TPMeasurement:
    metric = str(r["metric"])
    if metric not in METRICS:
        raise ConfigError(f"tp_measurements: row {r.get('id')}: metric must be one of {METRICS}")
    return TPMeasurement(str(r["id"]), str(r["setup"]), str(r["model"]), str(r["precision"]),
                         r.get("weight_bits"), int(r["batch"]), int(r["prompt_len"]),
                         int(r["gen_len"]), int(r["tp"]), int(r.get("pp", 1)), metric,
                         float(r["value"]), str(r["source"]),
                         bool(r.get("vocab_parallel", True)))


@functools.lru_cache(maxsize=2)
def load_tp_measurements(name: str = "tp_measurements") -> TPTable:
    """The published series in ``presets/tables/<name>.toml`` (see the module docstring)."""
    from ..model_presets import model_from_preset_dict
    from ..presets import load_table
    t = load_table(name)
    setups = {k: _setup(k, d) for k, d in t["setup"].items()}
    models = {k: model_from_preset_dict(d, f"{name}.toml [model.{k}]")
              for k, d in t.get("model", {}).items()}
    rows = tuple(_row(r) for r in t["row"])
    for r in rows:
        if r.setup not in setups:
            raise ConfigError(f"{name}.toml: row {r.row_id}: unknown setup {r.setup!r}")
    return TPTable(setups, models, rows, str(t.get("note", "")))


def _precision(r: TPMeasurement) -> Precision:
    p = precision_preset(r.precision)
    if r.weight_bits is None:
        return p
    return replace(p, name=f"{p.name} ({r.weight_bits:g}-bit weights)",
                   weight_attn_bits=r.weight_bits, weight_ffn_bits=r.weight_bits,
                   weight_embed_bits=r.weight_bits)


def predict_row(table: TPTable, r: TPMeasurement) -> float:
    """Modelled tokens/s per sequence of one row (gen_len / estimated end-to-end latency)."""
    from ..presets import load_model
    model = table.models.get(r.model) or load_model(r.model)
    wl = Workload(batch=r.batch, prompt_len=r.prompt_len, gen_len=r.gen_len)
    plan = ParallelPlan(tp=r.tp, pp=r.pp, vocab_parallel=r.vocab_parallel)
    est = shard_timings(model, table.setups[r.setup].hardware, _precision(r), wl, plan)[1]
    return r.gen_len / est.e2e_latency_s


def series_label(table: TPTable, r: TPMeasurement) -> str:
    name = table.models[r.model].name if r.model in table.models else r.model
    bits = f" ({r.weight_bits:g}-bit)" if r.weight_bits else ""
    return (f"{table.setups[r.setup].framework} · {name} · {r.precision}{bits} · batch "
            f"{r.batch} · {r.prompt_len}+{r.gen_len} tokens")


def compare_tp_measurements(table: TPTable | None = None) -> tuple[TPComparison, ...]:
    """Every row of ``table`` (default: the shipped table) with its prediction and the
    measured and predicted speedups within its series."""
    table = table or load_tp_measurements()
    preds = {r.row_id: predict_row(table, r) for r in table.rows}
    base: dict[str, TPMeasurement] = {}
    for r in sorted(table.rows, key=lambda r: r.devices):
        base.setdefault(series_label(table, r), r)
    superlinear = set()
    for r in table.rows:
        s = series_label(table, r)
        b = base[s]
        if r.decode_tokens_per_s / b.decode_tokens_per_s > r.devices / b.devices * (1 + 1e-9):
            superlinear.add(s)
    out = []
    for r in table.rows:
        s = series_label(table, r)
        b = base[s]
        out.append(TPComparison(r, s, table.setups[r.setup].framework, preds[r.row_id],
                                preds[r.row_id] / r.decode_tokens_per_s - 1.0,
                                r.decode_tokens_per_s / b.decode_tokens_per_s,
                                preds[r.row_id] / preds[b.row_id], s in superlinear))
    return tuple(out)

