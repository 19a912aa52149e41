"""Fit the efficiency model (:mod:`llmpara_core.calibration`) to measurements.

1. **Classes** -- on single-device llama.cpp rows (the stack measured on every class), per
   efficiency class with at least ``MIN_DEVICES`` devices and ``MIN_DECODE_ROWS`` decode rows:
   ``memory``, ``kernel_overhead`` and ``kv_read`` (decode) and ``compute`` (prefill, when the
   class has ``MIN_PREFILL_ROWS`` prefill rows). Other classes keep their previous values.
2. **Frameworks** -- with the classes fixed, each other framework's ``memory_scale`` and
   ``overhead_scale`` on its decode rows and ``compute_scale`` on its prefill/TTFT rows (when
   it has ``MIN_FRAMEWORK_ROWS`` such rows), multi-device rows included.

Loss: pseudo-Huber (``HUBER_DELTA``) of log(predicted / measured), each row weighted
1/sqrt(rows of its device and metric) so a much-measured device does not dominate; a weak prior
(``PRIOR_WEIGHT``) pulls ``kv_read`` and the framework scales towards 1 when the data say
little. Class predictions use the per-operator rows of one ideal ``analyze`` run with the same
``roofline.op_time_s`` (exact while no operator changes bound over the decode range -- true at
batch 1); the final errors are always recomputed with the full core.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

import numpy as np

from ..analysis import analyze
from .efficiency import FRAMEWORKS, EfficiencyTable, FrameworkProfile
from ..hardware import IDEAL, Efficiency, HardwareClass
from ..roofline import Rates, op_time_s
from ..units import S_PER_MS, S_PER_US
from .measurements import Mapped, efficiency_class, lacks_tensor_peak, metric_value, timings

MIN_DEVICES = 2
MIN_DECODE_ROWS = 8
MIN_PREFILL_ROWS = 4
MIN_FRAMEWORK_ROWS = 3
HUBER_DELTA = 0.05
PRIOR_WEIGHT = 2e-5
REFERENCE_FRAMEWORK = "llama.cpp"
# Kernel launch overhead is a property of the runtime (CUDA driver, graph launch), not of the
# memory: datacenter GPUs reuse the consumer GPUs' fitted value. Fitting it on the A100 rows
# alone (two model sizes) trades it against the bandwidth fraction.
SHARED_OVERHEAD = {HardwareClass.DATACENTER_GPU: HardwareClass.CONSUMER_GPU}


# ---- fast per-row evaluation ----------------------------------------------------------------

@dataclass(frozen=True)
class RowFeatures:
    """Per-operator totals of the row's phase (decode: mean per step) at ideal rates."""
    row: Mapped
    flops: np.ndarray
    mem_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kernels: np.ndarray
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float

    def predict(self, eff: Efficiency) -> float:
        r = Rates(self.peak_flops_per_s * eff.compute, self.bandwidth_bytes_per_s * eff.memory,
                  eff.kernel_overhead_s, None, None, eff.kv_read)
        t = float(np.sum(op_time_s(self.flops, self.mem_bytes, self.kernels, r,
                                   kv_read_bytes=self.kv_read_bytes)))
        m = self.row.measurement
        if m.metric == "decode_tok_s":
            return 1.0 / t
        if m.metric == "prefill_tok_s":
            return m.batch * self.row.workload.prompt_len / t
        return t / S_PER_MS


def features(row: Mapped) -> RowFeatures:
    rep = analyze(row.model, replace(row.hardware, efficiency=IDEAL), row.precision,
                  row.workload)
    phase = rep.decode if row.measurement.metric == "decode_tok_s" else rep.prefill
    rows = phase.rows
    return RowFeatures(row, np.array([r.flops for r in rows]),
                       np.array([r.memory_bytes for r in rows]),
                       np.array([r.kv_read_bytes for r in rows]),
                       np.array([float(r.count) for r in rows]),
                       rep.peak_flops_per_s, rep.bandwidth_bytes_per_s)


# ---- optimiser ------------------------------------------------------------------------------

