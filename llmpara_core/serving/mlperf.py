"""The serving simulator against MLPerf Inference v4.1 results (``presets/tables/
mlperf_serving.csv``, copied with its sources from the shared validation data).

Each row is one system x benchmark x scenario: ``instances`` replicas of a TP x PP model
instance, output tokens/s of the whole system. Predicted: one replica simulated with the row's
stack (TensorRT-LLM for NVIDIA and Dell, vLLM for AMD's ROCm runs, each at the round's release:
``stack_version.MLPERF_V41_VERSION``, ``RELEASE_ENGINE``) and precision, request
lengths from the benchmark's data set (OpenOrca, shipped as ``openorca``) scaled to the row's
mean input and output lengths (the run's outputs are the model's own, longer than the data
set's references; Mixtral's mixed set is not shipped, so OpenOrca's shape is scaled to its
means -- an assumption), times ``instances``.

* Offline: every request queued at once; tokens/s over the run. The run is as long as an
  MLPerf Offline run is for one instance: its share of the benchmark's minimum query count
  (``mlperf.conf``: ``llama2-70b.Offline.min_query_count = 24576``,
  ``mixtral-8x7b.Offline.min_query_count = 15000``) or 600 s at its rate
  (``*.Offline.min_duration = 600000`` ms), whichever is more, at most 24,576 requests (a cap
  on the simulation's cost: LoadGen repeats samples, so a real run has no such cap). (A 3,000-request run, used before, is ~10 % slower per request: its
  drain tail, with the batch emptying, is a large part of it.)
* Server: the largest Poisson rate at which p99 TTFT and p99 TPOT meet the row's limits
  (``scenarios``). The run is as long as MLPerf's minimum duration (600 s of arrivals at the
  max-load rate, at least 1,000 requests): queues near saturation only build up over a long
  run. Its figure is LoadGen's *completed* tokens/s: rate x mean output length x the run's
  length over its length plus its drain (``completed_share``; the length is the row's
  published ``min_duration_s``, else 600 s). The TensorRT-LLM Server runs stream a response
  per token, as NVIDIA's harness runs Server (``SERVER_STREAMING``); the Offline run does not.

A TP > 1 instance runs on its GPU's 8-GPU NVSwitch board, or on the system's own board where
it differs (``SYSTEM_CLUSTER``: Dell's XE9640, an HGX H100 4-GPU board of direct NVLinks, where
a TP 2 pair has 6 of each GPU's 18 links).

Nothing is fitted to these rows: every GPU is out of sample (leave-one-GPU-out = per-GPU).
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median

import numpy as np

from ..calibration.efficiency import efficiency_for
from ..errors import ConfigError
from ..units import MAX_SIZE
from ..parallel import ParallelPlan
from ..precision import precision_preset
from ..presets import PRESET_DIR, load_hardware, load_model
from .config import FRAMEWORK_DEFAULTS
from .cost import IterationCost
from .engine import simulate
from .lengths import LengthTable, named
from .report import Slo, max_rate_meeting_slo, summarize
from .stack_version import MLPERF_V41_VERSION, time_scale
from .requests import RequestSpec

DATA = PRESET_DIR / "tables" / "mlperf_serving.csv"
OFFLINE_REQUESTS = 3000         # first run; then the instance's share of a real Offline run:
# mlperf.conf <benchmark>.Offline.min_query_count (github mlcommons/inference@001712e9daf8:
# loadgen/mlperf.conf); the run also lasts at least *.Offline.min_duration = 600 s
MIN_OFFLINE_QUERIES = {"llama2-70b-99": 24576, "mixtral-8x7b": 15000}
OFFLINE_CAP = 24576             # requests per simulated instance at most (simulation cost)
SERVER_REQUESTS = 30000         # at most: a Server run lasts MLPerf's min_duration (600 s,
MIN_DURATION_S = 600.0          # mlperf.conf) of arrivals at the max-load rate, >= 1000 requests
# (the cap binds on no row: the fastest instance, Mixtral on one H100, draws ~27,000; at the
# earlier cap of 6,000 the MI300X Server runs were 1.5-4x shorter than 600 s and a queue near
# saturation had no time to build: +28.7 / +23.3 % then, +22.5 / +16.5 % at the full length)
MODELS = {"llama2-70b-99": "llama-2-70b", "mixtral-8x7b": "mixtral-8x7b"}
SINGLE = {"H100": "nvidia-h100-sxm", "H200": "nvidia-h200-sxm", "B200": "nvidia-b200",
          "MI300X": "amd-mi300x", "MI325X": "amd-mi325x"}
CLUSTER = {"H100": "8x-nvidia-h100-sxm-nvlink", "H200": "8x-nvidia-h200-sxm-nvlink",
           "MI300X": "8x-amd-mi300x-infinity-fabric"}
# Systems whose board is not the GPU's 8-GPU NVSwitch board: Dell's XE9640 holds 4 H100 SXM
# on NVIDIA's HGX H100 4-GPU board, every pair directly linked by 6 of each GPU's 18 NVLinks
# and no NVSwitch (its system file: "accelerator_interconnect": "6x 4th Gen NVLink, 900GB/s",
# 4 accelerators per node, against "NVLINK Switch" for Dell's 8-GPU XE9680; github
# mlcommons/inference_results_v4.1@a2f5d66d17e8:closed/Dell/systems/XE9640_H100_SXM_80GBx4_
# TRT.json). Its llama2-70b instances run TP 2 (``tensor_parallelism = 2`` for
# XE9640_H100_SXM_80GBX4 in closed/Dell/configs/llama2-70b/{Offline,Server}/custom.py, same
# commit), so each pair's all-reduces ride those 6 links (150 GB/s per direction) where
# NVIDIA's DGX H100 pair has all 18 through the switches. (Dell's XE8640 Mixtral rows run
# TP 1: no collectives, the board does not matter.)
SYSTEM_CLUSTER = {"XE9640_H100_SXM_80GBx4_TRT": "4x-nvidia-h100-sxm-hgx4"}
# True: the systems of SYSTEM_CLUSTER run on their own board (False: the GPU's 8-GPU board,
# the state before; ``scripts/mlperf_lengths_whatif.py --no-board``)
SYSTEM_BOARDS = True
STACKS = {"tensorrt-llm": "tensorrt-llm", "vllm": "vllm"}
# The round's vLLM release and its scheduler: AMD's v4.1 systems ran "vLLM 0.4.3+rocm614,
# PyTorch 2.3.0, ROCm 6.1.2" (github mlcommons/inference_results_v4.1@a2f5d66d17e8:
# closed/AMD/systems/1xMI300X_2xEPYC-9374F.json, "framework"), whose engine defaults to
# chunked prefill off and then schedules with Scheduler._schedule_default: prompts first, and
# "Don't schedule decodes if prefills are scheduled" (vllm-project/vllm v0.4.3,
# vllm/core/scheduler.py) -- every pass that admits a request stalls the running decodes.
# (Their GEMMs run at the CDNA3 vendor-BLAS share: calibration.efficiency.NATIVE_GEMM_FACTOR.)
RELEASE_ENGINE = {"vllm": {"mixed_batches": False, "chunked_prefill": False}}
# The rows' own engine settings (CSV columns max_batch = gpu_batch_size, max_num_tokens,
# min_duration_s, each with its engine_source in the submitter's v4.1 configs) are carried and
# validated, but the comparison runs the stack defaults and mlperf.conf's 600 s: run with them
# (engine=True) the median stayed 17.2 %, Offline 10.7 %, and Server went 21.6 -> 22.4 %
# (docs/serving-validation.md, MLPerf). The batch sizes do not bind (the KV cache admits
# fewer: ~520-640 in flight at reserve-policy admission), and the 2,400 s runs only lengthen
# the Offline reference (less drain tail), which the Server search ends at.
ENGINE_SETTINGS = False
# MLPerf's Server result is LoadGen's "Completed tokens per second" = token count / the time the
# last query finished (github mlcommons/inference@05a9cec3596d: loadgen/results.cc,
# PerformanceSummary::LogSummary, ``tps_as_completed = token_count /
# final_query_all_samples_done_time``), not the scheduled rate x mean output: the run's drain
# after its last arrival lowers it. The v4.1 logs show it (scheduled -> completed samples/s,
# mlperf_log_summary / _detail.txt): NVIDIA H100 TP2x4 75.10 -> 74.42 (-0.9 %), H200x8
# 101.25 -> 100.35 (-0.9 %), B200 39.57 -> 39.25 (-0.8 %), Mixtral H100x8 348.37 -> 348.06
# (-0.1 %), all over 2,400 s runs; AMD 8x MI300X 73.66 -> 71.74 (-2.6 %) over a 600 s run.
# True: predict the completed figure (``completed_share``).
COMPLETED_TOKENS = True
# NVIDIA's MLPerf LLM harness streams in every scenario but Offline: "Streaming is enabled by
# the generation config flag. Let's disable it for Offline scenario" -- ``config.mIsStreaming =
# genConfig["generation_config"]["streaming"] && (FLAGS_scenario != "Offline")``
# (github mlcommons/inference_results_v4.0@e81135a64c76: closed/NVIDIA/code/harness/
# harness_llm/main_llm.cc; the v4.1 LLM harness is the same ``harness_llm`` binary,
# closed/NVIDIA/code/llama2-70b-99.9/tensorrt/harness.py @a2f5d66d17e8). So in a Server run
# the TensorRT-LLM batch manager returns a response for every sequence that produced a token,
# every pass; in an Offline run only for the finished ones. TensorRT-LLM's maintainers give
# the cost as per-token host work that "is only revealed when the concurrency gets high
# enough" (NVIDIA/TensorRT-LLM PR #6332; issue #2613 "Performance of streaming requests is
# worse than non-streaming"; ``stream_interval`` exists to cut it). No source gives its size:
# a streamed response is taken to cost what the stack's per-sequence per-pass host work
# costs (``Efficiency.seq_overhead_s``, TensorRT-LLM 10.07 us, fitted on the static-batch rows
# of batched_throughput.csv, never on these), at the round's release factor, after the pass
# (``EngineConfig.stream_s_per_token``). True: the TensorRT-LLM Server rows' simulations
# (rate search and completed-tokens run) stream; the Offline run they start from does not.
# Measured (``scripts/mlperf_server_whatif.py``, docs/serving-validation.md, MLPerf): 15.0 ->
# 12.x %; 2x or 4x that size would score better or worse, and picking it on these rows would
# fit them, so it is not.
SERVER_STREAMING = True
# Systems run at another power limit than their GPU preset's TDP (the power wall of
# ``cost.TENSOR_DUTY`` moves with it).
POWER_LIMIT_W = {"H200-SXM-141GB-CTSx1_TRT": (
    1000.0, "github mlcommons/inference_results_v4.1@a2f5d66d17e8:closed/NVIDIA/systems/"
            "H200-SXM-141GB-CTSx1_TRT.json, hw_notes 'H200 TGP 1000W'")}


@dataclass(frozen=True)
class MlperfRow:
    source: str
    system: str
    gpu: str
    n_gpus: int
    tp: int
    pp: int
    instances: int
    framework: str
    benchmark: str
    scenario: str
    precision: str
    isl: float
    osl: float
    ttft_slo_ms: float | None
    tpot_slo_ms: float | None
    measured: float
    # how the row was run, from the submitter's per-system, per-scenario configs
    # (``engine_source``); None: not published for this row (the stack's defaults run)
    max_batch: int | None = None        # gpu_batch_size: in-flight requests per instance
    max_num_tokens: int | None = None   # tokens per engine pass
    min_duration_s: float | None = None  # the run's LoadGen min_duration
    engine_source: str = ""


@dataclass(frozen=True)
class MlperfComparison:
    row: MlperfRow
    predicted: float | None
    skipped: str | None = None

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.row.measured - 1


def _opt_number(r: dict, key: str, lo: float, hi: float, where: str,
                whole: bool = False) -> int | float | None:
    """Column ``key`` of row ``r`` as a whole number in [lo, hi] (``whole``) or a finite
    number in (lo, hi]; None when blank; ConfigError naming the row and column otherwise."""
    v = (r.get(key) or "").strip()
    if not v:
        return None
    try:
        x = int(v) if whole else float(v)
    except ValueError:
        raise ConfigError(f"{where}: {key} must be a {'whole number' if whole else 'number'}, "
                          f"got {v!r}") from None
    if whole and not lo <= x <= hi:
        raise ConfigError(f"{where}: {key} must be in [{lo}, {hi}], got {x}")
    if not whole and not (math.isfinite(x) and lo < x <= hi):
        raise ConfigError(f"{where}: {key} must be in ({lo:g}, {hi:g}], got {v}")
    return x


def load_rows(path: str | Path = DATA) -> tuple[MlperfRow, ...]:
    """The rows of ``path``; the engine columns (``max_batch``, ``max_num_tokens``,
    ``min_duration_s``, ``engine_source``) are optional, and a bad value raises ConfigError
    naming the row and column."""
    def f(v):
        return float(v) if v not in ("", None) else None
    out = []
    with open(path, newline="") as fh:
        for i, r in enumerate(csv.DictReader(fh), start=2):
            where = f"{Path(path).name} line {i}"
            b = _opt_number(r, "max_batch", 1, MAX_SIZE, where, whole=True)
            t = _opt_number(r, "max_num_tokens", 1, MAX_SIZE, where, whole=True)
            if b is not None and t is not None and b > t:
                raise ConfigError(f"{where}: max_batch {b} exceeds max_num_tokens {t}")
            d = _opt_number(r, "min_duration_s", 0.0, 86400.0, where)
            src = (r.get("engine_source") or "").strip()
            if (b, t, d) != (None, None, None) and not src:
                raise ConfigError(f"{where}: engine settings need an engine_source")
            out.append(MlperfRow(
                r["source"], r["system"], r["gpu"], int(r["n_gpus"]), int(r["tp"]),
                int(r["pp"]), int(r["instances"]), r["framework"], r["benchmark"],
                r["scenario"], r["precision"], float(r["isl"]), float(r["osl"]),
                f(r["ttft_slo_ms"]), f(r["tpot_slo_ms"]), float(r["measured_tok_s"]),
                b, t, d, src))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def lengths_for(isl: float, osl: float) -> LengthTable:
    """OpenOrca's requests with inputs and outputs scaled to these means (rounded, >= 1)."""
    base = named("openorca")
    i = np.maximum(1, np.rint(base.isl * isl / base.isl.mean())).astype(np.int64)
    o = np.maximum(1, np.rint(base.osl * osl / base.osl.mean())).astype(np.int64)
    return LengthTable(f"openorca scaled to {isl:g}/{osl:g}", base.source, i, o)


