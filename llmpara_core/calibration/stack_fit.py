"""Stack profiles of the efficiency model fitted on measurements
(:mod:`llmpara_core.calibration.fitting` calls these after the reference-stack fit): scales on
a stack's batch-1 rows, absolute batched-regime values on its batched rows, GPU-kernel values
borrowed where the data cannot separate them, and the stacks measured only in the
tensor-parallel series."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..budget import check_time_budget
from ..errors import ConfigError
from ..hardware import MAX_ACT_QUANT_KERNELS
from .efficiency import (ACT_QUANT_STACKS, FRAMEWORKS, KV_PER_QUERY_HEAD, cited_absolute,
                         EfficiencyTable, FrameworkProfile)
from .fastpath import PRIOR_WEIGHT, features, huber, implied_cost, nelder_mead, weights
from .measurements import Mapped, device_key, estimated_timing, metric_value, regime

MIN_FRAMEWORK_ROWS = 2
# The identification rule of issue 27, a what-if (``scripts/quant_cost_whatif.py --variant
# identified`` sets it to 2): a stack's batch-1 scales (and its own cost per quantised matmul)
# and its prefill compute scale fitted only where its rows of that regime come from at least
# this many physical devices (``measurements.device_key``) -- on one device a stack effect
# cannot be separated from that device's own, so below it the stack would run at the class
# values with its structural terms only (kernel plan, KV reads per query head, GEMM units:
# read from its source). Applied alike in the shipped fit and every leave-one-device-out fold,
# it made the held-out batch-1 figures worse and is not used (1 = any rows): with the A100s
# held out, gpt-fast's profile is otherwise fitted on the MI250X GCD's two rows, whose int8 row
# mispredicts the A100's int8 rows, but its BF16 row also carries the part of gpt-fast's
# streaming rate that transfers (1.22 x the reference stack's, 0.64-0.69 of HBM2e peak on both
# devices), which the class value (0.57, llama.cpp's) lacks: gpt-fast held out 10.2 -> 16.4 %
# (BF16 rows -11 -> -27 %, int8 rows -24..-40 -> -16..+3 %), MLC 13.2 % unchanged, datacenter
# batch 1 9.0 -> 11.8 %. The TensorRT-LLM TTFT rows (one device) would lose a compute scale
# the batched fit's absolute compute replaces anyway.
MIN_FRAMEWORK_DEVICES = 1
# Stacks whose GEMMs use each architecture's newest tensor-core instructions (CUTLASS/cuBLAS
# Hopper kernels): no legacy_kernel_factor. A fact about the stack, not a fit.
NATIVE_KERNEL_STACKS = ("tensorrt-llm", "vllm", "vllm-legacy", "sglang")
MIN_BATCHED_ROWS = 8
# Batched-row parameters (Efficiency field, start, lower, upper) fitted in log space.
BATCHED_PARAMS = (("memory", 0.7, 0.2, 0.95), ("compute", 0.6, 0.05, 1.0), ("gemm_half_tokens", 32.0, 1.0, 4096.0),
                  ("kv_read", 0.7, 0.05, 1.0), ("step_overhead_s", 1e-3, 1e-6, 0.1),
                  ("seq_overhead_s", 1e-5, 1e-8, 1e-2))
# Starts of gemm_half_tokens for the batched fit: the GEMM fraction and the tokens at which
# half of it is reached trade against each other along a shallow valley with more than one
# local minimum (TensorRT-LLM's rows: 61 and 94 tokens, losses 0.002697 vs 0.002689), which a
# single start reached or missed depending on rounding in the class values it inherits; the
# fit keeps the best of three starts.
GEMM_HALF_STARTS = (16.0, 64.0, 256.0)
# Along that valley, rows of fewer devices may not pin gemm_half_tokens at all: held out, the
# A100's TensorRT-LLM rows were predicted by a fit on the H100 and L40S alone that ran to the
# 1-token bound (batched held out 11.2 -> 12.3 %). A weak prior (the fit's usual
# ``PRIOR_WEIGHT``) pulls log(gemm_half_tokens) towards 64, half of a 128-row tile: a GEMM of
# M <= 128 rows fills M / 128 of cuBLAS's large-GEMM tiles (NVIDIA, "Matrix Multiplication
# Background User's Guide", DU-09799-001, 2023, sections 2.3 and 3.1, tile quantization).
# Rows that pin it move it (all rows: 93); held out, TensorRT-LLM 12.3 -> 10.9 %.
GEMM_HALF_TILE = 64.0
GEMM_HALF_PRIOR_WEIGHT = PRIOR_WEIGHT
# Prefill attention of stacks with fused FlashAttention kernels (TensorRT-LLM, vLLM, SGLang)
# relative to their GEMMs: FlashAttention-2's forward pass reaches up to 73 % of A100's peak
# (Dao 2023, arXiv:2307.08691) where large GEMMs reach about 90 % -> 0.8. Not fitted: the
# static-batch rows cannot separate it from the GEMM fraction.
FUSED_ATTENTION_COMPUTE = 0.8
# Stacks measured batched only without a known running batch share the GPU kernels of a stack
# that was (paged attention / FlashDecoding and cuBLAS/CUTLASS GEMMs): the data cannot
# separate them, so their GPU-side values are copied, their per-pass costs not.
BORROW_KERNELS = {"vllm": "tensorrt-llm", "sglang": "tensorrt-llm",
                  "vllm-legacy": "tensorrt-llm"}
KERNEL_FIELDS = ("memory", "compute", "gemm_half_tokens", "kv_read", "attention_compute")
# Shrinkage of a stack's batch-1 values (log memory / overhead scale, log cost per quantised
# matmul) towards the reference stack's (0): a prior lambda / devices x sum(x ** 2) on top of
# ``PRIOR_WEIGHT``, so values pinned by few devices move less. lambda is chosen per stack from
# SHRINK_GRID by leave-one-device-out over the stack's own training devices
# (``choose_shrink``: nested inside any outer fold, it never sees a held-out device); a stack
# measured on fewer than two devices keeps 0.
SHRINK_GRID = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3)
OVERHEAD_FIELDS = ("step_overhead_s", "seq_overhead_s")
# How a stack whose batch-1 rows mix quantised and native weights (and that does not run the
# reference stack's activation-quantising path) is charged for its quantised matmuls:
# "launch" -- a fitted fixed cost per quantised matmul, in launches
# (``Efficiency.act_quant_kernels``); "share" -- its weight-only kernels stream quantised
# weights at a fitted share of its 16-bit streaming rate (``Efficiency.quant_memory``). The
# fit uses QUANT_FORM_BY_STACK where it names the stack, else QUANT_FORM.
# "share" for every stack (``scripts/quant_cost_whatif.py --variant share``) was tried for
# issue 27 and not kept: gpt-fast's held-out A100 int8/int4 rows improve (median 28.5 -> 11 %;
# gpt-fast held out 10.2 -> 9.1 %, in sample 6.4 -> 5.0 %), but MLC's get worse
# (13.2 -> 15.1 %), the datacenter batch-1 figure stays at 9.0 %, and the A100's own int8 rows
# want the fixed cost per matmul (70B int8 on one GPU -17 % in sample; TP series speedups
# 4.5 -> 4.9 %). docs/accuracy.md has the figures of every variant tried.
# What-if (gptfast29, off): gpt-fast's form read from its source -- its quantised matmuls
# launch no kernel beyond the matmul. int8: ``WeightOnlyInt8Linear.forward`` is
# ``F.linear(input, self.weight.to(dtype=input.dtype)) * self.scales`` (github
# pytorch-labs/gpt-fast quantize.py; its MoE twin ``ConditionalFeedForwardBit8`` in
# mixtral-moe/quantize.py converts and gathers the top-k experts' int8 weights inside its
# einsums), compiled with ``torch._inductor.config.coordinate_descent_tuning = True``
# (generate.py), under which Inductor decomposes a matmul with one row (batch-1 decode) into a
# pointwise product and a sum (github pytorch/pytorch torch/_inductor/decomposition.py,
# ``mm``: "Our matrix vector multiplies only achieve peak bandwidth with coordinate descent
# tuning"; ``bmm`` likewise), so the int8 -> bf16 conversion, the expert gather and the scale
# fuse into that one generated reduction kernel; int4: one
# ``torch.ops.aten._weight_int4pack_mm`` (tinygemm) call per Linear (quantize.py
# ``linear_forward_int4``), which unpacks inside the kernel. What such a kernel pays is work
# per byte (its rate), not a launch: "share". Held out (``scripts/loo_residuals.py --device
# nvidia-a100-sxm-80gb-330w --device amd-mi250x-gcd --regime batch-1``): gpt-fast 10.2 ->
# 9.1 % (A100 int8/int4 rows median 28.5 -> 11.0 %: Mixtral int8 TP2/4/8 -30/-35/-40 ->
# -24/-12/-3 %, Llama-2/3.1-70B int8 TP8 -30/-28 -> -8/-7 %; its MI250X int8 row +28.5 ->
# +18.0 %, BF16 row +5.4 -> +10.4 %); MLC unchanged (launch).
# Refitted and run through `llmpara validate --loo --time-budget 3000`: batch 1 5.21 %
# (unchanged; 111 rows within 4 %), datacenter 9.01 -> 8.90 % (but 24 -> 23 rows within 6 %),
# gpt-fast 10.17 -> 9.15 %, prefill and batched unchanged; in sample gpt-fast 6.4 -> 4.7 %,
# batch 1 3.83 -> 3.90 %. Not kept: the tensor-parallel series gets worse
# (`validate --regime tp --loo` 3.4 -> 3.6 %, gpt-fast's speedups 3.9 -> 6.5 %) and breaks its
# stated tolerance (tests/test_parallel_validation.py: Llama-2 70B int8 TP1 -> TP8 speedup
# +25 % > 20 %): the A100's own int8 rows on one GPU want the fixed cost per matmul (-3 / +2 /
# -10 -> -20 / -16 / -22 % for 70B / 3.1-70B / Mixtral int8 with the share). Switch on with
# {"gpt-fast": "share"} (scripts/quant_cost_whatif.py --variant gptfast-share).
QUANT_FORMS = ("launch", "share")
QUANT_FORM = "launch"
QUANT_FORM_BY_STACK: dict = {}
# What-if (gptfast29, not kept): under the "share" form, also a fixed cost per quantised matmul
# (in launches: a longer tail of the quantised kernel, not a kernel of its own) where the
# stack's batch-1 rows hold at least this many quantised rows (0 = never). The A100's own
# int8 rows want it: their byte rate relative to BF16 grows with the matrices (gpt-fast's
# reported GB/s: 8B int8 1031 against BF16 1411 on one GPU; 70B int8 1254 on one GPU against
# BF16 1482 per GPU on two), and share alone puts 70B int8 on one GPU at -15 % in sample. At 4
# the A100 fold keeps share alone (the MI250X has one int8 row) and the MI250X fold fits both
# on the A100's ten. Measured (scripts/loo_residuals.py's gpt-fast folds with it set:
# --device nvidia-a100-sxm-80gb-330w --device amd-mi250x-gcd --regime batch-1): gpt-fast held
# out 9.1 -> 9.0 % (MI250X BF16 +10.4 -> +9.4 %, int8 +18.0 -> +20.2 %); in sample (gpt-fast
# refitted, classes as shipped) quant_memory 0.83 and 0.94 launches, gpt-fast 4.7 -> 4.8 %;
# `validate --regime tp --loo` with that profile 3.6 -> 3.2 %, but gpt-fast's speedups 6.5
# -> 8.3 % (3.9 % with the launch form). Not refitted nor run through the full
# leave-one-device-out: left off.
SHARE_LAUNCH_QUANT_ROWS = 0


# ---- stack fit ------------------------------------------------------------------------------

def predictor(row: Mapped):
    """eff -> predicted value of ``row``: the fast per-operator path for one device, the full
    core's pipeline times (``measurements.estimated_timing``) for several."""
    if row.devices == 1:
        return features(row).predict
    return lambda eff: metric_value(row.measurement.metric, estimated_timing(row, eff),
                                    row.workload)


