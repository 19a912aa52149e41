"""TensorRT-LLM release as a stack profile (``--stack-version``).

The shared max-load rows (``batched_throughput.csv``) measure the same configuration (GPU,
model, precision, TP, ISL/OSL) under several TensorRT-LLM releases, and the releases differ
systematically: on the configurations measured under both, the 0.13/0.14 rows are slower than
the 0.17 rows (dense FP8 median 0.90x, dense FP16 0.94x, MoE FP8 0.95x; ``scripts/
fit_stack_versions.py`` prints the table). Kernels and runtime change between releases; the
roofline's work does not. So a release range is modelled as one factor on an iteration's
roofline compute time (kernels, launches, per-pass runtime cost) -- not on its collectives and
not on the FP8 power wall's tensor-core work, which are the same physics in every release --
per model family (dense, MoE: the MoE kernels are their own code path) and range.

The factors are fitted on the TensorRT-LLM max-load rows only (never on MLPerf rows):
``fit`` picks, per (range, family), the grid factor with the lowest median |error| of that
group's rows, the power wall's duty held at ``cost.TENSOR_DUTY``; ``leave_one_gpu_out`` refits
duty and factors without each GPU's rows. No version (``None``) = factor 1, the profile fitted
on all releases pooled (what ``--framework tensorrt-llm`` always was).

Releases 0.11 and 0.12 are separate ranges: besides their dependencies (TensorRT 10.2 / 10.3,
below), their rows were measured by different harnesses on differently built engines. The 0.11
rows (perf-overview at the v0.11.0 release commit, github NVIDIA/TensorRT-LLM@05316d331336:
docs/source/performance/perf-overview.md, "Methodology") ran the C++ ``gptManagerBenchmark``
(``--type IFB --scheduler_policy guaranteed_no_evict --kv_cache_free_gpu_mem_fraction 0.99
--enable_chunked_context``) on engines built by ``trtllm-build`` with ``--multiple_profiles
enable --reduce_fusion disable``, ``max_input_len`` / ``max_output_len`` 2048 and hand-set
``max_batch_size`` / ``max_num_tokens`` per model and TP (its "Network Configuration Files and
Settings" table); the 0.12 rows (the same page at v0.12.0, @bfc50a71b239, "Reproducing
Benchmarked Results") ran ``trtllm-bench throughput`` on engines that ``trtllm-bench build
--dataset`` sizes from the dataset. The same page at v0.12.0 lists, as a known issue, extra GPU
memory allocated with ``--multiple_profiles`` "starting from v0.11" -- the 0.11 builds' flag.
The shared rows' notes say the same (``README_batched.md``: "gptManagerBenchmark (v0.10-0.11)
or trtllm-bench (v0.12-0.17)"). Measured on the same configuration (no model), 0.11 / 0.17 is
0.96 (dense FP8, 8 configurations) and 0.12 / 0.17 0.94 (10); MoE FP8 0.94 (4) and 0.96 (15).

MLPerf Inference v4.1 (NVIDIA's and the NVIDIA-derived Dell TRT submissions) ran the
TensorRT-LLM of TensorRT 10.2.0 / CUDA 12.4 (github mlcommons/inference_results_v4.1@
a2f5d66d17e8: closed/NVIDIA/systems/DGX-H100_H100-SXM-80GBx8_TRT.json, "framework":
"TensorRT 10.2.0, CUDA 12.4"), the dependencies of TensorRT-LLM 0.11.0 (TensorRT-LLM
docs/source/release-notes.md, Release 0.11.0: "The dependent TensorRT version is updated to
10.2.0", CUDA 12.4.1; 0.12.0 moved to TensorRT 10.3.0 / CUDA 12.5.1): ``MLPERF_V41_VERSION``.
"""

from __future__ import annotations

import re
from statistics import median

import numpy as np

from ..errors import ConfigError

# (name, first release, last release) of each range; a release outside every range is refused.
# 0.11 and 0.12 are separate ranges (module docstring): 0.11's rows were measured by
# gptManagerBenchmark on engines with hand-set limits, 0.12's by trtllm-bench on engines it
# sizes itself.
RANGES = (("0.10", (0, 10), (0, 10)), ("0.11", (0, 11), (0, 11)), ("0.12", (0, 12), (0, 12)),
          ("0.13-0.14", (0, 13), (0, 14)), ("0.15-0.17", (0, 15), (0, 17)),
          ("0.18-0.21", (0, 18), (0, 21)))
FAMILIES = ("dense", "moe")
MLPERF_V41_VERSION = "0.11"
# Factor on the roofline compute time of an iteration per (range, family); fitted by
# scripts/fit_stack_versions.py on the max-load rows (see the module docstring; grid 0.80 to
# 1.25). A range with no rows of a family (0.18-0.21 MoE) keeps 1.0. Refitted on all 1,794 rows
# with 0.11 and 0.12 split, beside the duty 0.52 and the 4 GiB runtime reserve refitted with
# them (python scripts/fit_runtime_reserve.py: serving.reserve_fit): in sample 7.8 %, signed
# -0.4 % (the shipped constants before, fitted on 1,388 rows under older code: 7.9 %, -0.7 %);
# leave-one-GPU-out with reserve, duty and factors refitted without each GPU 8.8 %, signed
# -1.1 % (TP1 / 2 / 4 / 8 9.6 / 7.7 / 7.8 / 9.9 %; the H100 fold picks 3 GiB and duty 0.44). At
# the 4 GiB reserve (python scripts/fit_stack_versions.py) leave-one-GPU-out is 8.3 % with the
# split and 8.4 % with 0.11-0.12 as one range (refitted: dense 0.97, MoE 0.94, in sample 8.0 %,
# the 0.11 MoE rows +20.4 %). MLPerf v4.1 (never fitted on; its TensorRT-LLM rows at 0.11's
# factors) 8.1 %, signed +7.5 %; with the one-range refit 11.0 %, +10.1 % (Mixtral +28 to
# +37 %). 0.10 dense sits at the grid's edge (few rows, A100 only); 0.11 MoE rests on 12 rows.
TIME_SCALE: dict[tuple[str, str], float] = {
    ("0.10", "dense"): 1.25, ("0.10", "moe"): 1.11,
    ("0.11", "dense"): 0.96, ("0.11", "moe"): 1.18,
    ("0.12", "dense"): 0.99, ("0.12", "moe"): 0.95,
    ("0.13-0.14", "dense"): 1.03, ("0.13-0.14", "moe"): 1.01,
    ("0.15-0.17", "dense"): 0.94, ("0.15-0.17", "moe"): 0.86,
    ("0.18-0.21", "dense"): 0.97}
