"""Heterogeneous memory tiers (SRAM / DRAM / Flash, any ordered list): ``placement`` lays
weights, KV cache and activations into the tiers, ``engine`` streams each tier's bytes of a
decode step at its bandwidth (operators from ``forward.forward_ops``, times by
``roofline.op_time_s``'s rule), ``report`` and ``formats`` turn results and tier tables to text.
"""

from .engine import HeteroResult, evaluate, hetero
from .placement import (CATEGORIES, OVERLAPS, STRATEGIES, build_items, expert_selection_probs,
                        place)

__all__ = ["HeteroResult", "evaluate", "hetero", "CATEGORIES", "OVERLAPS", "STRATEGIES",
           "build_items", "expert_selection_probs", "place"]