def _fit(rows: list[Mapped], effs, x0, iters: int, prior=None) -> np.ndarray:
    """x minimising the loss of ``rows`` when ``effs(x)`` gives each row's efficiency; ``x0``
    one start or a list of starts (the best end point is kept)."""
    preds = [predictor(r) for r in rows]
    meas = np.array([r.measurement.value for r in rows])
    w = weights(rows)

    def loss(x):
        check_time_budget()
        pred = np.array([f(e) for f, e in zip(preds, effs(x))])
        pen = PRIOR_WEIGHT * float(np.sum(np.square(x))) if prior is None else prior(x)
        return float(np.sum(w * huber(np.log(pred / meas))) / np.sum(w)) + pen
    ends = []
    for start in ([x0] if isinstance(x0, np.ndarray) else x0):
        x = nelder_mead(loss, start, step=0.3, iters=iters, tol=1e-8)
        ends.append(nelder_mead(loss, x, step=0.1, iters=iters, tol=1e-8))
    return min(ends, key=loss)


def _with(table: EfficiencyTable, prof: FrameworkProfile) -> EfficiencyTable:
    return replace(table, frameworks={**table.frameworks, prof.name: prof})


def fit_framework(name: str, rows: list[Mapped], table: EfficiencyTable,
                  kernels: dict | None = None, shrink: float = 0.0,
                  quant_form: str | None = None) -> FrameworkProfile:
    """Profile of stack ``name``: memory and overhead scales on its batch-1 decode rows (and
    its ``act_quant_kernels``, or ``quant_memory`` under the "share" form, where they mix
    quantised and native weights), compute scale on
    its prefill/TTFT rows, and its batched-regime values on its
    single-device batched rows (each part needs its own minimum of rows). ``kernels`` = GPU
    kernel values borrowed from another stack: only the per-pass costs are fitted. ``shrink``
    = lambda of the batch-1 shrinkage (``SHRINK_GRID``); ``quant_form`` = how its quantised
    rows' extra cost is fitted (``QUANT_FORMS``; None = the stack's ``QUANT_FORM_BY_STACK``
    entry, else ``QUANT_FORM``)."""
    quant_form = quant_form or QUANT_FORM_BY_STACK.get(name, QUANT_FORM)
    if quant_form not in QUANT_FORMS:
        raise ConfigError(f"quant_form must be one of {', '.join(QUANT_FORMS)}, got "
                          f"{quant_form!r}")
    label, native = FRAMEWORKS[name][0], name in NATIVE_KERNEL_STACKS
    prof = FrameworkProfile(name, label, native_kernels=native,
                            kv_per_query_head=name in KV_PER_QUERY_HEAD,
                            act_quant=name in ACT_QUANT_STACKS, absolute=cited_absolute(name))
    decode = [r for r in rows if regime(r) == "batch-1"]
    other = [r for r in rows if regime(r) == "prefill"]
    batched = [r for r in rows if regime(r) == "batched" and r.devices == 1]
    used, one_device = 0, []
    for part, rs in (("batch-1", decode), ("prefill", other)):
        if len(rs) >= MIN_FRAMEWORK_ROWS and not identified(rs):
            one_device.append(part)   # only with MIN_FRAMEWORK_DEVICES >= 2
    if len(decode) >= MIN_FRAMEWORK_ROWS and identified(decode):
        # fewer than 2 x MIN_FRAMEWORK_ROWS rows pin one number: the bandwidth scale
        two = len(decode) >= 2 * MIN_FRAMEWORK_ROWS
        # rows with and without quantised weights also pin what the stack's weight-only
        # path costs beyond its bytes (stacks in ACT_QUANT_STACKS keep the reference path:
        # the cited activation-quantising launches), in the form ``quant_form`` names
        # (``QUANT_FORMS``: a share of the 16-bit streaming rate, ``quant_memory``, or a fixed
        # cost per quantised matmul in launches, ``act_quant_kernels``). It is fitted even
        # with fewer than 2 x MIN_FRAMEWORK_ROWS rows, where one native and one quantised row
        # pin it and the bandwidth scale exactly (requiring two of each made gpt-fast's
        # leave-one-device-out worse: 8.1 -> 10.5 %)
        aq = mixes_quant(name, decode)
        # both parts of the "share" form's cost where enough quantised rows pin two numbers
        # (SHARE_LAUNCH_QUANT_ROWS; 0 = never)
        both = bool(aq and quant_form == "share" and SHARE_LAUNCH_QUANT_ROWS and sum(
            r.precision.weight_ffn_bits < 16 for r in decode) >= SHARE_LAUNCH_QUANT_ROWS)
        n = 1 + two + aq + both

        def scales(x) -> tuple[dict, dict]:
            s = {"memory_scale": math.exp(x[0]),
                 "overhead_scale": math.exp(x[1]) if two else 1.0}
            if not aq:
                return s, {}
            if quant_form == "share":
                a = {"quant_memory": min(1.0, math.exp(x[1 + two]))}
                if both:
                    a["act_quant_kernels"] = min(MAX_ACT_QUANT_KERNELS, math.exp(x[n - 1]))
                return s, a
            return s, {"act_quant_kernels": min(MAX_ACT_QUANT_KERNELS, math.exp(x[n - 1]))}

        def effs(x):
            s, a = scales(x)
            t = _with(table, replace(prof, **s, absolute={**prof.absolute, **a}))
            return [t.efficiency_for(r.hardware, name) for r in decode]
        weight = PRIOR_WEIGHT + shrink / len({r.hardware.slug for r in decode})

        def prior(x) -> float:
            return weight * float(np.sum(np.square(x)))
        s, a = scales(_fit(decode, effs, np.zeros(n), 60 * n, prior=prior))
        prof = replace(prof, **s, absolute={**prof.absolute, **a})
        used += len(decode)
    if len(other) >= MIN_FRAMEWORK_ROWS and identified(other):
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
        own = {**prof.absolute, **(kernels or {})}
        prof = replace(prof, absolute={**own, **fit_batched(
            name, batched, _with(table, replace(prof, absolute=own)), fields)})
        used += len(batched)
    note = "; ".join(x for x in (
        "" if used else "too few measurements: reference values",
        f"{' and '.join(one_device)} rows on one device: class values (a stack effect cannot "
        "be separated from one device's)" if one_device else "") if x)
    return replace(prof, rows=used, note=note)


