"""MLPerf Inference scenarios as presets of the serving simulator.

``offline``: every request queued at once (throughput only). ``server``: Poisson arrivals; a
result counts only if the 99th percentile of TTFT and of TPOT are within the benchmark's
limits. ``interactive``: the same with the tighter limits of the benchmark's interactive
variant. The limits per benchmark are those of MLPerf's LoadGen configuration
(``github mlcommons/inference@001712e9daf8:loadgen/mlperf.conf``: ``*.Server.ttft_latency``,
``*.Server.tpot_latency`` in ms, ``*.Server.target_latency_percentile = 99``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .report import Slo

SCENARIOS = ("offline", "server", "interactive")
MLPERF_PERCENTILE = 99.0
MLPERF_SOURCE = ("MLPerf LoadGen limits, github mlcommons/inference@001712e9daf8:"
                 "loadgen/mlperf.conf (Server.ttft_latency / tpot_latency [ms], "
                 "target_latency_percentile 99)")


@dataclass(frozen=True)
class BenchmarkLimits:
    """p99 TTFT / TPOT limits [ms] of one MLPerf LLM benchmark (server and interactive;
    None where the round has no interactive variant) and the length set it runs on."""
    benchmark: str
    server_ttft_ms: float
    server_tpot_ms: float
    interactive_ttft_ms: float | None
    interactive_tpot_ms: float | None
    lengths: str | None


LIMITS: dict[str, BenchmarkLimits] = {b.benchmark: b for b in (
    BenchmarkLimits("llama2-70b", 2000, 200, 450, 40, "openorca"),
    BenchmarkLimits("mixtral-8x7b", 2000, 200, None, None, None),
    BenchmarkLimits("llama3_1-405b", 6000, 175, 4500, 80, None),
    BenchmarkLimits("llama3_1-8b", 2000, 100, 500, 30, None),
    BenchmarkLimits("deepseek-r1", 2000, 80, 1500, 15, "deepseek-r1"),
)}
# Model presets -> their MLPerf benchmark (others use llama2-70b's limits, said in the note).
MODEL_BENCHMARK = {"llama-2-70b": "llama2-70b", "mixtral-8x7b": "mixtral-8x7b",
                   "llama-3.1-405b": "llama3_1-405b", "llama-3.1-8b": "llama3_1-8b",
                   "deepseek-r1": "deepseek-r1", "deepseek-v3": "deepseek-r1"}
DEFAULT_BENCHMARK = "llama2-70b"


@dataclass(frozen=True)
class ScenarioPreset:
    scenario: str
    benchmark: str
    arrival: str            # "max-load" or "poisson"
    slo: Slo | None         # p99 limits (None offline)
    note: str


def benchmark_for(model_slug: str | None) -> str:
    return MODEL_BENCHMARK.get((model_slug or "").lower(), DEFAULT_BENCHMARK)


def preset(scenario: str, model_slug: str | None = None,
           benchmark: str | None = None) -> ScenarioPreset:
    """The arrivals and p99 SLO of an MLPerf scenario for ``model_slug``'s benchmark (or the
    named ``benchmark``)."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    bench = benchmark or benchmark_for(model_slug)
    if bench not in LIMITS:
        raise ConfigError(f"unknown MLPerf benchmark {bench!r}; known: {', '.join(LIMITS)}")
    lim = LIMITS[bench]
    which = "" if benchmark or (model_slug or "").lower() in MODEL_BENCHMARK else \
        f" (this model has no MLPerf benchmark: {bench}'s limits)"
    if scenario == "offline":
        return ScenarioPreset(scenario, bench, "max-load", None,
                              f"MLPerf Offline: every request queued at once{which}")
    if scenario == "server":
        ttft, tpot = lim.server_ttft_ms, lim.server_tpot_ms
    else:
        if lim.interactive_ttft_ms is None:
            raise ConfigError(f"MLPerf {bench} has no interactive scenario")
        ttft, tpot = lim.interactive_ttft_ms, lim.interactive_tpot_ms
    slo = Slo(ttft / 1000.0, tpot / 1000.0, MLPERF_PERCENTILE)
    return ScenarioPreset(scenario, bench, "poisson", slo,
                          f"MLPerf {scenario.capitalize()} ({bench}): Poisson arrivals, p99 "
                          f"TTFT <= {ttft:g} ms and p99 TPOT <= {tpot:g} ms{which}; "
                          f"{MLPERF_SOURCE}")
