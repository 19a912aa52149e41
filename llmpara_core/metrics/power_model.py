"""The fitted constants of the power model under load (``presets/tables/energy_power.toml``,
written by ``scripts/fit_energy.py``): what ``metrics.energy`` prices a scenario with and
``metrics.energy_validation`` validates. Kept apart so that neither imports the other."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import require_float
from ..presets import load_table


@dataclass(frozen=True)
class PowerConstants:
    """Shares of a device's idle-to-TDP range (busy, host) and the scale of its technology
    energies per FLOP and per byte (the model: ``metrics.energy_validation``)."""
    active: float
    host: float
    dynamic: float

    def __post_init__(self):
        for k in ("active", "host", "dynamic"):
            require_float(f"power constant {k}", getattr(self, k), lo=0, hi=10)


@functools.lru_cache(maxsize=1)
def power_constants() -> PowerConstants:
    """The fitted constants of ``presets/tables/energy_power.toml``."""
    t = load_table("energy_power").get("power", {})
    return PowerConstants(float(t["active"]), float(t["host"]), float(t["dynamic"]))


def recorded_fit() -> dict:
    """The leave-one-device-out medians the fit script wrote beside the constants
    (``[fit]`` of ``energy_power.toml``; ``energy_fit.fit_energy`` recomputes them)."""
    return dict(load_table("energy_power").get("fit", {}))
