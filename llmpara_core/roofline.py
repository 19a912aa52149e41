"""The one place that turns (FLOPs, bytes, hardware) into time.

time = max(FLOPs / peak, bytes / bandwidth) + kernels * overhead   (+ comm bytes / link bw)

*Ideal* uses peak rates and no overhead; *estimated* derates peak compute and bandwidth by the
hardware's efficiency factors, streams KV-cache reads at ``kv_read`` of that bandwidth (the
bytes count 1 / kv_read times; stacks that read K/V per query head stream them
``kv_read_factor`` times), streams weights no faster than the stack's kernels can draw them
with the device's compute units (``weight_stream_limits``) and adds a fixed launch overhead
per kernel.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .hardware import (CLOCKED_CLASSES, IDEAL, INT8_MMA_ARCHITECTURES, Efficiency, Hardware,
                       HardwareClass, enum_key, kernel_class, plan_launches)
from .operators import OpKind
from .precision import DType


@dataclass(frozen=True)
class Rates:
    """Attainable rates for one hardware, data type and mode (ideal or estimated)."""
    flops_per_s: float
    bytes_per_s: float
    kernel_overhead_s: float
    dtype_used: DType
    link_bytes_per_s: float | None = None
    kv_read_efficiency: float = 1.0      # KV-cache reads stream at this fraction of bytes_per_s
    pass_overhead_s: float = 0.0         # fixed cost per forward pass (scheduler, host sync)
    attention_efficiency: float = 1.0    # attention FLOPs run at this fraction of flops_per_s
    kv_reread: float = 0.0               # share of K/V re-read per extra query head of a group
    act_quant_kernels: float = 0.0       # extra kernels per execution of a quantised matmul
    weight_limit_bytes_per_s: float = 0.0        # 16-bit weights stream at most this fast
    quant_weight_limit_bytes_per_s: float = 0.0  # quantised weights (0 = no limit)
    kernel_plan: tuple = ()              # the stack's launches per operator (Efficiency)
    quant_compute: float = 1.0           # quantised-weight GEMMs run at this multiple of flops_per_s
    gemm_half_tokens: float = 0.0        # half-point of the expert GEMMs' curve (expert_curve_tokens)
    tokens_in_flight: float | None = None  # rows per GEMM flops_per_s was set for (gemm_rows)
    dequant_bytes: float = 0.0           # dequantising bytes per quantised weight byte x memory
    wave_rows: float = 0.0               # rows per GEMM tiled in waves over the SMs (0 = no waves)
    wave_units: float = 0.0              # SMs the tiles of a GEMM run on (wave_flops_factor)
    wave_tile: tuple = ()                # (rows, columns) of a GEMM's output tile
    kv_limit_bytes_per_s: float = 0.0    # every query head's K/V reads at most this fast (0: none)

    def weight_excess(self) -> tuple[float, float]:
        """(16-bit, quantised) extra times a weight byte counts against ``bytes_per_s``
        because the stack's kernels stream weights no faster than their limits:
        bytes_per_s / limit - 1 where the limit is lower, else 0."""
        return tuple(max(0.0, self.bytes_per_s / lim - 1.0) if lim > 0 else 0.0
                     for lim in (self.weight_limit_bytes_per_s,
                                 self.quant_weight_limit_bytes_per_s))

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity where compute and memory time are equal."""
        return self.flops_per_s / self.bytes_per_s