def _setup(row: MlperfRow, releases: bool = True, engine: bool = ENGINE_SETTINGS):
    model = MODELS.get(row.benchmark)
    dev = SINGLE.get(row.gpu) if row.tp * row.pp == 1 else (
        SYSTEM_BOARDS and SYSTEM_CLUSTER.get(row.system) or CLUSTER.get(row.gpu))
    stack = STACKS.get(row.framework)
    if model is None or dev is None or stack is None:
        return None
    hw = load_hardware(dev)
    prec = "NVFP4" if row.precision == "NVFP4" else row.precision
    limit = POWER_LIMIT_W.get(row.system)
    m = load_model(model)
    # TensorRT-LLM rows run the release of their round (stack_version.MLPERF_V41_VERSION)
    scale = time_scale(MLPERF_V41_VERSION, bool(m.moe)) \
        if stack == "tensorrt-llm" and releases else 1.0
    cost = IterationCost(m, hw, precision_preset(prec),
                         ParallelPlan(tp=row.tp, pp=row.pp), efficiency_for(hw, stack),
                         power_limit_w=limit[0] if limit else None, time_scale=scale)
    cfg = FRAMEWORK_DEFAULTS[stack].config
    if releases and stack in RELEASE_ENGINE:
        cfg = replace(cfg, **RELEASE_ENGINE[stack])
    if engine:
        # the submitter's own settings for this system and scenario (``engine_source``)
        tok = row.max_num_tokens or cfg.max_num_tokens
        cfg = replace(cfg, max_num_tokens=max(tok, row.max_batch or 0),
                      max_batch=row.max_batch or min(cfg.max_batch, tok))
    return cost, cfg


