"""Predictions against published measurements: each row of a measurements CSV (the columns of
``presets/tables/measurements.csv``) is mapped to a scenario, predicted ideal and estimated,
and compared with the measured value.

Mapping rules (each assumption travels with the row):

* model and hardware: a preset name or alias, else ``presets/tables/measurement_mapping.toml``;
* precision: ``weight_bits`` for every weight tensor (file-size bits, so the format's scales are
  included), 16-bit activations and KV cache, fp16 compute; formats mixing bit widths (MXFP4
  experts) come from the mapping table;
* workload: batch, prompt = ``context_or_prompt_len``, generated = ``gen_len``; llama-bench tgN
  is N tokens from an empty cache (prompt 0), ppN one N-token prompt; decode rows without
  lengths assume tg128;
* metrics: ``decode_tok_s`` = 1 / mean TPOT of one sequence, ``prefill_tok_s`` = prompt / TTFT,
  ``ttft_ms`` = TTFT; ``throughput_tok_s`` = batch / TPOT (decode throughput at a running
  batch), ``output_tok_s`` = batch x generated tokens / (TTFT + generation) (a static batch);
* devices: ``layer-split`` = pipeline stages (PP = devices), ``tensor`` = TP = devices, over the
  link of ``[link_for]`` (``parallel.shard_analyze``).

Rows that cannot be mapped are returned as :class:`Skipped` with the reason, never dropped.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import functools
import io
import math
import re
from dataclasses import dataclass, replace

from ..analysis import analyze
from .efficiency import GENERIC, EfficiencyTable, default_table, framework_of_label
from .stacks import CLASS_DEFAULT_STACKS
from ..budget import TimeBudgetExceeded, check_time_budget
from ..errors import ConfigError, LLMParaError, PresetNotFoundError
from ..hardware import Hardware, HardwareClass, HostCpu, Interconnect, LinkKind, Topology
from ..limits import MAX_CSV_FIELD_CHARS, bound
from ..model import FFNKind, Model
from ..precision import DType, Precision
from ..presets import PRESET_DIR, find_preset, load_hardware, load_model, load_table
from ..units import BYTES_PER_GB, S_PER_MS, S_PER_US
from ..workload import Workload

MEASUREMENTS_PATH = PRESET_DIR / "tables" / "measurements.csv"
REQUIRED = ("hardware", "model", "metric", "value")
OPTIONAL = ("row_id", "hardware_class", "num_devices", "parallelism", "params_b", "quant",
            "weight_bits", "batch", "context_or_prompt_len", "gen_len", "framework", "source",
            "notes")
METRICS = ("decode_tok_s", "prefill_tok_s", "ttft_ms", "throughput_tok_s", "output_tok_s")
BATCHED_PATH = PRESET_DIR / "tables" / "batched_measurements.csv"
# Regimes of the error summary: batch-1 decode, batched decode (running batch > 1, or a
# static batch's generated tokens over the whole run), prefill (prompt tokens/s, TTFT).
REGIMES = ("batch-1", "batched", "prefill")
MAX_CSV_BYTES = 5_000_000
MAX_ROWS = 20_000
# A measured value (tokens/s or ms) outside these is a typo or an attack (1e-320 would make
# the prediction/measurement ratio infinite).
MIN_VALUE, MAX_VALUE = 1e-6, 1e12
ASSUMED_GEN_LEN = 128


@dataclass(frozen=True)
class Measurement:
    """One published measurement (the CSV's columns, parsed; None = not stated)."""
    row_id: str
    hardware: str
    model: str
    metric: str
    value: float
    framework: str = ""
    hardware_class: str = ""
    num_devices: int | None = 1
    parallelism: str = "single"
    quant: str = ""
    weight_bits: float | None = None
    batch: int = 1
    context_or_prompt_len: int | None = None
    gen_len: int | None = None
    source: str = ""
    notes: str = ""


@dataclass(frozen=True)
class Skipped:
    row_id: str
    hardware: str
    model: str
    metric: str
    reason: str


@dataclass(frozen=True)
class Mapped:
    """A measurement and the scenario that reproduces it."""
    measurement: Measurement
    model: Model
    hardware: Hardware                   # one device (with the link set for multi-device rows)
    precision: Precision
    workload: Workload
    tp: int = 1
    pp: int = 1
    framework: str | None = None         # profile name, None = no profile for this stack
    assumptions: tuple[str, ...] = ()

    @property
    def devices(self) -> int:
        return self.tp * self.pp


# ---- reading --------------------------------------------------------------------------------

def read_measurements(text: str | bytes | None = None) -> tuple[list[Measurement], list[Skipped]]:
    """Parse a measurements CSV (default: the shipped one). File-level problems raise
    ConfigError; a row with a bad cell becomes a Skipped row naming the cell."""
    if text is None:
        text = MEASUREMENTS_PATH.read_bytes()
    if isinstance(text, bytes):
        if len(text) > MAX_CSV_BYTES:
            raise ConfigError(f"measurements file too large ({len(text)} bytes; limit "
                              f"{MAX_CSV_BYTES})")
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError("measurements file is not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ConfigError(f"measurements CSV lacks column(s) {', '.join(missing)} (needs "
                          f"{', '.join(REQUIRED)}; optional: {', '.join(OPTIONAL)})")
    reader.fieldnames = header
    rows, skipped = [], []
    for i, raw in enumerate(_rows(reader)):
        if i >= MAX_ROWS:
            raise ConfigError(f"measurements CSV has more than {MAX_ROWS} rows")
        cells = {k: (v or "").strip() for k, v in raw.items() if k is not None}
        if any(len(v) > MAX_CSV_FIELD_CHARS for v in cells.values()):
            skipped.append(Skipped(f"row{i + 1}", "", "", "", f"a cell is longer than "
                                   f"{MAX_CSV_FIELD_CHARS:,} characters"))
            continue
        rid = cells.get("row_id") or f"row{i + 1}"
        try:
            rows.append(_parse_row(rid, cells))
        except ConfigError as e:
            skipped.append(Skipped(rid, cells.get("hardware", ""), cells.get("model", ""),
                                   cells.get("metric", ""), str(e)))
    if not rows and not skipped:
        raise ConfigError("measurements CSV has no rows")
    return rows, skipped


def _rows(reader: csv.DictReader):
    """The reader's rows; a malformed file (e.g. a cell over the csv module's field limit)
    is a ConfigError naming the line."""
    try:
        yield from reader
    except csv.Error as e:
        raise ConfigError(f"measurements CSV near line {reader.line_num + 1}: {e}") from None


def _num(cells: dict, key: str, integer: bool = False, lo: float = 0.0, hi: float = MAX_VALUE):
    s = cells.get(key, "")
    if s == "" or s.lower() in ("nan", "none", "na", "n/a", "-"):
        return None
    try:
        v = float(s)
    except ValueError:
        raise ConfigError(f"{key} is not a number: {s[:40]!r}") from None
    if not math.isfinite(v) or v < lo or v > hi:
        raise ConfigError(f"{key} must be a number in [{lo:g}, {hi:g}], got {s[:40]}")
    if integer:
        if not v.is_integer():
            raise ConfigError(f"{key} must be a whole number, got {s[:40]}")
        return int(v)
    return v


def _parse_row(rid: str, c: dict) -> Measurement:
    metric = c.get("metric", "")
    if metric not in METRICS:
        raise ConfigError(f"metric {metric[:40]!r} is not one of {', '.join(METRICS)}")
    value = _num(c, "value", lo=MIN_VALUE)
    if value is None:
        raise ConfigError("value must be given")
    if not c.get("hardware") or not c.get("model"):
        raise ConfigError("hardware and model must be given")
    batch = _num(c, "batch", integer=True, lo=1, hi=bound("batch").hi) or 1
    # no num_devices column = one device; an empty cell = not stated
    devices = (_num(c, "num_devices", integer=True, lo=1, hi=bound("devices").hi)
               if "num_devices" in c else 1)
    tokens_hi = bound("prompt_len").hi
    return Measurement(
        rid, c["hardware"], c["model"], metric, value, c.get("framework", ""),
        c.get("hardware_class", ""), devices, c.get("parallelism", "") or "single",
        c.get("quant", ""), _num(c, "weight_bits"), batch,
        _num(c, "context_or_prompt_len", integer=True, hi=tokens_hi),
        _num(c, "gen_len", integer=True, hi=tokens_hi),
        c.get("source", ""), c.get("notes", ""))


# ---- mapping --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def mapping_table() -> dict:
    return load_table("measurement_mapping")


def _lookup(kind: str, name: str) -> tuple[str, tuple[str, ...]]:
    entry = mapping_table().get("hardware" if kind == "hardware" else "model", {}).get(name)
    if isinstance(entry, dict) and "preset" in entry:
        return str(entry["preset"]), tuple([str(entry["assumption"])] if "assumption" in entry
                                           else [])
    return find_preset(kind, name).slug, ()


def _precision(m: Measurement) -> tuple[Precision, tuple[str, ...]]:
    q = mapping_table().get("quant", {}).get(m.quant)
    if isinstance(q, dict):
        other = float(q["other_bits"])
        return (Precision(other, float(q["ffn_bits"]), other, 16.0, float(q.get("kv_bits", 16.0)),
                          DType(q.get("compute", "fp16")), name=m.quant[:40]),
                (str(q.get("assumption", "")),))
    if m.weight_bits is None:
        raise ConfigError(f"bits per weight not stated for format {m.quant or '(none)'!r}")
    if not 0 < m.weight_bits <= 32:
        raise ConfigError(f"weight_bits {m.weight_bits:g} outside (0, 32]")
    w = m.weight_bits
    return Precision(w, w, w, 16.0, 16.0, DType.FP16, name=m.quant[:40] or f"{w:g}-bit"), ()


def _workload(m: Measurement) -> tuple[Workload, tuple[str, ...]]:
    p, g = m.context_or_prompt_len, m.gen_len
    if m.metric == "decode_tok_s":
        notes = []
        if p is None:
            p = 0
            notes.append("prompt length not stated: an empty cache assumed")
        if g is None:
            g = ASSUMED_GEN_LEN
            notes.append(f"generation length not stated: {ASSUMED_GEN_LEN} tokens assumed")
        if g < (1 if p == 0 else 2):
            raise ConfigError(f"a decode row needs generated tokens (gen_len = {g})")
        return Workload(m.batch, p, g), tuple(notes)
    if not p:
        raise ConfigError(f"{m.metric} needs the prompt length (context_or_prompt_len)")
    if m.metric in ("throughput_tok_s", "output_tok_s"):
        if not g or g < 2:
            raise ConfigError(f"{m.metric} needs the generated length (gen_len >= 2)")
        return Workload(m.batch, p, g), ()
    return Workload(m.batch, p, 1 if m.metric == "ttft_ms" else 0), ()


def _devices(m: Measurement, hw: Hardware, framework: str | None
             ) -> tuple[Hardware, int, int, tuple[str, ...]]:
    n = m.num_devices
    if n is None:
        raise ConfigError("number of devices not stated")
    if n == 1:
        return hw, 1, 1, ()
    par = m.parallelism.lower()
    links = mapping_table().get("link_for", {})
    name = "pcie4" if "no nvlink" in m.notes.lower() else links.get(hw.slug, links["default"])
    link = mapping_table()["link"][name]
    kind = LinkKind(link["link"]) if "link" in link else None
    # the host CPU of the platform a device's multi-GPU rows ran on, where a source states it
    # (a PCIe board's NCCL P2P level depends on it: parallel.collectives.nccl_ring_uses_shm)
    host = mapping_table().get("host_for", {}).get(hw.slug) if kind is LinkKind.PCIE else None
    ic = Interconnect(float(link["bandwidth_GBps"]) * BYTES_PER_GB,
                      float(link["latency_us"]) * S_PER_US, Topology(link["topology"]), n,
                      link=kind, host_cpu=HostCpu(host) if host else None)
    hw = replace(hw, interconnect=ic)
    note = f"{n} devices over {name}"
    if "tensor" in par:
        return hw, n, 1, (f"{note}, tensor parallel",)
    if "layer" in par or "pipeline" in par:
        return hw, 1, n, (f"{note}, layer split (one sequence: decode passes the stages in turn, "
                           "a prompt's micro-batches pipeline over them)",)
    raise ConfigError(f"parallelism {m.parallelism!r} across {n} devices is not modelled")


def map_measurement(m: Measurement) -> Mapped | Skipped:
    """The scenario of one measurement, or why there is none."""
    try:
        hw_slug, a_hw = _lookup("hardware", m.hardware)
        model_slug, a_model = _lookup("models", m.model)
        hw, model = load_hardware(hw_slug), load_model(model_slug)
        precision, a_prec = _precision(m)
        workload, a_wl = _workload(m)
        framework = framework_of_label(m.framework)
        hw, tp, pp, a_dev = _devices(m, hw, framework)
    except PresetNotFoundError as e:
        return Skipped(m.row_id, m.hardware, m.model, m.metric,
                       str(e).split(" (`llmpara")[0].replace("unknown ", "no preset for ", 1))
    except TimeBudgetExceeded:
        raise
    except (LLMParaError, KeyError, ValueError) as e:
        return Skipped(m.row_id, m.hardware, m.model, m.metric, str(e).splitlines()[0])
    return Mapped(m, model, hw, precision, workload, tp, pp, framework,
                  a_hw + a_model + a_prec + a_wl + a_dev)




def read_shipped() -> tuple[list[Measurement], list[Skipped]]:
    """The shipped batch-1 measurements and the batched-regime rows
    (``batched_measurements.csv``, built by scripts/build_batched_measurements.py)."""
    rows, skipped = read_measurements()
    if BATCHED_PATH.is_file():
        more, more_skipped = read_measurements(BATCHED_PATH.read_bytes())
        rows, skipped = rows + more, skipped + more_skipped
    return rows, skipped


def map_all(rows, skipped=()) -> tuple[list[Mapped], list[Skipped]]:
    mapped, skips = [], list(skipped)
    for m in rows:
        r = map_measurement(m)
        (mapped if isinstance(r, Mapped) else skips).append(r)
    return mapped, skips


def efficiency_class(row: Mapped, table: EfficiencyTable | None = None) -> HardwareClass:
    """The hardware class of the row's device (its fallback efficiency)."""
    return row.hardware.hw_class


def regime(row: Mapped) -> str:
    """batch-1 (one sequence decoding), batched (decode at a batch > 1, or a static batch's
    whole run) or prefill (prompt tokens/s, TTFT)."""
    m = row.measurement
    if m.metric in ("prefill_tok_s", "ttft_ms"):
        return "prefill"
    return "batch-1" if m.metric == "decode_tok_s" and m.batch == 1 else "batched"


# ---- prediction -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Prediction:
    """Measured value and predictions in the metric's unit (tokens/s or ms). ``estimated``
    uses the row's stack (``row_stack``), ``generic`` the class values;
    errors are predicted / measured - 1."""
    row: Mapped
    measured: float
    ideal: float
    generic: float
    estimated: float
    efficiency_class: HardwareClass
    notes: tuple[str, ...] = ()

    @property
    def error(self) -> float:
        return self.estimated / self.measured - 1.0

    @property
    def generic_error(self) -> float:
        return self.generic / self.measured - 1.0

    @property
    def ideal_error(self) -> float:
        return self.ideal / self.measured - 1.0


def metric_value(metric: str, timing, workload: Workload | None = None) -> float:
    """The measured quantity from an ``analysis.Timing`` (``output_tok_s`` needs the
    ``workload``: batch x generated tokens / end-to-end latency)."""
    if metric == "decode_tok_s":
        return timing.decode_tokens_per_s
    if metric == "prefill_tok_s":
        return timing.prefill_tokens_per_s
    if metric == "throughput_tok_s":
        return timing.throughput_tokens_per_s
    if metric == "output_tok_s":
        return workload.batch * workload.gen_len / timing.e2e_latency_s
    return timing.ttft_s / S_PER_MS


# The llama.cpp build behind a row, where its source says: a stack-version property, not a
# per-row value. Sources whose rows ran a CUDA build from before June 2024, when a prompt's
# matmuls with quantised weights (a batch above 32 rows) dequantised the weights to F16 and
# called FP16 cuBLAS (``roofline.DEQUANT_MIN_TOKENS`` cites the code and PR #8075, which made
# MMQ on int8 tensor cores the default on 2024-06-23). XiongjieDai/GPU-Benchmarks-on-LLM-
# Inference: its LLaMA 3 notebooks ran llama-bench builds 2836-2837 of May 2024 (LLaMA 3/
# Professional GPUs/A100_PCIe_4_v3.ipynb prints "build: 8c570c94 (2836)" under each table,
# "GGML_CUDA_FORCE_MMQ: no" and "CUDA_USE_TENSOR_CORES: yes", its nvidia-smi header 2024-05-10). Rows of other
# sources (the 2025 scoreboards, discussions #15013 / #10879, whose notes give 2025 builds) ran
# MMQ, as the shipped llama.cpp profile does.
# A what-if, not the shipped fit (CUBLAS_PROMPT_SOURCES is empty: every llama.cpp CUDA prompt
# row is priced as MMQ at the fitted quant_compute). `python scripts/fit_efficiency.py
# --cublas-builds --out /tmp/eff.toml` (and scripts/prefill_class_loo.py --cublas-builds) turn
# it on for CUBLAS_PROMPT_BUILDS. Measured for issue 27 with the whole fit and
# leave-one-device-out rerun: prefill held out 9.0 -> 8.9 %, consumer GPUs 13.5 -> 10.8 %
# (their Q4_K_M / F16 pairs within 4.9 % with nothing fitted for them), but datacenter GPUs
# 25.0 -> 27.9 % (the A100s' llama.cpp rows a little worse: the pass at the peak bandwidth gives
# their Q4_K_M / F16 ratio 0.87-0.90 where they measured 0.77-0.81; TensorRT-LLM's three TTFT
# rows 9.7 -> 27.9 %, its batched fit in the A100 SXM fold moving to another minimum: batched
# held out 10.4 -> 10.5 %, that fold 12.9 -> 15.3 %), batch 1 held out 5.4 % unchanged
# (consumer GPUs 4.1 -> 4.3 %). Timed at the fitted weight-streaming fraction instead
# (roofline.dequant_factor), the A100 rows' ratio comes out right (0.80-0.84) and the GPU prompt
# rows held out (classes refitted only, scripts/prefill_class_loo.py at commit fae21d9, which
# had that form switched on) go consumer 13.5 -> 11.7 %,
# datacenter 26.3 -> 22.4 %, but the in-sample refit moves the HBM fraction to its cap
# (0.57 -> 0.985) and MLC's A100 rows to +28..+50 %. Not kept.
CUBLAS_PROMPT_BUILDS = ("github XiongjieDai/GPU-Benchmarks-on-LLM-Inference",)
CUBLAS_PROMPT_SOURCES: tuple[str, ...] = ()


def cublas_prompts(row: Mapped) -> bool:
    """Whether ``row`` ran a llama.cpp CUDA build whose prompt matmuls with quantised weights
    dequantise them for FP16 cuBLAS (``CUBLAS_PROMPT_SOURCES``)."""
    m = row.measurement
    return (bool(CUBLAS_PROMPT_SOURCES) and row.framework == "llama.cpp"
            and "cuda" in m.framework.lower() and m.source.startswith(CUBLAS_PROMPT_SOURCES)
            and row.precision.weight_ffn_bits < 16)


# The date of the llama.cpp CUDA build behind a source's rows, where the source says (data on
# the measurement row's source, not on a device): XiongjieDai/GPU-Benchmarks-on-LLM-Inference's
# LLaMA 3 notebooks ran builds 2836-2837 (8c570c94, its nvidia-smi header 2024-05-10: see
# CUBLAS_PROMPT_BUILDS above). Sources not listed ran 2025 builds (their notes) or say nothing.
LLAMA_CPP_BUILD_DATES = {"github XiongjieDai/GPU-Benchmarks-on-LLM-Inference": "2024-05-10"}
# CUDA builds before this date ran every prompt matmul (more than 32 rows) through cuBLAS, 16-bit
# weights and dequantised quantised ones alike: github ggml-org/llama.cpp PR #8075
# (2024-06-23, "CUDA: use MMQ instead of cuBLAS by default") moved quantised prompts to MMQ,
# whose tiles PR #8018 (June 2024, "CUDA: stream-k decomposition for MMQ") splits over the SMs
# so no wave runs part-idle. cuBLAS's tiled GEMMs fill the SMs in whole waves
# (roofline.wave_flops_factor).
CUBLAS_PROMPT_UNTIL = "2024-06-23"
# Issue 27's wave rule for the pre-June-2024 llama.cpp rows' prompt GEMMs. On (with
# parallel.evaluation.PROMPT_PIPELINE): the fit refits only the class GEMM fractions with it
# (fitting.BUILD_RULES), so every stack but llama.cpp keeps the values it had without it.
# Off: those rows' prompt GEMMs timed without tile and wave quantisation (the model before the
# rule). Figures: docs/accuracy.md "What limits prefill" and scripts/fit_efficiency.py's docstring.
PROMPT_GEMM_WAVES = True


@contextlib.contextmanager
def prompt_gemm_waves(on: bool):
    """``PROMPT_GEMM_WAVES`` set to ``on`` inside the block (the fit runs part of itself with
    the rule off: ``fitting.BUILD_RULES``)."""
    global PROMPT_GEMM_WAVES
    saved, PROMPT_GEMM_WAVES = PROMPT_GEMM_WAVES, on
    try:
        yield
    finally:
        PROMPT_GEMM_WAVES = saved


# CUDA graphs in llama.cpp's layer split (issue 27). llama.cpp's CUDA back end captures a
# decode step into a CUDA graph and replays it (github ggml-org/llama.cpp PR #6766, merged
# 2024-05-08), which spares the per-kernel launch gaps the class fit's single-GPU rows were
# measured without. With pipeline parallelism on -- a layer split over several GPUs with every
# layer offloaded -- the scheduler's graph changed at every evaluation, so the back end kept
# re-capturing and switched graphs off (ggml-cuda.cu: disable_due_to_too_many_updates after 4
# consecutive updates) until PR #13814 (slaren, merged 2025-05-27, "ggml : allow CUDA graphs
# when using pipeline parallelism": "Due to changes in the graph in each evaluation when
# pipeline parallelism is enabled, CUDA graphs could not be used"). A layer-split decode row of
# an earlier CUDA build therefore launched every kernel from the host, one stream launch per
# kernel, where its single-GPU twins replayed a graph.
PIPELINE_GRAPHS_FROM = "2025-05-27"
# The extra cost of a kernel launched without a graph, per launch: cited, not fitted. PR #6766's
# own measurement at merge (JohannesGaessler, 2024-05-08, RTX 4090, llama-bench tg128, graphs
# off -> on): Llama-3 8B Q4_0 149.28 -> 159.67 tokens/s and F16 56.68 -> 57.85 tokens/s, i.e.
# 436 us and 357 us per token, over the 644 and 451 launches per decode step this model counts
# for those two (flash attention, as the rows are mapped): 0.677 and 0.791 us per launch; their
# mean. A host property (launch API and driver time, on that PR's host), so not scaled with
# the GPU clock.
GRAPHLESS_LAUNCH_S = 0.734 * S_PER_US
# The rule, switched on (issue 27). It moves only the 32 layer-split decode rows (all from the
# May 2024 notebooks of XiongjieDai/GPU-Benchmarks-on-LLM-Inference) and the stage hop fitted
# beside it (fitting.fit_stage_hop: 248 -> 122 us per boundary). Measured with the shipped
# table and the hop refitted (the seven devices with layer-split rows held out one by one,
# scripts/loo_residuals.py --device ...; the other rows do not depend on either): held-out
# batch 1 5.40 -> 5.21 %, consumer GPUs 4.06 -> 3.81 %, datacenter GPUs 9.00 -> 9.01 %
# (the A100 boxes' 8B splits stay +9..+35 %: their hosts pay 2-7 us per launch, not 0.7 --
# a host property the rows do not carry), unified SoCs 5.02 % unchanged; in sample the
# layer-split rows 3.8 -> 2.9 %. False = every row priced as with graphs (the hop absorbs it).
GRAPHLESS_SPLIT_DECODE = True

# vLLM before its CUDA graphs (issue 27, vl32). vLLM captured decode steps into CUDA graphs from
# github vllm-project/vllm PR #1926 ("Optimize model execution with CUDA graph": "uses CUDA
# graph to optimize the CPU overheads in model execution ... particularly effective for small
# models and when using tensor parallelism"; opened 2023-12-05, merged 2023-12-17 -- its last
# review threads, and PR #2154 of that day forbidding it for GPTQ models, are of 2023-12-17).
# A decode row of an earlier vLLM build ran every step eagerly: each PyTorch op of the model
# dispatched from Python on every tensor-parallel worker, a host cost per kernel fixed in time
# whatever the GPU (``Efficiency.eager_launch_s``, the vLLM < 0.6 profile's value; fitted in
# ``fitting.fit_eager_launch``, no cited per-op figure for that build was found).
VLLM_GRAPHS_FROM = "2023-12-17"
# Build dates of the vLLM builds behind measurement rows, by the row's framework label (the
# rows name their commit): github mlc-ai/llm-perf-bench@d401356f README, Setup Details: vLLM
# commit acbed3ef of 2023-10-06 (before v0.2.1 of 2023-10-16). The ML.ENERGY v0.4 / v0.5 rows
# ran 2024 releases, after PR #1926, and are not listed.
VLLM_BUILD_DATES = {"vllm v0.2 (commit acbed3e of 2023-10-06)": "2023-10-06"}
# The rule (on). Measured (scripts/vllm_eager_whatif.py; the two rows each predicted from the
# other's fit): see docs/accuracy.md, "vLLM v0.2 decoded eagerly". False = those rows priced
# as a CUDA-graph build.
EAGER_VLLM_DECODE = True


# Kernel fusion in 2025 llama.cpp CUDA builds (issue 27). Two changes of mid-2025 take launches
# out of every dense layer of a pass: PR #14800 ("CUDA: add fused rms norm", github
# ggml-org/llama.cpp, opened 2025-07-21 by am17an; its kernel is the one PR #15631 extended on
# 2025-08-28) runs rms_norm and the multiply by the norm weight as one kernel -- its RTX 3090
# figures, Llama 7B Q5_K_M tg128 115.84 -> 118.67 tok/s for two launches fewer per layer, are
# ~3.2 us per launch saved, the size of the fitted per-kernel cost (~3 us); and PR #14158
# ("ggml : implement REGLU/GEGLU/SWIGLU ops", June 2025) makes SiLU(gate) x up one GLU op where
# the graph had a silu and a mul kernel (that the Llama graph's split gate / up FFN used it by
# August 2025 is taken from the PR, not checked at a commit). The model charges one launch per
# norm and per activation op, fitted on builds that ran two kernels for each, so a fused build's
# norms and activation are charged no launch of their own (their bytes and FLOPs stay):
# ``FUSED_PLAN`` (launches per execution, ``Efficiency.kernel_plan``). Which rows ran such
# builds: the CUDA scoreboard, discussion #15013, was opened 2025-08-01 (the transcription its
# rows cite, 'Local AI Advisor - Source Research Findings' section 1b), and the gpt-oss guide,
# discussion #15396, was written with August 2025 builds (gpt-oss was released that month);
# their rows' builds (7-hex hashes in the notes; the RTX 5060 Ti's 89d1029 is an August 2025
# build) are taken to be no older than the discussion. The Vulkan scoreboard (#10879, opened
# Dec 2024) has builds of any date: not included. Later fusions (gate + up + GLU in one
# matrix-vector kernel, PRs #16630 / #16715, Oct 2025; rope + set_rows) are not applied: the
# rows' builds may predate them.
FUSED_BUILD_SOURCES = ("ggml-org/llama.cpp discussion #15013",
                       "ggml-org/llama.cpp discussion #15396")
FUSED_PLAN = {"attn_norm": 0.0, "ffn_norm": 0.0, "final_norm": 0.0, "ffn_act": 0.0,
              "moe_expert_act": 0.0}
# Switch (on). Measured with `llmpara validate --regime batch-1 --loo --time-budget 3000`
# (main at 1fdf165 -> on): held-out batch 1 5.01 -> 4.88 % (rows within 4 %: 112 -> 115 of 275),
# consumer GPUs 3.81 -> 3.57 % (60 -> 62 within 4 %; the #15013 / #15396 CUDA rows -10.6 ...
# -17 -> -7 ... -12 %), datacenter GPUs 7.76 -> 7.23 % (within 6 %: 27 -> 24 -- the per-kernel
# cost the datacenter class shares refits higher and gpt-fast's A100 TP rows lose 1-4 points),
# unified SoCs 4.89 % unchanged; prefill held out 7.1 -> 6.9 % (datacenter 9.7 -> 9.9 %),
# batched 10.32 -> 10.42 %. PR #14800's fused norm alone: 4.98 % (112 within 4 %),
# consumer 3.66 %, datacenter 7.76 % (25 within 6 %). False = every llama.cpp row priced with
# one launch per norm / activation (the model before). docs/accuracy.md has the rows.
FUSED_BUILD_PLAN = True


# Kernels llama.cpp's graph launches that the operator list does not hold (issue 27, oss32).
# The operator list charges a model's layer the launches of a dense Llama layer: one per
# matmul (plus its q8_1 activation-quantising launch, ``act_quant_kernels``), rope, KV write,
# attention, one MoE combine and two residual adds (norms and GLU fused: ``FUSED_PLAN``).
# llama.cpp's graph adds, each as a kernel of its own on CUDA before the fusions below:
#   * a bias add after every biased matmul: ``ggml_add(Qcur, bq)`` / bk / bv, and the output
#     projection's bias in ``build_attn`` (github ggml-org/llama.cpp@5c880d94
#     src/models/openai-moe-iswa.cpp, the gpt-oss graph, ``bq`` / ``bk`` / ``bv`` / ``bo``);
#   * the MoE routing (``build_moe_ffn``, github ggml-org/llama.cpp@00395eb2
#     src/llama-graph.cpp): the router bias add (``gate_inp_b``), the gating function
#     (softmax of the logits, or for gpt-oss's SOFTMAX_WEIGHT the softmax of the k selected
#     logits), the top-k's argsort and the ``ggml_get_rows`` of the weights -- 3 kernels plus
#     the bias; the router's matmul itself is one launch, not two: llama-quantize never
#     quantises ``ffn_gate_inp.weight`` (github ggml-org/llama.cpp@8784689f src/llama-quant.cpp,
#     "do not quantize expert gating tensors"), so no q8_1 kernel runs before it (-1);
#   * the expert biases, one ``ggml_add_id`` after each of the up, gate and down
#     ``mul_mat_id`` (gpt-oss: 3);
#   * the weighted sum over the k experts: one ``ggml_mul`` by the weights and k - 1
#     ``ggml_add`` of the experts' views, where the operator list has one ``moe_combine``
#     (k - 1 more; gpt-oss k = 4: 3).
# gpt-oss-20b / -120b: 4 + (1 + 3 - 1) + 3 + 3 = 13 kernels per layer beyond the operator
# list's (24 / 36 layers: 312 / 468 a pass); a dense unbiased model: none. Which fusions the
# rows' builds had: PR #14800's norm + mul and PR #14158's GLU op (``FUSED_PLAN``); not yet
# PR #15631 ("CUDA: fuse adds, fuse add with rms norm", opened 2025-08-28, which would fuse
# the k - 1 adds into one kernel and each residual add into the next norm), nor PR #16130
# (fused top-k MoE kernel, 2025-09-20), nor the Oct 2025 bias-in-matmul fusions -- the
# gpt-oss guide (#15396) was written on the mid-August 2025 builds (its AMD reply names
# build 6194, 3007baf), so the count is that of the builds between gpt-oss's support (Aug 5)
# and Aug 28. Applied to llama.cpp CUDA rows only (the Metal back end fused adds and norms on
# its own schedule, not checked here); the rows it reaches: the gpt-oss rows of #15396
# (RTX 3090 / 5070 Ti tg128, and their pp2048 rows, where 312 kernels are ~0.1 % of a pass).
LLAMA_GRAPH_EXTRA_KERNELS = True
# What one such kernel costs. These are one-block or elementwise kernels over a few thousand
# values inside a CUDA graph, far cheaper than the mean per launch the class fits (which
# includes the matmuls' launch-and-drain): PR #15631's own figures (JohannesGaessler's table,
# microbatch 1, pp4096, i.e. one token per graph) give RTX 3090 gpt-oss 20B MXFP4 182.88 ->
# 186.29 tok/s for 4 kernels fewer per layer (3 expert adds -> 1, two adds folded into the next
# RMS norm; 24 layers: 96 a token): 0.100 ms / 96 = 1.04 us per kernel; RTX 4090 qwen3moe
# 30B.A3B Q4_0 194.24 -> 205.87 tok/s for 8 fewer per layer (k = 8: 7 adds -> 1, and the two
# norms; 48 layers: 384): 0.291 ms / 384 = 0.76 us. Their mean, 0.90 us, cited, not fitted.
# None = charge each at the row's fitted per-kernel cost instead (the what-if the docs compare).
# Measured (`llmpara validate --regime batch-1 --loo --time-budget 3000 --format json`, main at
# 9890937 -> on, 0.90 us): batch 1 3.90 -> 3.90 % (rows within 4 %: 141 -> 143 of 275),
# consumer GPUs 2.72 -> 3.09 % (within 6 %: 91 -> 93 of 115; within 4 %: 74 -> 73), datacenter
# GPUs 7.29 -> 7.35 % (within 6 %: 30 -> 31 of 67), unified SoCs 3.52 % unchanged; rows:
# RTX 3090 gpt-oss tg128 +18.6 -> +12.9 %, RTX 5070 Ti +9.9 -> +3.9 %. Each at the class's
# per-kernel cost instead (None): batch 1 4.12 % (134 within 4 %: below the 138 the 4 % bar
# needs), consumer 3.34 %, datacenter 7.71 % (30), gpt-oss rows -0.4 / -9.7 % -- rejected.
# What is left of the 3090 row is not launches: PR #15631's own late-August master ran gpt-oss
# 20B on an RTX 3090 at 182.88 tok/s one token at a time over a 4,096-token prompt (mean
# context ~2,048; for reading, not fitted), where this model with the shipped table says 173
# tok/s; the guide's 3090 build gave 161.77 at an empty context.
LLAMA_GRAPH_EXTRA_KERNEL_S: float | None = 0.90 * S_PER_US


def llama_graph_extra_kernels(row: Mapped) -> int:
    """Kernels per forward pass that ``row``'s llama.cpp CUDA graph launches beyond the
    operator list's (``LLAMA_GRAPH_EXTRA_KERNELS``): bias adds, MoE routing, expert bias adds
    and the weighted expert sum; 0 for other rows or with the switch off."""
    if not LLAMA_GRAPH_EXTRA_KERNELS or row.framework != "llama.cpp" \
            or "cuda" not in row.measurement.framework.lower():
        return 0
    m = row.model
    if m.mla is not None:
        return 0
    attn = 3 * int(m.attention_bias) + int(m.attention_out_bias)
    total = 0
    for kind, layers in m.layer_groups():
        per = attn
        if kind.moe and m.moe is not None:
            moe = m.moe
            gated = 3 if m.ffn_kind is FFNKind.GATED else 2
            per += (int(moe.router_bias) + 3 - 1 + gated * int(moe.expert_bias)
                    + max(moe.experts_per_token - 1, 0))
        total += per * layers
    return total


# The host CPU behind a notebook's rows (issue 27, kept on). llama.cpp's May 2024 CUDA
# builds prepare every decode step on one host thread (graph build, scheduling, the kernel
# launches or a CUDA graph's capture and update), so part of the per-kernel cost is host time
# and a slower host core pays more of it. The XiongjieDai single-GPU notebooks ran on rented
# boxes of very different hosts; each notebook prints its CPU (its first cell, `cat
# /proc/cpuinfo | grep model name`; github XiongjieDai/GPU-Benchmarks-on-LLM-Inference@9232c8d5f19571274e3c8a3ea66e1a3f56deb5da
# `LLaMA 3/Gaming GPUs/*_v3.ipynb`, @7d5af5243b33c4fbea06cfaa962aa7fdee031af6 `LLaMA 3/
# Professional GPUs/*_v3.ipynb`; the A100 boxes' CPUs as docs/accuracy.md quotes them). Each
# CPU's maximum single-core boost clock is its vendor's spec (AMD EPYC / Ryzen product pages,
# Intel ARK; the E5-2696 v3 and Gold 6133 are OEM parts: their published turbo 3.8 and 3.0 GHz).
# The rule scales a row's per-kernel cost by (HOST_REFERENCE_GHZ / boost) ** HOST_CLOCK_EXPONENT
# (the reference is the 12 hosts' geometric mean, so the class value keeps its meaning; rows
# without a stated host, the multi-GPU notebooks included, are unchanged). A clock is not a
# core's speed (Haswell / Broadwell / Skylake-SP and Zen 1 do less per cycle than Zen 2 / 3),
# which the rule does not see. Measured: scripts/host_clock_whatif.py.
NOTEBOOK_HOSTS = {
    "LLaMA 3/Gaming GPUs/3070_v3.ipynb": ("AMD EPYC 7443P", 4.0),
    "LLaMA 3/Gaming GPUs/3080_v3.ipynb": ("AMD Ryzen 5 3600X", 4.4),
    "LLaMA 3/Gaming GPUs/3080Ti_v3.ipynb": ("AMD EPYC 7551P", 3.0),
    "LLaMA 3/Gaming GPUs/3090_v3.ipynb": ("Intel Xeon E5-2696 v3", 3.8),
    "LLaMA 3/Gaming GPUs/4070Ti_v3.ipynb": ("AMD EPYC 7302", 3.3),
    "LLaMA 3/Gaming GPUs/4080_v3.ipynb": ("AMD EPYC 7452", 3.35),
    "LLaMA 3/Gaming GPUs/4090_v3.ipynb": ("Intel Xeon Gold 6133", 3.0),
    "LLaMA 3/Professional GPUs/4000_Ada_v3.ipynb": ("Intel Xeon E5-2650 v4", 2.9),
    "LLaMA 3/Professional GPUs/5000_Ada_v3.ipynb": ("AMD EPYC 7453", 3.45),
    "LLaMA 3/Professional GPUs/A6000_v3.ipynb": ("AMD EPYC 7343", 3.9),
    "LLaMA 3/Professional GPUs/A100_PCIe_v3.ipynb": ("AMD EPYC 9554", 3.75),
    "LLaMA 3/Professional GPUs/A100_SXM_v3.ipynb": ("AMD EPYC 7763", 3.5),
}
HOST_REFERENCE_GHZ = 3.5
# The exponent (on): 1 = the host's share of a launch in host-clock time, the physical prior
# (0 = off, the model before). Chosen with the in-sample fit agreeing, measured with
# scripts/host_clock_whatif.py (issue 27, branch cons31; the batch-1 rows of the 12 devices'
# folds, held out, rows within 4 % of 156 / consumer of 97 / in sample within 4 % of 275):
# 0: 70 / 55 / 156; 0.5: 69 / 55 / 162; 1: 77 / 65 / 162; 1.5: 79 / 65 / 158 -- 1 kept.
# The whole batch-1 leave-one-device-out (`llmpara validate --regime batch-1 --loo
# --time-budget 3000`, main at 39a209e -> on): 4.34 -> 4.12 %, rows within 4 % 125 -> 133 of
# 275; consumer GPUs 3.57 -> 3.07 % (62 -> 73 within 4 %, 77 -> 90 within 6 %); datacenter
# GPUs 7.23 -> 6.79 % (within 6 %: 24 -> 26; within 4 %: 17 -> 14: the A100 PCIe box's EPYC
# 9554 and the class refit); unified SoCs 3.97 % unchanged (the table refitted with the rule). docs/accuracy.md has the rows.
HOST_CLOCK_EXPONENT = 1.0


# HIP's per-kernel dispatch on a replayed graph (issue 27, gf32; on). gpt-fast's MI250X rows
# (github pytorch-labs/gpt-fast@32971d31 README.md "AMD": one GCD of an MI250X) ran the same
# `torch.compile(mode="reduce-overhead")` decode step as its A100 rows. Inductor's CUDA-graph
# trees carry no ROCm guard (pytorch/pytorch issue #187715: "`cudagraph_trees` has zero ROCm
# awareness and unconditionally enables the new cudagraph implementation on ROCm"), and PyTorch
# mainline has replayed hipGraphs since ROCm 5.3 (pytorch/pytorch PR #88202, merged
# 2023-02-14): the MI250X rows replayed a graph too, so they were not graphless (the llama.cpp
# layer-split rule above does not apply). What differs is what one node of a replayed graph
# costs under HIP. The one published per-node figure found: ROCm/rocm-systems issue #10834
# (2026-08-27, Radeon Pro W7900 gfx1100): 941 serialized dispatches of a tiny kernel replayed
# as a HIP graph take 3.865 us of GPU time per node, the same chain in a Vulkan command buffer
# on the same GPU 0.876 us -- 2.99 us more per node, "pure submission overhead" (a CUDA graph on
# an RTX 5070 Ti: ~0.58 us per node, github ahrefs/ocannl issue #488, i.e. 3.3 us less than
# HIP's). It is RDNA3 and a 2026 runtime, not CDNA2 at the rows' ROCm (Dec 2023, before the
# runtime pre-captured a graph's AQL packets: rocclr flags.hpp DEBUG_CLR_GRAPH_PACKET_CAPTURE),
# so it is taken as the order of HIP's per-node cost, not fitted. The model's per-kernel cost
# is fitted on CUDA, Vulkan and Metal rows; a row run through ROCm / HIP (``hip_runtime``)
# pays HIP_GRAPH_NODE_EXTRA_S more per kernel launch; 0 = off (the model before).
# Measured with scripts/hip_dispatch_whatif.py (the gpt-fast folds rerun, the other batch-1
# rows from main's leave-one-device-out; held out: datacenter median |error| / rows within 6 %
# of 67, overall / rows within 4 % of 275; in sample: gpt-fast's 28 rows refitted):
#   extra us   0     1     2     2.99  4     5     6     8     12
#   datacenter 7.29  6.41  5.79  4.67  4.54  4.64  5.50  7.02  9.28 %
#   within 6 % 30    32    35    39    44    43    38    31    29
#   overall    3.90  3.86  3.86  3.71  3.56  3.58  3.86  3.86  3.88 %  (141 146 150 155 ...)
#   in sample  6.41  5.54  4.89  4.02  4.02  3.67  4.94  4.87  5.01 %
# The in-sample fit orders the values as the held-out figures do (best 3-5 us), and every value
# from 2 to 6 us meets the datacenter bar: not a narrow valley. At the cited 2.99 us the
# MI250X's int8 row goes +28.6 -> +4.6 % and its BF16 row +5.4 -> -2.9 % (both rows at once,
# which no bandwidth factor did: scripts/device_bandwidth_whatif.py); gpt-fast's A100 BF16 rows
# held out -5 ... -13 -> +1 ... -9 % (70B on two GPUs +16.5 -> +27 %), its int8/int4 rows
# -24 ... -42 -> -4 ... -22 % where they were too slow, but the three that were close get
# worse (70B int4 one GPU -1.9 -> +16.3 %, 3.1-70B int8 one GPU -5.2 -> +9.7 %, 405B int8 TP8
# +16.9 -> +39.8 %).
HIP_GRAPH_NODE_CITED_S = (3.865 - 0.876) * S_PER_US
HIP_GRAPH_NODE_EXTRA_S = HIP_GRAPH_NODE_CITED_S


def hip_runtime(row: Mapped) -> bool:
    """Whether ``row`` ran through AMD's ROCm / HIP runtime (its stack names ROCm or HIP;
    llama.cpp's Vulkan back end on AMD cards does not)."""
    fw = row.measurement.framework.lower()
    return "rocm" in fw or re.search(r"\bhip\b", fw) is not None


def notebook_host(row: Mapped) -> tuple[str, float] | None:
    """(CPU, boost GHz) of the host behind ``row``, where its source notebook states it."""
    src = row.measurement.source
    if "XiongjieDai/GPU-Benchmarks-on-LLM-Inference" not in src:
        return None
    return next((h for path, h in NOTEBOOK_HOSTS.items() if f":{path} " in src
                 or src.endswith(f":{path}")), None)


def host_launch_factor(row: Mapped) -> float:
    """The per-kernel cost factor of ``row``'s host (1 without a stated host or with the
    rule off): (``HOST_REFERENCE_GHZ`` / boost) ** ``HOST_CLOCK_EXPONENT``."""
    if not HOST_CLOCK_EXPONENT or row.framework != "llama.cpp":
        return 1.0
    host = notebook_host(row)
    return 1.0 if host is None else (HOST_REFERENCE_GHZ / host[1]) ** HOST_CLOCK_EXPONENT


def fused_build(row: Mapped) -> bool:
    """Whether ``row`` is a llama.cpp CUDA decode row of a build with PR #14800's fused RMS
    norm and PR #14158's GLU op (``FUSED_BUILD_SOURCES``; ``FUSED_BUILD_PLAN`` on)."""
    m = row.measurement
    return (FUSED_BUILD_PLAN and row.framework == "llama.cpp" and "cuda" in m.framework.lower()
            and m.source.startswith(FUSED_BUILD_SOURCES))


def graphless_decode(row: Mapped) -> bool:
    """Whether ``row`` is a llama.cpp CUDA decode row of a layer split (PP > 1) whose build
    predates CUDA graphs under pipeline parallelism (``PIPELINE_GRAPHS_FROM``): each kernel
    launched from the host (``GRAPHLESS_LAUNCH_S`` more per launch)."""
    if not GRAPHLESS_SPLIT_DECODE or row.framework != "llama.cpp" or row.pp <= 1 \
            or row.measurement.metric != "decode_tok_s" \
            or "cuda" not in row.measurement.framework.lower():
        return False
    date = llama_cpp_build_date(row)
    return date is not None and date < PIPELINE_GRAPHS_FROM


def vllm_build_date(row: Mapped) -> str | None:
    """ISO date of the vLLM build behind ``row``, where its framework label names one
    (``VLLM_BUILD_DATES``)."""
    label = row.measurement.framework.strip().lower()
    return next((d for s, d in VLLM_BUILD_DATES.items() if label.startswith(s)), None)


def eager_decode(row: Mapped) -> bool:
    """Whether ``row`` is a vLLM (< 0.6 profile) decode row of a build that predates vLLM's
    CUDA graphs (``VLLM_GRAPHS_FROM``): each kernel dispatched from Python
    (``Efficiency.eager_launch_s`` more per launch)."""
    if not EAGER_VLLM_DECODE or row.framework != "vllm-legacy" \
            or row.measurement.metric != "decode_tok_s":
        return False
    date = vllm_build_date(row)
    return date is not None and date < VLLM_GRAPHS_FROM


def llama_cpp_build_date(row: Mapped) -> str | None:
    """ISO date of the llama.cpp build behind ``row``, where its source gives one."""
    src = row.measurement.source
    return next((d for s, d in LLAMA_CPP_BUILD_DATES.items() if src.startswith(s)), None)


def tiled_prompt_gemms(row: Mapped) -> bool:
    """Whether ``row`` ran a llama.cpp CUDA build whose prompt matmuls all ran as cuBLAS's
    tiled GEMMs (built before ``CUBLAS_PROMPT_UNTIL``)."""
    if not PROMPT_GEMM_WAVES or row.framework != "llama.cpp" \
            or "cuda" not in row.measurement.framework.lower():
        return False
    date = llama_cpp_build_date(row)
    return date is not None and date < CUBLAS_PROMPT_UNTIL


def build_efficiency(row: Mapped, efficiency):
    """``efficiency`` as the build ``row`` ran uses it: for ``graphless_decode`` rows, each
    kernel launch ``GRAPHLESS_LAUNCH_S`` dearer (no CUDA graph); for ``eager_decode`` rows,
    ``efficiency.eager_launch_s`` dearer (PyTorch eager dispatch); for ``hip_runtime`` rows,
    each launch ``HIP_GRAPH_NODE_EXTRA_S`` dearer (a HIP graph node); for rows whose llama.cpp
    CUDA graph holds kernels the operator list does not (``llama_graph_extra_kernels``), each
    pass ``LLAMA_GRAPH_EXTRA_KERNEL_S`` per such kernel dearer; for ``tiled_prompt_gemms``
    rows, prompt GEMMs tiled in waves over the SMs (``Efficiency.prompt_gemm_waves``); for
    ``cublas_prompts`` rows, quantised prompt matmuls at the 16-bit GEMM's rate (no int8 unit, ``quant_compute`` 1) after a
    dequantising pass that reads each block and writes a 16-bit copy: 1 + 16 / bits bytes per
    quantised weight byte (``Efficiency.quant_dequant_bytes``); other rows unchanged. A copy
    with those fields set (the fits ask for it per row and trial; the values are in range by
    construction)."""
    if efficiency is None:
        return efficiency
    if fused_build(row):
        efficiency = copy.copy(efficiency)
        plan = {**dict(efficiency.kernel_plan), **FUSED_PLAN}
        object.__setattr__(efficiency, "kernel_plan", tuple(sorted(plan.items())))
    host = host_launch_factor(row)
    if host != 1.0:
        efficiency = copy.copy(efficiency)
        object.__setattr__(efficiency, "kernel_overhead_s", efficiency.kernel_overhead_s * host)
    if HIP_GRAPH_NODE_EXTRA_S and hip_runtime(row):
        efficiency = copy.copy(efficiency)
        object.__setattr__(efficiency, "kernel_overhead_s",
                           efficiency.kernel_overhead_s + HIP_GRAPH_NODE_EXTRA_S)
    extra = llama_graph_extra_kernels(row)
    if extra:
        efficiency = copy.copy(efficiency)
        per = (efficiency.kernel_overhead_s if LLAMA_GRAPH_EXTRA_KERNEL_S is None
               else LLAMA_GRAPH_EXTRA_KERNEL_S)
        object.__setattr__(efficiency, "step_overhead_s",
                           efficiency.step_overhead_s + extra * per)
    if graphless_decode(row):
        efficiency = copy.copy(efficiency)
        object.__setattr__(efficiency, "kernel_overhead_s",
                           efficiency.kernel_overhead_s + GRAPHLESS_LAUNCH_S)
    if efficiency.eager_launch_s and eager_decode(row):
        efficiency = copy.copy(efficiency)
        object.__setattr__(efficiency, "kernel_overhead_s",
                           efficiency.kernel_overhead_s + efficiency.eager_launch_s)
    if tiled_prompt_gemms(row) and not efficiency.prompt_gemm_waves:
        efficiency = copy.copy(efficiency)
        object.__setattr__(efficiency, "prompt_gemm_waves", True)
    if not cublas_prompts(row):
        return efficiency
    out = copy.copy(efficiency)
    for name, value in (("quant_gemm_int8", False), ("quant_compute", 1.0),
                        ("quant_dequant_bytes", 1.0 + 16.0 / row.precision.weight_ffn_bits)):
        object.__setattr__(out, name, value)
    return out


def timings(row: Mapped, efficiency) -> tuple:
    """(ideal, estimated) Timing of ``row`` with ``efficiency`` (as its build runs it,
    ``build_efficiency``), and the analysis notes."""
    efficiency = build_efficiency(row, efficiency)
    hw = row.hardware.with_efficiency(efficiency)
    if row.devices == 1:
        rep = analyze(row.model, hw, row.precision, row.workload)
        return rep.ideal, rep.estimated, rep.notes
    from ..parallel import shard_analyze
    rep = shard_analyze(row.model, hw, row.precision, row.workload, _plan(row))
    return rep.ideal, rep.estimated, tuple(rep.notes)


def estimated_timing(row: Mapped, efficiency):
    """The estimated Timing of ``timings``, without the rest of the report: for a row on
    several devices only the pipeline's times (``parallel.shard_timings``, the same
    arithmetic), which is what a fit re-evaluates with every trial efficiency."""
    if row.devices == 1:
        return timings(row, efficiency)[1]
    from ..parallel import shard_timings
    efficiency = build_efficiency(row, efficiency)
    return shard_timings(row.model, row.hardware.with_efficiency(efficiency),
                         row.precision, row.workload, _plan(row))[1]


def _plan(row: Mapped):
    """The parallel plan of a row on several devices (gpt-fast shards no vocabulary)."""
    from ..parallel import ParallelPlan
    return ParallelPlan(tp=row.tp, pp=row.pp, vocab_parallel=row.framework != "gpt-fast")


def row_stack(row: Mapped) -> str:
    """The stack a row's estimate runs under: its framework's profile; a row that names no
    framework at all gets its hardware class's default stack (as an estimate without a named
    stack does); a row naming a stack without a profile (QNN, T-MAC, ...) the generic class
    fit."""
    if row.framework:
        return row.framework
    return GENERIC if row.measurement.framework.strip() else CLASS_DEFAULT_STACKS[
        row.hardware.hw_class]


def predict(row: Mapped, table: EfficiencyTable | None = None) -> Prediction:
    """Ideal, generic and stack-aware estimates of one mapped measurement."""
    table = table or default_table()
    metric = row.measurement.metric
    generic_eff = table.efficiency_for(row.hardware)
    fw_eff = table.efficiency_for(row.hardware, row_stack(row))
    ideal_t, gen_t, notes = timings(row, generic_eff)
    est_t = gen_t if fw_eff == generic_eff else timings(row, fw_eff)[1]
    wl = row.workload
    return Prediction(row, row.measurement.value, metric_value(metric, ideal_t, wl),
                      metric_value(metric, gen_t, wl), metric_value(metric, est_t, wl),
                      efficiency_class(row, table), tuple(notes))


def predict_all(rows, table: EfficiencyTable | None = None) -> tuple[list[Prediction],
                                                                      list[Skipped]]:
    """Predictions of mapped rows; a row the core rejects (e.g. a plan that does not divide
    the model) becomes a Skipped row with the core's message."""
    table = table or default_table()
    out, skipped = [], []
    for i, r in enumerate(rows):
        check_time_budget(f"{i:,} of {len(rows):,} rows predicted")
        try:
            out.append(predict(r, table))
        except TimeBudgetExceeded:
            raise
        except LLMParaError as e:
            m = r.measurement
            skipped.append(Skipped(m.row_id, m.hardware, m.model, m.metric,
                                   str(e).splitlines()[0]))
    return out, skipped


GPU_CLASSES = (HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU)


def lacks_tensor_peak(row: Mapped) -> bool:
    """A GPU preset without a peak for the row's compute data type (its matmuls would run at a
    slower fallback peak, e.g. fp32 instead of fp16 tensor cores). Unified-memory SoCs are not
    flagged: Apple GPUs run fp16 at their fp32 rate, so the fallback is the real rate."""
    return (row.hardware.hw_class in GPU_CLASSES
            and row.hardware.peak_flops_per_s_raw(row.precision.compute_dtype) is None)


def unsteady_prefill(rows: list[Mapped]) -> set[str]:
    """Row ids of prompt-processing sweeps not at steady state: a sweep (one source, device,
    device count, model, weight format and stack at two or more prompt lengths) whose tokens/s
    at its longest prompt exceeds that at its shortest. A prompt's work per token grows with
    its length (attention over more keys), so a steady run slows down with it; one that speeds
    up was not steady (llama-bench runs its prompt tests shortest first: a GPU still clocking
    up, or shared with another job, shows exactly this). Of the shared data's 25 sweeps one is
    flagged: the A100 SXM4 notebook's Llama-3-8B F16 rows (pp512 604, pp4096 866 tokens/s; its
    own table gives pp1024 681 and pp8192 1,323, with a 6-13 % spread over llama-bench's
    repetitions where the notebook's other rows spread < 1 %). A diagnostic for the reasons
    the validation gives (``summary.why``); the rows are fitted and scored like every other."""
    sweeps: dict[tuple, list[Mapped]] = {}
    for r in rows:
        m = r.measurement
        if m.metric == "prefill_tok_s" and r.workload.prompt_len:
            key = (m.source, r.hardware.slug, r.devices, m.model, m.quant, r.framework, m.batch)
            sweeps.setdefault(key, []).append(r)
    out = set()
    for rs in sweeps.values():
        lens = {r.workload.prompt_len for r in rs}
        if len(lens) < 2:
            continue
        short = [r.measurement.value for r in rs if r.workload.prompt_len == min(lens)]
        long_ = [r.measurement.value for r in rs if r.workload.prompt_len == max(lens)]
        if max(long_) > min(short):
            out |= {r.measurement.row_id for r in rs}
    return out


def device_key(hardware) -> tuple:
    """What makes two presets one physical device for leave-one-device-out: the same class,
    architecture, memory technology, bandwidth, capacity and dense peaks. Presets differing
    only in power limit or name (the gpt-fast box: an A100 SXM4 80GB capped at 330 W) are held
    out together -- predicting one from the other would not be a new device."""
    return (hardware.hw_class, hardware.architecture, hardware.memory_type,
            hardware.memory_bandwidth_bytes_per_s, hardware.memory_capacity_bytes,
            hardware.peak_fp16_flops_per_s, hardware.peak_fp32_flops_per_s)
