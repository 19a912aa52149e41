"""Fit the efficiency model (:mod:`llmpara_core.calibration.efficiency`) to measurements.

1. **Classes** -- on single-device batch-1 llama.cpp rows (the reference stack, measured on
   every class), per hardware class with at least ``MIN_DECODE_ROWS`` decode rows on
   ``MIN_DEVICES`` devices: ``memory``, ``kernel_overhead`` and ``kv_read`` (decode),
   ``compute`` and ``attention_compute`` (prefill, when the class has ``MIN_PREFILL_ROWS``
   prefill rows) and ``quant_compute`` where devices have prefill rows of one model in both
   16-bit and quantised weights (``paired_quant_devices``).
2. **Memory technologies** -- the same rows grouped by the preset's ``memory_type``: ``memory``
   with the kernel class's overhead, KV-read fraction and compute held (the same minimum of
   rows; devices without ``memory_type`` use their class).
   Then the reference stack's **weight-streaming bound per compute unit** (16-bit and
   quantised weights, ``fit_stream_limits``) on the GPU rows of devices with compute units,
   and the GPU classes and 2 refitted once with it; the bound goes to the llama.cpp profile.
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

Leave-one-device-out (``leave_one_device_out``) refits everything the held-out device's rows
touched, holds out presets of the same physical device together (``device_key``) and never
lets a value fitted with the device survive: a class or technology without enough rows left
falls back to the provisional constants.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from dataclasses import replace

import numpy as np

from . import measurements as validation
from .efficiency import (FRAMEWORKS, UBATCH_STACKS, EfficiencyTable, FrameworkProfile,
                         architecture_of, memory_type_of)
from .fastpath import (PRIOR_WEIGHT, PhaseArrays, RowFeatures, _logit, _sigmoid,  # noqa: F401
                       features, huber, implied_cost, nelder_mead, weights)
from ..budget import check_time_budget
from ..precision import is_kquant
from ..efficiency_table import STACK_CLASS_KEYS
from ..hardware import (MEMORY_TYPE_CLASSES, PROVISIONAL_EFFICIENCY, STREAM_FIELDS, Efficiency,
                        HardwareClass, clock_overhead_factor, kernel_class, memory_factor_key,
                        memory_family)
from ..units import S_PER_US
from .measurements import (GRAPHLESS_LAUNCH_S, Mapped, device_key,  # noqa: F401
                           efficiency_class, graphless_decode, lacks_tensor_peak, metric_value,
                           timings)
from .stack_fit import (BORROW_KERNELS, _borrowed, fit_energy_profiles,  # noqa: F401
                        choose_shrink, fit_framework, fit_tp_profiles, predictor)

# A class or memory technology is fitted where its batch-1 decode rows pin its values: six rows
# (model sizes and decode lengths varying) on at least one device. Fitting on one device is
# allowed because leave-one-device-out is the check against one device's quirks; a fold left
# with fewer rows falls back to the provisional values (``fit_table``).
MIN_DEVICES = 1
MIN_DECODE_ROWS = 6
MIN_PREFILL_ROWS = 4
RESTARTS = 4                     # Nelder-Mead restarts of a class fit (converged: start-independent)
# Where a class fit with prefill rows starts its attention fraction (fit_class): the fitted
# GPU and Apple values sit at 0.1-0.2; from the provisional 1 the simplex stalled near 1 with
# a higher loss (consumer GPUs: attention 0.9995, compute 0.37, loss +12 %).
ATTENTION_START = 0.15
# The GEMM fractions (compute, attention_compute) need prefill rows of two devices: one
# device's prefill rows can be off by 10x (an A100 SXM notebook's F16 prompts at 3 % of peak,
# a sweep that is not at steady state: ``measurements.unsteady_prefill``), and with one device
# they would set the class alone. Tried and not kept (issue 27): leaving such sweeps out of the
# class fit -- the A100s' prompt rows held out 24.96 -> 24.99 %, and through the streaming
# bounds' fit (the datacenter class values it holds moved) consumer prefill 13.5 -> 13.7 %,
# consumer batch 1 4.1 -> 4.2 %; with that rule, one device allowed and MIN_PREFILL_ROWS 3, the
# A100s' 21 prompt rows held out go 25.0 -> 18.6 % (TensorRT-LLM's three TTFT rows at their
# shipped fit: the A100 PCIe fold fits compute on the SXM's three quantised rows, one of them
# a 2025 MMQ build) -- not kept either: both thresholds would be chosen on those rows.
MIN_PREFILL_DEVICES = 2
# A class's half-saturation in rows of its routed-expert GEMMs (``Efficiency.
# expert_half_tokens``; its dense GEMMs stay flat: a GEMM curve on them made batch-1 decode
# compute-bound and raised the held-out batch-1 error 5.6 -> 6.5 %) is fitted where its prefill
# rows include mixture-of-experts prompts on MIN_PREFILL_DEVICES devices
# (``moe_prefill_devices``), from GEMM_HALF_START within GEMM_HALF_BOUNDS (the stack fits'
# range, ``stack_fit.BATCHED_PARAMS``); other classes keep 0.
GEMM_HALF_START = 32.0
GEMM_HALF_BOUNDS = (1.0, 4096.0)
REFERENCE_FRAMEWORK = "llama.cpp"
# The reference stack's build rules (issue 27): ``measurements.PROMPT_GEMM_WAVES`` (a
# pre-June-2024 llama.cpp CUDA build's prompt GEMMs tiled in whole waves over the SMs) and
# ``parallel.evaluation.PROMPT_PIPELINE`` (its layer split pipelines a prompt's micro-batches).
# Both time llama.cpp's prompt passes only: the wave rule its single-device prompt rows of such
# builds (``measurements.tiled_prompt_gemms``), the pipeline its layer-split prompt rows (no
# class-fit row: those are single-device). No decode row and no other stack's row is timed by
# either. So the fit (``fit_table``) is run with the wave rule off -- every class, memory
# technology, architecture and streaming value, and every stack profile, as without the rules
# -- and then only what the rules act on is refitted with it on: each class's GEMM fractions
# (``fit_gemm_fractions``), every other value held. The stacks other than llama.cpp keep the
# GEMM fractions they were fitted against (``EfficiencyTable.stack_classes``, written as
# ``[stack_class.*]``): their rows are not timed by the rules, so their effective values are
# those of the fit without them. With both rules off the two sets are the same.
BUILD_RULES = ("measurements.PROMPT_GEMM_WAVES", "parallel.evaluation.PROMPT_PIPELINE")
GEMM_FIELDS = STACK_CLASS_KEYS       # the GEMM fractions the rules refit
# Kernel launch overhead is a property of the runtime (CUDA driver, graph launch), not of the
# memory: datacenter GPUs reuse the consumer GPUs' fitted value. Fitting it on the A100 rows
# alone (two model sizes) trades it against the bandwidth fraction and the KV-read fraction:
# with the activation-quantising launches counted it fits 4.3 us (consumer 2.7), the class's
# kv_read moves 0.65 -> 0.93, datacenter batch 1 held out 11.5 -> 10.1 % (in sample 7.9 ->
# 5.9 %) and batched 10.8 -> 11.0 %, but batch 1 held out 6.4 -> 6.5 % (consumer GPUs 5.5 ->
# 5.6 %), and with each energy row timed with its own stack (energy per token 16.7 -> 15.8 %)
# the HF-eager A100 row, which has no profile and takes the class values, falls to 0.49 of its
# measured J/token. Not kept: tried twice (before and after the energy rows were timed with
# their stacks), neither met the datacenter bar.
SHARED_OVERHEAD = {HardwareClass.DATACENTER_GPU: HardwareClass.CONSUMER_GPU}
# What-if (issue 27, dc31; off): a class of SHARED_OVERHEAD fits its own per-kernel cost where
# its reference rows come from at least OWN_OVERHEAD_MIN_DEVICES physical devices (else it
# takes the donor's, as with the switch off); its GEMM fractions still come from the donor
# where its rows do not pin them. Tried a third time after the fused-build plan raised the
# shared value: in sample the datacenter class fits 4.41 us (consumer 3.63) and its batch-1
# rows go 4.7 -> 3.7 %, but held out datacenter batch 1 stays 7.23 % (rows within 4 %: 17 ->
# 13, within 6 %: 24 -> 26) -- scripts/dc_overhead_whatif.py has the figures. Off.
OWN_OVERHEAD = False
OWN_OVERHEAD_MIN_DEVICES = 1
# Share of a GQA group's K/V that llama.cpp's decode attention reads again from DRAM for each
# further query head of the group (``roofline.kv_read_factor``; the rest hits in L2). Fixed,
# not fitted per class (one number for all devices): chosen on a grid 0, 0.15, 0.3, 0.5, 1 --
# leave-one-device-out batch-1 error 7.2, 6.9, 6.8, 6.7, 7.8 %, in-sample 5.2, -, 5.1, 5.2, -
# %. At 1 (every query head streams its group's K/V again) the fitted per-class kv_read
# would have to exceed 1 on consumer GPUs (it sits at its cap of 1 already at 0.3): their L2
# keeps most of a group's K/V. Written into each fitted [class.*] as ``kv_reread``.
REFERENCE_KV_REREAD = 0.3
# Extra kernels per matmul with quantised weights of the reference stack, per hardware class
# (``Efficiency.act_quant_kernels``; the stacks that pay it: efficiency.ACT_QUANT_STACKS). Not
# fitted, read from llama.cpp's source: its CUDA/HIP back end quantises the activations to
# q8_1 in a kernel of their own before each quantised matrix-vector product (ggml-cuda.cu,
# ggml_cuda_op_mul_mat -> quantize_row_q8_1_cuda); Metal's quantised mat-vec kernels read
# float activations and the CPU back end launches nothing. Written into each fitted
# [class.*] as ``act_quant_kernels``.
REFERENCE_ACT_QUANT_KERNELS = {HardwareClass.CONSUMER_GPU: 1.0, HardwareClass.DATACENTER_GPU: 1.0}
# The units the reference stack's GEMMs run on, per GPU kernel class (``Efficiency.
# gemm_fp16_acc16`` / ``quant_gemm_int8``; efficiency.ACC16_STACKS / INT8_GEMM_STACKS say
# why). Not fitted: read from llama.cpp's CUDA back end (cuBLAS with FP16 compute for F16
# matmuls; MMQ on int8 MMA for quantised ones). Whether a device has the faster unit is its
# file's (``fp16_acc16``, ``int8`` and the architecture: ``roofline.gemm_peaks``). Written into
# each fitted GPU [class.*].
REFERENCE_GEMM_UNITS = {c: {"gemm_fp16_acc16": True, "quant_gemm_int8": True}
                        for c in (HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU)}
# Tried and not kept (issue 13): a dequantisation cost per weight format (extra streaming time
# per weight for block formats -- int8/int4 weight-only, Q4_0 -- and k-quants, native
# FP16/BF16/FP8 free). Per class on llama.cpp rows it lowered the in-sample batch-1 error (5.1
# -> 4.9 %) but raised leave-one-device-out (6.8 -> 7.0 %; consumer GPUs 5.0 -> 6.3 %): the
# format is confounded with model size and multi-GPU splits there. Per stack, gpt-fast's rows
# pin it (0.30 B/weight: int8 streams at ~0.74 of BF16's rate on the A100) but only on two
# devices of two vendors (held out, the MI250X's 0.50 mispredicts the A100's int8 rows by
# -13 %), and it broke the tensor-parallel scaling of its int8 rows (TP8 speedup predicted
# 5.1x vs 4.2x measured, +22 %): the quantised rows' TP1 cost is not per-weight streaming time.


# ---- class fit ------------------------------------------------------------------------------

def _clock(hardware) -> float:
    """The device's per-kernel cost relative to its kernel class's (``clock_overhead_factor``)."""
    return clock_overhead_factor(kernel_class(hardware.hw_class, hardware.architecture),
                                 hardware.boost_clock_mhz)


def _at_clock(eff: Efficiency, factor: float) -> Efficiency:
    """A class efficiency as one device pays it: the per-kernel cost at its clock. A copy
    with that one field set, not ``replace``: the class fit asks for it per row and trial, and
    a (0, 1] s per-kernel cost times a clock factor near 1 needs no new check of every field
    (the table the fit writes is checked when it is read)."""
    if factor == 1.0:
        return eff
    out = copy.copy(eff)
    object.__setattr__(out, "kernel_overhead_s", eff.kernel_overhead_s * factor)
    return out


def _unpack(x: np.ndarray, base: Efficiency, fit_compute: bool,
            overhead_s: float | None, fit_quant: bool = False,
            fit_half: bool = False) -> Efficiency:
    half = (float(np.clip(math.exp(x[-1]), *GEMM_HALF_BOUNDS)) if fit_half
            else base.expert_half_tokens)
    return Efficiency(compute=_sigmoid(x[3]) if fit_compute else base.compute,
                      gemm_half_tokens=base.gemm_half_tokens, expert_half_tokens=half,
                      memory=_sigmoid(x[0]),
                      kernel_overhead_s=(math.exp(x[1]) * S_PER_US if overhead_s is None
                                         else overhead_s),
                      kv_read=_sigmoid(x[2]),
                      attention_compute=(_sigmoid(x[4]) if fit_compute
                                         else base.attention_compute),
                      kv_reread=base.kv_reread, act_quant_kernels=base.act_quant_kernels,
                      quant_compute=_sigmoid(x[5]) if fit_quant else base.quant_compute,
                      stream_bytes_per_cu_cycle=base.stream_bytes_per_cu_cycle,
                      quant_stream_bytes_per_cu_cycle=base.quant_stream_bytes_per_cu_cycle,
                      kquant_stream_bytes_per_cu_cycle=base.kquant_stream_bytes_per_cu_cycle,
                      kv_stream_bytes_per_cu_cycle=base.kv_stream_bytes_per_cu_cycle,
                      gemm_fp16_acc16=base.gemm_fp16_acc16, quant_gemm_int8=base.quant_gemm_int8,
                      prompt_ubatch_tokens=base.prompt_ubatch_tokens)


def fit_class(feats: list[RowFeatures], base: Efficiency,
              overhead_s: float | None = None) -> Efficiency:
    """Class efficiency minimising the weighted loss over ``feats`` (``overhead_s`` given =
    the kernel overhead is held at that value)."""
    prefill = [f.row for f in feats if f.row.measurement.metric != "decode_tok_s"]
    fit_compute = (len(prefill) >= MIN_PREFILL_ROWS
                   and len({r.hardware.slug for r in prefill}) >= MIN_PREFILL_DEVICES)
    fit_quant = fit_compute and len(paired_quant_devices(prefill)) >= MIN_PREFILL_DEVICES
    fit_half = fit_compute and len(moe_prefill_devices(prefill)) >= MIN_PREFILL_DEVICES
    meas = np.array([f.row.measurement.value for f in feats])
    w = weights([f.row for f in feats])
    clocks = [_clock(f.row.hardware) for f in feats]

    def loss(x, half=False):
        check_time_budget()
        eff = _unpack(x, base, fit_compute, overhead_s, fit_quant, half)
        pred = np.array([f.predict(_at_clock(eff, c)) for f, c in zip(feats, clocks)])
        prior = PRIOR_WEIGHT * (math.log(eff.kv_read) ** 2
                                + math.log(eff.attention_compute) ** 2
                                + math.log(eff.quant_compute) ** 2)
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w)) + prior

    def minimise(f, x0: np.ndarray) -> np.ndarray:
        x = nelder_mead(f, x0, step=1.0)
        for _ in range(RESTARTS):        # restart until it stops improving: Nelder-Mead stalls
            x_new = nelder_mead(f, x, step=0.2)
            improved = f(x_new) < f(x) - 1e-9
            x = x_new if improved else x
            if not improved:
                break
        return x

    def descend(attention: float) -> np.ndarray:
        x0 = [_logit(base.memory), math.log(max(base.kernel_overhead_s / S_PER_US, 0.05)),
              _logit(base.kv_read), _logit(base.compute), _logit(attention)]
        x0 = np.array(x0 + [_logit(min(base.quant_compute, 0.9))] if fit_quant else x0)
        return minimise(loss, x0)
    # the GEMM and attention fractions trade along a shallow valley of prefill rows at 512 to
    # 4,096 tokens: from the provisional attention fraction (1) the simplex can stall at the
    # far end, so a class fit with prefill rows starts from ATTENTION_START
    x = descend(ATTENTION_START if fit_compute else base.attention_compute)
    if not fit_half:
        return _unpack(x, base, fit_compute, overhead_s, fit_quant)
    # then the GEMM fractions (compute, attention, quantised) and the experts' half-saturation
    # rows, with the decode values held: the MoE prompts' few rows move the GEMM curve, not
    # the bandwidth, overhead and KV-read fractions the batch-1 rows pin
    gemm = list(range(3, len(x)))
    full = np.append(x, math.log(GEMM_HALF_START))

    def gemm_loss(y):
        z = full.copy()
        z[gemm + [len(full) - 1]] = y
        return loss(z, True)
    full[gemm + [len(full) - 1]] = minimise(gemm_loss, full[gemm + [len(full) - 1]])
    return _unpack(full, base, fit_compute, overhead_s, fit_quant, True)


def fit_gemm_fractions(feats: list[RowFeatures], base: Efficiency,
                       donor: Efficiency | None = None) -> Efficiency:
    """``base`` (a fitted class) with only its GEMM fractions -- ``compute``,
    ``attention_compute`` and, where ``fit_class`` fits them on these rows, ``quant_compute``
    and ``expert_half_tokens`` -- refitted on ``feats`` with the same loss, every other value
    held (the refit of the build rules, ``BUILD_RULES``). A GEMM fraction these rows do not pin
    is ``donor``'s where the class takes it from one (``SHARED_OVERHEAD``, as ``_start``),
    else held; ``base`` itself where the rows pin none."""
    prefill = [f.row for f in feats if f.row.measurement.metric != "decode_tok_s"]
    fit_compute = (len(prefill) >= MIN_PREFILL_ROWS
                   and len({r.hardware.slug for r in prefill}) >= MIN_PREFILL_DEVICES)
    fit_quant = fit_compute and len(paired_quant_devices(prefill)) >= MIN_PREFILL_DEVICES
    fit_half = fit_compute and len(moe_prefill_devices(prefill)) >= MIN_PREFILL_DEVICES
    if donor is not None:
        base = replace(base, **{k: getattr(donor, k) for k, fitted in (
            ("compute", fit_compute), ("attention_compute", fit_compute),
            ("quant_compute", fit_quant), ("expert_half_tokens", fit_half)) if not fitted})
    if not fit_compute:
        return base
    meas = np.array([f.row.measurement.value for f in feats])
    w = weights([f.row for f in feats])
    clocks = [_clock(f.row.hardware) for f in feats]

    def unpack(y) -> Efficiency:
        vals = {"compute": _sigmoid(y[0]), "attention_compute": _sigmoid(y[1])}
        if fit_quant:
            vals["quant_compute"] = _sigmoid(y[2])
        if fit_half:
            vals["expert_half_tokens"] = float(np.clip(math.exp(y[-1]), *GEMM_HALF_BOUNDS))
        return replace(base, **vals)

    def loss(y) -> float:
        check_time_budget()
        eff = unpack(y)
        pred = np.array([f.predict(_at_clock(eff, c)) for f, c in zip(feats, clocks)])
        prior = PRIOR_WEIGHT * (math.log(eff.kv_read) ** 2
                                + math.log(eff.attention_compute) ** 2
                                + math.log(eff.quant_compute) ** 2)
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w)) + prior
    y = [_logit(base.compute), _logit(base.attention_compute)]
    y += [_logit(min(base.quant_compute, 0.9))] if fit_quant else []
    y += [math.log(base.expert_half_tokens or GEMM_HALF_START)] if fit_half else []
    y = nelder_mead(loss, np.array(y), step=1.0)
    for _ in range(RESTARTS):
        y_new = nelder_mead(loss, y, step=0.2)
        if not loss(y_new) < loss(y) - 1e-9:
            break
        y = y_new
    return unpack(y)


def moe_prefill_devices(prefill: list[Mapped]) -> set[str]:
    """Devices with prefill rows of a mixture-of-experts model: their routed experts run
    GEMMs of T x top-k / experts touched rows (``roofline.expert_flops_factor``), so the rows
    pin the experts' GEMM half-saturation ``expert_half_tokens``."""
    return {r.hardware.slug for r in prefill if r.model.moe is not None}


