"""Streaming as a user setting: on or off, and what it is when nobody says.

An engine that streams returns a response for every sequence that produced a token, after each
pass, before it starts the next (``EngineConfig.stream_s_per_token``). Its size per streamed
token is taken, as for the MLPerf Server rows (``mlperf.server_stream_s``), to be what the
stack's per-sequence per-pass host work costs (``Efficiency.seq_overhead_s`` at the release's
factor on the time; TensorRT-LLM 10.07 us, vLLM 36.7 us, 0 for profiles without one, such as
the generic fit): no source gives it directly.

The default follows NVIDIA's MLPerf LLM harness, which streams in every scenario except
Offline (``mlperf.SERVER_STREAMING``, cited there): on for the ``server`` and ``interactive``
scenarios under TensorRT-LLM, off otherwise (no stack streams by default; AMD's vLLM harness:
no source read on its streaming, as in ``mlperf.server_stream_s``).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import ConfigError
from ..hardware import Hardware
from .config import EngineConfig

STREAMING_SCENARIOS = ("server", "interactive")
STREAMING_STACKS = ("tensorrt-llm",)


def default_streaming(scenario: str | None, stack: str | None) -> bool:
    """Whether a run streams when the user does not say: an MLPerf ``server`` or
    ``interactive`` scenario (``scenarios.SCENARIOS``) under TensorRT-LLM."""
    return scenario in STREAMING_SCENARIOS and stack in STREAMING_STACKS


def default_reason(scenario: str | None, stack: str | None) -> str:
    """Why :func:`default_streaming` is what it is, in a few words."""
    if default_streaming(scenario, stack):
        return f"NVIDIA's MLPerf harness streams in {scenario} runs of TensorRT-LLM"
    if scenario in STREAMING_SCENARIOS:
        return f"no source read on {stack or 'this stack'}'s streaming in MLPerf runs"
    return "no stack streams by default; MLPerf server / interactive under TensorRT-LLM do"


def stream_s_per_token(hardware: Hardware, time_scale: float = 1.0) -> float:
    """Host seconds per streamed token on ``hardware`` (with its stack's efficiency profile)
    at a release factor ``time_scale``: the stack's per-sequence per-pass host cost."""
    return float(hardware.effective_efficiency.seq_overhead_s) * float(time_scale)


def with_streaming(cfg: EngineConfig, on: bool, hardware: Hardware,
                   time_scale: float = 1.0) -> EngineConfig:
    """``cfg`` streaming (``on``) at :func:`stream_s_per_token`, or not streaming."""
    if not isinstance(on, bool):
        raise ConfigError("streaming must be true or false")
    return replace(cfg, stream_s_per_token=stream_s_per_token(hardware, time_scale) if on
                   else 0.0)