def identified(rows: list[Mapped]) -> bool:
    """Whether ``rows`` come from at least ``MIN_FRAMEWORK_DEVICES`` physical devices (presets
    of one chip count once), so a stack's values fitted on them are not one device's effect
    (always, at the shipped 1)."""
    return len({device_key(r.hardware) for r in rows}) >= MIN_FRAMEWORK_DEVICES


def mixes_quant(name: str, decode: list[Mapped]) -> bool:
    """Whether stack ``name``'s batch-1 rows ``decode`` pin a cost of its own quantised
    matmuls: rows with quantised and with native weights, and not the reference path
    (``ACT_QUANT_STACKS`` keep the cited activation-quantising launches)."""
    quant = sum(r.precision.weight_ffn_bits < 16 for r in decode)
    return name not in ACT_QUANT_STACKS and quant >= 1 and len(decode) - quant >= 1


def _held_out_errors(name: str, decode: list[Mapped], table: EfficiencyTable, keys: list,
                     **fit_kw) -> list[float]:
    """|error| of stack ``name``'s batch-1 rows ``decode`` when each device (``keys``) is
    predicted by the stack fitted on the other devices' rows (``fit_kw`` to
    ``fit_framework``)."""
    from .measurements import predict_all
    errs = []
    for k in keys:
        train = [r for r in decode if device_key(r.hardware) != k]
        if len(train) < MIN_FRAMEWORK_ROWS:
            continue
        prof = fit_framework(name, train, table, **fit_kw)
        errs += [abs(p.error) for p in predict_all(
            [r for r in decode if device_key(r.hardware) == k], _with(table, prof))[0]]
    return errs