def paired_quant_devices(prefill: list[Mapped]) -> set[str]:
    """Devices with prefill rows of both 16-bit and quantised weights of one model at one
    prompt length: only such pairs separate the quantised matmuls' GEMM rate
    (``Efficiency.quant_compute``) from the device's compute fraction and the model's size."""
    kinds = defaultdict(set)
    for r in prefill:
        key = (r.hardware.slug, r.model.name, r.workload.prompt_len)
        kinds[key].add(min(r.precision.weight_attn_bits, r.precision.weight_ffn_bits) < 16)
    return {k[0] for k, v in kinds.items() if len(v) == 2}


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
        check_time_budget()
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
        bases = [_at_clock(table.classes.get(kernel_class(r.hardware.hw_class,
                                                          r.hardware.architecture)),
                           _clock(r.hardware)) for r in rs]
        out[key] = fit_memory_type([features(r) for r in rs], bases)
        counts[key] = len(rs)
    return out, counts


# ---- architecture memory factor --------------------------------------------------------------

MIN_ARCH_DEVICES = 2      # a generation's factor needs two of its devices (else: one device's)
# Discrete GPUs only: within an Apple generation the memory system spans 128- to 1024-bit
# buses and two-die Ultras, and generation factors fitted on Apple rows did not carry to the
# held-out Apple device (leave-one-device-out unified-soc 6.2 % -> 6.7 % with them).
ARCH_MEMORY_CLASSES = (HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU)


