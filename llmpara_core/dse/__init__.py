"""Design-space exploration: for one model, precision and workload, the operators' FLOPs and
bytes come once from ``forward.forward_ops`` (``profile``); ``evaluation`` applies
``roofline.op_time_s``'s rule to millions of hardware designs with numpy, chunk by chunk,
``run.explore`` runs a whole space keeping only the front, the counts and a sample, ``physics``
couples area, price, memory and power, ``space`` defines the swept axes, ``pareto`` the exact
fronts and ``nsga`` NSGA-II (pymoo).
"""

from .evaluation import (AXIS_COLUMN, DEFAULT_OBJECTIVES, OBJECTIVES, DesignContext, Evaluation,
                         Sensitivity, design_name, objective_matrix, pareto_front, sensitivity)
from .run import DSEResult, explore, summarise

__all__ = ["AXIS_COLUMN", "DEFAULT_OBJECTIVES", "OBJECTIVES", "DSEResult", "DesignContext",
           "Evaluation", "Sensitivity", "design_name", "explore", "objective_matrix",
           "pareto_front", "sensitivity", "summarise"]