@functools.lru_cache(maxsize=64)
def predict(row: MlperfRow, offline_requests: int = OFFLINE_REQUESTS,
            server_requests: int = SERVER_REQUESTS, releases: bool = True,
            engine: bool = ENGINE_SETTINGS) -> float | None:
    """Predicted output tokens/s of the whole system of ``row`` (None: no preset);
    ``releases``: rows at their round's stack release -- TensorRT-LLM's release profile, vLLM
    0.4.3's scheduler (``RELEASE_ENGINE``) -- (False: pooled profile, today's scheduler)."""
    s = _setup(row, releases, engine)
    if s is None:
        return None
    cost, cfg = s
    # the run's LoadGen min_duration where its config gives one, else mlperf.conf's 600 s
    min_s = (row.min_duration_s if engine else None) or MIN_DURATION_S
    table = lengths_for(row.isl, row.osl)
    res = simulate(cost, cfg, RequestSpec(table=table, requests=offline_requests))
    if offline_requests == OFFLINE_REQUESTS:
        # the instance's share of an MLPerf Offline run: the larger of its share of the
        # minimum query count and MIN_DURATION_S at its rate (capped at the data set's size);
        # a short run would be dominated by its drain tail, a real one is not
        share = max(MIN_OFFLINE_QUERIES.get(row.benchmark, 24576) / row.instances,
                    len(res.osl) / res.makespan_s * min_s)
        n_off = int(min(OFFLINE_CAP, share))
        if n_off > offline_requests:
            res = simulate(cost, cfg, RequestSpec(table=table, requests=n_off))
    off_tok = summarize(res, cost).output_tokens_per_s
    if row.scenario == "Offline":
        return off_tok * row.instances
    sat = len(res.osl) / res.makespan_s
    slo = Slo(row.ttft_slo_ms / 1000.0, row.tpot_slo_ms / 1000.0, 99.0)
    n = int(min(server_requests, max(1000, sat * min_s)))
    spec = RequestSpec(table=table, requests=n)
    cfg = replace(cfg, stream_s_per_token=server_stream_s(row, cost))
    found = max_rate_meeting_slo(cost, cfg, spec, slo, sat)
    scheduled = found.max_rate * float(table.osl.mean()) * row.instances
    if not COMPLETED_TOKENS or found.max_rate <= 0:
        return scheduled
    # LoadGen's Server figure is *completed* tokens/s: every token over the time the last
    # query finished, so the drain after the last arrival counts (``COMPLETED_TOKENS``)
    res = simulate(cost, cfg, spec.with_rate(found.max_rate))
    return scheduled * completed_share(res, row)