def fit_arch_memory(rows: list[Mapped], table: EfficiencyTable) -> dict:
    """{(architecture, factor key): memory_factor}: how much of its memory technology's
    weight-streaming fraction one GPU generation's memory controllers for one memory family
    reach (``hardware.memory_factor_key``), on the reference decode rows with class and
    technology values held; only where ``MIN_ARCH_DEVICES`` devices and ``MIN_DECODE_ROWS``
    rows carry it."""
    groups: dict[tuple, list[Mapped]] = defaultdict(list)
    for cls, rs in class_rows(rows).items():
        if cls not in ARCH_MEMORY_CLASSES:
            continue
        for r in rs:
            arch, key = architecture_of(r.hardware), memory_factor_key(r.hardware.memory_type)
            if arch and key and r.measurement.metric == "decode_tok_s":
                groups[(arch, key)].append(r)
    out = {}
    for group, rs in sorted(groups.items()):
        if len(rs) < MIN_DECODE_ROWS or len({r.hardware.slug for r in rs}) < MIN_ARCH_DEVICES:
            continue
        feats, bases = [features(r) for r in rs], [table.efficiency_for(r.hardware) for r in rs]
        meas = np.array([r.measurement.value for r in rs])
        w = weights(rs)

        def loss(x):
            check_time_budget()
            pred = np.array([f.predict(replace(b, memory=min(1.0, b.memory * math.exp(x[0]))))
                             for f, b in zip(feats, bases)])
            return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w))
        x = nelder_mead(loss, nelder_mead(loss, np.zeros(1), step=0.1), step=0.02)
        out[group] = float(math.exp(x[0]))
    return out


