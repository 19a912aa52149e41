"""One call for the CLI and the page: build the iteration cost, simulate, summarise, and
optionally search the largest rate meeting an SLO and size a fleet for a target rate."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError
from ..hardware import Efficiency, Hardware
from ..metrics.cost import MetricsSettings
from ..model import Model
from ..parallel import ParallelPlan
from ..precision import Precision
from .cost import IterationCost
from .engine import EngineConfig, SimResult, simulate
from .report import (RateSearch, ServeSummary, Slo, max_rate_meeting_slo, replicas_for_rate,
                     steady_state_output_tokens_per_s, summarize)
from .requests import RequestSpec
from .sweeps import LoadCurve, load_curve


@dataclass(frozen=True)
class ServeStudy:
    """Everything ``serve`` computed. ``search`` is None without an SLO; ``replicas`` None
    without a target rate."""
    summary: ServeSummary
    result: SimResult
    cost: IterationCost
    config: EngineConfig
    spec: RequestSpec
    slo: Slo | None
    saturation_requests_per_s: float
    search: RateSearch | None
    target_rate: float | None
    replicas: int | None
    closed_form_output_tokens_per_s: float | None
    curve: LoadCurve | None = None

    @property
    def gpus_for_target(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.cost.devices


def serve(model: Model, hardware: Hardware, precision: Precision, spec: RequestSpec,
          config: EngineConfig, plan: ParallelPlan | None = None,
          efficiency: Efficiency | None = None, slo: Slo | None = None,
          target_rate: float | None = None, settings: MetricsSettings | None = None,
          flash_attention: bool = True, search: bool = True, curve_points: int = 0,
          progress=None) -> ServeStudy:
    """Simulate ``spec`` on one replica of ``plan`` and summarise it; with an SLO, also find
    the largest request rate meeting it (``search``); with ``target_rate`` [requests/s], the
    replicas needed (at the SLO rate if there is an SLO, else at the max-load rate); with
    ``curve_points`` > 0, latency against load at that many rates."""
    plan = plan or ParallelPlan()
    cost = IterationCost(model, hardware, precision, plan, efficiency, flash_attention)
    share = (0.3, 0.4, 0.3) if curve_points else (0.3, 0.7, 0.0)

    def part(lo: float, width: float):
        return (lambda f: progress(lo + width * f)) if progress else None   # noqa: E731
    res = simulate(cost, config, spec, part(0.0, share[0]))
    summ = summarize(res, cost, slo, settings)
    if spec.arrival == "max-load":
        sat = summ.requests_per_s
    else:
        sat_res = simulate(cost, config, replace(spec, arrival="max-load"))
        sat = len(sat_res.osl) / sat_res.makespan_s
    found = None
    if slo is not None and search:
        found = max_rate_meeting_slo(cost, config, spec, slo, sat, part(share[0], share[1]))
    reps = None
    if target_rate is not None:
        per = found.max_rate if found is not None else sat
        reps = replicas_for_rate(target_rate, per)
        if reps is None:
            raise ConfigError("no request rate meets the SLO on one replica, so no number of "
                              "replicas reaches the target")
    closed = None
    if spec.lengths == "fixed":
        closed = steady_state_output_tokens_per_s(cost, config, spec.isl, spec.osl)[0]
    curve = None
    if curve_points:
        curve = load_curve(cost, config, spec, sat, curve_points, slo,
                           part(share[0] + share[1], share[2]))
    if progress:
        progress(1.0)
    return ServeStudy(summ, res, cost, config, spec, slo, sat, found, target_rate, reps, closed,
                      curve)
