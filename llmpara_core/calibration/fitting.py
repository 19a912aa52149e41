"""Fit the efficiency model (:mod:`llmpara_core.calibration.efficiency`) to measurements.

1. **Classes** -- on single-device batch-1 llama.cpp rows (the reference stack, measured on
   every class), per hardware class with at least ``MIN_DEVICES`` devices and
   ``MIN_DECODE_ROWS`` decode rows: ``memory``, ``kernel_overhead`` and ``kv_read`` (decode) and
   ``compute`` (prefill, when the class has ``MIN_PREFILL_ROWS`` prefill rows).
2. **Memory technologies** -- the same rows grouped by the preset's ``memory_type``: ``memory``
   with the kernel class's overhead, KV-read fraction and compute held (a technology needs
   ``MIN_DEVICES`` devices; devices without ``memory_type`` use their class).
3. **Stacks** -- with 1-2 fixed, each other stack's ``memory_scale`` and ``overhead_scale`` on
   its batch-1 decode rows, ``compute_scale`` on its prefill/TTFT rows and, on its batched rows
   (running or static batch > 1, single device), the absolute ``compute``,
   ``gemm_half_tokens``, ``kv_read`` and per-pass costs (``BATCHED_PARAMS``).

Loss: pseudo-Huber (``HUBER_DELTA``) of log(predicted / measured), each row weighted
1/sqrt(rows of its device and metric) so a much-measured device does not dominate; a weak prior
(``PRIOR_WEIGHT``) pulls ``kv_read`` and the stack scales towards 1 when the data say little.
Predictions in the fit use per-operator rows of one ideal ``analyze`` run per row and
``roofline.op_time_s`` (decode: the mean step); the final errors are always recomputed with the
full core.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

import numpy as np

from .efficiency import FRAMEWORKS, EfficiencyTable, FrameworkProfile, memory_type_of
from .fastpath import (PRIOR_WEIGHT, PhaseArrays, RowFeatures, _logit, _sigmoid,  # noqa: F401
                       features, huber, nelder_mead, weights)
from ..hardware import MEMORY_TYPE_CLASSES, Efficiency, HardwareClass, kernel_class, memory_family
from ..units import S_PER_US
from .measurements import Mapped, efficiency_class, lacks_tensor_peak  # noqa: F401
from .stack_fit import (BORROW_KERNELS, _borrowed, fit_framework,  # noqa: F401
                        fit_tp_profiles, predictor)

MIN_DEVICES = 2
MIN_DECODE_ROWS = 8
MIN_PREFILL_ROWS = 4
REFERENCE_FRAMEWORK = "llama.cpp"
# Kernel launch overhead is a property of the runtime (CUDA driver, graph launch), not of the
# memory: datacenter GPUs reuse the consumer GPUs' fitted value. Fitting it on the A100 rows
# alone (two model sizes) trades it against the bandwidth fraction.
SHARED_OVERHEAD = {HardwareClass.DATACENTER_GPU: HardwareClass.CONSUMER_GPU}


# ---- class fit ------------------------------------------------------------------------------

def _unpack(x: np.ndarray, base: Efficiency, fit_compute: bool,
            overhead_s: float | None) -> Efficiency:
    return Efficiency(compute=_sigmoid(x[3]) if fit_compute else base.compute,
                      memory=_sigmoid(x[0]),
                      kernel_overhead_s=(math.exp(x[1]) * S_PER_US if overhead_s is None
                                         else overhead_s),
                      kv_read=_sigmoid(x[2]),
                      attention_compute=(_sigmoid(x[4]) if fit_compute
                                         else base.attention_compute))


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
        prior = PRIOR_WEIGHT * (math.log(eff.kv_read) ** 2
                                + math.log(eff.attention_compute) ** 2)
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w)) + prior

    x0 = np.array([_logit(base.memory), math.log(max(base.kernel_overhead_s / S_PER_US, 0.05)),
                   _logit(base.kv_read), _logit(base.compute),
                   _logit(base.attention_compute)])
    x = nelder_mead(loss, x0, step=1.0)
    x = nelder_mead(loss, x, step=0.2)                 # restart: Nelder-Mead can stall
    return _unpack(x, base, fit_compute, overhead_s)


def class_rows(rows: list[Mapped], table: EfficiencyTable | None = None
               ) -> dict[HardwareClass, list[Mapped]]:
    """Rows the class fit uses, by hardware class: single-device batch-1 llama.cpp rows, but
    no prefill/TTFT row of a GPU whose preset lacks the fp16 (tensor) peak -- its fp32 peak
    understates what the GPU computes with."""
    out: dict[HardwareClass, list[Mapped]] = defaultdict(list)
    for r in rows:
        if (r.framework == REFERENCE_FRAMEWORK and r.devices == 1
                and r.hardware.efficiency is None and r.measurement.batch == 1
                and r.measurement.metric in ("decode_tok_s", "prefill_tok_s", "ttft_ms")
                and not (r.measurement.metric != "decode_tok_s" and lacks_tensor_peak(r))):
            out[kernel_class(r.hardware.hw_class, r.hardware.architecture)].append(r)
    return out


def fittable(rows: list[Mapped], min_devices: int = MIN_DEVICES) -> bool:
    decode = [r for r in rows if r.measurement.metric == "decode_tok_s"]
    return (len(decode) >= MIN_DECODE_ROWS
            and len({r.hardware.slug for r in decode}) >= min_devices)


# ---- memory-technology fit ------------------------------------------------------------------

def memory_type_key(row: Mapped) -> str | None:
    """The memory technology a row's device is grouped by (lower case; None = not stated)."""
    t = memory_type_of(row.hardware)
    return t.strip().lower() if t else None