# Inline ECC of datacenter GDDR memory in the estimated memory rate (``inline_ecc``): GDDR has
# no sideband ECC chips, so a datacenter GDDR part (A10, A10G, L4, L40S, A40), which ships with
# ECC on, keeps its check bits in main memory -- one byte in 16 (NVIDIA Tesla V100 whitepaper,
# "ECC Memory Resiliency": inline ECC "where a portion of main memory is carved out for ECC
# bits, as in the GDDR5 memory subsystem of the Tesla K40 GPU where 6.25% of the overall GDDR5
# is reserved for ECC bits", against HBM2's sideband ECC "without a bandwidth or capacity
# penalty"; the drivers' totals show the same 15/16: L40S 46,068 MiB of 48 GiB, A10
# 23,028 MiB of 24 GiB, thundergolfer.com/blog/nvidia-gpu-memory-capacity). The check bits
# cross the data bus, so first order a stream of B bytes moves 16/15 B: every estimated memory
# rate x 15/16. HBM parts (sideband ECC) and consumer GDDR cards (ECC off by default) keep
# theirs. Cited, not fitted (``serving.cost.INLINE_ECC_RATE`` applied it to serving iterations
# only; this carries it into every estimate, the fits included).
# Measured (issue 27, `llmpara validate --loo --time-budget 3000`): batch 1 held out 5.21 ->
# 5.18 % (the A10G's fold 12.8 -> 8.7 %, its MLC rows +10..+14 -> +5..+10 %), datacenter GPUs
# 9.0 -> 8.1 %; batched 10.4 -> 10.3 % (TensorRT-LLM's L40S rows); prefill, serving max-load
# and MLPerf unchanged.
# INLINE_ECC_CORE: False = ECC in serving iterations only (the model before, what-if switch).
INLINE_ECC_RATE = 15 / 16
INLINE_ECC_CORE = True


def inline_ecc(hw) -> bool:
    """True for a datacenter GPU with GDDR main memory: its ECC, on by default, is inline
    (``INLINE_ECC_RATE``). HBM's ECC is sideband; consumer GDDR cards ship with ECC off."""
    mt = getattr(hw, "memory_type", None)
    return (hw.hw_class is HardwareClass.DATACENTER_GPU and mt is not None
            and str(getattr(mt, "value", mt)).upper().startswith("GDDR"))


def memory_ecc_factor(hw) -> float:
    """The share of the estimated memory rate left after inline ECC (``INLINE_ECC_CORE``)."""
    return INLINE_ECC_RATE if INLINE_ECC_CORE and inline_ecc(hw) else 1.0


def rates(hardware: Hardware, dtype: DType, estimated: bool,
          efficiency: Efficiency | None = None, *, tokens_in_flight: float | None = None,
          batch: int | None = None, kquant: bool = False) -> Rates:
    """Rates of ``hardware`` for ``dtype``; ``efficiency`` overrides the hardware's own.

    Estimated mode only: ``tokens_in_flight`` (rows of every GEMM in the pass: batch x new
    tokens per sequence) sets the GEMM compute fraction (``Efficiency.compute_at``; None = the
    large-M value), ``batch`` the per-pass fixed cost (``Efficiency.pass_overhead_s``),
    ``kquant`` whether the quantised weights are in a llama.cpp k-quant format
    (``weight_stream_limits``)."""
    eff = IDEAL if not estimated else (efficiency or hardware.effective_efficiency)
    peak, used, quant_ratio = gemm_peaks(hardware, dtype, eff)
    link = None
    if hardware.interconnect is not None:
        link = hardware.interconnect.bandwidth_bytes_per_s * (eff.memory if estimated else 1.0)
    bw = hardware.memory_bandwidth_bytes_per_s * eff.memory
    if estimated:
        bw *= memory_ecc_factor(hardware)
    curve = estimated and eff.expert_curve_tokens > 0   # the rows matter only on a GEMM curve
    return Rates(peak * eff.compute_at(tokens_in_flight), bw,
                 eff.kernel_overhead_s, used, link, eff.kv_read,
                 eff.pass_overhead_s(batch) if batch is not None else eff.step_overhead_s,
                 eff.attention_compute, eff.kv_reread, eff.act_quant_kernels,
                 *weight_stream_limits(hardware, eff, kquant), eff.kernel_plan,
                 eff.quant_compute * quant_ratio, eff.expert_curve_tokens if curve else 0.0,
                 eff.gemm_rows(tokens_in_flight) if curve else None,
                 dequant_factor(eff, tokens_in_flight) * eff.memory if estimated else 0.0,
                 *(wave_setup(hardware, eff, tokens_in_flight) if estimated else (0.0, 0.0, ())),
                 kv_limit_bytes_per_s=kv_stream_limit(hardware, eff) if estimated else 0.0)


