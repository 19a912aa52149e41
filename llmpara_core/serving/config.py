"""Engine settings: scheduler limits, KV-cache paging and policy, and the documented defaults
of inference stacks (with where each default comes from)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError, require_float, require_int
from ..units import BYTES_PER_GIB, MAX_SIZE

POLICIES = ("on-demand", "reserve")
# A runtime reserve above 1 TB per device is a typo, not a stack.
MAX_RUNTIME_RESERVE_BYTES = 1e12
# TensorRT-LLM's runtime reserve per device [GiB] (``EngineConfig.runtime_reserve_bytes``),
# fitted on the max-load rows with the power wall's duty and the release factors refitted on
# top of each grid value (``serving.reserve_fit``, ``scripts/fit_runtime_reserve.py``; grid
# 0-5 GiB; refitted on all 1,794 rows on the current cost, release ranges 0.11 and 0.12 split):
# in sample 9.1 % at 0, 8.6 / 8.4 / 8.0 % at 1 / 2 / 3, 7.8 % at 4, 8.4 % at 5 GiB;
# leave-one-GPU-out (reserve, duty and factors refitted without each GPU; the folds pick 3 / 4
# / 3 / 4 GiB for A100 PCIe / A100 SXM / H100 / L40S) 8.8 %, signed -1.1 %. What it stands
# for, from one published trtllm-bench log (H100, TensorRT-LLM 0.12, Llama-2-7B FP8, max batch
# 4096: the example executor log of the trtllm-bench guide, github NVIDIA/TensorRT-LLM
# benchmarks/Suite.md at "TensorRT-LLM Version: 0.12.0.dev2024073000", found by exact-string
# search; the later version @8809c33e replaced that log): of CUDA's total, 79.10 GiB
# (nvidia-smi's 81,559 MiB = 79.65 GiB: the driver keeps 0.55), 63.62 GiB is "available" when
# the KV cache is sized; the rest is the weights (6,214 MiB) and the engine's activations
# (928.77 MiB), which the model counts itself, "1.14 GB GPU memory for runtime buffers",
# "4.35 GB GPU memory for decoder" (sampling buffers, growing with max batch x vocabulary) and
# 3.0-3.4 GiB that no line names (CUDA context, library workspaces; the range: the log's "GB"
# read as GiB or as 1e9 B). The 4 GiB fitted sits below those buffers at max batch 4096 and
# above the unnamed part alone. Not keyed by device or model; the rows it moves are those whose
# weights nearly fill the device.
TRTLLM_RUNTIME_RESERVE_GIB = 4.0
# Scheduler kinds (``EngineConfig.mixed_batches``): "mixed" = decode tokens and prompt chunks
# share a pass (in-flight batching: TensorRT-LLM, vLLM V1, SGLang); "prefill-first" = vLLM
# V0's default scheduler (chunked prefill off): a pass that runs prompts carries no decodes.
SCHEDULERS = ("mixed", "prefill-first")


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler and KV-cache settings of one engine replica."""
    max_batch: int = 256
    max_num_tokens: int = 8192
    chunked_prefill: bool = True
    block_size: int = 16
    kv_memory_fraction: float = 0.9
    policy: str = "on-demand"
    prefix_hit_rate: float = 0.0
    kv_capacity_tokens: int | None = None     # override of the memory-derived capacity
    # Device memory [B] the stack holds outside the weights, the pass's activations and the KV
    # cache (CUDA context, library workspaces, runtime and sampling buffers), per device; the
    # KV cache gets ``kv_memory_fraction`` of what is left after it.
    runtime_reserve_bytes: float = 0.0
    # What ``kv_memory_fraction`` is a share of. False (TensorRT-LLM's
    # ``free_gpu_memory_fraction``): of the memory left after weights, activations and the
    # reserve. True (vLLM's ``gpu_memory_utilization``): of the device's total memory, which
    # weights, activations, the reserve and the KV cache share, so the KV cache gets that share
    # of the total less everything else ("0.8 means 80% of the GPU's total memory ...
    # requested_memory = total_gpu_memory x gpu_memory_utilization", docs.vllm.ai/projects/
    # vllm-omni/en/latest/configuration/gpu_memory_utilization/; "It will use 90% of the total
    # GPU memory by default to reserve space for kv cache after loading the model",
    # huggingface.co/neuralmagic/Mistral-7B-Instruct-v0.3-GPTQ-4bit/discussions/1).
    kv_fraction_of_total: bool = False
    # False: vLLM V0's default scheduler (chunked prefill off): an iteration that admits or
    # prefills prompts carries no decode tokens -- the running requests wait a pass
    # (github vllm-project/vllm v0.4.3, vllm/core/scheduler.py, Scheduler._schedule_default:
    # "Don't schedule decodes if prefills are scheduled.")
    mixed_batches: bool = True
    # False: the engine keeps and reads every cached token of a sliding-window model (no
    # rolling buffer): its attention and KV reads run to the full context, as if the model had
    # no window. A property of how a stack is run, not of the model (``FRAMEWORK_DEFAULTS``).
    sliding_window: bool = True
    # Host time [s] per streamed token: an engine that streams returns a response for every
    # sequence that produced a token in a pass, as the pass ends, and its step loop starts
    # the next pass after that (0: no streaming -- responses only as requests finish, as an
    # offline or max-load run returns them). Used by the MLPerf Server rows
    # (``mlperf.SERVER_STREAMING``); no stack default streams. (The serving energy estimate
    # prices this time as kernel time, at busy power: an overestimate of a streaming run's J.)
    stream_s_per_token: float = 0.0

    def __post_init__(self):
        require_int("max batch", self.max_batch, 1, MAX_SIZE)
        require_int("max num tokens", self.max_num_tokens, 1, MAX_SIZE)
        require_int("block size", self.block_size, 1, 1 << 20)
        require_float("KV memory fraction", self.kv_memory_fraction, lo=0, hi=1, lo_open=True)
        require_float("prefix hit rate", self.prefix_hit_rate, lo=0, hi=1)
        require_float("runtime reserve [B]", self.runtime_reserve_bytes, lo=0,
                      hi=MAX_RUNTIME_RESERVE_BYTES)
        require_float("stream host time per token", self.stream_s_per_token, lo=0, hi=1)
        if self.prefix_hit_rate >= 1:
            raise ConfigError("prefix hit rate must be below 1 (the last prompt token is "
                              "always computed)")
        if self.policy not in POLICIES:
            raise ConfigError(f"KV policy must be one of {', '.join(POLICIES)}, got "
                              f"{self.policy!r}")
        if self.kv_capacity_tokens is not None:
            require_int("KV capacity tokens", self.kv_capacity_tokens, 1, MAX_SIZE * 1000)
        if not isinstance(self.chunked_prefill, bool):
            raise ConfigError("chunked prefill must be true or false")
        if not isinstance(self.mixed_batches, bool):
            raise ConfigError("mixed batches must be true or false")
        if not isinstance(self.kv_fraction_of_total, bool):
            raise ConfigError("KV fraction of total must be true or false")
        if not isinstance(self.sliding_window, bool):
            raise ConfigError("sliding window must be true or false")
        if self.max_batch > self.max_num_tokens:
            raise ConfigError(f"max batch {self.max_batch} exceeds max-num-tokens "
                              f"{self.max_num_tokens}: a full batch's decode tokens would not "
                              f"fit the token budget")


