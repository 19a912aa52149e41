"""Cached calls into llmpara_core. Pages call these, never the physics themselves.

Arguments are hashable inputs (preset slugs, frozen dataclasses); results are copies, so pages
may mutate them. Every cache is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from llmpara_core import presets
from llmpara_core.analysis import Report, analyze
from llmpara_core.envelope import check_report
from llmpara_core.hardware import Hardware
from llmpara_core.hf_import import from_hf_config
from llmpara_core.model import Model
from llmpara_core.precision import Precision
from llmpara_core.workload import Workload


@st.cache_data(max_entries=256, show_spinner=False)
def report(model: Model, hardware: Hardware, precision: Precision, workload: Workload) -> Report:
    """``llmpara_core.analysis.analyze`` of one scenario (raises the core's ConfigError; a
    report outside the output envelope, ``llmpara_core.envelope``, is refused the same way)."""
    rep = analyze(model, hardware, precision, workload)
    check_report(rep)
    return rep


def scenario_report(scn) -> Report:
    """The report of a :class:`ui.scenario.Scenario`."""
    return report(scn.model, scn.hardware, scn.precision, scn.workload)


@st.cache_data(max_entries=32, show_spinner=False)
def model_from_config(text: bytes, name: str) -> Model:
    """A model from an uploaded or pasted Hugging Face ``config.json`` (ConfigError if bad)."""
    return from_hf_config(text, name=name)


def preset_model(slug: str) -> Model:
    """A model preset (the core caches preset loading)."""
    return presets.load_model(slug)


def preset_hardware(slug: str) -> Hardware:
    return presets.load_hardware(slug)


def decode_crossover(model: Model, hardware: Hardware, precision: Precision,
                     workload: Workload, max_batch: int):
    """Smallest batch at which decode turns compute-bound (``llmpara_core.sweeps``). The search
    sets the batch itself, so the cache ignores the workload's batch (a batch change on the
    page does not repeat the search)."""
    return _decode_crossover(model, hardware, precision, replace(workload, batch=1), max_batch)


@st.cache_data(max_entries=64, show_spinner=False)
def _decode_crossover(model: Model, hardware: Hardware, precision: Precision,
                      workload: Workload, max_batch: int):
    from llmpara_core.sweeps import decode_crossover_batch
    return decode_crossover_batch(model, hardware, precision, workload, max_batch=max_batch)


@st.cache_data(max_entries=64, show_spinner=False)
def kv_growth(model: Model, precision: Precision, batch: int, max_context: int, points: int):
    from llmpara_core.sweeps import kv_cache_curve
    return kv_cache_curve(model, precision, batch, max_context, points)


@dataclass(frozen=True)
class ClusterResult:
    """A cluster preset evaluated on all its devices: the sharded report, and how the plan
    was chosen ("best" = the sharding engine's lowest-TPOT plan over all devices that fits;
    "tp" = tensor parallelism over all devices, when no plan fits)."""
    shard: object            # llmpara_core.parallel.ShardReport
    how: str


@st.cache_data(max_entries=64, show_spinner=False)
def cluster_result(model: Model, hardware: Hardware, precision: Precision,
                   workload: Workload) -> ClusterResult | None:
    """A multi-device preset (``[interconnect] devices > 1``) on all its devices
    (``llmpara_core.parallel``); None for a single device. Raises the core's ConfigError when
    not even TP over all devices is a valid plan."""
    from llmpara_core import parallel
    ic = hardware.interconnect
    if ic is None or ic.devices <= 1:
        return None
    found = parallel.search_plans(model, hardware, precision, workload, "min_tpot",
                                  exact_devices=ic.devices)
    if found:
        plan, how = found[0].plan, "best"
    else:
        plan, how = parallel.ParallelPlan(tp=ic.devices), "tp"
    return ClusterResult(parallel.shard_analyze(model, hardware, precision, workload, plan), how)