# Rows above which a prompt GEMM of a stack with ``Efficiency.prompt_gemm_waves`` runs as a
# tiled GEMM (cuBLAS): llama.cpp's CUDA back end before June 2024 sent a batch of more than
# MMQ_MAX_BATCH_SIZE = 32 rows to cuBLAS (``DEQUANT_MIN_TOKENS`` cites it); at fewer rows its
# matrix-vector kernels run, which are not tiled over the output.
WAVE_MIN_TOKENS = 32

# Output tile (rows, columns) of a 16-bit tensor-core GEMM per architecture: CUTLASS's default
# threadblock shape for tensor-op GEMMs, GemmShape<128, 256, K> on Sm70 (Volta), Sm75 (Turing)
# and Sm80 (Ampere; CUTLASS builds Ada's sm_89 kernels from the Sm80 configuration)
# (github NVIDIA/cutlass@7c04f954 include/cutlass/gemm/device/default_gemm_configuration.h,
# DefaultGemmConfiguration<OpClassTensorOp, Sm70 / Sm75 / Sm80, ...>: ThreadblockShape). That
# is 128 of the output matrix's M dimension by 256 of N; llama.cpp calls cuBLAS with the
# weights' output features as M and the tokens as N (ggml-cuda.cu ggml_cuda_op_mul_mat_cublas:
# cublasGemmEx(..., CUBLAS_OP_T, CUBLAS_OP_N, row_diff, src1_ncols, ...)), so a tile covers
# 256 tokens by 128 output columns. Hopper and later have no entry there (their CUTLASS 3
# collective builders choose per problem): no tile, no quantisation. Auditable choice: the
# what-if scripts/prompt_wave_whatif.py tried 128x128 first and 256x128 second (held out,
# llama.cpp GPU prompt rows: datacenter 26.3 -> 13.0 / 13.9 %, consumer 13.5 -> 13.4 / 10.9 %);
# the tile here is the cited one, not the better-scoring one (it happens to be the second).
GEMM_TILE_BY_ARCHITECTURE = {"volta": (256, 128), "turing": (256, 128), "ampere": (256, 128),
                             "ada": (256, 128)}


def gemm_quantisation(m_tokens, n_cols, sms: float, tile, m_waste: bool = True) -> np.ndarray:
    """Share of a GEMM's tile slots doing useful work: M N / (waves x SMs x tm x tn), with
    ceil(M / tm) x ceil(N / tn) tiles run in waves of ``sms`` (tile and wave quantisation:
    NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001, sections 2.3 and
    3). ``tile`` = (tm, tn), or a set of them (the kernel picks the least wasteful);
    ``m_waste`` False leaves partial row tiles out (counted elsewhere). 1 where ``n_cols`` is
    0 (not a GEMM)."""
    if isinstance(tile[0], (tuple, list)):      # a set of tiles: the kernel picks the best
        return np.max([gemm_quantisation(m_tokens, n_cols, sms, t, m_waste) for t in tile],
                      axis=0)
    tm, tn = tile
    m = np.maximum(np.asarray(m_tokens, dtype=float), 1.0)
    n = np.asarray(n_cols, dtype=float)
    tiles = np.ceil(m / tm) * np.ceil(n / tn)
    waves = np.ceil(tiles / sms)
    if not m_waste:
        m = np.ceil(m / tm) * tm
    return np.where(n > 0, m * n / np.maximum(waves * sms * tm * tn, 1.0), 1.0)


