"""Fleet planner: the cheapest way to serve a traffic mix (several models at their request
rates, lengths and SLOs), searched over hardware x TP x PP x precision x serving stack.

Closed forms prune the candidates (memory fit, zero-load latency floor, max-load throughput
bound and the cost it implies); the serving simulator's SLO rate search runs on the survivors,
one task per candidate, in this process, on a process pool or on Ray (:mod:`.executors`).
:func:`plan` is the one call the CLI (`llmpara plan`) and the Fleet page use."""

from .executors import EXECUTORS, InProcess, LocalPool, RayExecutor, make_executor
from .search import (Bound, Candidate, FleetPlan, PlanRow, Task, bounds, enumerate_candidates,
                     evaluate_candidate, plan, plan_to_dict, price_per_gpu_hour, support)
from .traffic import (DEFAULT_FRAMEWORKS, DEFAULT_HARDWARE, DEFAULT_PRECISIONS, Candidates,
                      Constraints, Demand, TrafficMix, load_traffic, mix_from_dict,
                      mix_to_dict, parse_traffic, workload_row)

__all__ = [
    "EXECUTORS", "InProcess", "LocalPool", "RayExecutor", "make_executor", "Bound",
    "Candidate", "FleetPlan", "PlanRow", "Task", "bounds", "enumerate_candidates",
    "evaluate_candidate", "plan", "plan_to_dict", "price_per_gpu_hour", "support",
    "DEFAULT_FRAMEWORKS", "DEFAULT_HARDWARE", "DEFAULT_PRECISIONS", "Candidates",
    "Constraints", "Demand", "TrafficMix", "load_traffic", "mix_from_dict", "mix_to_dict",
    "parse_traffic", "workload_row",
]
