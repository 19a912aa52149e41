"""The efficiency model (v2): what fraction of the roofline a real inference stack reaches.

The estimated time of every operator in a pass with M tokens in flight (``roofline.rates`` and
``roofline.op_time_s``)::

    max(FLOPs / (peak x compute x M / (M + gemm_half_tokens)),
        (bytes + KV reads x (1/kv_read - 1)) / (bandwidth x memory))
        + kernels x kernel_overhead          (+ per pass: step_overhead + batch x seq_overhead)

Every parameter is physical and attached to what causes it, so it carries to hardware and
stacks the fit never saw through their TOML fields:

* ``memory`` -- fraction of peak DRAM bandwidth reached streaming weights, per **memory
  technology** (``memory_type``: HBM, GDDR, LPDDR; family fallback, then the hardware class).
  Set by the slope of batch-1 decode time vs weight bytes.
* ``kv_read`` -- fraction of that bandwidth decode attention reaches reading the KV cache: per
  memory technology for the reference stack (llama.cpp: one block per head, short strided
  rows), absolute per stack for paged attention / FlashDecoding (vLLM, SGLang, TensorRT-LLM).
* ``kv_reread`` -- stacks with ``kv_per_query_head`` (llama.cpp, gpt-fast) multiply K and V
  with each query head of a GQA group, so the group's K/V is streamed
  1 + kv_reread x (group - 1) times (``roofline.kv_read_factor``; the cache keeps the rest):
  decode attention cost grows with query heads x context, not with KV bytes alone.
* ``compute`` and ``gemm_half_tokens`` -- the GEMM fraction of the dense peak at many tokens in
  flight, and the tokens in flight (M = batch x new tokens per pass) at which half of it is
  reached (tile / wave quantisation). Per stack; the reference stack's value on an
  architecture whose tensor cores need new instructions (Hopper wgmma) is cut by that
  architecture's cited ``legacy_kernel_factor``; stacks with ``native_kernels`` skip it.
* ``kernel_overhead`` -- fixed cost per kernel (launch, tail); ``step_overhead`` per forward
  pass and ``seq_overhead`` per sequence per pass (scheduling, sampling, detokenisation).
* ``act_quant_kernels`` -- launches added before each matmul with quantised weights by stacks
  that quantise the activations in a kernel of their own (``act_quant``: llama.cpp's CUDA/HIP
  back end, q8_1); cited, not fitted: 1 per GPU class for the reference stack, 0 elsewhere.
  A stack measured with both quantised and native weights gets its own value, fitted on its
  batch-1 rows (the fixed cost per quantised matmul of its weight-only path, in launches).
* ``quant_compute`` -- the share of its GEMM rate a stack's matmuls with quantised weights
  reach at many tokens in flight (prefill): llama.cpp's quantised path unpacks weight blocks
  inside the matmul (MMQ on q8_1 activations; Metal dequantises to half in threadgroup
  memory) where its F16 path calls cuBLAS / simdgroup GEMMs. Fitted per class on devices
  with prefill rows of one model in both 16-bit and quantised weights; the ``act_quant``
  stacks keep it, the others run at 1.
* ``tp_row_copy_s`` -- llama.cpp's tensor split divides each matmul's weights by rows and
  gathers on one device: 2 (TP - 1) host-driven copies per split matmul, each this much beyond
  the link's time (fitted on its tensor-split rows), in place of per-block all-reduces.
* ``spec_host_seq_s`` -- host work per sequence per pass that a stack's overlap scheduler hides
  in plain decoding but its speculative modes pay serially (``SPEC_HOST_SEQ_S``; cited).

The reference stack (llama.cpp, measured on every class) gives the class and memory-technology
values; stack profiles (``[framework.*]``) scale or replace them. Values:
``presets/tables/efficiency.toml`` (every key documented in its header), written by
``scripts/fit_efficiency.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .. import efficiency_table
from ..errors import ConfigError, did_you_mean
from ..hardware import (
    ARCHITECTURE_EFFICIENCY,
    GEMM_UNIT_FIELDS,
    MEMORY_TYPE_EFFICIENCY,
    PROVISIONAL_EFFICIENCY,
    Efficiency,
    Hardware,
    HardwareClass,
    enum_key,
    generic_efficiency,
)
from ..units import S_PER_US

# CLI names of the framework profiles (lower case) and how measurement rows spell them.
FRAMEWORKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "llama.cpp": ("llama.cpp", ("llama.cpp", "llamacpp", "ggml", "ollama")),
    "gpt-fast": ("gpt-fast (PyTorch compile)", ("gpt-fast", "gptfast")),
    "vllm-legacy": ("vLLM < 0.6 (per-step CPU scheduling)", ("vllm:v0.4", "vllm:v0.5",
                                                            "vllm v0.2", "vllm v0.3",
                                                            "vllm v0.4", "vllm v0.5")),
    "vllm": ("vLLM", ("vllm",)),
    "sglang": ("SGLang", ("sglang",)),
    "tensorrt-llm": ("TensorRT-LLM", ("tensorrt", "trt-llm", "trtllm")),
    "mlc": ("MLC LLM", ("mlc",)),
    "exllamav2": ("ExLlamaV2", ("exllama",)),
    "mlx": ("Apple MLX", ("mlx",)),
    "fastertransformer": ("FasterTransformer", ("fastertransformer",)),
    "hf-eager": ("PyTorch eager (HF transformers)", ("fastchat", "hf eager", "hf-style eager",
                                                     "transformers")),
}
GENERIC = "generic"
# The stack whose rows the class values are fitted on (calibration.fitting.REFERENCE_FRAMEWORK).
# Every other stack's profile applies to the class values of ``EfficiencyTable.stack_classes``
# where the table gives them (``[stack_class.*]``: the class fit without the reference stack's
# build rules, fitting.fit_table says why).
REFERENCE_STACK = "llama.cpp"
# Architecture values taken from sources, not fitted (the table header cites them): Hopper's
# dense peak needs wgmma; kernels written with Ampere-style mma.sync reach about half of it
# (FlashAttention-2 35 % vs FlashAttention-3 75 % of H100's peak, arXiv:2407.08608).
# Blackwell is not listed: one key covers datacenter (tcgen05) and consumer (mma.sync) parts.
CITED_ARCHITECTURE = {"hopper": {"legacy_kernel_factor": 0.5}}
# Vendor-BLAS GEMM share of an architecture relative to the NVIDIA devices the native-kernel
# stacks' compute fraction is fitted on (vLLM / SGLang borrow TensorRT-LLM's, fitted on
# Hopper/Ada rows): stacks with ``native_kernels`` call the platform's GEMM library (cuBLAS(Lt)
# / hipBLASLt), whose maximum achievable matmul rate is a property of the platform. Cited, not
# fitted: BF16 MAMF, stas00/ml-engineering@744d01e1 compute/accelerator/README.md "Maximum
# Achievable Matmul FLOPS comparison table": AMD MI300X 781.9 of 1300 TFLOPS = 60.1 % (ROCm
# 6.2, hipBLASLt) vs NVIDIA H100 SXM 792.1 of 989 = 80.1 % (CUDA 12.1): 0.601 / 0.801. Keyed
# by architecture (CDNA3: MI300X and MI325X share the compute die; MI325X's 1000 W may lift
# its MAMF -- no MI325X rows here to check). No row of the batch-1, prefill or batched data is
# on CDNA3; the MLPerf v4.1 MI300X rows are the check (never fitted).
NATIVE_GEMM_FACTOR = {"cdna3": 0.601 / 0.801}
# Stacks whose batch-1 decode attention reads K/V per query head (``kv_per_query_head``):
# llama.cpp multiplies K and V with each query head (matrix-vector products, K/V broadcast over
# the heads of a GQA group); gpt-fast repeats K and V to every query head
# (``k.repeat_interleave(n_head // n_local_heads)`` before scaled_dot_product_attention in its
# model.py). Paged attention / FlashDecoding kernels (vLLM, SGLang, TensorRT-LLM) and
# ExLlamaV2's flash-attn (GQA-aware) load each KV block once per group; MLC (paged KV cache,
# own decode kernels) is assumed to as well -- not checked against its source.
KV_PER_QUERY_HEAD = ("llama.cpp", "gpt-fast")
# Stacks that launch a kernel of its own to quantise the activations before each matmul with
# quantised weights (``act_quant``: they keep the class's ``act_quant_kernels``): llama.cpp's
# CUDA/HIP back end (ggml-cuda.cu, ggml_cuda_op_mul_mat: src1 is quantised to q8_1 by
# quantize_row_q8_1_cuda for the mul_mat_vec_q / mul_mat_q kernels, whose dot products take
# q8_1 activations). Other stacks' weight-only kernels (gpt-fast, ExLlamaV2, MLC, AWQ/GPTQ in
# vLLM/TensorRT-LLM) dequantise the weights inside the matmul and read the activations as
# they are: act_quant_kernels = 0.
ACT_QUANT_STACKS = ("llama.cpp",)
# The units a stack's GEMMs run on (``Efficiency.gemm_fp16_acc16`` / ``quant_gemm_int8``;
# ``roofline.gemm_peaks`` applies them where the device has the unit). Read from the stacks'
# sources, not fitted. FP16 accumulation: llama.cpp's CUDA back end runs F16 matmuls through
# cublasGemmEx with CUBLAS_COMPUTE_16F at the default precision (ggml-cuda.cu,
# ggml_cuda_op_mul_mat_cublas), at twice the FP32-accumulate rate on GeForce cards; PyTorch-
# based stacks (vLLM, SGLang, gpt-fast, HF) and TensorRT-LLM accumulate FP16/BF16 GEMMs in FP32.
# Int8 MMA: llama.cpp's quantised matmuls (MMQ, ggml-cuda/mmq.cu) multiply the weight blocks
# with q8_1-quantised activations in int8 (mma.sync on Turing and newer); the other stacks'
# weight-only kernels dequantise to 16 bits and run at the 16-bit rate. Build dependence, a
# what-if (measurements.CUBLAS_PROMPT_BUILDS, roofline.dequant_factor; not kept, the figures are
# there): MMQ runs prompts only since June 2024 (github ggml-org/llama.cpp PR #8075, "use MMQ
# instead of cuBLAS by default"; int8 MMA in MMQ from PR #7676 / #7860, May-June 2024). Before,
# a batch above MMQ_MAX_BATCH_SIZE = 32 rows had its quantised weights dequantised to F16 for
# FP16 cuBLAS (ggerganov/llama.cpp@005de593 ggml-cuda.cu: "max batch size to use MMQ kernels
# when tensor cores are available"): the XiongjieDai notebook rows (llama-bench builds 2836-2837,
# May 2024; their log prints "CUDA_USE_TENSOR_CORES: yes") ran that path, the 2025 scoreboard
# rows (discussion #15013) MMQ. The shipped fit prices both as MMQ: one fitted quant_compute
# covers both paths.
ACC16_STACKS = ("llama.cpp",)
# Stacks whose tensor-parallel all-reduces are plain NCCL calls (``Efficiency.nccl_all_reduce``;
# read from the source, not fitted): MLC LLM runs multi-GPU models on TVM's Disco runtime,
# whose all-reduce is ncclAllReduce on the group's communicator (github apache/tvm@035cee65
# src/runtime/disco/nccl/nccl.cc, AllReduce; registered as "runtime.disco.nccl.allreduce").
# The other stacks with TP rows are left as they are: gpt-fast's TP rows ran PyTorch's
# intra-node all-reduce (ENABLE_INTRA_NODE_COMM=1, tp_measurements.csv), TensorRT-LLM its own
# kernels (``collectives.trtllm_all_reduce_s``), llama.cpp a row split (``tp_row_copy_s``).
# Measured (issue 27, held out with inline ECC in the core on): the A10G's fold 8.7 -> 7.2 %
# (MLC TP4 / TP8 q4f16_1 +5.1 / +9.5 -> +2.6 / +4.0 %), MLC's A100 TP8 rows +9.6 / +17.9 ->
# +6.1 / +9.7 %, MLC 7.8 -> 6.1 %, datacenter GPUs 8.1 -> 7.8 %, batch 1 5.18 % (the A10G's AMD
# host on top, measurement_mapping [host_for]: 5.07 %, datacenter 7.8 %, MLC 5.6 %).
# NCCL_ALLREDUCE_ON: False = every stack on the one-shot estimate (the model before; what-if).
NCCL_ALLREDUCE_STACKS = ("mlc",)
NCCL_ALLREDUCE_ON = True
# Stacks that run a prompt in micro-batches of a fixed number of tokens
# (``Efficiency.prompt_ubatch_tokens``): llama.cpp's physical batch n_ubatch, 512 by default
# (github ggml-org/llama.cpp common/common.h ``n_ubatch = 512``; llama-bench's default -ub 512,
# which the llama.cpp prompt rows ran). Each micro-batch is a pass of its own through the
# weights: its GEMMs have at most that many rows, and a MoE layer's routed experts each get
# their share of those rows (``roofline.expert_flops_factor``). The fit gives the reference
# stack's class values this micro-batch (``fitting._start``); other stacks' profiles drop it.
UBATCH_STACKS = {"llama.cpp": 512.0}
INT8_GEMM_STACKS = ("llama.cpp",)
# The weight-streaming bound per compute unit and cycle (``Efficiency.stream_bytes_per_cu_cycle``
# / ``quant_stream_bytes_per_cu_cycle``) is a property of a stack's matrix-vector kernels: only
# the reference stack's profile carries one, fitted on its rows (fitting.fit_stream_limits; the
# classes hold it only while the fit runs). Other stacks run kernels of their own (gpt-fast's
# BF16 kernels draw ~1.4 TB/s from an A100, llama.cpp's F16 path ~0.9 TB/s), and the generic
# estimate is stack-agnostic: no bound. (It is an ABSOLUTE_KEYS entry of the llama.cpp profile.)

# Kernel launches per execution of the operators a stack launches differently from one kernel
# each (``Efficiency.kernel_plan``; read from the stack's source, not fitted). gpt-fast
# (github pytorch-labs/gpt-fast model.py and mixtral-moe/model.py at 32971d3, the commit its
# rows cite): Q, K and V are one ``wqkv`` matmul (k_proj, v_proj: 0); the SwiGLU gate and up
# projections are two matmuls, w1 and w3 (ffn_gate_up: 2; its MoE experts' einsums are left at
# one each: whether Inductor fuses the expert gather is not in the source); and torch.compile's
# Inductor fuses each residual add, a pointwise op, into the RMSNorm reduction that reads its
# output (residual_add: 0). 14 launches per dense layer become 11.
KERNEL_PLANS = {"gpt-fast": {"k_proj": 0.0, "v_proj": 0.0, "ffn_gate_up": 2.0,
                             "residual_add": 0.0}}
# Tried and not kept (issue 27): llama.cpp's prompt pipeline over a layer split. llama.cpp
# splits a batch into micro-batches of n_ubatch = 512 tokens and pipelines them through the
# devices, up to GGML_SCHED_MAX_COPIES = 4 in flight (github ggml-org/llama.cpp PR #6017,
# 2024-03; the XiongjieDai rows ran llama-bench with its defaults, -b 2048 -ub 512, in May
# 2024), so a pp1024 prompt is two micro-batches and 4 devices could prefill it up to 1.6x
# faster than one. The rows show the overlap: the same 8B model and card prefill 1.3-1.6x
# faster on 4 devices than on one (its pp1024 interpolated between its pp512 and pp4096
# rows), where running the stages one after another gives at most 1x, and the 3090 rigs
# scale from 2 to 4 / 6 devices as the two-micro-batch pipeline says (1.22x measured vs
# 1.20x, 1.29x vs 1.29x). But the multi-GPU rigs are not the single-GPU
# rigs: the 3090x4 notebook's nvidia-smi shows power caps of 230/230/230/185 W (stock 350 W)
# and the rows map to the stock preset. Modelled (chunks of 512 tokens, one chunk's pass
# plus one chunk per slowest stage), the layer-split rows, already off by their rig, went from
# too slow to too fast: prefill in sample 7.0 -> 8.6 % (consumer GPUs 14.0 -> 18.0 %,
# datacenter 12.8 -> 11.2 %); held out (the folds of the seven devices with layer-split
# prefill rows rerun with the pipeline: scripts/loo_residuals.py --device ...) 8.8 -> 11.0 %
# (consumer 16.2 -> 19.5 %, datacenter 23.7 -> 21.3 %; the layer-split rows 16.3 -> 31.6 %
# and 41.6 -> 46.3 %). It needs the rigs' power caps in the rows and a clock-under-power-cap
# rule for GEMMs first.
# Tried and not kept (issue 27, datacenter prefill; both measured with the classes-only
# leave-one-device-out of llama.cpp's GPU prompt rows, scripts/prefill_class_loo.py, which
# reproduces the shipped consumer figure, 13.5 %):
# * A GEMM power bound: llama.cpp's prompt GEMMs at most k x tdp_W FLOP/s, k fitted on the
#   GPU prompt rows with the classes held and then refitted (an A100 PCIe reaches 40 % of its
#   312 TFLOPS at 300 W and a 250 W RTX 5000 Ada 38 %, where the GeForce cards reach 50-60 %).
#   Fitted k = 0.34-0.39 TFLOP/J per fold. Consumer GPUs 13.5 -> 15.1 % (the RTX A6000, RTX PRO
#   6000 Blackwell and RTX 3090 rows get worse as the class fraction rises to 0.54-0.58 to make
#   up), the A100s' llama.cpp rows 26.3 -> 29.7 % (single-GPU rows +11..+40 -> -20..-7 %, the
#   layer-split rows -7..-45 -> -40..-60 %). The A100 SXM (400 W) is only ~1.1x the PCIe card
#   (300 W) on the same rows, not the 1.33x one energy per FLOP gives.
# * FP32 work of the quantised matmuls on int8 MMA: a quantised FLOP taking
#   1 / (compute x quant_compute x int8) + c / fp32, c FP32 operations per int8 operation on
#   the CUDA cores (MMQ scales each block's int8 partial sum in float; the pre-June-2024 path
#   dequantised on them). Every GeForce/RTX card has fp32 = int8 / 8, the A100 int8 / 32, so c
#   acts on the A100 alone (the A100's MMQ Q4_0 prompt, 4,850 tokens/s, is 0.94x an RTX 3090's
#   with 2.2x its int8 peak). Fitted on all rows c goes to 0 (its lower bound): once the
#   datacenter class has its own GEMM fraction (both A100s), the A100's quantised rows need no
#   more. With one A100 held out, the fold fits c = 0.016-0.026 on the other A100's rows and
#   the A100s' llama.cpp rows go 26.3 -> 22.8 % (consumer 13.5 -> 13.6 %): c then stands in for
#   the missing datacenter GEMM fraction, which the F16 rows (still +11 / +19 %) show is not
#   quantisation-specific. Not kept: a held-out gain the full data does not support.
# Host work per sequence per pass that a stack's overlap scheduler hides behind the GPU in plain
# decoding and that its speculative modes pay serially (``Efficiency.spec_host_seq_s``). Cited,
# not fitted: the one published batch sweep fits alpha on its smallest batch, and two rows
# cannot pin a cost as well. TensorRT-LLM switches its overlap scheduler off for speculative
# decoding (C++ runtime: github NVIDIA/TensorRT-LLM PR #3625, "Disable overlap for speculative
# decoding"; PyTorch executor: PR #6676 disables it for speculation modes that do not support
# it; the n-gram sweep's own source, NVIDIA/TensorRT-LLM @0b88109 docs/source/blogs/tech_blog/
# blog_7_NGram_performance_Analysis_And_Auto_Enablement.md, "Feature Gaps": N-Gram "is not
# compatible with overlap scheduler", its drafter's pool being a host-side dictionary; PR
# #19437 later measured ~1.3 ms of exposed host time between forward passes with that CPU
# drafter, ~0.2 ms once it ran on the GPU under the overlap scheduler: gpt-oss, TP4, B200), and
# its PyTorch executor's host step takes 45.11 ms per iteration with up to 1,536
# requests per rank (PR #10273: GB200, GPT-OSS-120B, attention-DP 2, concurrency 3,072) ->
# 45.11 ms / 1,536 = 29.4 us per request (a lower bound on the per-request share: the rank's
# batch is taken as full, and the per-iteration part is not separated). Other stacks: 0 (no
# published figure; vLLM and SGLang overlap or not depending on version and method).
SPEC_HOST_SEQ_S = {"tensorrt-llm": 29.4e-6}


def cited_absolute(name: str) -> dict:
    """The absolute values stack ``name`` takes from cited sources, not fits."""
    return {"spec_host_seq_s": SPEC_HOST_SEQ_S[name]} if name in SPEC_HOST_SEQ_S else {}


SCALE_KEYS = ("memory_scale", "compute_scale", "overhead_scale")
# Absolute per-stack values (None = the reference stack's): TOML key -> (Efficiency field,
# factor from the TOML unit to SI).
ABSOLUTE_KEYS = {"memory": ("memory", 1.0), "compute": ("compute", 1.0), "kv_read": ("kv_read", 1.0),
                 "gemm_half_tokens": ("gemm_half_tokens", 1.0),
                 "attention_compute": ("attention_compute", 1.0),
                 "kernel_overhead_us": ("kernel_overhead_s", S_PER_US),
                 "step_overhead_us": ("step_overhead_s", S_PER_US),
                 "seq_overhead_us": ("seq_overhead_s", S_PER_US),
                 "stage_hop_us": ("stage_hop_s", S_PER_US),
                 "act_quant_kernels": ("act_quant_kernels", 1.0),
                 "quant_memory": ("quant_memory", 1.0),
                 "spec_host_seq_us": ("spec_host_seq_s", S_PER_US),
                 "tp_row_copy_us": ("tp_row_copy_s", S_PER_US),
                 "node_step_us": ("node_step_s", S_PER_US),
                 "eager_launch_us": ("eager_launch_s", S_PER_US),
                 "stream_bytes_per_cu_cycle": ("stream_bytes_per_cu_cycle", 1.0),
                 "quant_stream_bytes_per_cu_cycle": ("quant_stream_bytes_per_cu_cycle", 1.0)}


@dataclass(frozen=True)
class FrameworkProfile:
    """What an inference stack changes relative to the reference stack (llama.cpp):
    multipliers of the reference values (1 = unchanged) and absolute values (None = the
    reference's). ``native_kernels``: the stack's GEMMs use the newest tensor-core
    instructions of every architecture (no ``legacy_kernel_factor``). ``kv_per_query_head``:
    its decode attention re-reads a GQA group's K/V per query head, as the reference stack
    does (keeps the class's ``kv_reread``; other stacks read each KV block once per group:
    ``kv_reread`` = 0). ``act_quant``: it runs the reference stack's quantised-matmul path --
    the activations quantised in a kernel of their own before each quantised matmul (on GPUs)
    and weight blocks unpacked inside the matmul's inner loop -- so it keeps the class's
    ``act_quant_kernels`` and ``quant_compute`` (other stacks: 0 and 1).
    ``gemm_fp16_acc16`` / ``quant_gemm_int8``: the units its GEMMs run on (``ACC16_STACKS``,
    ``INT8_GEMM_STACKS``): 16-bit GEMMs with FP16 accumulation, quantised matmuls on int8
    MMA; the device's file says whether it has them (``roofline.gemm_peaks``)."""
    name: str
    label: str
    memory_scale: float = 1.0
    compute_scale: float = 1.0
    overhead_scale: float = 1.0
    rows: int = 0            # measurements the values were fitted on (0 = not fitted)
    note: str = ""
    absolute: dict = field(default_factory=dict, hash=False)   # Efficiency field -> value
    native_kernels: bool = False
    kv_per_query_head: bool = False
    act_quant: bool = False
    gemm_fp16_acc16: bool | None = None      # None = the stack's cited units (ACC16_STACKS)
    quant_gemm_int8: bool | None = None      # None = INT8_GEMM_STACKS

    def __post_init__(self):
        if self.gemm_fp16_acc16 is None:
            object.__setattr__(self, "gemm_fp16_acc16", self.name in ACC16_STACKS)
        if self.quant_gemm_int8 is None:
            object.__setattr__(self, "quant_gemm_int8", self.name in INT8_GEMM_STACKS)

    def apply(self, eff: Efficiency, native_compute: float | None = None) -> Efficiency:
        """``eff`` (the reference stack's) as this stack reaches it; ``native_compute`` = the
        reference compute fraction without the architecture's legacy-kernel factor."""
        base_c = native_compute if (self.native_kernels and native_compute) else eff.compute
        plan = tuple(sorted(KERNEL_PLANS.get(self.name, {}).items()))
        # one replace (one check of the result; the absolute values win): fits call this for
        # every row and trial efficiency
        changes = dict(memory=min(1.0, eff.memory * self.memory_scale),
                       kv_reread=eff.kv_reread if self.kv_per_query_head else 0.0,
                       # the per-core attention bound is the per-query-head kernels' (fitting.
                       # fit_kv_limits); a stack reading each KV block once per group has none
                       kv_stream_bytes_per_cu_cycle=(eff.kv_stream_bytes_per_cu_cycle
                                                     if self.kv_per_query_head else 0.0),
                       act_quant_kernels=eff.act_quant_kernels if self.act_quant else 0.0,
                       quant_compute=eff.quant_compute if self.act_quant else 1.0,
                       gemm_fp16_acc16=self.gemm_fp16_acc16,
                       quant_gemm_int8=self.quant_gemm_int8,
                       prompt_ubatch_tokens=(eff.prompt_ubatch_tokens
                                             if self.name in UBATCH_STACKS else 0.0),
                       expert_half_tokens=(eff.expert_half_tokens
                                           if self.name in UBATCH_STACKS else 0.0),
                       compute=min(1.0, base_c * self.compute_scale),
                       kernel_overhead_s=min(1.0, eff.kernel_overhead_s * self.overhead_scale),
                       kernel_plan=plan,
                       nccl_all_reduce=NCCL_ALLREDUCE_ON and self.name in NCCL_ALLREDUCE_STACKS)
        return replace(eff, **{**changes, **self.absolute})


@dataclass(frozen=True)
class EfficiencyTable:
    """Class efficiencies, memory-technology and architecture values and stack profiles."""
    classes: dict = field(hash=False)          # HardwareClass -> Efficiency
    frameworks: dict = field(hash=False)       # CLI name -> FrameworkProfile
    class_rows: dict = field(default_factory=dict, hash=False)   # HardwareClass -> rows fitted
    source: str = ""
    memory_types: dict = field(default_factory=dict, hash=False)   # type -> {memory, kv_read}
    architectures: dict = field(default_factory=dict, hash=False)  # arch -> {compute, ...}
    memory_type_rows: dict = field(default_factory=dict, hash=False)
    # HardwareClass -> Efficiency: the class values the stacks other than REFERENCE_STACK apply
    # to, where they differ from ``classes`` (the GEMM fractions of the class fit with the
    # reference stack's build rules off: fitting.fit_table); a class not here: ``classes``
    stack_classes: dict = field(default_factory=dict, hash=False)

    def class_efficiency(self, hardware: Hardware, stack: bool = False) -> Efficiency:
        """The preset's own ``[efficiency]`` if it has one, else the reference stack's on its
        class, memory technology and architecture (``stack``: the values the other stacks'
        profiles apply to, ``stack_classes``)."""
        if hardware.efficiency is not None:
            return hardware.efficiency
        return self._generic(hardware, stack=stack)

    def _generic(self, hardware: Hardware, architectures: dict | None = None,
                 stack: bool = False) -> Efficiency:
        classes = ({**self.classes, **self.stack_classes} if stack and self.stack_classes
                   else self.classes)
        return generic_efficiency(hardware.hw_class, memory_type_of(hardware),
                                  architecture_of(hardware), classes, self.memory_types,
                                  self.architectures if architectures is None else architectures,
                                  getattr(hardware, "boost_clock_mhz", None))

    def efficiency_for(self, hardware: Hardware, framework: str | None = None) -> Efficiency:
        """Estimated-mode efficiency of ``hardware`` under ``framework`` (None = generic)."""
        if framework is None or framework == GENERIC:
            return self.class_efficiency(hardware)
        prof = self.profile(framework)
        stack = prof.name != REFERENCE_STACK
        eff = self.class_efficiency(hardware, stack)
        native = None
        if prof.native_kernels and hardware.efficiency is None:
            arch = {k: {kk: vv for kk, vv in v.items() if kk != "legacy_kernel_factor"}
                    for k, v in self.architectures.items()}
            native = self._generic(hardware, arch, stack).compute
        out = prof.apply(eff, native)
        factor = NATIVE_GEMM_FACTOR.get(architecture_of(hardware) or "", 1.0) \
            if prof.native_kernels and hardware.efficiency is None else 1.0
        return replace(out, compute=out.compute * factor) if factor != 1.0 else out

    def profile(self, framework: str) -> FrameworkProfile:
        name = resolve_framework(framework)
        return self.frameworks.get(name) or FrameworkProfile(
            name, FRAMEWORKS[name][0], kv_per_query_head=name in KV_PER_QUERY_HEAD,
            act_quant=name in ACT_QUANT_STACKS, absolute=cited_absolute(name),
            gemm_fp16_acc16=name in ACC16_STACKS, quant_gemm_int8=name in INT8_GEMM_STACKS)


def memory_type_of(hardware: Hardware) -> str | None:
    """The preset's memory technology as a lower-case key (None when it does not say)."""
    return enum_key(getattr(hardware, "memory_type", None))


def architecture_of(hardware: Hardware) -> str | None:
    """The preset's architecture as a lower-case key (None when it does not say)."""
    return enum_key(getattr(hardware, "architecture", None))


def resolve_framework(name: str) -> str:
    """The CLI name of a framework profile (exact lower-case name or alias); ConfigError with
    close matches otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("framework name must be a non-empty string")
    key = name.strip().lower()
    if key in FRAMEWORKS:
        return key
    raise ConfigError(f"unknown framework {name!r}{did_you_mean(key, FRAMEWORKS)} "
                      f"(known: {', '.join(FRAMEWORKS)})")


def framework_of_label(label: str) -> str | None:
    """The profile a measurement's framework column belongs to ("llama.cpp (CUDA)" ->
    "llama.cpp"); None for stacks without a profile (T-MAC, QNN, ...)."""
    s = re.sub(r"\s+", "", str(label).lower())
    for name, (_, aliases) in FRAMEWORKS.items():
        if any(a.replace(" ", "") in s for a in aliases):
            return name
    return None


# ---- the table on disk ----------------------------------------------------------------------

def table_from_dict(data: dict, source: str = "") -> EfficiencyTable:
    """An EfficiencyTable from the TOML structure of ``presets/tables/efficiency.toml``;
    classes the table lacks keep the provisional constants (``hardware.PROVISIONAL_EFFICIENCY``,
    not ``CLASS_DEFAULTS``, which hold the table this process imported)."""
    classes = dict(PROVISIONAL_EFFICIENCY)
    rows = {}
    for name, kwargs in efficiency_table.class_values(data).items():
        cls = _class(name)
        classes[cls] = Efficiency(**kwargs)
        rows[cls] = int(data["class"][name].get("rows", 0))
    frameworks = {}
    raw = data.get("framework", {})
    if not isinstance(raw, dict):
        raise ConfigError("efficiency.toml: [framework] must be a table of profiles")
    for name, entry in raw.items():
        frameworks[resolve_framework(name)] = _profile(name, entry)
    mt = efficiency_table.memory_type_values(data)
    mt_rows = {k: int(v.get("rows", 0)) for k, v in data.get("memory_type", {}).items()
               if isinstance(v, dict)}
    stack_classes = {}
    for name, vals in efficiency_table.stack_class_values(data).items():
        cls = _class(name)
        try:
            stack_classes[cls] = replace(classes[cls], **vals)
        except ConfigError as e:
            raise ConfigError(f"efficiency.toml: [stack_class.{name}]: {e}") from None
    return EfficiencyTable(classes, frameworks, rows, source, mt,
                           efficiency_table.architecture_values(data), mt_rows, stack_classes)


def _profile(name: str, entry) -> FrameworkProfile:
    key = resolve_framework(name)
    if not isinstance(entry, dict):
        raise ConfigError(f"efficiency.toml: [framework.{name}] must be a table")
    scales = {k: efficiency_table._number(f"framework.{name}.{k}", entry.get(k, 1.0))
              for k in SCALE_KEYS}
    if any(v <= 0 for v in scales.values()):
        raise ConfigError(f"efficiency.toml: [framework.{name}] scales must be > 0")
    absolute = {f: efficiency_table._number(f"framework.{name}.{k}", entry[k]) * unit
                for k, (f, unit) in ABSOLUTE_KEYS.items() if k in entry}
    try:
        Efficiency(**{"compute": 0.5, "memory": 0.5} | absolute)
    except ConfigError as e:
        raise ConfigError(f"efficiency.toml: [framework.{name}]: {e}") from None
    return FrameworkProfile(key, FRAMEWORKS[key][0], **scales, rows=int(entry.get("rows", 0)),
                            note=str(entry.get("note", "")), absolute=absolute,
                            native_kernels=bool(entry.get("native_kernels", False)),
                            kv_per_query_head=bool(entry.get("kv_per_query_head",
                                                              key in KV_PER_QUERY_HEAD)),
                            act_quant=bool(entry.get("act_quant", key in ACT_QUANT_STACKS)),
                            gemm_fp16_acc16=_flag(name, entry, "gemm_fp16_acc16",
                                                  key in ACC16_STACKS),
                            quant_gemm_int8=_flag(name, entry, "quant_gemm_int8",
                                                  key in INT8_GEMM_STACKS))


def _flag(name: str, entry: dict, key: str, default: bool) -> bool:
    v = entry.get(key, default)
    if not isinstance(v, bool):
        raise ConfigError(f"efficiency.toml: [framework.{name}] {key} must be true or false, "
                          f"got {v!r}")
    return v


def _class(name: str) -> HardwareClass:
    try:
        return HardwareClass(name)
    except ValueError:
        raise ConfigError(f"efficiency.toml: unknown hardware class {name!r}") from None


def default_table() -> EfficiencyTable:
    """The fitted table shipped in ``presets/tables/efficiency.toml`` (the app's defaults)."""
    t = table_from_dict(efficiency_table.read_table(), "presets/tables/efficiency.toml")
    # hardware.py applied the same file at import; keep one truth if the file changed since
    return replace(t, memory_types={**MEMORY_TYPE_EFFICIENCY, **t.memory_types},
                   architectures={**ARCHITECTURE_EFFICIENCY, **t.architectures})


def efficiency_for(hardware: Hardware, framework: str | None = None) -> Efficiency:
    """Estimated-mode efficiency of ``hardware`` with the shipped table (``framework`` None =
    the class's generic profile)."""
    return default_table().efficiency_for(hardware, framework)


def provisional_table() -> EfficiencyTable:
    """The built-in provisional class values, no memory-technology values, the shipped
    architecture factors (cited facts, not fits) and identity stack profiles (where a fit
    starts)."""
    arch = {k: dict(v) for k, v in CITED_ARCHITECTURE.items()}
    return EfficiencyTable(dict(PROVISIONAL_EFFICIENCY), {}, {}, "provisional", {}, arch, {})


def _fmt(v: float) -> str:
    return f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.4e}"