def fit_memory_type(feats: list[RowFeatures], bases: list[Efficiency]) -> dict:
    """{memory} of one memory technology on its batch-1 decode rows, each row keeping its
    kernel class's overhead, KV-read fraction and compute (``bases``). The KV-read fraction is
    not fitted per technology: on these rows it is confounded with the attention kernel of the
    GPU backend (Metal vs CUDA), which the kernel class carries."""
    meas = np.array([f.row.measurement.value for f in feats])
    w = weights([f.row for f in feats])

    def loss(x):
        mem = _sigmoid(x[0])
        pred = np.array([f.predict(replace(b, memory=mem)) for f, b in zip(feats, bases)])
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w))
    x0 = np.array([_logit(float(np.median([b.memory for b in bases])))])
    x = nelder_mead(loss, nelder_mead(loss, x0, step=1.0), step=0.2)
    return {"memory": _sigmoid(x[0])}


def fit_memory_types(rows: list[Mapped], table: EfficiencyTable) -> tuple[dict, dict]:
    """Fitted memory technologies (type -> values) and their row counts; the same
    technology's family ("hbm", "gddr", ...) is fitted too when it pools several types."""
    groups: dict[str, list[Mapped]] = defaultdict(list)
    for cls, rs in class_rows(rows).items():
        if cls not in MEMORY_TYPE_CLASSES:
            continue
        for r in rs:
            key = memory_type_key(r)
            if key and r.measurement.metric == "decode_tok_s":
                groups[key].append(r)
                if memory_family(key) != key:
                    groups[memory_family(key)].append(r)
    out, counts = {}, {}
    for key, rs in sorted(groups.items()):
        if len(rs) < MIN_DECODE_ROWS or len({r.hardware.slug for r in rs}) < MIN_DEVICES:
            continue
        bases = [table.classes.get(kernel_class(r.hardware.hw_class, r.hardware.architecture))
                 for r in rs]
        out[key] = fit_memory_type([features(r) for r in rs], bases)
        counts[key] = len(rs)
    return out, counts


# ---- the whole fit --------------------------------------------------------------------------