def server_stream_s(row: MlperfRow, cost: IterationCost) -> float:
    """Host seconds per streamed token of ``row``'s Server runs (``SERVER_STREAMING``): the
    stack's per-sequence per-pass host cost at the run's release factor for a TensorRT-LLM
    Server row, else 0 (Offline rows; AMD's vLLM harness: no source read on its streaming)."""
    from .streaming import default_streaming, stream_s_per_token
    if not SERVER_STREAMING or not default_streaming(row.scenario.lower(), row.framework):
        return 0.0
    return stream_s_per_token(cost.hardware, cost.time_scale)


def completed_share(res, row: MlperfRow) -> float:
    """LoadGen's completed over scheduled rate of a Server run whose arrivals last the row's
    ``min_duration_s`` (its submitter's, published for NVIDIA's and Dell's rows; else
    ``mlperf.conf``'s 600 s): D / (D + drain), the drain being the simulated time from the last
    arrival to the last completion at the found rate."""
    drain = max(0.0, float(res.finish_s.max() - res.arrival_s.max()))
    d = row.min_duration_s or MIN_DURATION_S
    return d / (d + drain)


def compare(rows=None, offline_requests: int = OFFLINE_REQUESTS,
            server_requests: int = SERVER_REQUESTS, releases: bool = True,
            engine: bool = ENGINE_SETTINGS) -> tuple[MlperfComparison, ...]:
    out = []
    for r in rows if rows is not None else load_rows():
        try:
            p = predict(r, offline_requests, server_requests, releases, engine)
        except Exception as e:          # noqa: BLE001 - a row that cannot run is reported
            out.append(MlperfComparison(r, None, str(e).splitlines()[0]))
            continue
        out.append(MlperfComparison(r, p, None if p is not None else
                                    "no preset for this GPU, benchmark or framework"))
    return tuple(out)


def error_summary(comps) -> dict:
    """Median |error| and signed median overall, per scenario and per GPU."""
    ok = [c for c in comps if c.error is not None]

    def block(cs):
        e = [c.error for c in cs]
        return {"rows": len(e), "median_abs_error": median(abs(x) for x in e) if e else None,
                "median_signed_error": median(e) if e else None}
    by_s, by_g = {}, {}
    for c in ok:
        by_s.setdefault(c.row.scenario, []).append(c)
        by_g.setdefault(c.row.gpu, []).append(c)
    return {**block(ok), "skipped": len(comps) - len(ok),
            "per_scenario": {k: block(v) for k, v in sorted(by_s.items())},
            "per_gpu": {k: block(v) for k, v in sorted(by_g.items())}}
