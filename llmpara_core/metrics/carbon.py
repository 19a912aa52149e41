"""Carbon: grid intensity by region and CO2e per million output tokens.

Per output token (device-level energy E and device time t from ``energy.EnergyReport``)::

    operational [g] = (E + P_idle t (1 - u) / u) * PUE / 3.6e6 * CI        (CI in gCO2e/kWh)
    embodied    [g] = 1000 * M_emb * t / (lifetime_s * u)                    (M_emb in kgCO2e)

The idle term charges the energy drawn while the device waits between requests (a fraction
1 - u of its life) to the tokens it serves; ``include_idle=False`` drops it. The embodied term
amortises manufacturing over the hours the device is busy (README_energy_carbon.md "How to use").

Reference defects fixed (reference-tool §10 item 16 and §4.4): operational carbon uses the
roofline (estimated) time of every operator, not FLOPs / peak at TDP; PUE is applied; embodied
carbon uses the user's lifetime and utilisation; results are per token of the actual workload.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import ConfigError, did_you_mean, require_float
from ..limits import check_float
from ..presets import load_table, normalize
from ..units import G_PER_KG, HOURS_PER_YEAR, J_PER_KWH, S_PER_HOUR, TOKENS_PER_MILLION


@dataclass(frozen=True)
class GridRegion:
    """Annual average grid carbon intensity of one region (gCO2e per kWh)."""
    key: str
    name: str
    region_type: str
    gco2e_per_kwh: float
    year: str
    basis: str
    source: str
    notes: str = ""
    aliases: tuple[str, ...] = ()


@functools.lru_cache(maxsize=1)
def _grid_table() -> dict:
    return load_table("grid_carbon_intensity")


@functools.lru_cache(maxsize=1)
def grid_regions() -> tuple[GridRegion, ...]:
    """Every region of ``presets/tables/grid_carbon_intensity.toml``, in file order."""
    out = []
    for key, r in _grid_table()["regions"].items():
        out.append(GridRegion(key, r["name"], r["type"], float(r["gco2e_per_kWh"]), str(r["year"]),
                              r["basis"], r["source"], r.get("notes", ""),
                              tuple(r.get("aliases", ()))))
    return tuple(out)


DEFAULT_REGION = "world"


@functools.lru_cache(maxsize=1)
def _region_index() -> dict[str, GridRegion]:
    idx: dict[str, GridRegion] = {}
    for reg in grid_regions():
        for name in (reg.key, reg.name, *reg.aliases):
            idx.setdefault(normalize(name), reg)
    return idx


def grid_region(name: str | None = None) -> GridRegion:
    """A region by key, name or alias (the reference's 9 names work, e.g. "Global_Average"),
    case-insensitively; ConfigError with close matches otherwise."""
    name = DEFAULT_REGION if name is None else name
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("empty grid region name")
    reg = _region_index().get(normalize(name))
    if reg is None:
        names = [r.name for r in grid_regions()] + [r.key for r in grid_regions()]
        raise ConfigError(f"unknown grid region {name!r}{did_you_mean(name, names)}")
    return reg


@dataclass(frozen=True)
class CarbonResult:
    """Grams of CO2e per million output tokens. ``embodied_g_per_million_tokens`` is None when
    the device's embodied carbon is unknown; ``total_g_per_million_tokens`` then counts only
    the operational part (``embodied_known`` says which)."""
    gco2e_per_kwh: float
    pue: float
    operational_g_per_million_tokens: float
    idle_share_of_operational: float
    embodied_g_per_million_tokens: float | None
    embodied_kgco2e: float | None
    region: GridRegion | None = None

    @property
    def embodied_known(self) -> bool:
        return self.embodied_g_per_million_tokens is not None

    @property
    def total_g_per_million_tokens(self) -> float:
        return self.operational_g_per_million_tokens + (self.embodied_g_per_million_tokens or 0.0)

    def operational_at_g_per_million_tokens(self, gco2e_per_kwh: float) -> float:
        """Operational part [gCO2e / M tokens] on another grid (it scales linearly with the
        grid's intensity; the same energy and PUE)."""
        if self.gco2e_per_kwh <= 0:
            return 0.0
        return self.operational_g_per_million_tokens * gco2e_per_kwh / self.gco2e_per_kwh

    @property
    def embodied_fraction(self) -> float | None:
        t = self.total_g_per_million_tokens
        if not self.embodied_known or t <= 0:
            return None
        return self.embodied_g_per_million_tokens / t


def check_lifetime_utilisation(lifetime_years: float, utilisation: float) -> None:
    check_float("lifetime_years", lifetime_years)
    check_float("utilisation", utilisation)


def carbon_per_million_tokens(j_per_token: float, s_per_token: float, gco2e_per_kwh: float,
                              pue: float, lifetime_years: float, utilisation: float,
                              embodied_kgco2e: float | None, idle_w: float | None = None,
                              include_idle: bool = True,
                              region: GridRegion | None = None) -> CarbonResult:
    """CO2e per million output tokens (formulas in the module docstring).

    Parameters
    ----------
    j_per_token : device energy per output token [J]
    s_per_token : device busy time per output token [s] (the batch shares the device)
    gco2e_per_kwh : grid intensity [gCO2e/kWh]
    pue : facility power usage effectiveness [-], >= 1
    lifetime_years, utilisation : service life [years] and busy fraction of it (0, 1]
    embodied_kgco2e : manufacturing carbon of the device [kgCO2e], None if unknown
    idle_w : bare idle power [W] charged for the idle share of the life (None -> 0)
    """
    require_float("energy per token", j_per_token, lo=0)
    require_float("time per token", s_per_token, lo=0)
    require_float("grid intensity", gco2e_per_kwh, lo=0, hi=5000)
    require_float("PUE", pue, lo=1, hi=10)
    check_lifetime_utilisation(lifetime_years, utilisation)
    idle_j = (idle_w or 0.0) * s_per_token * (1 - utilisation) / utilisation if include_idle else 0.0
    op_g = (j_per_token + idle_j) * pue / J_PER_KWH * gco2e_per_kwh
    life_s = lifetime_years * HOURS_PER_YEAR * S_PER_HOUR
    emb_g = (None if embodied_kgco2e is None
             else G_PER_KG * embodied_kgco2e * s_per_token / (life_s * utilisation))
    total = j_per_token + idle_j
    return CarbonResult(gco2e_per_kwh, pue, op_g * TOKENS_PER_MILLION,
                        idle_j / total if total > 0 else 0.0,
                        None if emb_g is None else emb_g * TOKENS_PER_MILLION,
                        embodied_kgco2e, region)
