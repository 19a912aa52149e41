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
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

import numpy as np

from ..analysis import analyze
from .efficiency import FRAMEWORKS, EfficiencyTable, FrameworkProfile, memory_type_of
from ..hardware import (IDEAL, MEMORY_TYPE_CLASSES, Efficiency, HardwareClass, kernel_class,
                        memory_family)
from ..roofline import Rates, op_time_s
from ..units import S_PER_MS, S_PER_US
from .measurements import (Mapped, efficiency_class, lacks_tensor_peak, metric_value, regime,
                           timings)

MIN_DEVICES = 2
MIN_DECODE_ROWS = 8
MIN_PREFILL_ROWS = 4
MIN_FRAMEWORK_ROWS = 2
HUBER_DELTA = 0.05
PRIOR_WEIGHT = 2e-5
REFERENCE_FRAMEWORK = "llama.cpp"
# Kernel launch overhead is a property of the runtime (CUDA driver, graph launch), not of the
# memory: datacenter GPUs reuse the consumer GPUs' fitted value. Fitting it on the A100 rows
# alone (two model sizes) trades it against the bandwidth fraction.
SHARED_OVERHEAD = {HardwareClass.DATACENTER_GPU: HardwareClass.CONSUMER_GPU}
# Stacks whose GEMMs use each architecture's newest tensor-core instructions (CUTLASS/cuBLAS
# Hopper kernels): no legacy_kernel_factor. A fact about the stack, not a fit.
NATIVE_KERNEL_STACKS = ("tensorrt-llm", "vllm", "vllm-legacy", "sglang")
MIN_BATCHED_ROWS = 8
# Batched-row parameters (Efficiency field, start, lower, upper) fitted in log space.
BATCHED_PARAMS = (("memory", 0.7, 0.2, 0.95), ("compute", 0.6, 0.05, 1.0), ("gemm_half_tokens", 32.0, 1.0, 4096.0),
                  ("kv_read", 0.7, 0.05, 1.0), ("step_overhead_s", 1e-3, 1e-6, 0.1),
                  ("seq_overhead_s", 1e-5, 1e-8, 1e-2))
# Stacks measured batched only without a known running batch share the GPU kernels of a stack
# that was (paged attention / FlashDecoding and cuBLAS/CUTLASS GEMMs): the data cannot
# separate them, so their GPU-side values are copied, their per-pass costs not.
BORROW_KERNELS = {"vllm": "tensorrt-llm", "sglang": "tensorrt-llm",
                  "vllm-legacy": "tensorrt-llm"}
KERNEL_FIELDS = ("memory", "compute", "gemm_half_tokens", "kv_read")
OVERHEAD_FIELDS = ("step_overhead_s", "seq_overhead_s")


# ---- fast per-row evaluation ----------------------------------------------------------------

@dataclass(frozen=True)
class PhaseArrays:
    """Per-operator totals of one phase (prefill: one pass; decode: mean per step)."""
    flops: np.ndarray
    mem_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kernels: np.ndarray

    @classmethod
    def of(cls, phase) -> "PhaseArrays":
        rows = phase.rows
        return cls(np.array([r.flops for r in rows]), np.array([r.memory_bytes for r in rows]),
                   np.array([r.kv_read_bytes for r in rows]),
                   np.array([float(r.count) for r in rows]))

    def time_s(self, r: Rates) -> float:
        return float(np.sum(op_time_s(self.flops, self.mem_bytes, self.kernels, r,
                                      kv_read_bytes=self.kv_read_bytes))) + r.pass_overhead_s


@dataclass(frozen=True)
class RowFeatures:
    """A row's prefill and decode operators at ideal rates, and the device's peaks."""
    row: Mapped
    prefill: PhaseArrays
    decode: PhaseArrays
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float

    def _rates(self, eff: Efficiency, tokens: float) -> Rates:
        return Rates(self.peak_flops_per_s * eff.compute_at(tokens),
                     self.bandwidth_bytes_per_s * eff.memory, eff.kernel_overhead_s, None, None,
                     eff.kv_read, eff.pass_overhead_s(self.row.workload.batch))

    def predict(self, eff: Efficiency) -> float:
        m, wl = self.row.measurement, self.row.workload
        b = wl.batch
        if m.metric in ("decode_tok_s", "throughput_tok_s"):
            step = self.decode.time_s(self._rates(eff, b))
            return (1.0 if m.metric == "decode_tok_s" else b) / step
        pre = self.prefill.time_s(self._rates(eff, b * wl.prompt_len))
        if m.metric == "prefill_tok_s":
            return b * wl.prompt_len / pre
        if m.metric == "ttft_ms":
            return pre / S_PER_MS
        step = self.decode.time_s(self._rates(eff, b))
        return b * wl.gen_len / (pre + (wl.gen_len - 1) * step)