def fit_table(rows: list[Mapped], base: EfficiencyTable, frameworks: bool = True,
              only: set | None = None, classes_too: bool = True) -> EfficiencyTable:
    """A new table fitted on ``rows``; classes and stacks without enough data keep the values
    of ``base``. ``only`` = refit just these stacks; ``classes_too`` = False keeps the class and
    memory-technology values of ``base`` (leave-one-out of a device without reference rows)."""
    classes, counts = dict(base.classes), dict(base.class_rows)
    by_cls = class_rows(rows) if classes_too else {}
    order = sorted(by_cls, key=lambda c: c in SHARED_OVERHEAD)    # donors first
    for cls in order:
        rs = by_cls[cls]
        if not fittable(rs):
            continue
        classes[cls] = fit_class([features(r) for r in rs], classes[cls],
                                 _shared_overhead(cls, classes, counts))
        counts[cls] = len(rs)
    table = replace(base, classes=classes, class_rows=counts)
    mt, mt_rows = fit_memory_types(rows, table) if classes_too else ({}, {})
    table = replace(table, memory_types={**base.memory_types, **mt},
                    memory_type_rows={**base.memory_type_rows, **mt_rows})
    fws = dict(base.frameworks)
    fws[REFERENCE_FRAMEWORK] = FrameworkProfile(
        REFERENCE_FRAMEWORK, FRAMEWORKS[REFERENCE_FRAMEWORK][0],
        rows=sum(len(v) for v in by_cls.values()) or base.profile(REFERENCE_FRAMEWORK).rows,
        note="reference stack: the class and memory-technology values are fitted on its rows")
    table = replace(table, frameworks=fws)
    if frameworks:
        by_fw: dict[str, list[Mapped]] = defaultdict(list)
        for r in rows:
            if r.framework and r.framework != REFERENCE_FRAMEWORK \
                    and r.hardware.efficiency is None:
                by_fw[r.framework].append(r)
        for name in FRAMEWORKS:
            if name in by_fw and name not in BORROW_KERNELS and (only is None or name in only):
                fws[name] = fit_framework(name, by_fw[name], table)
                table = replace(table, frameworks=dict(fws))
        for name, donor in BORROW_KERNELS.items():
            if only is None or name in only or donor in only:
                fws[name] = _borrowed(name, donor, fws, by_fw.get(name, []), table)
        if only is None:
            fws.update(fit_tp_profiles(replace(table, frameworks=dict(fws)), fws))
    return replace(table, frameworks=fws)


def _shared_overhead(cls: HardwareClass, classes: dict, counts: dict) -> float | None:
    donor = SHARED_OVERHEAD.get(cls)
    return classes[donor].kernel_overhead_s if donor is not None and counts.get(donor) else None


def leave_one_device_out(rows: list[Mapped], base: EfficiencyTable,
                         devices: list[str] | None = None) -> list:
    """Held-out predictions (``measurements.Prediction``) of every row: for each device, the
    table is refitted from ``base`` without that device's rows (the class and memory-technology
    values only when the device has reference-stack rows, the stacks it was measured with) and
    its rows are predicted with the full core. ``devices`` limits the devices held out."""
    from .measurements import predict_all
    ref = {r.hardware.slug for rs in class_rows(rows).values() for r in rs}
    out = []
    for slug in sorted(devices or {r.hardware.slug for r in rows}):
        test = [r for r in rows if r.hardware.slug == slug]
        if not test:
            continue
        train = [r for r in rows if r.hardware.slug != slug]
        stacks = {r.framework for r in test if r.framework}
        t = fit_table(train, base, only=stacks, classes_too=slug in ref)
        out += predict_all(test, t)[0]
    return out


def fitted_classes(table: EfficiencyTable) -> list[HardwareClass]:
    """Classes whose values come from a fit (not the provisional constants)."""
    return [c for c, n in table.class_rows.items() if n]
