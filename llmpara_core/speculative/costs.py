"""Costs of speculation that are not in any pass's operators: two constants, fitted on the
published batch sweeps (``speculative.fit``, ``scripts/fit_speculative.py``), stored in
``presets/tables/speculative_costs.toml``.

* ``draft_seq_share``: the share of the stack's per-sequence pass cost
  (``Efficiency.seq_overhead_s``: inputs prepared per request) that each draft pass pays. A
  draft head or model run in a loop on the device within one engine step pays none (0); a
  draft pass scheduled like any engine pass pays all of it (1).
* ``iteration_seq_s``: host work per sequence per draft + verify iteration that speculation
  adds to the plain decode step (accepting and rejecting drafts, rolling back the KV slots of
  rejected ones, preparing the next drafts' inputs), on top of a stack's own
  ``Efficiency.spec_host_seq_s``.

Neither depends on gamma, alpha or the batch: the batch sweeps pin them through the way the
speedup falls with the batch, alpha being fitted on each sweep's smallest batch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import require_float
from ..presets import load_table
from ..units import S_PER_US


@dataclass(frozen=True)
class SpecCosts:
    draft_seq_share: float = 1.0
    iteration_seq_s: float = 0.0

    def __post_init__(self):
        require_float("draft_seq_share", self.draft_seq_share, lo=0, hi=1)
        require_float("iteration_seq_s", self.iteration_seq_s, lo=0, hi=1e-2)


_OVERRIDE: list[SpecCosts] = []


@functools.lru_cache(maxsize=1)
def _table_costs() -> SpecCosts:
    t = load_table("speculative_costs").get("costs", {})
    return SpecCosts(float(t.get("draft_seq_share", 1.0)),
                     float(t.get("iteration_seq_us", 0.0)) * S_PER_US)


def spec_costs() -> SpecCosts:
    """The constants in force: an ``overridden`` value while fitting, else the table's."""
    return _OVERRIDE[-1] if _OVERRIDE else _table_costs()


class overridden:
    """Context manager: ``spec_costs()`` returns ``costs`` inside (the fit's trial values;
    the engine cache is keyed by the costs in force, so no cached engine leaks across)."""

    def __init__(self, costs: SpecCosts):
        self.costs = costs

    def __enter__(self):
        _OVERRIDE.append(self.costs)
        return self.costs

    def __exit__(self, *exc):
        _OVERRIDE.pop()
        return False


def recorded_fit() -> dict:
    """The leave-one-sweep-out figures the fit script wrote beside the constants (``[fit]``
    of ``speculative_costs.toml``; ``speculative.fit.fit_costs`` recomputes them)."""
    return dict(load_table("speculative_costs").get("fit", {}))