HEADER = """\
# Efficiency model v2 (llmpara_core.calibration.efficiency explains it). Written by
# `python scripts/fit_efficiency.py` on the rows named under [fit] (all from
# shared/validation/); rerun the script instead of editing numbers.
#
# Estimated time of one operator in a pass with M tokens in flight (roofline.op_time_s):
#   max(FLOPs / (peak x compute x M / (M + gemm_half_tokens)),
#       (bytes + KV reads x (f / kv_read - 1)) / (bandwidth x memory))
#   + kernels x kernel_overhead        and per pass: step_overhead + batch x seq_overhead
# f = 1 + kv_reread x (query heads per KV head - 1) for stacks with kv_per_query_head, else 1
#
# [class.*]        reference stack (llama.cpp) per hardware class, fallback for devices whose
#                  preset lacks memory_type / architecture. memory = fraction of peak DRAM
#                  bandwidth streaming weights (GEMV); compute = fraction of the dense peak in
#                  large GEMMs (prefill); kernel_overhead_us = fixed cost per kernel launch
#                  (GPU classes: at a 2,000 MHz boost clock; a GPU whose preset gives
#                  boost_clock_MHz = f pays (2000 / f) ** 0.5 times it -- the launch is
#                  partly GPU cycles, partly host and driver time; the exponent was chosen
#                  on a grid by the in-sample fit, hardware.CLOCK_OVERHEAD_EXPONENT; and
#                  at a 3.5 GHz host CPU: a calibration row whose notebook names its host
#                  pays 3.5 GHz / the host's boost clock times it, measurements.NOTEBOOK_HOSTS
#                  -- a scenario outside validation uses the value as it stands);
#                  kv_read = fraction of that bandwidth decode attention reaches reading the
#                  KV cache (llama.cpp batch 1: one block per head, short strided rows);
#                  kv_reread = share of a GQA group's K/V read again per further query head
#                  (llama.cpp multiplies K and V with each query head: matrix-vector products
#                  with K/V broadcast over the group; L2 keeps the rest). Not fitted: 0.3 for
#                  every class (fitting.REFERENCE_KV_REREAD says how it was chosen);
#                  attention_compute = fraction of the GEMM rate prefill attention reaches
#                  (softmax, masking, score tiles; set by prefill at 512 vs 4096 tokens).
#                  act_quant_kernels = extra kernels per matmul with quantised weights: the
#                  reference stack's CUDA/HIP back end quantises the activations to q8_1 in a
#                  kernel of their own before each (ggml-cuda.cu ggml_cuda_op_mul_mat ->
#                  quantize_row_q8_1_cuda). Not fitted: 1 on GPUs, 0 on Apple SoCs (Metal's
#                  quantised mat-vec kernels read float activations) and CPUs (no launches).
#                  gemm_fp16_acc16, quant_gemm_int8 = true (GPU classes): the units the
#                  reference stack's GEMMs run on, read from llama.cpp's CUDA source, not
#                  fitted: F16 matmuls through cuBLAS with FP16 compute (the device's
#                  fp16_acc16 peak where its file gives one: GeForce 2x the spec sheet's
#                  FP32-accumulate fp16), quantised matmuls (MMQ, q8_1 activations) on int8
#                  MMA (the file's int8 peak on NVIDIA Turing and newer); roofline.gemm_peaks.
#                  quant_compute = fraction of the GEMM rate (compute) of that unit the
#                  reference stack's matmuls with quantised weights reach in prefill: they
#                  unpack weight blocks
#                  in their inner loop (CUDA/HIP: MMQ kernels on q8_1 activations; Metal:
#                  dequantised to half in threadgroup memory) where 16-bit weights go to
#                  cuBLAS / simdgroup GEMMs. Fitted per class with compute, where >= 2 devices
#                  have prefill rows of one model at one prompt length in both 16-bit and
#                  quantised weights (fitting.paired_quant_devices); datacenter GPUs, which run
#                  the consumer GPUs' kernels, take theirs with compute. One value covers the
#                  May 2024 notebook rows (dequantise + FP16 cuBLAS) and the 2025 MMQ rows
#                  (measurements.CUBLAS_PROMPT_BUILDS: the what-if that splits them).
#                  kquant_stream_bytes_per_cu_cycle (unified-soc) = the most k-quant weight
#                  bytes (Q4_K, Q6_K ...) llama.cpp's Metal matrix-vector kernels stream per
#                  GPU core per cycle (cores x the clock of the preset's fp32 peak): fitted on
#                  the class's k-quant decode rows, the class refitted around it
#                  (fitting.fit_kquant_limits; roofline.weight_stream_limits).
#                  kv_stream_bytes_per_cu_cycle (unified-soc) = the most bytes of K/V per GPU
#                  core per cycle llama.cpp's Metal decode attention passes over, once per
#                  query head (KV reads + re-reads); the DRAM stream (kv_read, kv_reread) is
#                  the other bound: fitted on the class's decode rows, the class refitted
#                  around it (fitting.fit_kv_limits; roofline.kv_stream_limit).
# [stack_class.*]  per class, the GEMM fractions (compute, attention_compute, quant_compute,
#                  expert_half_tokens) every stack but llama.cpp applies its profile to, where
#                  they differ from [class.*]: those of the class fit without llama.cpp's build
#                  rules (a pre-June-2024 CUDA build's prompt GEMMs in whole waves over the SMs,
#                  measurements.PROMPT_GEMM_WAVES; its layer split's prompt pipeline). The rules
#                  time llama.cpp's prompt passes only, so the fit runs without them and then
#                  refits only the [class.*] GEMM fractions of the classes with rows they time,
#                  every other value held (fitting.BUILD_RULES): the other stacks' profiles
#                  and effective values are those of the fit without the rules.
# [memory_type.*]  memory, kv_read per memory technology (HBM*, GDDR*, LPDDR*; refresh, bank
#                  conflicts and controller efficiency differ by technology, not by vendor).
# [architecture.*] legacy_kernel_factor: fraction of a generation's dense peak reached by GEMM
#                  kernels written for the previous one (mma.sync instead of Hopper wgmma /
#                  Blackwell tcgen05). Hopper 0.5: FlashAttention-2 (Ampere-style mma.sync)
#                  reaches 35 % of H100's peak vs 75 % for FlashAttention-3 with wgmma
#                  (Shah et al. 2024, arXiv:2407.08608, section 1) -> 0.35/0.75 ~ 0.5; the
#                  same assumed for datacenter Blackwell (tcgen05). Not fitted (no llama.cpp
#                  Hopper rows in the data); stacks with native_kernels = true skip it.
#                  memory_factor_<family> (gddr, hbm, lpddr, ddr): fraction of its memory
#                  technology's weight-streaming value a discrete-GPU generation's memory
#                  controllers for that family reach (Ada GDDR6X/GDDR6 above, Ampere GDDR6X/
#                  GDDR6 below the technology's pooled value); fitted on the reference rows of
#                  >= 2 devices and >= 6 rows per (generation, family), none for Apple SoCs
#                  (generation factors fitted on Apple rows did not carry to a held-out Apple
#                  device). ampere/hbm is fitted on the same A100 rows as HBM2e, so the data
#                  cannot separate the two: it comes out at 1.
# [framework.*]    per stack: *_scale multiply the reference values; absolute values replace
#                  them: compute, gemm_half_tokens (M at which GEMMs reach half of compute:
#                  tile and wave quantisation; fitted from three starts with a weak prior
#                  towards 64, half of a 128-row cuBLAS tile -- NVIDIA DU-09799-001 sections
#                  2.3, 3.1 -- which holds it where a stack's rows cannot pin it:
#                  stack_fit.GEMM_HALF_TILE), kv_read (paged attention / FlashDecoding split
#                  the context across blocks, so KV reads stream near weight speed),
#                  kernel_overhead_us (CUDA graphs cut it), step_overhead_us (per forward
#                  pass: scheduler, sampling, host sync), seq_overhead_us (per sequence per
#                  pass: CPU work per request of a serving engine), attention_compute (fused
#                  FlashAttention stacks: fixed at 0.8, not fitted -- FlashAttention-2's
#                  forward reaches up to 73 % of A100's peak (Dao 2023, arXiv:2307.08691)
#                  where large GEMMs reach about 90 %). Stacks without batched rows of their
#                  own (vllm, sglang) borrow tensorrt-llm's GPU-kernel values (note says so).
#                  kv_per_query_head = true: the stack's decode attention reads K/V per query
#                  head (llama.cpp; gpt-fast repeats K/V to every query head) and keeps the
#                  class's kv_reread; other stacks (paged attention / FlashDecoding, fused
#                  GQA kernels) read each KV block once per group: kv_reread = 0.
#                  gemm_fp16_acc16 / quant_gemm_int8 = true: the stack's GEMM units
#                  (llama.cpp; efficiency.ACC16_STACKS, INT8_GEMM_STACKS): other stacks
#                  accumulate in FP32 and dequantise to 16 bits (the device's fp16 peak).
#                  act_quant = true (llama.cpp): the stack keeps the class's
#                  act_quant_kernels and quant_compute (other stacks: quant_compute 1, no
#                  data separates theirs); other stacks dequantise inside the matmul: 0, unless
#                  their batch-1 rows include both quantised and native weights, which pin
#                  their own act_quant_kernels (fitted: the fixed cost per quantised matmul of
#                  the stack's weight-only path in launches -- gpt-fast's int8/int4 rows put
#                  it per matmul, not per byte: it does not shrink with tensor parallelism).
#                  stage_hop_us (llama.cpp): cost per pipeline-stage boundary per pass of its
#                  layer split beyond the link's time (host hand-off and sync): the median over
#                  (device, model, format, lengths) groups of the slope of measured step time
#                  vs number of GPUs (fitting.fit_stage_hop), each step time less the cost of
#                  its launches without CUDA graphs where its build ran the split without them
#                  (before llama.cpp PR #13814, 2025-05-27: 0.734 us per launch, cited from PR
#                  #6766's RTX 4090 graphs off/on figures; measurements.graphless_decode).
#                  node_step_us (FasterTransformer): fixed cost per pass of a model instance
#                  that spans more than one node, on top of its collectives (fitted with its
#                  memory and kernel_overhead_us on the tensor-parallel series: its
#                  Megatron-530B rows across 2-4 nodes run 10-16 ms per pass slower than
#                  their bytes, kernels and collectives, at TP16, TP32 and TP8 x PP3 alike).
#                  stream_bytes_per_cu_cycle, quant_stream_bytes_per_cu_cycle (llama.cpp) =
#                  the most weight bytes per compute unit (SM / CU / Xe core) per clock cycle
#                  its matrix-vector kernels stream, for 16-bit and for quantised weights: a
#                  kernel keeps a bounded number of loads in flight per unit, so it draws at
#                  most units x boost clock x this from memory (Little's law), whatever the
#                  memory could deliver. Binds where the memory is wide and the units few
#                  (A100 HBM2e: its F16 path ~0.9 TB/s, its Q4_K path ~1.2 TB/s of 2 TB/s;
#                  on no GDDR card). Needs the preset's compute_units and boost_clock_MHz.
#                  Fitted on the GPU reference decode rows, the classes and memory
#                  technologies refitted around it (fitting.fit_stream_limits); a property of
#                  llama.cpp's kernels: other stacks and the generic estimate have none.
#                  tp_row_copy_us (llama.cpp): its tensor split is a row split -- each split
#                  matmul's input goes to, and its output comes back from, every other device,
#                  2 (TP - 1) host-driven copies per matmul in place of per-block all-reduces;
#                  the cost of each copy beyond the link's time: the median over its
#                  tensor-split rows of the value at which the model meets each
#                  (fitting.fit_row_copy; three 2023 rows, Llama-2-70B F16 on 4 and 8 A100s and
#                  8 A10Gs over PCIe).
#                  eager_launch_us (vllm-legacy): host time per kernel launch of a vLLM build
#                  before its CUDA graphs (github vllm-project/vllm PR #1926, merged
#                  2023-12-17): each op dispatched from Python on every TP worker, fixed in
#                  time whatever the GPU; added only to the decode rows of such builds
#                  (measurements.eager_decode), never to an estimate. The median over those
#                  rows of the value at which the model meets each (fitting.fit_eager_launch;
#                  two 2023 llm-perf-bench rows, Llama-2-70B F16 on 4 A100s and 8 A10Gs).
#                  spec_host_seq_us (tensorrt-llm): host work per sequence per pass that the
#                  overlap scheduler hides in plain decoding but speculative decoding, which
#                  switches the overlap off, pays serially: added to each draft + verify
#                  iteration only. Not fitted: 45.11 ms host step per iteration at 1,536
#                  requests per rank (github NVIDIA/TensorRT-LLM PR #10273) -> 29.4 us; the
#                  overlap is off for speculation per PRs #3625 and #6676
#                  (efficiency.SPEC_HOST_SEQ_S).
#                  hf-eager (PyTorch eager via FastChat, measured only in the energy rows):
#                  kernel_overhead_us fitted on the measured time per token of its two
#                  ML.ENERGY v1 rows (batch 1, A100; presets/tables/energy_measurements.csv):
#                  host-bound per-operator dispatch (stack_fit.fit_energy_profiles).
#                  Kernel plans (not in this file; efficiency.KERNEL_PLANS, read from the
#                  stack's source): launches per execution of the operators a stack fuses or
#                  splits -- gpt-fast: Q, K, V in one wqkv matmul, gate and up as two (w1,
#                  w3), each residual add folded into the next RMSNorm by Inductor (14 launches
#                  per dense layer -> 11); its overhead_scale is fitted on top of that count.
# Minimum data: a class or memory technology is fitted on >= 6 batch-1 decode rows (one
# device allowed); [fit.leave_one_device_out] holds out each device (power-limited twins of
# the same chip together) and refits without it -- a class or technology left with too few
# rows then falls back to the provisional constants, never to values fitted with the device.
# [fit.leave_one_device_out_by_device] gives the same held-out median |error| per regime and
# device preset ("regime.slug"; `llmpara validate --loo --regime R --device slug`).
"""