def _with_arch_memory(table: EfficiencyTable, rows: list[Mapped]) -> EfficiencyTable:
    """``table`` with its architecture memory factors refitted on ``rows`` (none kept from
    ``table``: a refit without a device must not keep what was fitted with it)."""
    arch = {k: {kk: vv for kk, vv in v.items() if not kk.startswith("memory_factor")}
            for k, v in table.architectures.items()}
    table = replace(table, architectures=arch)
    for (name, key), f in fit_arch_memory(rows, table).items():
        arch.setdefault(name, {})[key] = f
    return replace(table, architectures={k: v for k, v in arch.items() if v})


# ---- weight-streaming limit per compute unit -------------------------------------------------

# The reference stack's matrix-vector kernels stream weights at most at so many bytes per compute
# unit per cycle (``Efficiency.stream_bytes_per_cu_cycle``, 16-bit weights, and
# ``quant_stream_bytes_per_cu_cycle``, quantised): a kernel keeps a bounded number of loads in
# flight per SM, so the bandwidth it draws is capped near units x clock x bytes in flight per
# unit / DRAM latency (Little's law), whatever the memory could deliver. Fitted on the GPU
# kernel classes' reference decode rows of devices whose files give compute units and a boost
# clock, with the classes and memory-technology values refitted once around them:
# the limit binds only where the memory is wide and the units few -- the A100's HBM2e, where
# llama.cpp's F16 path draws ~0.8 TB/s of 2 TB/s and its Q4_K path ~1.0 TB/s, while the same
# kernels reach 80-90 % of an RTX A6000's or RTX 4000 Ada's GDDR6.
STREAM_CLASSES = (HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU)
STREAM_GRID = (2.0, 4.0, 6.0, 8.0, 12.0, 64.0)   # bytes per unit per cycle; 64 binds nowhere
STREAM_BOUNDS = (0.5, 1024.0)


def stream_rows(rows: list[Mapped]) -> list[Mapped]:
    """The rows the streaming limits are fitted on: reference decode rows of GPU kernel-class
    devices with compute units and a boost clock."""
    return [r for cls, rs in class_rows(rows).items() if cls in STREAM_CLASSES for r in rs
            if r.measurement.metric == "decode_tok_s" and r.hardware.compute_units
            and r.hardware.boost_clock_mhz]


def fit_stream_limits(rows: list[Mapped], table: EfficiencyTable) -> tuple[float, float] | None:
    """(16-bit, quantised) bytes per compute unit per cycle of the reference stack's
    weight streaming on ``rows`` (``stream_rows``), everything else held at ``table``'s values;
    None without ``MIN_DECODE_ROWS`` such rows of each kind."""
    rs = stream_rows(rows)
    quant = [r.precision.weight_ffn_bits < 16 for r in rs]
    if min(sum(quant), len(rs) - sum(quant)) < MIN_DECODE_ROWS:
        return None
    feats, bases = [features(r) for r in rs], [table.efficiency_for(r.hardware) for r in rs]
    meas = np.array([r.measurement.value for r in rs])
    w = weights(rs)
    lo, hi = (math.log(b) for b in STREAM_BOUNDS)

    def unpack(x) -> dict:
        return {"stream_bytes_per_cu_cycle": math.exp(min(hi, max(lo, x[0]))),
                "quant_stream_bytes_per_cu_cycle": math.exp(min(hi, max(lo, x[1])))}

    def loss(x):
        check_time_budget()
        vals = unpack(x)
        pred = np.array([f.predict(replace(b, **vals)) for f, b in zip(feats, bases)])
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w))
    # the loss is flat wherever a limit binds nowhere: start from the best point of a grid
    grid = [np.log([a, b]) for a in STREAM_GRID for b in STREAM_GRID]
    x0 = min(grid, key=loss)
    x = nelder_mead(loss, nelder_mead(loss, x0, step=0.3), step=0.05)
    v = unpack(x)
    return v["stream_bytes_per_cu_cycle"], v["quant_stream_bytes_per_cu_cycle"]