SCALES = tuple(round(x, 2) for x in np.arange(0.80, 1.2501, 0.01))


def parse(version: str) -> tuple[int, int]:
    """(major, minor) of a TensorRT-LLM release string ("0.12", "0.12.0", "v0.17")."""
    m = re.fullmatch(r"v?(\d{1,3})\.(\d{1,3})(?:\.\d{1,4})?(?:rc\d+)?",
                     str(version).strip())
    if m is None:
        raise ConfigError(f"stack version must look like 0.12 or 0.12.0, got {version!r}")
    return int(m.group(1)), int(m.group(2))


def range_of(version: str) -> str:
    """Name of the release range holding ``version`` (ConfigError outside every range)."""
    v = parse(version)
    for name, lo, hi in RANGES:
        if lo <= v <= hi:
            return name
    raise ConfigError(f"TensorRT-LLM {version} has no profile: the shared rows cover "
                      f"{RANGES[0][1][0]}.{RANGES[0][1][1]} to "
                      f"{RANGES[-1][2][0]}.{RANGES[-1][2][1]}")


def time_scale(version: str | None, moe: bool, table: dict | None = None) -> float:
    """Factor on the roofline compute time of a TensorRT-LLM ``version`` (None: 1, pooled)."""
    if version is None:
        return 1.0
    t = TIME_SCALE if table is None else table
    return t.get((range_of(version), "moe" if moe else "dense"), 1.0)


def range_scale(name: str, moe: bool) -> float:
    """Factor of a release range by its name (``versions()``; ConfigError if unknown)."""
    if name not in versions():
        raise ConfigError(f"TensorRT-LLM release range must be one of {', '.join(versions())}, "
                          f"got {name!r}")
    return TIME_SCALE.get((name, "moe" if moe else "dense"), 1.0)


def versions() -> tuple[str, ...]:
    """The release range names a user can choose (CLI / page)."""
    return tuple(name for name, _, _ in RANGES)


# ---- fitting on recorded max-load runs (duty_fit.record) -------------------------------------

def _group(row) -> tuple[str, str] | None:
    """(release range, family) of a max-load row (``validation.MaxLoadRow``; None: no
    release or one outside every range)."""
    if not row.version:
        return None
    try:
        rng = range_of(row.version)
    except ConfigError:
        return None
    return rng, "moe" if row.moe else "dense"


def errors(records, duty: float | None, table: dict) -> list[tuple]:
    """[(row, predicted / measured - 1)] with the wall at ``duty`` and the factors of
    ``table`` (each row at its own release's factor)."""
    out = []
    for r, p in records:
        g = _group(r)
        s = table.get(g, 1.0) if g else 1.0
        out.append((r, p.tokens_per_s(duty, s) / r.measured - 1))
    return out


def fit(records, duty: float | None, scales=SCALES, keep=lambda row: True) -> dict:
    """{(range, family): factor}: per group the grid factor with the lowest median |error|
    over the group's rows that ``keep`` accepts, each row's error taken relative to its GPU's
    median ratio predicted / measured at factor 1 (over all its kept rows): the factor is the
    release's effect within a GPU, not a GPU's own offset (which a GPU mix that differs
    between releases would otherwise leak into it)."""
    kept = [(r, p) for r, p in records if keep(r)]
    base: dict = {}
    for r, p in kept:
        base.setdefault(r.hardware, []).append(p.tokens_per_s(duty) / r.measured)
    bias = {g: median(v) for g, v in base.items()}
    by: dict = {}
    for r, p in kept:
        g = _group(r)
        if g is not None:
            by.setdefault(g, []).append((r, p))
    out = {}
    for g, recs in sorted(by.items()):
        best = min(scales, key=lambda s: (median(
            abs(p.tokens_per_s(duty, s) / r.measured / bias[r.hardware] - 1) for r, p in recs),
            abs(s - 1.0)))
        out[g] = float(best)
    return out


def leave_one_gpu_out(records, duties: dict, scales=SCALES) -> tuple[list[tuple], dict]:
    """([(row, held-out error)], {gpu: factors fitted without it}); ``duties`` = the power
    wall's duty fitted without each GPU (``duty_fit.leave_one_gpu_out``)."""
    held, chosen = [], {}
    for g in sorted({r.hardware for r, _ in records}):
        d = duties[g]
        table = fit(records, d, scales, keep=lambda row: row.hardware != g)
        chosen[g] = table
        held += errors([(r, p) for r, p in records if r.hardware == g], d, table)
    return held, chosen


def summary(errs) -> str:
    e = [x for _, x in errs]
    return f"{median(map(abs, e)):.1%} (signed {median(e):+.1%}, {len(e)} rows)" if e else "-"