def wave_setup(hardware: Hardware, eff: Efficiency,
               tokens_in_flight: float | None) -> tuple[float, float, tuple]:
    """(rows per GEMM, SMs, tile) of the wave quantisation of a pass with
    ``tokens_in_flight`` rows, or (0, 0, ()) where it does not apply: the stack runs its
    prompt GEMMs in whole waves of output tiles (``Efficiency.prompt_gemm_waves``), the pass has
    more than ``WAVE_MIN_TOKENS`` rows, the device's file gives its SM count
    (``compute_units``) and its architecture a tile (``GEMM_TILE_BY_ARCHITECTURE``)."""
    if not eff.prompt_gemm_waves or tokens_in_flight is None \
            or tokens_in_flight <= WAVE_MIN_TOKENS:
        return 0.0, 0.0, ()
    units = getattr(hardware, "compute_units", None)
    tile = GEMM_TILE_BY_ARCHITECTURE.get(enum_key(getattr(hardware, "architecture", None)))
    if not units or tile is None:
        return 0.0, 0.0, ()
    return float(eff.gemm_rows(tokens_in_flight)), float(units), tile


def wave_flops_factor(r: Rates, gemm_cols):
    """How many times a GEMM's FLOPs count against ``flops_per_s`` because its output tiles
    run in whole waves over the SMs: 1 / ``gemm_quantisation`` for operators with output
    columns (``Operator.gemm_cols``: a number or an array), 1 where the rates set no waves."""
    if not r.wave_rows:
        return 1.0
    q = gemm_quantisation(r.wave_rows, gemm_cols, r.wave_units, r.wave_tile)
    out = 1.0 / q
    return float(out) if np.ndim(out) == 0 else out


# Rows above which a stack with ``Efficiency.quant_dequant_bytes`` dequantises the weights of
# its quantised matmuls to 16 bits for a 16-bit GEMM: llama.cpp's CUDA back end before June
# 2024 ran a batch of more than MMQ_MAX_BATCH_SIZE = 32 rows through FP16 cuBLAS on tensor
# cores, converting each quantised weight matrix to F16 first (ggerganov/llama.cpp@005de593
# ggml-cuda.cu: "max batch size to use MMQ kernels when tensor cores are available";
# ggml_cuda_op_mul_mat_cublas: to_fp16_cuda on src0), until PR #8075 (2024-06-23, "CUDA: use
# MMQ instead of cuBLAS by default") made MMQ on int8 tensor cores the default.
DEQUANT_MIN_TOKENS = 32


def dequant_factor(eff: Efficiency, tokens_in_flight: float | None) -> float:
    """Bytes moved per quantised weight byte by the dequantising passes of one forward pass
    with ``tokens_in_flight`` rows: ``Efficiency.quant_dequant_bytes`` once per micro-batch
    (``prompt_ubatch_tokens``) where the pass has more than ``DEQUANT_MIN_TOKENS`` rows, else
    0 (the matmul reads its quantised weights directly). Timed at the device's peak bandwidth
    (``Rates.dequant_bytes`` = this x ``memory``, counted against ``bytes_per_s``): an
    element-wise streaming kernel, not the matrix-vector products whose weight-streaming
    fraction ``memory`` is fitted on. At that fraction instead, the refit moved the HBM
    fraction from 0.57 to its cap (0.985: on the A100 the per-SM streaming bound leaves it
    unpinned by the decode rows, so the dequantising rows set it) and put MLC's A100 rows
    +28..+50 % in sample -- a choice made on in-sample rows, said here. Only the what-if of
    ``measurements.CUBLAS_PROMPT_SOURCES`` sets the field; no shipped profile does."""
    if eff.quant_dequant_bytes <= 0 or tokens_in_flight is None \
            or tokens_in_flight <= DEQUANT_MIN_TOKENS:
        return 0.0
    ub = eff.prompt_ubatch_tokens
    return eff.quant_dequant_bytes * (math.ceil(tokens_in_flight / ub) if ub > 0 else 1)