def _with_stream(classes: dict, limits: tuple[float, float] | None) -> dict:
    """``classes`` with the GPU kernel classes' streaming limits set (0 = none)."""
    k16, kq = limits or (0.0, 0.0)
    return {c: (replace(e, stream_bytes_per_cu_cycle=k16, quant_stream_bytes_per_cu_cycle=kq)
                if c in STREAM_CLASSES else e) for c, e in classes.items()}


# The Metal k-quant kernels' streaming bound (issue 27, Apple SoCs): llama.cpp's matrix-vector
# kernels for k-quant weights (Q4_K, Q6_K: 256-weight super-blocks whose 6-bit sub-block scales
# and minimums are unpacked in the inner loop, ggml-metal.metal kernel_mul_mv_q4_K_f32_impl)
# stream those weights no faster than so many bytes per GPU core per cycle -- the same Little's
# law bound as ``stream_bytes_per_cu_cycle`` (loads in flight per core), for one kernel family.
# The data show it: the May 2024 notebook rows (XiongjieDai/GPU-Benchmarks-on-LLM-Inference,
# build 858f6b73 (2797) on the M1 Max) put Llama-3 8B and 70B Q4_K_M on the 32-core M1 Max at
# ~190 GB/s of weights (its F16 rows at ~300, its #4167 Q8_0 row at ~330), on the 76-core M2
# Ultra at ~600 and the 40-core M3 Max at ~350-380 (step time = layers x a fixed cost + weights
# / rate, on each device's 8B and 70B rows) -- per core per cycle 4.6, 5.9 and 6.8 B: wide
# memories fed by few cores bind, as the A100's HBM does for the CUDA kernels. Fitted as one
# value per class (``KQUANT_CLASSES``) on its reference decode rows in k-quant formats of devices
# whose files give GPU cores and a clock, the class refitted once around it (``fit_table``).
KQUANT_CLASSES = (HardwareClass.UNIFIED_SOC,)
KQUANT_GRID = (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 64.0)   # 64 binds nowhere
# Switch (issue 27): False = no k-quant bound fitted (the model before it).
KQUANT_STREAM = True


def kquant_rows(rows: list[Mapped]) -> dict:
    """Class -> the reference decode rows in a k-quant format (``precision.is_kquant``) of
    devices of ``KQUANT_CLASSES`` with GPU cores and a clock in their files."""
    out = {}
    for cls, rs in class_rows(rows).items():
        if cls not in KQUANT_CLASSES:
            continue
        sel = [r for r in rs if r.measurement.metric == "decode_tok_s"
               and is_kquant(r.precision) and r.hardware.compute_units
               and r.hardware.boost_clock_mhz]
        if sel:
            out[cls] = sel
    return out


def fit_kquant_limits(rows: list[Mapped], table: EfficiencyTable) -> dict:
    """Class -> ``kquant_stream_bytes_per_cu_cycle`` fitted on its ``kquant_rows`` (everything
    else held at ``table``'s values), for classes with ``MIN_DECODE_ROWS`` such rows on two
    devices (one device's rows would set a per-device value)."""
    out = {}
    if not KQUANT_STREAM:
        return out
    for cls, rs in kquant_rows(rows).items():
        if len(rs) < MIN_DECODE_ROWS or len({device_key(r.hardware) for r in rs}) < 2:
            continue
        out[cls] = _fit_bound(rs, table, "kquant_stream_bytes_per_cu_cycle", KQUANT_GRID)
    return out


def _fit_bound(rs: list[Mapped], table: EfficiencyTable, field: str, grid) -> float:
    """One per-compute-unit streaming bound (``Efficiency.<field>``, bytes per unit-cycle)
    fitted on the rows ``rs``, everything else held at ``table``'s values: the best value of
    ``grid``, then Nelder-Mead in log space, within ``STREAM_BOUNDS``."""
    lo, hi = (math.log(b) for b in STREAM_BOUNDS)
    feats = [features(r) for r in rs]
    bases = [table.efficiency_for(r.hardware) for r in rs]
    meas = np.array([r.measurement.value for r in rs])
    w = weights(rs)

    def loss(x):
        check_time_budget()
        v = math.exp(min(hi, max(lo, float(x[0]))))
        pred = np.array([f.predict(replace(b, **{field: v})) for f, b in zip(feats, bases)])
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w))
    x0 = min((np.log([g]) for g in grid), key=loss)
    x = nelder_mead(loss, x0, step=0.1)
    return math.exp(min(hi, max(lo, float(x[0]))))


def _with_kquant(classes: dict, limits: dict) -> dict:
    """``classes`` with the k-quant bounds of ``limits`` set (a class not in it: 0)."""
    return {c: (replace(e, kquant_stream_bytes_per_cu_cycle=limits.get(c, 0.0))
                if c in KQUANT_CLASSES else e) for c, e in classes.items()}


# Decode attention on Apple GPUs bound per GPU core (issue 27, uni31): llama.cpp's Metal decode
# attention of the May 2024 notebook builds (no flash attention: llama-bench's default then) is
# two matrix-vector products per layer, K x q and V x softmax, each broadcast over the query
# heads of a GQA group, so every query head passes over its group's K and V -- the passes the
# model counts as KV reads plus re-reads (``Operator.kv_reread_bytes``). The K x q product
# runs over rows of one head's width (128 F16 values, 256 bytes: short rows, a reduction per
# row) and the re-reads of a group's K/V hit the GPU's caches, so the rate of these passes is
# set by the GPU cores, not by the DRAM: at most ``kv_stream_bytes_per_cu_cycle`` x cores x
# clock bytes of every query head's K/V per second (``roofline.kv_stream_limit``), the DRAM
# stream at ``kv_read`` with the share ``kv_reread`` re-read being the other bound. What the
# rows say (step time against context, the notebooks' tg512 ... tg8192 rows; ms per 1,000
# tokens of mean context for Llama-3 8B, x the GPU's cores x GHz): M1 7-core 18.9 ms (169),
# M1 Max 3.5 (F16; 142), M2 Ultra 1.4-1.5 (151-160), M3 Max 1.9-2.2 (106-124) -- nearly one
# number per core-cycle, where per byte of DRAM bandwidth the M3 Max reads its KV cache 1.5 x
# as fast as the M1 Max with the same 400 GB/s (an M1 Max fold fitted on the DRAM bound alone
# predicts its slope 2.3 ms for the measured 3.5, an M3 Max fold 3.2 for 2.0). Fitted as one
# value per class (``KV_CLASSES``) on its reference decode rows of devices whose files give
# GPU cores and a clock, the class refitted once around it (``fit_table``).
KV_CLASSES = (HardwareClass.UNIFIED_SOC,)
KV_GRID = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 64.0)   # 64 binds nowhere
# Switch (issue 27): False = no per-core attention bound fitted (the model before it).
KV_STREAM = True