def _devices(decode: list[Mapped]) -> list:
    return sorted({device_key(r.hardware) for r in decode}, key=repr)


def _median(errs: list[float]) -> float | None:
    return float(np.median(errs)) if errs else None


def _best_lambda(name: str, decode: list[Mapped], table: EfficiencyTable, keys: list,
                 quant_form: str | None) -> float:
    """lambda of ``SHRINK_GRID`` with the lowest held-out median |error|; ties go to the
    smaller."""
    best = None
    for lam in SHRINK_GRID:
        med = _median(_held_out_errors(name, decode, table, keys, shrink=lam,
                                       quant_form=quant_form))
        if med is not None and (best is None or med < best[0] - 1e-12):
            best = (med, lam)
    return best[1] if best else 0.0


def choose_shrink(name: str, rows: list[Mapped], table: EfficiencyTable,
                  quant_form: str | None = None) -> float:
    """lambda of ``SHRINK_GRID`` with the lowest median |error| of stack ``name``'s batch-1
    rows when each of its devices (presets of one chip together) is predicted by the stack
    fitted on its other devices' batch-1 rows (its quantised matmuls charged as
    ``quant_form``); ties go to the smaller. 0 with fewer than two devices."""
    decode = [r for r in rows if regime(r) == "batch-1"]
    keys = _devices(decode)
    if len(keys) < 2:
        return 0.0
    return _best_lambda(name, decode, table, keys, quant_form)