def gemm_peaks(hardware: Hardware, dtype: DType, eff: Efficiency) -> tuple[float, DType, float]:
    """(peak [FLOP/s] of the stack's GEMMs in ``dtype``, the data type whose peak it is, how
    many times that rate its matmuls with quantised weights run at before ``quant_compute``).

    The units a stack's GEMMs run on (``Efficiency.gemm_fp16_acc16``,
    ``Efficiency.quant_gemm_int8``): 16-bit GEMMs that accumulate in FP16 run at the device's
    ``peak_fp16_acc16_flops_per_s`` where its file gives one (GeForce: twice the spec sheet's
    FP32-accumulate rate); quantised matmuls on int8 MMA run at the device's int8 peak where
    its file gives one and its architecture has int8 MMA (``INT8_MMA_ARCHITECTURES``), else at
    the 16-bit rate (ratio 1). Only passes in a 16-bit data type (or its fp32 fallback) change:
    a W8A8 or FP8 pass already runs at its own type's peak."""
    peak, used = hardware.peak_flops_per_s(dtype)
    if dtype is not DType.FP16:
        return peak, used, 1.0
    acc16 = getattr(hardware, "peak_fp16_acc16_flops_per_s", None)
    if eff.gemm_fp16_acc16 and acc16 and used is DType.FP16:
        peak = acc16
    ratio = 1.0
    int8 = hardware.peak_int8_flops_per_s
    if (eff.quant_gemm_int8 and int8
            and enum_key(getattr(hardware, "architecture", None)) in INT8_MMA_ARCHITECTURES):
        ratio = int8 / peak
    return peak, used, ratio


def weight_stream_limits(hardware: Hardware, eff: Efficiency,
                         kquant: bool = False) -> tuple[float, float]:
    """(16-bit, quantised) fastest rates [B/s] at which the stack's kernels stream weights on
    ``hardware``: ``Efficiency.stream_bytes_per_cu_cycle`` (and its quantised twin) x the
    device's compute units x its boost clock, on GPU kernel-class devices (the values are
    fitted on SMs / CUs: ``hardware.CLOCKED_CLASSES``; none where the device's file lacks
    ``compute_units`` or ``boost_clock_MHz``); quantised weights in a llama.cpp k-quant format
    (``kquant``, ``precision.is_kquant``) also at most ``Efficiency.
    kquant_stream_bytes_per_cu_cycle`` x units x clock on any device whose class carries that
    value (Apple SoCs' Metal k-quant kernels); quantised weights also at most
    ``Efficiency.quant_memory`` x the stack's streaming rate (``memory`` x bandwidth), the
    lower of the two where both apply. 0 = no limit."""
    units = getattr(hardware, "compute_units", None)
    mhz = getattr(hardware, "boost_clock_mhz", None)
    per_cu = (0.0, 0.0)
    if units and mhz:
        cycles_per_s = units * mhz * 1e6
        if kernel_class(hardware.hw_class, getattr(hardware, "architecture", None)) \
                in CLOCKED_CLASSES:
            per_cu = (eff.stream_bytes_per_cu_cycle * cycles_per_s,
                      eff.quant_stream_bytes_per_cu_cycle * cycles_per_s)
        if kquant and eff.kquant_stream_bytes_per_cu_cycle > 0:
            k = eff.kquant_stream_bytes_per_cu_cycle * cycles_per_s
            per_cu = (per_cu[0], min(per_cu[1], k) if per_cu[1] > 0 else k)
    if eff.quant_memory >= 1.0:
        return per_cu
    share = eff.quant_memory * hardware.memory_bandwidth_bytes_per_s * eff.memory
    return per_cu[0], (min(per_cu[1], share) if per_cu[1] > 0 else share)


