"""The serving simulator against published max-load throughput (TensorRT-LLM perf-overview
tables, in-flight batching, fixed ISL/OSL; ``tests/data/serving_trtllm_max_load.csv``, rows
copied from ``shared/validation/batched_throughput.csv`` with their source URLs).

Each row is simulated at max load with the TensorRT-LLM profile (efficiency and scheduler
defaults), ``MAX_LOAD_REQUESTS`` requests of the row's ISL/OSL, the row's precision (FP8 =
FP8 weights, GEMMs and KV cache, as the docs up to v0.17 state) and TP over the matching
cluster preset, and the row's TensorRT-LLM release (``framework_version``) at its
release range's factor on the compute time (``stack_version``). TP > 1 rows run on their
node's cluster preset (``CLUSTERS``: NVSwitch for H100 and A100 SXM4, PCIe Gen4 for A100 PCIe
and L40S, whose all-reduces take NCCL's PCIe path: ``parallel.collectives``, eight GPUs over two
CPU sockets); A100 PCIe TP 2 is left out (``UNMAPPED_TP``). Fitted on these rows: the FP8
power wall's duty (``cost.TENSOR_DUTY``) and the release factors; ``llmpara validate --regime
serving-maxload --loo`` refits both without each GPU.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from ..budget import TimeBudgetExceeded
from ..calibration.efficiency import efficiency_for
from ..parallel import ParallelPlan
from ..precision import precision_preset
from ..presets import load_hardware, load_model
from ..units import S_PER_MS
from .cost import IterationCost
from .config import FRAMEWORK_DEFAULTS
from .engine import simulate
from .report import summarize
from .requests import RequestSpec

MAX_LOAD_REQUESTS = 1000
SHIPPED_MAX_LOAD = Path(__file__).resolve().parent.parent.parent / "presets" / "tables" \
    / "serving_max_load.csv"
MODELS = {"Llama-3-8B": "llama-3-8b", "Llama-3.1-8B": "llama-3.1-8b", "Llama-2-7B": "llama-2-7b",
          "Mistral-7B": "mistral-7b-v0.1", "Mixtral-8x7B": "mixtral-8x7b",
          "Llama-3.1-70B": "llama-3.1-70b", "Llama-3-70B": "llama-3-70b",
          "Llama-3.3-70B": "llama-3.3-70b", "Llama-2-70B": "llama-2-70b",
          "Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3.1-70B-Instruct": "llama-3.1-70b"}
DEVICES = {"NVIDIA H100 SXM 80GB": "nvidia-h100-sxm", "NVIDIA A100 SXM4 80GB": "nvidia-a100-sxm-80gb",
           "NVIDIA A100 PCIe 80GB": "nvidia-a100-pcie-80gb", "NVIDIA L40S": "nvidia-l40s",
           "NVIDIA B200": "nvidia-b200",
           "NVIDIA H100 80GB (form factor not stated)": "nvidia-h100-sxm",
           "NVIDIA A100 80GB (form factor not stated)": "nvidia-a100-sxm-80gb"}
# The node each GPU's TP > 1 rows ran on. The perf-overview pages name one system per GPU
# column and that column holds TP 8 rows, so the node has eight GPUs:
# - A100 SXM4: the HGX A100 8-GPU board (as in DGX A100), six NVSwitch chips: every GPU reaches
#   every other at its full 300 GB/s per direction, so TP 2, 4 and 8 all run on it;
# - A100 PCIe and L40S: PCIe Gen4 x16 cards (the L40S has no NVLink; an A100 PCIe NVLink bridge
#   joins two cards only), so a collective over 3 or more GPUs crosses PCIe, 31 GB/s per
#   direction: a ring is as fast as its slowest link.
CLUSTERS = {"nvidia-h100-sxm": "8x-nvidia-h100-sxm-nvlink",
            "nvidia-a100-sxm-80gb": "8x-nvidia-a100-sxm-80gb-nvlink",
            "nvidia-a100-pcie-80gb": "8x-nvidia-a100-pcie-80gb",
            "nvidia-l40s": "8x-nvidia-l40s-pcie"}
# (device, TP) whose link no source states: left unsimulated, with the reason.
UNMAPPED_TP = {("nvidia-a100-pcie-80gb", 2): "A100 PCIe TP 2: the source does not say whether "
               "the pair was joined by an NVLink bridge (300 GB/s per direction) or by PCIe "
               "(31 GB/s), so no link is assumed"}
PRECISIONS = {"FP16": "FP16", "BF16": "BF16", "FP8": "FP8"}


@dataclass(frozen=True)
class MaxLoadRow:
    row_id: str
    hardware: str
    model: str
    precision: str
    tp: int
    isl: int
    osl: int
    measured: float           # output tokens/s, whole system
    source: str
    max_batch: int | None = None        # engine settings the source states (v0.10 / v0.11)
    max_num_tokens: int | None = None
    version: str = ""                   # TensorRT-LLM release of the row (framework_version)
    moe: bool = False                   # a mixture-of-experts model (its release factor's family)


@dataclass(frozen=True)
class MaxLoadComparison:
    row: MaxLoadRow
    predicted: float | None
    skipped: str | None = None

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.row.measured - 1


@functools.lru_cache(maxsize=64)
def _is_moe(model: str) -> bool:
    slug = MODELS.get(model)
    return bool(slug and load_model(slug).moe)


def load_rows(path: str | Path) -> tuple[MaxLoadRow, ...]:
    with open(path, newline="") as f:
        return tuple(MaxLoadRow(r["row_id"], r["hardware"], r["model"], r["precision_weights"],
                                int(float(r["tp"])), int(float(r["isl"])), int(float(r["osl"])),
                                float(r["value"]), r["source_url"], *_engine_settings(r["notes"]),
                                r.get("framework_version", ""), _is_moe(r["model"]))
                     for r in csv.DictReader(f) if r["metric"] == "output_tok_s_total")


def _engine_settings(notes: str) -> tuple[int | None, int | None]:
    """(max batch size, max num tokens) of the engine build the row's source states (the
    v0.10 build command, the v0.11 per-model settings); None where it states none."""
    import re
    b = re.search(r"max_batch_size[ =]+([0-9]+)", notes)
    t = re.search(r"max_num_tokens[ =]+([0-9]+)", notes)
    return (int(b.group(1)) if b else None), (int(t.group(1)) if t else None)


def device_for(row: MaxLoadRow) -> str | None:
    """The hardware preset a row is simulated on (its device at TP 1, else its node's cluster
    preset, ``CLUSTERS``); None where there is none or its link is not known (``UNMAPPED_TP``)."""
    dev = DEVICES.get(row.hardware)
    if dev is None or row.tp == 1:
        return dev
    if (dev, row.tp) in UNMAPPED_TP:
        return None
    return CLUSTERS.get(dev)


def skip_reason(row: MaxLoadRow) -> str:
    """Why a row has no preset to run on (``device_for`` None, or no model or precision)."""
    dev = DEVICES.get(row.hardware)
    if (dev, row.tp) in UNMAPPED_TP:
        return UNMAPPED_TP[(dev, row.tp)]
    return "no preset for this hardware, model, precision or TP"


@functools.lru_cache(maxsize=1024)
def predict(model: str, device: str, precision: str, tp: int, isl: int, osl: int,
            requests: int = MAX_LOAD_REQUESTS, max_batch: int | None = None,
            max_num_tokens: int | None = None, time_scale: float = 1.0) -> float:
    """Simulated max-load output tokens/s of TensorRT-LLM for one configuration (with the
    engine's stated max batch size and token budget where given, and the row's release's
    factor on the compute time, ``stack_version``)."""
    hw = load_hardware(device)
    m = load_model(model)
    cost = IterationCost(m, hw, precision_preset(precision), ParallelPlan(tp=tp),
                         efficiency_for(hw, "tensorrt-llm"), time_scale=time_scale)
    cfg = FRAMEWORK_DEFAULTS["tensorrt-llm"].config
    if max_batch or max_num_tokens:
        from dataclasses import replace
        cfg = replace(cfg, max_batch=max_batch or cfg.max_batch,
                      max_num_tokens=max_num_tokens or cfg.max_num_tokens)
    res = simulate(cost, cfg, RequestSpec(isl=isl, osl=osl, requests=requests))
    return summarize(res, cost).output_tokens_per_s


def release_scale(row: MaxLoadRow, model: str, table: dict | None = None) -> float:
    """The factor of the row's TensorRT-LLM release (``stack_version``; 1 if it has none)."""
    from .stack_version import range_of, time_scale
    if not row.version:
        return 1.0
    try:
        range_of(row.version)
    except Exception:           # noqa: BLE001 - a release outside every range: pooled
        return 1.0
    return time_scale(row.version, bool(load_model(model).moe), table)