def fit_batched(name: str, rows: list[Mapped], table: EfficiencyTable,
                fields: tuple[str, ...] | None = None) -> dict:
    """Absolute batched-regime values of stack ``name`` (``BATCHED_PARAMS``, or only
    ``fields`` of them) on its rows."""
    params = [p for p in BATCHED_PARAMS if fields is None or p[0] in fields]
    fixed = {"attention_compute": FUSED_ATTENTION_COMPUTE} if fields is None else {}
    bases = [replace(table.efficiency_for(r.hardware, name), **fixed) for r in rows]
    starts = [np.array([math.log(half if f == "gemm_half_tokens" else v)
                        for f, v, _, _ in params])
              for half in (GEMM_HALF_STARTS if any(p[0] == "gemm_half_tokens" for p in params)
                           else (None,))]

    def unpack(x) -> dict:
        return {f: float(min(hi, max(lo, math.exp(v)))) for (f, _, lo, hi), v in zip(params, x)}

    def effs(x):
        vals = unpack(x)
        return [replace(b, **vals) for b in bases]

    names = [p[0] for p in params]
    i = names.index("gemm_half_tokens") if "gemm_half_tokens" in names else None

    def prior(x) -> float:
        if i is None:
            return 0.0
        return GEMM_HALF_PRIOR_WEIGHT * (x[i] - math.log(GEMM_HALF_TILE)) ** 2
    return {**unpack(_fit(rows, effs, starts, 500, prior=prior)), **fixed}