def kv_stream_limit(hardware: Hardware, eff: Efficiency) -> float:
    """Fastest rate [B/s] at which the stack's decode attention passes over K/V once per query
    head: ``Efficiency.kv_stream_bytes_per_cu_cycle`` x the device's compute units x its
    clock; 0 (no limit) where the class carries no such value or the file gives no units or
    clock."""
    units = getattr(hardware, "compute_units", None)
    mhz = getattr(hardware, "boost_clock_mhz", None)
    if not (units and mhz and eff.kv_stream_bytes_per_cu_cycle > 0):
        return 0.0
    return eff.kv_stream_bytes_per_cu_cycle * units * mhz * 1e6


def expert_flops_factor(r: Rates, moe) -> float:
    """How many times a routed-expert GEMM's FLOPs count against ``flops_per_s`` (>= 1): the
    pass's rate is set for ``tokens_in_flight`` rows per GEMM, but each touched expert runs its
    own GEMM over its share of them (``MoE.tokens_per_expert``: T x top-k / experts touched),
    lower on the GEMM curve ``M / (M + gemm_half_tokens)``. 1 for dense models (``moe`` None),
    ideal rates, one token per pass and rates set without a token count."""
    t, h = r.tokens_in_flight, r.gemm_half_tokens
    if moe is None or h <= 0 or t is None or t <= 1:
        return 1.0
    m = max(moe.tokens_per_expert(t), 1.0)
    return (t / (t + h)) / (m / (m + h))


def is_expert_gemm(kind, weight_bytes: float) -> bool:
    """A routed expert's matmul (an operator of kind MOE_EXPERT that reads weights)."""
    return kind is OpKind.MOE_EXPERT and weight_bytes > 0


def quant_flops_factor(r: Rates, quantized):
    """How many times a matmul's FLOPs count against ``flops_per_s``: 1 / ``quant_compute``
    (the quantised matmuls' rate as a multiple of ``flops_per_s``: the stack's fraction of the
    unit that runs them, ``gemm_peaks``) where its weights are quantised (``quantized``: a bool, or a 0..1 array of each
    operator's quantised share of its weights), 1 otherwise."""
    if r.quant_compute == 1.0:
        return 1.0
    return 1.0 + quantized * (1.0 / r.quant_compute - 1.0)


def launches(count, quantized, r, name: str | None = None):
    """Kernel launches of ``count`` executions of operator ``name``: as many each as the
    stack's kernel plan says (``kernel_plan`` of ``r``, a ``Rates`` or an ``Efficiency``; 1
    where it does not name the operator), each followed by the stack's activation-quantising
    kernels (``act_quant_kernels``) when it is a matmul with quantised weights
    (``Operator.quantized``). ``quantized`` may be a bool or a 0/1 array (then ``count`` an
    array with the plan already applied: ``plan_factors``)."""
    per = plan_launches(r.kernel_plan, name) if name is not None else 1.0
    return count * per * (1.0 + r.act_quant_kernels * quantized)


@functools.lru_cache(maxsize=256)
def plan_factors(names: tuple, plan: tuple) -> np.ndarray:
    """Launches per execution of each operator in ``names`` under ``plan``."""
    return np.array([plan_launches(plan, n) for n in names])


def kv_read_factor(kv_group, r: Rates):
    """How many times the KV-cache bytes of an attention operator are streamed from memory:
    1 + kv_reread x (kv_group - 1), ``kv_group`` = query heads per KV head (GQA; 1 = MHA,
    MLA). Stacks whose decode attention multiplies K and V with each query head (llama.cpp:
    matrix-vector products with K/V broadcast over the heads of a GQA group) read the group's
    K/V again per further query head, less what the cache keeps (``Efficiency.kv_reread``);
    paged attention / FlashDecoding load each KV block once per group (kv_reread = 0)."""
    return 1.0 + r.kv_reread * (kv_group - 1.0)