def nelder_mead(f, x0, step: float = 0.3, iters: int = 400, tol: float = 1e-7) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (plain Nelder-Mead, standard coefficients)."""
    n = len(x0)
    pts = [np.asarray(x0, float)] + [np.asarray(x0, float) + step * np.eye(n)[i]
                                     for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        centre = np.mean(pts[:-1], axis=0)
        xr = centre + (centre - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = centre + 2.0 * (centre - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = centre + 0.5 * (pts[-1] - centre)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    return pts[int(np.argmin(vals))]


def _logit(p: float) -> float:
    p = min(max(p, 0.02), 0.9)       # start inside the range, where the loss has a slope
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, x))))


def huber(residuals: np.ndarray) -> np.ndarray:
    d = HUBER_DELTA
    return d * d * (np.sqrt(1.0 + (residuals / d) ** 2) - 1.0)


def weights(rows: list[Mapped]) -> np.ndarray:
    n = Counter((r.hardware.slug, r.measurement.metric) for r in rows)
    return np.array([1.0 / math.sqrt(n[(r.hardware.slug, r.measurement.metric)]) for r in rows])


# ---- class fit ------------------------------------------------------------------------------

def _unpack(x: np.ndarray, base: Efficiency, fit_compute: bool,
            overhead_s: float | None) -> Efficiency:
    return Efficiency(compute=_sigmoid(x[3]) if fit_compute else base.compute,
                      memory=_sigmoid(x[0]),
                      kernel_overhead_s=(math.exp(x[1]) * S_PER_US if overhead_s is None
                                         else overhead_s),
                      kv_read=_sigmoid(x[2]))


def fit_class(feats: list[RowFeatures], base: Efficiency,
              overhead_s: float | None = None) -> Efficiency:
    """Class efficiency minimising the weighted loss over ``feats`` (``overhead_s`` given =
    the kernel overhead is held at that value)."""
    fit_compute = sum(f.row.measurement.metric != "decode_tok_s" for f in feats) \
        >= MIN_PREFILL_ROWS
    meas = np.array([f.row.measurement.value for f in feats])
    w = weights([f.row for f in feats])

    def loss(x):
        eff = _unpack(x, base, fit_compute, overhead_s)
        pred = np.array([f.predict(eff) for f in feats])
        prior = PRIOR_WEIGHT * math.log(eff.kv_read) ** 2
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w)) + prior

    x0 = np.array([_logit(base.memory), math.log(max(base.kernel_overhead_s / S_PER_US, 0.05)),
                   _logit(base.kv_read), _logit(base.compute)])
    x = nelder_mead(loss, x0, step=1.0)
    x = nelder_mead(loss, x, step=0.2)                 # restart: Nelder-Mead can stall
    return _unpack(x, base, fit_compute, overhead_s)


def class_rows(rows: list[Mapped], table: EfficiencyTable) -> dict[HardwareClass, list[Mapped]]:
    """Rows the class fit uses, by efficiency class: single-device batch-1 llama.cpp rows, but
    no prefill/TTFT row of a GPU whose preset lacks the fp16 (tensor) peak -- its fp32 peak
    understates what the GPU computes with."""
    out: dict[HardwareClass, list[Mapped]] = defaultdict(list)
    for r in rows:
        if (r.framework == REFERENCE_FRAMEWORK and r.devices == 1
                and r.hardware.efficiency is None and r.measurement.batch == 1
                and not (r.measurement.metric != "decode_tok_s" and lacks_tensor_peak(r))):
            out[efficiency_class(r, table)].append(r)
    return out


def fittable(rows: list[Mapped], min_devices: int = MIN_DEVICES) -> bool:
    decode = [r for r in rows if r.measurement.metric == "decode_tok_s"]
    return (len(decode) >= MIN_DECODE_ROWS
            and len({r.hardware.slug for r in decode}) >= min_devices)


# ---- framework fit --------------------------------------------------------------------------

def predictor(row: Mapped):
    """eff -> predicted value of ``row``: the fast per-operator path for one device, the full
    core (``parallel.shard_analyze``) for several."""
    if row.devices == 1:
        return features(row).predict
    return lambda eff: metric_value(row.measurement.metric, timings(row, eff)[1])


def _fit_scales(rows: list[Mapped], table: EfficiencyTable, make, x0: np.ndarray,
                iters: int) -> np.ndarray:
    """Log-scales minimising the loss of ``rows`` when ``make(x)`` turns them into a profile."""
    preds = [predictor(r) for r in rows]
    bases = [table.class_efficiency(r.hardware) for r in rows]
    meas = np.array([r.measurement.value for r in rows])
    w = weights(rows)

    def loss(x):
        p = make(x)
        pred = np.array([f(p.apply(b)) for f, b in zip(preds, bases)])
        return (float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w))
                + PRIOR_WEIGHT * float(np.sum(np.square(x))))
    return nelder_mead(loss, x0, step=0.3, iters=iters, tol=1e-8)


def fit_framework(name: str, rows: list[Mapped], table: EfficiencyTable) -> FrameworkProfile:
    """Scales of framework ``name``: memory and overhead on its decode rows, compute on its
    prefill/TTFT rows (two independent fits; each needs MIN_FRAMEWORK_ROWS rows)."""
    label = FRAMEWORKS[name][0]
    decode = [r for r in rows if r.measurement.metric == "decode_tok_s"]
    other = [r for r in rows if r.measurement.metric != "decode_tok_s"]
    mem = over = comp = 0.0
    if len(decode) >= MIN_FRAMEWORK_ROWS:
        mem, over = _fit_scales(decode, table, lambda x: FrameworkProfile(
            name, label, math.exp(x[0]), 1.0, math.exp(x[1])), np.zeros(2), 60)
    if len(other) >= MIN_FRAMEWORK_ROWS:
        comp, = _fit_scales(other, table, lambda x: FrameworkProfile(
            name, label, 1.0, math.exp(x[0])), np.zeros(1), 40)
    used = (len(decode) if len(decode) >= MIN_FRAMEWORK_ROWS else 0) + \
        (len(other) if len(other) >= MIN_FRAMEWORK_ROWS else 0)
    note = "" if used else "too few measurements: generic values"
    return FrameworkProfile(name, label, math.exp(mem), math.exp(comp), math.exp(over),
                            rows=used, note=note)


# ---- the whole fit --------------------------------------------------------------------------

def fit_table(rows: list[Mapped], base: EfficiencyTable,
              frameworks: bool = True) -> EfficiencyTable:
    """A new table fitted on ``rows``; classes and frameworks without enough data keep the
    values of ``base``."""
    classes, counts = dict(base.classes), dict(base.class_rows)
    by_cls = class_rows(rows, base)
    order = sorted(by_cls, key=lambda c: c in SHARED_OVERHEAD)    # donors first
    for cls in order:
        rs = by_cls[cls]
        if not fittable(rs):
            continue
        classes[cls] = fit_class([features(r) for r in rs], classes[cls],
                                 _shared_overhead(cls, classes, counts))
        counts[cls] = len(rs)
    table = replace(base, classes=classes, class_rows=counts)
    fws = dict(base.frameworks)
    fws[REFERENCE_FRAMEWORK] = FrameworkProfile(
        REFERENCE_FRAMEWORK, FRAMEWORKS[REFERENCE_FRAMEWORK][0],
        rows=sum(len(v) for v in class_rows(rows, base).values()),
        note="reference stack: the class values are fitted on its rows")
    if frameworks:
        by_fw: dict[str, list[Mapped]] = defaultdict(list)
        for r in rows:
            if r.framework and r.framework != REFERENCE_FRAMEWORK \
                    and r.hardware.efficiency is None:
                by_fw[r.framework].append(r)
        for name in FRAMEWORKS:
            if name in by_fw:
                fws[name] = fit_framework(name, by_fw[name], table)
    return replace(table, frameworks=fws)


def _shared_overhead(cls: HardwareClass, classes: dict, counts: dict) -> float | None:
    donor = SHARED_OVERHEAD.get(cls)
    return classes[donor].kernel_overhead_s if donor is not None and counts.get(donor) else None


def leave_one_device_out(rows: list[Mapped], base: EfficiencyTable) -> list[tuple[Mapped, float]]:
    """Held-out predictions: for each device of the class fit, refit its class without that
    device's rows (from ``base``'s values as the starting point; one remaining device is
    enough) and predict them. Devices whose class cannot be refitted without them are left
    out. Returns (row, predicted / measured - 1)."""
    out = []
    by_cls = class_rows(rows, base)
    for cls, rs in by_cls.items():
        if not fittable(rs):
            continue
        feats = {id(r): features(r) for r in rs}
        for slug in sorted({r.hardware.slug for r in rs}):
            train = [r for r in rs if r.hardware.slug != slug]
            test = [r for r in rs if r.hardware.slug == slug]
            if not fittable(train, min_devices=1):
                continue
            eff = fit_class([feats[id(r)] for r in train], base.classes[cls],
                            _shared_overhead(cls, base.classes, base.class_rows))
            out += [(r, feats[id(r)].predict(eff) / r.measurement.value - 1.0) for r in test]
    return out


def fitted_classes(table: EfficiencyTable) -> list[HardwareClass]:
    """Classes whose values come from a fit (not the provisional constants)."""
    return [c for c, n in table.class_rows.items() if n]