def compare(rows, requests: int = MAX_LOAD_REQUESTS,
            releases: bool = True) -> tuple[MaxLoadComparison, ...]:
    """Each row simulated (``releases``: at its TensorRT-LLM release's profile, else the
    pooled one)."""
    out = []
    for r in rows:
        dev, model = device_for(r), MODELS.get(r.model)
        prec = PRECISIONS.get(r.precision)
        if dev is None or model is None or prec is None:
            out.append(MaxLoadComparison(r, None, skip_reason(r)))
            continue
        try:
            scale = release_scale(r, model) if releases else 1.0
            out.append(MaxLoadComparison(r, predict(model, dev, prec, r.tp, r.isl, r.osl,
                                                    requests, r.max_batch, r.max_num_tokens,
                                                    scale)))
        except TimeBudgetExceeded:
            raise
        except Exception as e:          # noqa: BLE001 - a row that cannot run is reported
            out.append(MaxLoadComparison(r, None, str(e).splitlines()[0]))
    return tuple(out)


def error_summary(comps) -> dict:
    """Median |predicted / measured - 1| overall and per GPU (= leave-one-GPU-out: nothing is
    fitted), with the signed median (bias) and the row counts."""
    ok = [c for c in comps if c.error is not None]
    by: dict[str, list[float]] = {}
    by_tp: dict[int, list[float]] = {}
    for c in ok:
        by.setdefault(c.row.hardware, []).append(c.error)
        by_tp.setdefault(c.row.tp, []).append(c.error)
    return {
        "rows": len(ok), "skipped": len(comps) - len(ok),
        "median_abs_error": median(abs(c.error) for c in ok) if ok else None,
        "median_signed_error": median(c.error for c in ok) if ok else None,
        "per_gpu": {k: {"rows": len(v), "median_abs_error": median(abs(e) for e in v),
                        "median_signed_error": median(v)} for k, v in sorted(by.items())},
        "per_tp": {k: {"rows": len(v), "median_abs_error": median(abs(e) for e in v),
                       "median_signed_error": median(v)} for k, v in sorted(by_tp.items())},
    }