def effective_memory_bytes(mem_bytes, kv_read_bytes, r: Rates, kv_reread_bytes=0.0,
                           weight_bytes=0.0, quantized=0.0):
    """``mem_bytes`` with its ``kv_read_bytes`` share counted 1 / kv_read_efficiency times,
    plus ``kv_reread`` x ``kv_reread_bytes`` (= KV reads x (kv_group - 1):
    ``Operator.kv_reread_bytes``) at the same rate -- together ``kv_read_factor`` x the KV
    reads, each at kv_read_efficiency of the bandwidth -- and its ``weight_bytes`` share
    counted 1 + ``Rates.weight_excess`` times (the quantised one where ``quantized``: a bool,
    or a 0..1 array of each operator's quantised share of its weights)."""
    out = mem_bytes
    if r.weight_limit_bytes_per_s or r.quant_weight_limit_bytes_per_s:
        ex, qex = r.weight_excess()
        if ex or qex:
            out = out + weight_bytes * (ex + (qex - ex) * quantized)
    if r.kv_limit_bytes_per_s > 0:
        # the KV reads' bytes-equivalent at the memory rate: the DRAM stream (as below) or,
        # where slower, every query head's pass over its group's K/V at the per-core bound
        dram = (kv_read_bytes + kv_reread_bytes * r.kv_reread) / r.kv_read_efficiency
        heads = (kv_read_bytes + kv_reread_bytes) * (r.bytes_per_s / r.kv_limit_bytes_per_s)
        return out - kv_read_bytes + np.maximum(dram, heads)
    if r.kv_read_efficiency == 1.0 and not r.kv_reread:
        return out
    return (out + kv_read_bytes * (1.0 / r.kv_read_efficiency - 1.0)
            + kv_reread_bytes * (r.kv_reread / r.kv_read_efficiency))


def op_time_s(flops, mem_bytes, kernels, r: Rates, comm_bytes=0.0, kv_read_bytes=0.0,
              attention_flops=0.0, kv_reread_bytes=0.0, weight_bytes=0.0, quantized=0.0,
              gemm_cols=0.0):
    """Roofline time [s] of ``kernels`` kernel launches doing ``flops`` FLOPs and moving
    ``mem_bytes`` bytes of device memory (and ``comm_bytes`` over the link, serially), of
    which ``kv_read_bytes`` are KV-cache reads (re-read per query head as
    ``effective_memory_bytes`` says with ``kv_reread_bytes``) and ``attention_flops``
    attention FLOPs (counted 1 / attention_efficiency times), and ``weight_bytes`` weights
    (quantised where ``quantized``) streamed within the stack's limit; the FLOPs of a
    quantised matmul count 1 / ``quant_compute`` times, those of a GEMM with ``gemm_cols``
    output columns ``wave_flops_factor`` times. Works on floats and on numpy arrays alike."""
    link = comm_bytes / r.link_bytes_per_s if r.link_bytes_per_s else 0.0
    mem_bytes = effective_memory_bytes(mem_bytes, kv_read_bytes, r, kv_reread_bytes,
                                       weight_bytes, quantized)
    extra = 0.0
    if r.attention_efficiency != 1.0:
        extra = attention_flops * (1.0 / r.attention_efficiency - 1.0)
    flops = flops * quant_flops_factor(r, quantized) * wave_flops_factor(r, gemm_cols) + extra
    if r.dequant_bytes:         # a dequantising kernel before the GEMM, serially (with the link)
        link = link + quantized * weight_bytes * (r.dequant_bytes / r.bytes_per_s)
    if isinstance(flops, np.ndarray) or isinstance(mem_bytes, np.ndarray):
        return (np.maximum(flops / r.flops_per_s, mem_bytes / r.bytes_per_s)
                + kernels * r.kernel_overhead_s + link)
    return max(flops / r.flops_per_s, mem_bytes / r.bytes_per_s) + kernels * r.kernel_overhead_s + link


def attainable_flops_per_s(intensity, r: Rates):
    """Roofline ceiling: min(peak, intensity * bandwidth) [FLOP/s]."""
    return np.minimum(r.flops_per_s, np.asarray(intensity, dtype=float) * r.bytes_per_s)