@dataclass(frozen=True)
class FrameworkDefaults:
    config: EngineConfig
    source: str


FRAMEWORK_DEFAULTS: dict[str, FrameworkDefaults] = {
    "tensorrt-llm": FrameworkDefaults(
        EngineConfig(max_batch=2048, max_num_tokens=8192, chunked_prefill=True, block_size=64,
                     kv_memory_fraction=0.9, policy="reserve", sliding_window=False,
                     runtime_reserve_bytes=TRTLLM_RUNTIME_RESERVE_GIB * BYTES_PER_GIB),
        "TensorRT-LLM: trtllm-build defaults max_batch_size 2048, max_num_tokens 8192 "
        "(trtllm-build reference, https://nvidia.github.io/TensorRT-LLM/commands/"
        "trtllm-build.html; values as remembered for v0.11+, check your release); KV cache "
        "free_gpu_memory_fraction 0.9 (https://nvidia.github.io/TensorRT-LLM/examples/"
        "kvcacheconfig.html); capacity scheduler GUARANTEED_NO_EVICT by default "
        "(performance-tuning-guide/useful-runtime-flags); tokens_per_block 64 (as remembered, "
        "not re-checked); chunked context on, as trtllm-bench runs it (its published max-load "
        "rows include 20000-token prompts, longer than any max_num_tokens it uses); no sliding "
        "window: TensorRT-LLM applies one only when the run sets max_attention_window "
        "(examples/llama/README.md, 'Mistral v0.1': '--max_attention_window_size' 'regulates "
        "both sliding window attention in the context phase and rolling buffer cache in the "
        "generation phase', passed to run.py by hand; github NVIDIA/TensorRT-LLM@3c44cb97), and "
        "trtllm-bench's executor sets only free_gpu_memory_fraction in its KvCacheConfig "
        "(tensorrt_llm/bench/benchmark/dataclasses.py, ExecutorSettingsConfig."
        "get_kvcache_config; github NVIDIA/TensorRT-LLM@04a2cacb), so each sequence keeps and "
        "attends to all its tokens (executor.h KvCacheConfig: only an explicit max attention "
        "window caps them)"),
    "vllm": FrameworkDefaults(
        EngineConfig(max_batch=256, max_num_tokens=8192, chunked_prefill=True, block_size=16,
                     kv_memory_fraction=0.9, policy="on-demand", kv_fraction_of_total=True),
        "vLLM: max_num_seqs 256, block_size 16, gpu_memory_utilization 0.9 (a share of the "
        "device's total memory, which weights and activations share with the KV cache), "
        "chunked prefill "
        "with max_num_batched_tokens 8192 (offline LLM engine, V1), preemption by recompute "
        "(vLLM engine-argument docs; as remembered, check your release)"),
}
GENERIC_DEFAULTS = FrameworkDefaults(
    EngineConfig(), "generic in-flight batching engine (vLLM-like defaults: 256 running "
                    "requests, 8192-token budget, chunked prefill, 16-token blocks)")


def framework_defaults(framework: str | None) -> FrameworkDefaults:
    """Scheduler defaults of a framework profile name (None or unknown: generic)."""
    return FRAMEWORK_DEFAULTS.get(framework or "", GENERIC_DEFAULTS)


def engine_config(framework: str | None, **overrides) -> tuple[EngineConfig, str]:
    """The framework's scheduler defaults with the given settings on top (None = keep the
    default); returns (config, where the defaults come from)."""
    d = framework_defaults(framework)
    return replace(d.config, **{k: v for k, v in overrides.items() if v is not None}), d.source