def kv_rows(rows: list[Mapped]) -> dict:
    """Class -> the reference decode rows of devices of ``KV_CLASSES`` with GPU cores and a
    clock in their files (the per-core attention bound is fitted on them)."""
    out = {}
    for cls, rs in class_rows(rows).items():
        if cls not in KV_CLASSES:
            continue
        sel = [r for r in rs if r.measurement.metric == "decode_tok_s"
               and r.hardware.compute_units and r.hardware.boost_clock_mhz]
        if sel:
            out[cls] = sel
    return out


def fit_kv_limits(rows: list[Mapped], table: EfficiencyTable) -> dict:
    """Class -> ``kv_stream_bytes_per_cu_cycle`` fitted on its ``kv_rows`` (everything else
    held at ``table``'s values), for classes whose rows at 1,024 tokens of context or more
    (where KV reads weigh) come from two devices (one device would set a per-device value)."""
    out = {}
    if not KV_STREAM:
        return out
    for cls, rs in kv_rows(rows).items():
        long = [r for r in rs if r.workload.prompt_len + r.workload.gen_len >= KV_MIN_CONTEXT]
        if len(rs) < MIN_DECODE_ROWS or len({device_key(r.hardware) for r in long}) < 2:
            continue
        out[cls] = _fit_bound(rs, table, "kv_stream_bytes_per_cu_cycle", KV_GRID)
    return out


KV_MIN_CONTEXT = 1024      # tokens of prompt + generation of a row that pins the KV bound
KV_ROUNDS = 2              # rounds of (bound, class) refits in fit_table


def _with_kv(classes: dict, limits: dict) -> dict:
    """``classes`` with the per-core attention bounds of ``limits`` set (a class not in it:
    0)."""
    return {c: (replace(e, kv_stream_bytes_per_cu_cycle=limits.get(c, 0.0))
                if c in KV_CLASSES else e) for c, e in classes.items()}


# ---- layer-split hop cost --------------------------------------------------------------------

MIN_HOP_GROUPS = 3
MIN_HOP_DEVICES = 2


def hop_groups(rows: list[Mapped], table: EfficiencyTable | None = None
               ) -> dict[tuple, list[tuple[int, float]]]:
    """The reference stack's batch-1 decode rows of one device, model, format and lengths
    measured at two or more pipeline depths (1 = one device; layer split only): key ->
    [(PP, measured step time [s])]. With ``table``, a row that launched its kernels without a
    CUDA graph (``measurements.graphless_decode``) has that cost, as ``table`` times it,
    taken off its step time: it is a step at PP > 1, not a cost per stage boundary."""
    groups: dict[tuple, list[tuple[int, float]]] = defaultdict(list)
    for r in rows:
        m = r.measurement
        if (r.framework == REFERENCE_FRAMEWORK and r.tp == 1 and r.hardware.efficiency is None
                and m.batch == 1 and m.metric == "decode_tok_s"):
            key = (r.hardware.slug, r.model.name, r.precision.name, r.workload.prompt_len,
                   r.workload.gen_len)
            groups[key].append((r.pp, 1.0 / m.value - _graphless_s(r, table)))
    return {k: v for k, v in groups.items() if len({p for p, _ in v}) >= 2}


def _graphless_s(row: Mapped, table: EfficiencyTable | None) -> float:
    """Step time [s] that ``row``'s kernel launches without a CUDA graph add under ``table``
    (0 for other rows, or without a table): launches x ``GRAPHLESS_LAUNCH_S``, the launches
    counted as the step time's slope in the per-launch cost (time is linear in it)."""
    if table is None or not graphless_decode(row):
        return 0.0
    eff = table.efficiency_for(row.hardware, REFERENCE_FRAMEWORK)
    less = replace(eff, kernel_overhead_s=max(0.0, eff.kernel_overhead_s - GRAPHLESS_LAUNCH_S))
    return (1.0 / timings(row, eff)[1].decode_tokens_per_s
            - 1.0 / timings(row, less)[1].decode_tokens_per_s) \
        * GRAPHLESS_LAUNCH_S / (eff.kernel_overhead_s - less.kernel_overhead_s)


def fit_stage_hop(rows: list[Mapped], table: EfficiencyTable | None = None) -> float | None:
    """``stage_hop_s`` of the reference stack: the cost per stage boundary per decode step of
    its layer split, beyond the link's own time (a few kB sent). Set by how the measured step
    time of the same device, model, format and lengths grows with the number of devices --
    the least-squares slope of step time on PP - 1 in each such group, and the median over
    groups (clamped at 0). Comparing within a group keeps the device's own streaming fraction
    out: fitted on the step times themselves, the hop also absorbed the k-quant rows' base
    error (441 us vs 248 us). None with fewer than ``MIN_HOP_GROUPS`` groups on
    ``MIN_HOP_DEVICES`` devices."""
    groups = hop_groups(rows, table)
    if len(groups) < MIN_HOP_GROUPS or len({k[0] for k in groups}) < MIN_HOP_DEVICES:
        return None
    slopes = [np.polyfit([p - 1.0 for p, _ in pts], [t for _, t in pts], 1)[0]
              for pts in groups.values()]
    return max(0.0, float(np.median(slopes)))


# ---- row-split copy cost ---------------------------------------------------------------------

# Ceiling of the search for a row's implied copy cost [s]: beyond it the row is not a copy cost.
MAX_ROW_COPY_S = 1e-3


def row_split_rows(rows: list[Mapped]) -> list[Mapped]:
    """The reference stack's batch-1 decode rows split by rows over a TP group (llama.cpp's
    tensor split)."""
    return [r for r in rows if r.framework == REFERENCE_FRAMEWORK and r.tp > 1
            and r.hardware.efficiency is None and r.measurement.batch == 1
            and r.measurement.metric == "decode_tok_s"]


def fit_row_copy(rows: list[Mapped], table: EfficiencyTable) -> float | None:
    """``tp_row_copy_s`` of the reference stack: the host-driven cost of each device-to-device
    copy of its row split (2 (TP - 1) per split matmul) beyond the link's own time. Each
    tensor-split row implies the value at which the model meets it (bisection: the predicted
    speed falls as the cost grows), and the median over rows is taken, as the stage hop takes
    the median over groups. None without such rows (the data: three 2023 llm-perf-bench rows,
    Llama-2-70B F16 on 4 and 8 A100s and 8 A10Gs over PCIe)."""
    return median_implied(row_split_rows(rows), table, REFERENCE_FRAMEWORK, "tp_row_copy_s",
                          MAX_ROW_COPY_S)


