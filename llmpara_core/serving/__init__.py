"""Serving simulator: an in-flight-batching engine (scheduler, paged KV cache, preemption)
stepped iteration by iteration with closed-form iteration costs from the core. See
:mod:`.engine` for the scheduler, :mod:`.cost` for the iteration time, :mod:`.report` for the
metrics and :func:`serve` for the one call the CLI and the page use."""

from . import lengths, scenarios, streaming
from .api import ServeStudy, replica_fits, serve, smallest_fitting, study_to_dict
from .cost import IterationCost
from .disagg import DisaggStudy, Split, disagg_to_dict, disaggregate
from .config import (FRAMEWORK_DEFAULTS, GENERIC_DEFAULTS, POLICIES, SCHEDULERS, EngineConfig,
                     engine_config, framework_defaults)
from .engine import SimResult, kv_capacity_tokens, simulate
from .kv_memory import KvMemory, kv_memory, kv_memory_for
from .report import (Percentiles, RateSearch, ServeSummary, Slo, max_rate_meeting_slo, meets,
                     per_request, replicas_for_rate, steady_state_output_tokens_per_s,
                     summarize)
from .requests import ARRIVALS, LENGTHS, RequestSpec, draw
from .sweeps import (FrontierPoint, LoadCurve, LoadPoint, SweepPoint, evaluate_point, frontier,
                     load_curve, run_sweep)

__all__ = [
    "lengths", "scenarios", "streaming", "KvMemory", "kv_memory", "kv_memory_for",
    "DisaggStudy", "Split", "disagg_to_dict", "disaggregate", "ServeStudy", "serve", "study_to_dict", "replica_fits", "smallest_fitting", "engine_config", "IterationCost", "FRAMEWORK_DEFAULTS", "GENERIC_DEFAULTS",
    "POLICIES", "SCHEDULERS", "EngineConfig", "SimResult", "framework_defaults", "kv_capacity_tokens",
    "simulate", "Percentiles", "RateSearch", "ServeSummary", "Slo", "max_rate_meeting_slo",
    "meets", "per_request", "replicas_for_rate", "steady_state_output_tokens_per_s",
    "summarize", "ARRIVALS", "LENGTHS", "RequestSpec", "draw", "FrontierPoint", "LoadCurve",
    "LoadPoint", "SweepPoint", "evaluate_point", "frontier", "load_curve", "run_sweep",
]