def features(row: Mapped) -> RowFeatures:
    rep = analyze(row.model, replace(row.hardware, efficiency=IDEAL), row.precision,
                  row.workload)
    return RowFeatures(row, PhaseArrays.of(rep.prefill), PhaseArrays.of(rep.decode),
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


# ---- stack fit ------------------------------------------------------------------------------

def predictor(row: Mapped):
    """eff -> predicted value of ``row``: the fast per-operator path for one device, the full
    core (``parallel.shard_analyze``) for several."""
    if row.devices == 1:
        return features(row).predict
    return lambda eff: metric_value(row.measurement.metric, timings(row, eff)[1], row.workload)


def _fit(rows: list[Mapped], effs, x0: np.ndarray, iters: int, prior=None) -> np.ndarray:
    """x minimising the loss of ``rows`` when ``effs(x)`` gives each row's efficiency."""
    preds = [predictor(r) for r in rows]
    meas = np.array([r.measurement.value for r in rows])
    w = weights(rows)

    def loss(x):
        pred = np.array([f(e) for f, e in zip(preds, effs(x))])
        pen = PRIOR_WEIGHT * float(np.sum(np.square(x))) if prior is None else prior(x)
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w)) + pen
    x = nelder_mead(loss, x0, step=0.3, iters=iters, tol=1e-8)
    return nelder_mead(loss, x, step=0.1, iters=iters, tol=1e-8)


def _with(table: EfficiencyTable, prof: FrameworkProfile) -> EfficiencyTable:
    return replace(table, frameworks={**table.frameworks, prof.name: prof})


def fit_framework(name: str, rows: list[Mapped], table: EfficiencyTable,
                  kernels: dict | None = None) -> FrameworkProfile:
    """Profile of stack ``name``: memory and overhead scales on its batch-1 decode rows,
    compute scale on its prefill/TTFT rows, and its batched-regime values on its
    single-device batched rows (each part needs its own minimum of rows). ``kernels`` = GPU
    kernel values borrowed from another stack: only the per-pass costs are fitted."""
    label, native = FRAMEWORKS[name][0], name in NATIVE_KERNEL_STACKS
    prof = FrameworkProfile(name, label, native_kernels=native)
    decode = [r for r in rows if regime(r) == "batch-1"]
    other = [r for r in rows if regime(r) == "prefill"]
    batched = [r for r in rows if regime(r) == "batched" and r.devices == 1]
    used = 0
    if len(decode) >= MIN_FRAMEWORK_ROWS:
        # fewer than 2 x MIN_FRAMEWORK_ROWS rows pin one number: the bandwidth scale
        two = len(decode) >= 2 * MIN_FRAMEWORK_ROWS

        def scales(x) -> dict:
            return {"memory_scale": math.exp(x[0]),
                    "overhead_scale": math.exp(x[1]) if two else 1.0}

        def effs(x):
            t = _with(table, replace(prof, **scales(x)))
            return [t.efficiency_for(r.hardware, name) for r in decode]
        prof = replace(prof, **scales(_fit(decode, effs, np.zeros(2 if two else 1), 60)))
        used += len(decode)
    if len(other) >= MIN_FRAMEWORK_ROWS:
        def effs(x):
            t = _with(table, replace(prof, compute_scale=math.exp(x[0])))
            return [t.efficiency_for(r.hardware, name) for r in other]
        comp, = _fit(other, effs, np.zeros(1), 40)
        prof = replace(prof, compute_scale=math.exp(comp))
        used += len(other)
    if len(batched) >= MIN_BATCHED_ROWS or (kernels and batched):
        # borrowed kernels: the per-pass costs; with fewer than MIN_BATCHED_ROWS rows only the
        # per-sequence cost (one number per row cannot pin two)
        fields = ((OVERHEAD_FIELDS if len(batched) >= MIN_BATCHED_ROWS else ("seq_overhead_s",))
                  if kernels else None)
        prof = replace(prof, absolute={**(kernels or {}), **fit_batched(
            name, batched, _with(table, replace(prof, absolute=kernels or {})), fields)})
        used += len(batched)
    note = "" if used else "too few measurements: reference values"
    return replace(prof, rows=used, note=note)