def median_implied(rows: list[Mapped], table: EfficiencyTable, stack: str, field: str,
                   bound_s: float) -> float | None:
    """The median over ``rows`` of the value of the cost ``field`` (an ``Efficiency`` time,
    0 .. ``bound_s``) at which the model meets each row, on ``stack``'s efficiency
    (bisection: the predicted speed falls as the cost grows); None without such a value."""
    implied = []
    for r in rows:
        base = table.efficiency_for(r.hardware, stack)

        def slowness(c: float) -> float:          # 1 / speed: grows with the cost
            eff = replace(base, **{field: c})
            return 1.0 / metric_value(r.measurement.metric, timings(r, eff)[1], r.workload)
        c = implied_cost(slowness, 1.0 / r.measurement.value, bound_s)
        if c is not None:
            implied.append(c)
    return float(np.median(implied)) if implied else None


EAGER_STACK = "vllm-legacy"
MAX_EAGER_LAUNCH_S = 1e-3


def eager_rows(rows: list[Mapped]) -> list[Mapped]:
    """The rows of a build that dispatched every kernel from Python
    (``measurements.eager_decode``), of a device without its own efficiency."""
    return [r for r in rows if r.hardware.efficiency is None and validation.eager_decode(r)]


def fit_eager_launch(rows: list[Mapped], table: EfficiencyTable) -> float | None:
    """``eager_launch_s`` of the vLLM < 0.6 profile: the host time per kernel launch of its
    builds before CUDA graphs (``measurements.VLLM_GRAPHS_FROM``). Each such row implies the
    value at which the model meets it (bisection: the predicted speed falls as it grows), and
    the median over rows is taken, as ``fit_row_copy`` does. One value for every GPU: a host
    cost, not scaled by the device. None without such rows (the data: two 2023 llm-perf-bench
    rows, Llama-2-70B F16 on 4 A100s and on 8 A10Gs over PCIe; in a leave-one-device-out fold
    the other device's row alone)."""
    return median_implied(eager_rows(rows), table, EAGER_STACK, "eager_launch_s",
                          MAX_EAGER_LAUNCH_S)


# ---- the whole fit --------------------------------------------------------------------------

def fit_table(rows: list[Mapped], base: EfficiencyTable, frameworks: bool = True,
              only: set | None = None, classes_too: bool = True,
              energy=None) -> EfficiencyTable:
    """A new table fitted on ``rows``; classes and stacks without enough data keep the values
    of ``base``. ``only`` = refit just these stacks; ``classes_too`` = False keeps the class and
    memory-technology values of ``base`` (leave-one-out of a device without reference rows).
    ``energy`` = energy measurements (``metrics.energy.EnergyMeasurement``) that time the
    stacks measured nowhere else (``stack_fit.fit_energy_profiles``)."""
    by_cls = class_rows(rows) if classes_too else {}
    # donors first; a class fitted in ``base`` is refitted or reset (values fitted on other
    # rows never survive a refit: no leak in leave-one-device-out)
    todo = set(by_cls) | ({c for c, n in base.class_rows.items() if n} if classes_too else set())
    rules = validation.PROMPT_GEMM_WAVES
    with validation.prompt_gemm_waves(False):     # the build rules: see BUILD_RULES
        table = _fit_reference(rows, base, by_cls, todo, None, classes_too)
        limits = fit_stream_limits(rows, table) if by_cls else None
        if limits:
            # refitted with the bound: only the classes that carry it change
            table = _fit_reference(rows, table, by_cls, todo & set(STREAM_CLASSES), limits,
                                   classes_too)
        kq = fit_kquant_limits(rows, table) if by_cls else {}
        if kq:
            # the classes that carry a k-quant bound refitted once with it held
            table = _fit_reference(rows, table, by_cls, todo & set(kq), limits, classes_too,
                                   kq)
        for _ in range(KV_ROUNDS if by_cls else 0):
            # the per-core attention bound fitted, the class refitted with it held (k-quant
            # bound kept); again, so the bound is fitted with a KV-read fraction that no
            # longer carries the slopes the bound explains
            kv = fit_kv_limits(rows, table)
            if not kv:
                break
            table = _fit_reference(rows, table, by_cls, todo & set(kv), limits, classes_too,
                                   kq, kv)
    if by_cls:
        table = replace(table, stack_classes={})
        if rules:
            table = _fit_build_rules(table, by_cls, todo)
    if limits:
        # the classes held it while the fit ran; it is the reference stack's (its kernels'),
        # not the generic estimate's
        table = replace(table, classes=_with_stream(table.classes, None),
                        stack_classes=_with_stream(table.stack_classes, None))
        stream = dict(zip(STREAM_FIELDS, limits))
    elif by_cls:
        stream = {}          # too few rows to pin a bound
    else:                    # the classes were not refitted: the reference keeps its bound
        stream = {k: v for k, v in base.profile(REFERENCE_FRAMEWORK).absolute.items()
                  if k in STREAM_FIELDS}
    fws = dict(base.frameworks)
    hop = fit_stage_hop(rows, table)
    ref = FrameworkProfile(
        REFERENCE_FRAMEWORK, FRAMEWORKS[REFERENCE_FRAMEWORK][0], kv_per_query_head=True,
        act_quant=True,
        rows=sum(len(v) for v in by_cls.values()) or base.profile(REFERENCE_FRAMEWORK).rows,
        absolute={**({"stage_hop_s": hop} if hop else {}), **stream},
        note="reference stack: the class and memory-technology values are fitted on its rows"
             + ("; stage_hop from its layer-split rows (step time vs devices)" if hop else "")
             + ("; stream bounds per compute unit from its GPU rows" if stream else ""))
    fws[REFERENCE_FRAMEWORK] = ref
    table = replace(table, frameworks=fws)
    copy = fit_row_copy(rows, table)
    if copy:
        fws[REFERENCE_FRAMEWORK] = replace(
            ref, absolute={**ref.absolute, "tp_row_copy_s": copy},
            note=ref.note + "; tp_row_copy from its tensor-split (row split) rows")
        table = replace(table, frameworks=fws)
    if frameworks:
        by_fw: dict[str, list[Mapped]] = defaultdict(list)
        for r in rows:
            if r.framework and r.framework != REFERENCE_FRAMEWORK \
                    and r.hardware.efficiency is None:
                by_fw[r.framework].append(r)
        for name in FRAMEWORKS:
            if name in by_fw and name not in BORROW_KERNELS and (only is None or name in only):
                lam = choose_shrink(name, by_fw[name], table)
                prof = fit_framework(name, by_fw[name], table, shrink=lam)
                fws[name] = replace(prof, note="; ".join(
                    x for x in (prof.note, f"batch-1 shrinkage {lam:g} (chosen by "
                                "leave-one-device-out over its devices)" if lam else "") if x))
                table = replace(table, frameworks=dict(fws))
        for name, donor in BORROW_KERNELS.items():
            if only is None or name in only or donor in only:
                fws[name] = _borrowed(name, donor, fws, by_fw.get(name, []), table)
        if EAGER_STACK in fws and (only is None or EAGER_STACK in only):
            eager = fit_eager_launch(rows, replace(table, frameworks=dict(fws)))
            if eager is not None:
                p = fws[EAGER_STACK]
                fws[EAGER_STACK] = replace(
                    p, absolute={**p.absolute, "eager_launch_s": eager},
                    note=p.note + "; eager_launch from its decode rows of builds before CUDA "
                                  "graphs (host time per launch, measurements.eager_decode)")
        if only is None:
            fws.update(fit_tp_profiles(replace(table, frameworks=dict(fws)), fws))
            if energy is not None:
                fws.update(fit_energy_profiles(replace(table, frameworks=dict(fws)), fws,
                                               energy))
    return replace(table, frameworks=fws)