# Stacks fitted on the tensor-parallel series (presets/tables/tp_measurements.toml) because
# no other rows measure them: weight-streaming fraction and per-kernel cost (no CUDA graphs:
# every launch is paid, and it does not shrink as TP divides the work).
TP_FIT_FIELDS = (("memory", 0.6, 0.2, 0.95), ("kernel_overhead_s", 5e-6, 1e-7, 1e-3))
# Fitted as well where the stack's rows include instances across nodes: its fixed cost per pass
# of such an instance (``Efficiency.node_step_s``). FasterTransformer's Megatron-530B rows
# (TP16 on 2 nodes, TP32 on 4, TP8 x PP3 on 3) run 10-16 ms per pass slower than their
# bytes, kernels and collectives, whatever the layout -- a per-pass cost, not a link rate.
NODE_FIT_FIELD = ("node_step_s", 1e-3, 1e-6, 0.1)
TP_FIT_NOTE = "fitted on the tensor-parallel series (tp_measurements): end-to-end tokens/s"


def spans_nodes(tp, r) -> bool:
    """Whether row ``r`` of tensor-parallel table ``tp`` runs one instance across nodes."""
    ic = tp.setups[r.setup].hardware.interconnect
    return bool(ic is not None and ic.devices_per_node and r.tp * r.pp > ic.devices_per_node)


def fit_tp_profiles(table: EfficiencyTable, fws: dict, tp=None) -> dict:
    """Profiles of the stacks named by the tensor-parallel setups that have no profile fitted
    on other rows: ``TP_FIT_FIELDS`` on their rows' end-to-end tokens/s (``tp``: the
    series to fit on, default the shipped ``tp_measurements``)."""
    from .tp_measurements import load_tp_measurements, predict_row
    tp = tp or load_tp_measurements()
    out = {}
    for name in sorted({s.efficiency_profile for s in tp.setups.values()} - {""}):
        if fws.get(name) is not None and fws[name].rows:
            continue
        rows = [r for r in tp.rows if tp.setups[r.setup].efficiency_profile == name]
        meas = np.array([r.decode_tokens_per_s for r in rows])
        base = {k: v.hardware.with_efficiency(None) for k, v in tp.setups.items()}
        fields = TP_FIT_FIELDS + ((NODE_FIT_FIELD,) if any(spans_nodes(tp, r) for r in rows)
                                  else ())

        def unpack(x) -> dict:
            return {f: float(min(hi, max(lo, math.exp(v))))
                    for (f, _, lo, hi), v in zip(fields, x)}

        def loss(x):
            check_time_budget()
            prof = FrameworkProfile(name, FRAMEWORKS[name][0], absolute=unpack(x))
            t = _with(table, prof)
            setups = {k: replace(v, hardware=base[k].with_efficiency(t.efficiency_for(base[k], name)))
                      for k, v in tp.setups.items()}
            tt = replace(tp, setups=setups)
            pred = np.array([predict_row(tt, r) for r in rows])
            return float(np.mean(huber(np.log(pred / meas))))
        x0 = np.array([math.log(v) for _, v, _, _ in fields])
        x = nelder_mead(loss, x0, step=0.5, iters=60 * len(fields), tol=1e-9)
        out[name] = FrameworkProfile(name, FRAMEWORKS[name][0], rows=len(rows),
                                     absolute={**cited_absolute(name), **unpack(x)},
                                     note=TP_FIT_NOTE)
    return out