def fit_batched(name: str, rows: list[Mapped], table: EfficiencyTable,
                fields: tuple[str, ...] | None = None) -> dict:
    """Absolute batched-regime values of stack ``name`` (``BATCHED_PARAMS``, or only
    ``fields`` of them) on its rows."""
    params = [p for p in BATCHED_PARAMS if fields is None or p[0] in fields]
    bases = [table.efficiency_for(r.hardware, name) for r in rows]
    x0 = np.array([math.log(v) for _, v, _, _ in params])

    def unpack(x) -> dict:
        return {f: float(min(hi, max(lo, math.exp(v)))) for (f, _, lo, hi), v in zip(params, x)}

    def effs(x):
        vals = unpack(x)
        return [replace(b, **vals) for b in bases]
    return unpack(_fit(rows, effs, x0, 500, prior=lambda x: 0.0))


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


# Stacks fitted on the tensor-parallel series (presets/tables/tp_measurements.toml) because
# no other rows measure them: weight-streaming fraction and per-kernel cost (no CUDA graphs:
# every launch is paid, and it does not shrink as TP divides the work).
TP_FIT_FIELDS = (("memory", 0.6, 0.2, 0.95), ("kernel_overhead_s", 5e-6, 1e-7, 1e-3))


def fit_tp_profiles(table: EfficiencyTable, fws: dict) -> dict:
    """Profiles of the stacks named by the tensor-parallel setups that have no profile fitted
    on other rows: ``TP_FIT_FIELDS`` on their rows' end-to-end tokens/s."""
    from ..parallel.measurements import load_tp_measurements, predict_row
    tp = load_tp_measurements()
    out = {}
    for name in sorted({s.efficiency_profile for s in tp.setups.values()} - {""}):
        if fws.get(name) is not None and fws[name].rows:
            continue
        rows = [r for r in tp.rows if tp.setups[r.setup].efficiency_profile == name]
        meas = np.array([r.decode_tokens_per_s for r in rows])
        base = {k: replace(v.hardware, efficiency=None) for k, v in tp.setups.items()}

        def unpack(x) -> dict:
            return {f: float(min(hi, max(lo, math.exp(v))))
                    for (f, _, lo, hi), v in zip(TP_FIT_FIELDS, x)}

        def loss(x):
            prof = FrameworkProfile(name, FRAMEWORKS[name][0], absolute=unpack(x))
            t = _with(table, prof)
            setups = {k: replace(v, hardware=replace(base[k], efficiency=t.efficiency_for(
                base[k], name))) for k, v in tp.setups.items()}
            tt = replace(tp, setups=setups)
            pred = np.array([predict_row(tt, r) for r in rows])
            return float(np.mean(huber(np.log(pred / meas))))
        x0 = np.array([math.log(v) for _, v, _, _ in TP_FIT_FIELDS])
        x = nelder_mead(loss, x0, step=0.5, iters=120, tol=1e-9)
        out[name] = FrameworkProfile(name, FRAMEWORKS[name][0], rows=len(rows),
                                     absolute=unpack(x),
                                     note="fitted on the tensor-parallel series "
                                          "(tp_measurements): end-to-end tokens/s")
    return out


def _borrowed(name: str, donor: str, fws: dict, rows: list[Mapped],
              table: EfficiencyTable) -> FrameworkProfile:
    """Stack ``name`` with the GPU-kernel values of ``donor`` (see ``BORROW_KERNELS``), its own
    scales where it has batch-1 rows and its own per-pass costs where it has batched rows."""
    d = fws.get(donor)
    kernels = {k: v for k, v in (d.absolute if d else {}).items() if k in KERNEL_FIELDS}
    own = fit_framework(name, rows, table, kernels or None) if rows else FrameworkProfile(
        name, FRAMEWORKS[name][0], native_kernels=name in NATIVE_KERNEL_STACKS)
    if not kernels:
        return own
    return replace(own, absolute={**kernels, **own.absolute},
                   note=f"GPU kernels (memory, compute, gemm_half_tokens, kv_read) as {donor}: "
                        "the data cannot separate them from its per-pass costs; "
                        f"{own.note}".rstrip("; "))


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
