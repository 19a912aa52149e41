"""Published speculative-decoding measurements and this model's predictions for them.

The data are ``presets/tables/speculative_measurements.csv``: a copy of the shared validation
set (one row per published measurement, with its ``source``) plus ``model_*`` columns saying how a
row is modelled here (target, draft, hardware and device count, precision, prompt and output
length, gamma, and ``model_framework``: the stack whose efficiency profile the target's rates
use, blank = the hardware class's generic profile) and ``in_test`` (whether the row is part of
the tolerance test). Paths in ``model_target``/``model_draft``/``model_hardware`` are relative to
``presets/tables`` (the T5 decoders and the two devices without a shipped preset are in its
``speculative/`` folder). Batch sweeps (one published series at several batch sizes) are
validated in ``batch_sweeps``.

A row is *predicted* when it gives gamma and an acceptance (alpha) or a mean accepted length
(E, tokens per target pass including the bonus token); it gets an *implied alpha* when it gives
gamma but no acceptance; otherwise it is listed with the reason it is not modelled.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path

from ..calibration.efficiency import efficiency_for, resolve_framework
from ..errors import ConfigError
from ..hardware import Hardware
from ..precision import DType, Precision, precision_preset
from ..presets import load_hardware, load_model
from .engine import (Setup, Speculation, head_draft, implied_alpha, model_draft, ngram_draft,
                          speedup)
from ..workload import Workload

DATA_DIR = Path(__file__).resolve().parents[2] / "presets" / "tables"
MEASUREMENTS_CSV = DATA_DIR / "speculative_measurements.csv"

# The tolerance the test suite holds the rows marked in_test to (estimated rates): every row's
# predicted / measured speedup - 1 within TOLERANCE_EACH, the median |error| within
# TOLERANCE_MEDIAN, the DeepSeek-R1 MTP series (TensorRT-LLM) within TOLERANCE_MTP.
TOLERANCE_EACH = 0.50
TOLERANCE_MEDIAN = 0.15
TOLERANCE_MTP = 0.10

_PREC_KEYS = {"attn": ("weight_attn_bits",), "ffn": ("weight_ffn_bits",),
              "embed": ("weight_embed_bits",), "act": ("activation_bits",), "kv": ("kv_bits",),
              "weights": ("weight_attn_bits", "weight_ffn_bits", "weight_embed_bits")}


def parse_precision(spec: str) -> Precision:
    """'PRESET;key=value;...' -> Precision. Keys: attn, ffn, embed, weights (all three), act,
    kv (bits) and dtype (fp32, fp16, fp8, int8, int4). Example: 'BF16;ffn=4.5;dtype=fp8'."""
    parts = [p.strip() for p in str(spec).split(";") if p.strip()]
    if not parts:
        raise ConfigError("empty precision spec")
    p = precision_preset(parts[0])
    changes = {}
    for item in parts[1:]:
        key, _, value = item.partition("=")
        key = key.strip().lower()
        if key == "dtype":
            changes["compute_dtype"] = DType(value.strip().lower())
        elif key in _PREC_KEYS:
            try:
                bits = float(value)
            except ValueError:
                raise ConfigError(f"precision spec {spec!r}: {key} needs a number") from None
            changes.update({f: bits for f in _PREC_KEYS[key]})
        else:
            raise ConfigError(f"precision spec {spec!r}: unknown key {key!r}")
    return replace(p, name=str(spec), **changes) if changes else p


def mul_peak(v: float | None, devices: int) -> float | None:
    return None if v is None else v * devices


def aggregate(hw: Hardware, devices: int) -> Hardware:
    """``devices`` copies of ``hw`` treated as one device (bandwidth, compute, capacity and power
    multiplied; collectives ignored): a first-order stand-in for tensor/expert parallelism."""
    if devices == 1:
        return hw
    peaks = {f"peak_{d.value}_flops_per_s": (v * devices if (v := hw.peak_flops_per_s_raw(d))
                                              is not None else None) for d in DType}
    peaks["peak_fp16_acc16_flops_per_s"] = mul_peak(hw.peak_fp16_acc16_flops_per_s, devices)
    tiers = tuple(replace(t, capacity_bytes=t.capacity_bytes * devices,
                          bandwidth_bytes_per_s=t.bandwidth_bytes_per_s * devices)
                  for t in hw.memory_tiers)
    mul = (lambda v: None if v is None else v * devices)
    return replace(hw, name=f"{devices}x {hw.name}", slug="", interconnect=None,
                   memory_bandwidth_bytes_per_s=hw.memory_bandwidth_bytes_per_s * devices,
                   memory_capacity_bytes=hw.memory_capacity_bytes * devices, memory_tiers=tiers,
                   tdp_w=mul(hw.tdp_w), idle_w=mul(hw.idle_w), price_usd=mul(hw.price_usd),
                   **peaks)


def _num(v: str) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Measurement:
    """One published measurement (the CSV row, all columns kept as text in ``raw``)."""
    row_id: str
    raw: tuple[tuple[str, str], ...]

    def get(self, key: str) -> str:
        return dict(self.raw).get(key, "") or ""

    @property
    def measured_speedup(self) -> float | None:
        return _num(self.get("speedup"))

    @property
    def alpha(self) -> float | None:
        return _num(self.get("acceptance_rate"))

    @property
    def mean_accepted_tokens(self) -> float | None:
        return _num(self.get("mean_accepted_tokens"))

    @property
    def in_test(self) -> bool:
        return self.get("in_test").strip().lower() == "yes"

    @property
    def modelled(self) -> bool:
        return bool(self.get("model_target"))


@functools.lru_cache(maxsize=4)
def load_measurements(path: str | None = None) -> tuple[Measurement, ...]:
    """The rows of the measurement CSV (default: the repository's copy)."""
    p = Path(path) if path else MEASUREMENTS_CSV
    try:
        with p.open(newline="", encoding="utf-8") as f:
            return tuple(Measurement(r["row_id"], tuple(r.items())) for r in csv.DictReader(f))
    except OSError as e:
        raise ConfigError(f"cannot read {p}: {e.strerror}") from None


def _resolve(name: str) -> str:
    """A preset name, or a path relative to presets/tables."""
    if name.endswith(".toml") or name.endswith(".json"):
        return str(DATA_DIR / name)
    return name


def setup_for(m: Measurement) -> tuple[Setup, int]:
    """The modelled setup of a measurement and its gamma."""
    if not m.modelled:
        raise ConfigError(f"{m.row_id} is not modelled: {m.get('model_note')}")
    target = load_model(_resolve(m.get("model_target")))
    hw = aggregate(load_hardware(_resolve(m.get("model_hardware"))),
                   int(m.get("model_devices") or 1))
    prec = parse_precision(m.get("model_precision") or "FP16")
    dprec = parse_precision(m.get("model_draft_precision")) if m.get("model_draft_precision") \
        else None
    kind = m.get("model_draft_kind") or "model"
    if kind == "model":
        draft = model_draft(load_model(_resolve(m.get("model_draft"))), dprec)
    elif kind.startswith("head-"):
        draft = head_draft(target, kind.removeprefix("head-"), precision=dprec)
    elif kind == "ngram":
        draft = ngram_draft()
    else:
        raise ConfigError(f"{m.row_id}: unknown model_draft_kind {kind!r}")
    batch = int(_num(m.get("batch")) or 1)
    wl = Workload(batch, int(m.get("model_prompt_len") or 0), int(m.get("model_gen_len") or 2))
    framework = m.get("model_framework").strip()
    eff = efficiency_for(hw, resolve_framework(framework)) if framework else None
    return Setup(target, hw, prec, wl, draft, eff), int(m.get("model_gamma"))


@dataclass(frozen=True)
class Comparison:
    """A measurement next to this model's prediction (estimated rates unless stated)."""
    row_id: str
    method: str
    target: str
    draft: str
    hardware: str
    batch: float | None
    gamma: int | None
    alpha: float | None
    mean_accepted_tokens: float | None
    measured_speedup: float | None
    predicted_speedup: float | None
    predicted_ideal_speedup: float | None
    implied_alpha: float | None
    status: str                    # "predicted" | "implied alpha" | "not modelled" | "error"
    in_test: bool
    note: str
    source: str

    @property
    def relative_error(self) -> float | None:
        """predicted / measured - 1."""
        if self.predicted_speedup is None or not self.measured_speedup:
            return None
        return self.predicted_speedup / self.measured_speedup - 1.0


def compare(m: Measurement) -> Comparison:
    """Predict one measurement (or give its implied alpha, or say why it is not modelled)."""
    base = dict(row_id=m.row_id, method=m.get("method"), target=m.get("target_model"),
                draft=m.get("draft_model"), hardware=m.get("hardware"),
                batch=_num(m.get("batch")), alpha=m.alpha,
                mean_accepted_tokens=m.mean_accepted_tokens,
                measured_speedup=m.measured_speedup, in_test=m.in_test,
                note=m.get("model_note"), source=m.get("source"))
    empty = dict(predicted_speedup=None, predicted_ideal_speedup=None, implied_alpha=None)
    if not m.modelled:
        return Comparison(gamma=None, status="not modelled", **empty, **base)
    try:
        setup, gamma = setup_for(m)
        if m.mean_accepted_tokens is not None:
            spec = Speculation(gamma, expected_tokens=min(m.mean_accepted_tokens, gamma + 1.0))
        elif m.alpha is not None:
            spec = Speculation(gamma, alpha=m.alpha)
        else:
            ia = (implied_alpha(setup, gamma, m.measured_speedup)
                  if m.measured_speedup is not None else None)
            return Comparison(gamma=gamma, status="implied alpha",
                              **{**empty, "implied_alpha": ia}, **base)
        return Comparison(gamma=gamma, status="predicted",
                          predicted_speedup=speedup(setup, spec, True),
                          predicted_ideal_speedup=speedup(setup, spec, False),
                          implied_alpha=None, **base)
    except ConfigError as e:
        return Comparison(gamma=None, status="error", **empty,
                          **{**base, "note": f"{base['note']} (error: {e})"})


def compare_measurements(path: str | None = None) -> tuple[Comparison, ...]:
    """Every measurement of the CSV with its prediction, in file order."""
    return tuple(compare(m) for m in load_measurements(path))


@dataclass(frozen=True)
class ComparisonSummary:
    """Errors of the rows in the tolerance test."""
    rows: int
    median_abs_error: float | None
    worst_abs_error: float | None
    worst_row: str | None
    within_each: bool
    within_median: bool

    @property
    def passes(self) -> bool:
        return self.rows > 0 and self.within_each and self.within_median


def summarize(comparisons) -> ComparisonSummary:
    """Median and worst |predicted / measured - 1| over the predicted rows marked in_test."""
    errs = [(abs(c.relative_error), c.row_id) for c in comparisons
            if c.in_test and c.relative_error is not None]
    if not errs:
        return ComparisonSummary(0, None, None, None, False, False)
    values = sorted(e for e, _ in errs)
    n = len(values)
    median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    worst, worst_id = max(errs)
    return ComparisonSummary(n, median, worst, worst_id, worst <= TOLERANCE_EACH,
                             median <= TOLERANCE_MEDIAN)