def _fit_build_rules(table: EfficiencyTable, by_cls: dict, todo: set) -> EfficiencyTable:
    """``table`` (fitted with the build rules off) with the GEMM fractions of each class that
    has rows the wave rule times (or takes GEMM fractions from a class refitted here,
    ``SHARED_OVERHEAD``) refitted with the rules on (``fit_gemm_fractions``, ``BUILD_RULES``);
    the values fitted with them off go to ``stack_classes`` where they differ, for the other
    stacks' profiles."""
    classes, stack = dict(table.classes), {}
    for cls in sorted(todo, key=lambda c: (c in SHARED_OVERHEAD, c.value)):   # donors first
        rs = by_cls.get(cls, [])
        donor = SHARED_OVERHEAD.get(cls)
        touched = any(validation.tiled_prompt_gemms(r) for r in rs) or donor in stack
        if touched and not table.class_rows.get(cls) and donor in stack:
            # not fitted: its GEMM fractions are the donor's (``_start``), refitted or not
            new = replace(classes[cls], **{k: getattr(classes[donor], k) for k in GEMM_FIELDS})
            if new != classes[cls]:
                stack[cls], classes[cls] = classes[cls], new
            continue
        if not (touched and fittable(rs) and table.class_rows.get(cls)):
            continue
        new = fit_gemm_fractions([features(r) for r in rs], classes[cls],
                                 classes[donor] if donor in stack else None)
        if new != classes[cls]:
            stack[cls], classes[cls] = classes[cls], new
    return replace(table, classes=classes, stack_classes=stack)


def _fit_reference(rows: list[Mapped], base: EfficiencyTable, by_cls: dict, todo: set,
                   limits: tuple[float, float] | None, classes_too: bool,
                   kquant: dict | None = None, kv: dict | None = None) -> EfficiencyTable:
    """``base`` with the classes in ``todo`` fitted on their reference rows ``by_cls`` (the
    GPU kernel classes with the streaming ``limits``, None = none; the classes of ``kquant``
    with its k-quant bound held, those of ``kv`` with their per-core attention bound held),
    then -- ``classes_too`` -- the memory technologies and architecture memory factors."""
    classes, counts = dict(base.classes), dict(base.class_rows)
    for cls in sorted(todo, key=lambda c: (c in SHARED_OVERHEAD, c.value)):
        rs = by_cls.get(cls, [])
        if not fittable(rs):
            classes[cls], counts[cls] = _start(cls, classes, counts), 0
            continue
        start = replace(_start(cls, classes, counts), kv_reread=REFERENCE_KV_REREAD,
                        **REFERENCE_GEMM_UNITS.get(cls, {}),
                        act_quant_kernels=REFERENCE_ACT_QUANT_KERNELS.get(cls, 0.0))
        start = _with_stream({cls: start}, limits)[cls]
        start = _with_kquant({cls: start}, kquant or {})[cls]
        start = _with_kv({cls: start}, kv or {})[cls]
        classes[cls] = fit_class([features(r) for r in rs], start,
                                 _shared_overhead(cls, classes, counts, rs))
        counts[cls] = len(rs)
    table = replace(base, classes=classes, class_rows=counts)
    if classes_too:
        mt, mt_rows = fit_memory_types(rows, table)
        kept = {k: v for k, v in base.memory_types.items() if not base.memory_type_rows.get(k)}
        table = replace(table, memory_types={**kept, **mt}, memory_type_rows=mt_rows)
        table = _with_arch_memory(table, rows)
    return table


def _start(cls: HardwareClass, classes: dict, counts: dict) -> Efficiency:
    """Where a class fit starts, and what it keeps where its rows cannot pin a value: the
    provisional constants, with the GEMM fractions of the class whose kernels it runs
    (``SHARED_OVERHEAD``: datacenter GPUs run the consumer GPUs' CUDA kernels) when that class
    is fitted."""
    start = replace(PROVISIONAL_EFFICIENCY[cls],
                    prompt_ubatch_tokens=UBATCH_STACKS.get(REFERENCE_FRAMEWORK, 0.0))
    donor = SHARED_OVERHEAD.get(cls)
    if donor is not None and counts.get(donor):
        d = classes[donor]
        start = replace(start, compute=d.compute, attention_compute=d.attention_compute,
                        quant_compute=d.quant_compute, expert_half_tokens=d.expert_half_tokens)
    return start


def _shared_overhead(cls: HardwareClass, classes: dict, counts: dict,
                     rs: list[Mapped] = ()) -> float | None:
    """The per-kernel cost ``cls`` is held at (its donor's, ``SHARED_OVERHEAD``), or None
    where it fits its own (no donor fitted, or ``OWN_OVERHEAD`` and its rows ``rs`` span
    ``OWN_OVERHEAD_MIN_DEVICES`` physical devices)."""
    if OWN_OVERHEAD and len({device_key(r.hardware) for r in rs}) >= OWN_OVERHEAD_MIN_DEVICES:
        return None
    donor = SHARED_OVERHEAD.get(cls)
    return classes[donor].kernel_overhead_s if donor is not None and counts.get(donor) else None


def leave_one_device_out(rows: list[Mapped], base: EfficiencyTable,
                         devices: list[str] | None = None) -> list:
    """Held-out predictions (``measurements.Prediction``) of every row: for each device (with
    its twins, ``device_key``), the table is refitted from ``base`` without that device's rows
    (the class and memory-technology values only when the device has reference-stack rows; a
    class or technology left with too few rows falls back to the provisional values, never
    to values fitted with the device), the stacks it was measured with, and its rows are
    predicted with the full core. ``devices`` limits the devices held out."""
    from .measurements import predict_all
    ref = {device_key(r.hardware) for rs in class_rows(rows).values() for r in rs}
    keys = {r.hardware.slug: device_key(r.hardware) for r in rows}
    out, done = [], set()
    for slug in sorted(devices or keys):
        key = keys.get(slug)
        if key is None or key in done:
            continue
        done.add(key)
        test = [r for r in rows if device_key(r.hardware) == key]
        train = [r for r in rows if device_key(r.hardware) != key]
        stacks = {r.framework for r in test if r.framework}
        t = fit_table(train, base, only=stacks, classes_too=key in ref)
        out += predict_all(test, t)[0]
    return out


def fitted_classes(table: EfficiencyTable) -> list[HardwareClass]:
    """Classes whose values come from a fit (not the provisional constants)."""
    return [c for c, n in table.class_rows.items() if n]
