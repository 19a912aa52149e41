"""Cached calls into llmpara_core. Pages call these, never the physics themselves.

Arguments are hashable inputs (preset slugs, frozen dataclasses); results are copies, so pages
may mutate them. Every cache is bounded.
"""

from __future__ import annotations

import streamlit as st

from llmpara_core import presets
from llmpara_core.analysis import Report, analyze
from llmpara_core.hardware import Hardware
from llmpara_core.hf_import import from_hf_config
from llmpara_core.model import Model
from llmpara_core.precision import Precision
from llmpara_core.workload import Workload


@st.cache_data(max_entries=256, show_spinner=False)
def report(model: Model, hardware: Hardware, precision: Precision, workload: Workload) -> Report:
    """``llmpara_core.analysis.analyze`` of one scenario (raises the core's ConfigError)."""
    return analyze(model, hardware, precision, workload)


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


@st.cache_data(max_entries=64, show_spinner=False)
def decode_crossover(model: Model, hardware: Hardware, precision: Precision,
                     workload: Workload, max_batch: int):
    """Smallest batch at which decode turns compute-bound (``llmpara_core.sweeps``)."""
    from llmpara_core.sweeps import decode_crossover_batch
    return decode_crossover_batch(model, hardware, precision, workload, max_batch=max_batch)


@st.cache_data(max_entries=64, show_spinner=False)
def kv_growth(model: Model, precision: Precision, batch: int, max_context: int, points: int):
    from llmpara_core.sweeps import kv_cache_curve
    return kv_cache_curve(model, precision, batch, max_context, points)