def table_to_toml(table: EfficiencyTable, fit_info: dict | None = None) -> str:
    """The TOML text of ``table`` (the format of presets/tables/efficiency.toml)."""
    lines = HEADER.splitlines() + [""]
    if fit_info:
        lines.append("[fit]")
        nested = {k: v for k, v in fit_info.items() if isinstance(v, dict)}
        for k, v in fit_info.items():
            if not isinstance(v, dict):
                lines.append(f"{k} = {_value(v)}")
        for k, d in nested.items():
            lines += ["", f"[fit.{k}]"] + [f'"{kk}" = {_value(vv)}' for kk, vv in d.items()]
        lines.append("")
    for cls in HardwareClass:
        if cls not in table.class_rows or not table.class_rows[cls]:
            continue
        e = table.classes[cls]
        lines += [f"[class.{cls.value}]", f"memory = {_fmt(e.memory)}",
                  f"compute = {_fmt(e.compute)}",
                  f"kernel_overhead_us = {_fmt(e.kernel_overhead_s / S_PER_US)}",
                  f"kv_read = {_fmt(e.kv_read)}",
                  f"kv_reread = {_fmt(e.kv_reread)}",
                  f"act_quant_kernels = {_fmt(e.act_quant_kernels)}",
                  f"quant_compute = {_fmt(e.quant_compute)}",
                  f"attention_compute = {_fmt(e.attention_compute)}"]
        if e.gemm_half_tokens > 0:
            lines.append(f"gemm_half_tokens = {_fmt(e.gemm_half_tokens)}")
        if e.expert_half_tokens > 0:
            lines.append(f"expert_half_tokens = {_fmt(e.expert_half_tokens)}")
        if e.prompt_ubatch_tokens > 0:
            lines.append(f"prompt_ubatch_tokens = {_fmt(e.prompt_ubatch_tokens)}")
        if e.kquant_stream_bytes_per_cu_cycle > 0:
            lines.append("kquant_stream_bytes_per_cu_cycle = "
                         f"{_fmt(e.kquant_stream_bytes_per_cu_cycle)}")
        if e.kv_stream_bytes_per_cu_cycle > 0:
            lines.append("kv_stream_bytes_per_cu_cycle = "
                         f"{_fmt(e.kv_stream_bytes_per_cu_cycle)}")
        lines += [f"{f} = true" for f in GEMM_UNIT_FIELDS if getattr(e, f)]
        lines += [f"rows = {table.class_rows[cls]}", ""]
    for cls in HardwareClass:
        e, own = table.stack_classes.get(cls), table.classes.get(cls)
        if e is None or own is None or not table.class_rows.get(cls):
            continue
        diff = [k for k in efficiency_table.STACK_CLASS_KEYS if getattr(e, k) != getattr(own, k)]
        if diff:
            lines.append(f"[stack_class.{cls.value}]")
            lines += [f"{k} = {_fmt(getattr(e, k))}" for k in diff] + [""]
    for name, vals in sorted(table.memory_types.items()):
        lines.append(f'[memory_type."{name}"]')
        lines += [f"{k} = {_fmt(v)}" for k, v in vals.items()]
        lines += [f"rows = {table.memory_type_rows.get(name, 0)}", ""]
    for name, vals in sorted(table.architectures.items()):
        lines.append(f'[architecture."{name}"]')
        lines += [f"{k} = {_fmt(v)}" for k, v in vals.items()] + [""]
    for name in FRAMEWORKS:
        p = table.frameworks.get(name)
        if p is None:
            continue
        lines += [f'[framework."{name}"]', f"memory_scale = {_fmt(p.memory_scale)}",
                  f"compute_scale = {_fmt(p.compute_scale)}",
                  f"overhead_scale = {_fmt(p.overhead_scale)}"]
        for key, (fld, unit) in ABSOLUTE_KEYS.items():
            if fld in p.absolute:
                lines.append(f"{key} = {_fmt(p.absolute[fld] / unit)}")
        if p.native_kernels:
            lines.append("native_kernels = true")
        if p.kv_per_query_head:
            lines.append("kv_per_query_head = true")
        if p.act_quant:
            lines.append("act_quant = true")
        if p.gemm_fp16_acc16:
            lines.append("gemm_fp16_acc16 = true")
        if p.quant_gemm_int8:
            lines.append("quant_gemm_int8 = true")
        lines.append(f"rows = {p.rows}")
        if p.note:
            lines.append(f"note = {_value(p.note)}")
        lines.append("")
    return "\n".join(lines)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v) if isinstance(v, int) else _fmt(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