# ---- request-rate rows (reported, not fitted) -----------------------------------------------

SHAREGPT_ISL_ASSUMED = 220     # mean prompt tokens of the ShareGPT runs: NOT in the source
RATE_REQUESTS = 500


@dataclass(frozen=True)
class RatePoint:
    """One published serving point and the simulated one (rate None = max load)."""
    framework: str
    model: str
    hardware: str
    tp: int
    isl: int | None
    osl: int | None
    rate: float | None
    measured: dict             # metric -> value (ms for latencies)
    predicted: dict
    statistic: str             # "mean" (Triton table) or "median" (SGLang/vLLM README)
    assumptions: tuple[str, ...]


def _qps(notes: str) -> float | None:
    import re
    m = re.search(r"QPS=([0-9.]+|inf)", notes) or re.search(r"request rate ([0-9.]+) req/s",
                                                            notes)
    if m is None or m.group(1) == "inf" or "max load" in notes:
        return None
    return float(m.group(1))


def rate_points(path: str | Path, requests: int = RATE_REQUESTS,
                rates: tuple | None = None) -> tuple[RatePoint, ...]:
    """Group the rate rows by setup and simulate each (TensorRT-LLM profile for the Triton
    table, vLLM profile for the SGLang and vLLM rows; ShareGPT lengths lognormal with the mean
    output length implied by the max-load rows and an assumed mean prompt length). ``rates``
    keeps only setups at those request rates (None in it = max load)."""
    groups: dict[tuple, dict] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["framework"], r["model"], r["hardware"], int(float(r["tp"])),
                   int(float(r["isl"])) if r["isl"] else None,
                   int(float(r["osl"])) if r["osl"] else None, _qps(r["notes"]),
                   r["row_id"] if "Triton" in r["framework"] else "")
            groups.setdefault(key[:7], {})[r["metric"]] = float(r["value"])
    sharegpt_osl = _sharegpt_mean_osl(groups)
    return tuple(_rate_point(k, v, sharegpt_osl, requests) for k, v in groups.items()
                 if rates is None or k[6] in rates)


def _sharegpt_mean_osl(groups) -> dict:
    out = {}
    for (fw, model, hw, tp, isl, osl, rate), m in groups.items():
        if isl is None and rate is None and "requests_s" in m and "output_tok_s_total" in m:
            out[(fw, model)] = m["output_tok_s_total"] / m["requests_s"]
    return out


def _rate_point(key, measured, sharegpt_osl, requests) -> RatePoint:
    import numpy as np
    from .report import per_request
    fw, model, hw_label, tp, isl, osl, rate = key
    dev = DEVICES[hw_label] if tp == 1 else CLUSTERS[DEVICES[hw_label]]
    hw = load_hardware(dev)
    profile = "tensorrt-llm" if "TensorRT" in fw else "vllm"
    notes = []
    if isl is None:
        osl_mean = round(sharegpt_osl.get((fw, model), 200))
        isl_mean = SHAREGPT_ISL_ASSUMED
        notes.append(f"ShareGPT: lognormal lengths, mean output {osl_mean} tokens (max-load "
                     f"rows), mean prompt {isl_mean} tokens ASSUMED")
        spec = RequestSpec(isl=isl_mean, osl=osl_mean, lengths="lognormal", spread=0.8,
                           requests=requests)
    else:
        spec = RequestSpec(isl=isl, osl=osl, requests=requests)
    if rate is not None:
        spec = spec.with_rate(rate)
    cost = IterationCost(load_model(MODELS[model]), hw, precision_preset("BF16"),
                         ParallelPlan(tp=tp), efficiency_for(hw, profile))
    res = simulate(cost, FRAMEWORK_DEFAULTS[profile].config, spec)
    ttft, tpot, _ = per_request(res)
    stat = np.nanmean if "Triton" in fw else np.nanmedian
    pred = {"output_tok_s_total": summarize(res, cost).output_tokens_per_s,
            "ttft_ms": float(stat(ttft)) / S_PER_MS, "tpot_ms": float(stat(tpot)) / S_PER_MS}
    return RatePoint(fw, model, hw_label, tp, isl, osl, rate,
                     {k: v for k, v in measured.items() if k in pred}, pred,
                     "mean" if "Triton" in fw else "median", tuple(notes))