def _borrowed(name: str, donor: str, fws: dict, rows: list[Mapped],
              table: EfficiencyTable) -> FrameworkProfile:
    """Stack ``name`` with the GPU-kernel values of ``donor`` (see ``BORROW_KERNELS``), its own
    scales where it has batch-1 rows and its own per-pass costs where it has batched rows."""
    d = fws.get(donor)
    kernels = {k: v for k, v in (d.absolute if d else {}).items() if k in KERNEL_FIELDS}
    own = fit_framework(name, rows, table, kernels or None) if rows else FrameworkProfile(
        name, FRAMEWORKS[name][0], native_kernels=name in NATIVE_KERNEL_STACKS,
        absolute=cited_absolute(name))
    if not kernels:
        return own
    return replace(own, absolute={**kernels, **own.absolute},
                   note=f"GPU kernels (memory, compute, gemm_half_tokens, kv_read) as {donor}: "
                        "the data cannot separate them from its per-pass costs; "
                        f"{own.note}".rstrip("; "))


# Stacks measured only in the energy rows (presets/tables/energy_measurements.csv, copied from
# ../shared/validation/ with each row's source) that carry a measured time per step: PyTorch
# eager (HF transformers via FastChat, ML.ENERGY v1). Batch-1 eager decoding is bound by the
# host's per-operator dispatch, not by memory: one number is fitted, the absolute per-kernel
# cost, on the rows' measured time per output token (latency / response length, prefill
# included); the device's bandwidth and compute fractions are kept.
ENERGY_TIMED_STACKS = ("hf-eager",)
MAX_EAGER_KERNEL_S = 1e-3


def fit_energy_profiles(table: EfficiencyTable, fws: dict, measurements) -> dict:
    """Profiles of ``ENERGY_TIMED_STACKS`` without rows elsewhere: ``kernel_overhead_s`` on
    the ``measurements`` (``metrics.energy.EnergyMeasurement``) of that stack with a measured
    time per step (median over rows of the value at which each is met,
    ``fastpath.implied_cost``; rows faster than the model with no such cost are left out)."""
    from ..analysis import analyze
    from ..precision import precision_preset
    from ..presets import load_hardware, load_model
    from ..workload import Workload
    from .efficiency import framework_of_label
    out = {}
    for name in ENERGY_TIMED_STACKS:
        if fws.get(name) is not None and fws[name].rows:
            continue
        rows = [m for m in measurements if m.measured_s_per_step
                and framework_of_label(m.framework) == name]
        implied = []
        for m in rows:
            hw = load_hardware(m.hardware_preset)
            model, prec = load_model(m.model_preset), precision_preset(m.precision_preset)
            wl = Workload(batch=m.batch, prompt_len=m.prompt_len, gen_len=m.gen_len)

            def step_s(k: float) -> float:
                prof = FrameworkProfile(name, FRAMEWORKS[name][0],
                                        absolute={"kernel_overhead_s": k})
                r = analyze(model, hw, prec, wl,
                            efficiency=_with(table, prof).efficiency_for(hw, name))
                return r.estimated.e2e_latency_s / m.gen_len
            k = implied_cost(step_s, m.measured_s_per_step, MAX_EAGER_KERNEL_S)
            if k:         # 0: the row is faster than the model with no per-kernel cost
                implied.append(k)
        if implied:
            out[name] = FrameworkProfile(
                name, FRAMEWORKS[name][0], rows=len(implied),
                absolute={**cited_absolute(name), "kernel_overhead_s": float(np.median(implied))},
                note="per-kernel cost fitted on the measured time per token of its energy rows "
                     "(ML.ENERGY v1, batch 1): host-bound eager dispatch")
    return out
