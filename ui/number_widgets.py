"""Every numeric input of the dashboard, with the range it accepts, in one registry.

Each page-local number box (``ui.url_widgets.url_number``, ``ui.page_inputs.optional_number``)
takes its range from here: ``quantity`` names the quantity's bound in ``llmpara_core.limits``
(the physics), and ``lo``/``hi`` may narrow it for the page (a box of at most 20,000 simulated
requests); a page may narrow it further at run time (the Sharding page's devices of the
cluster). ``tests/test_hostile.py`` generates its page cases from this registry (every box at
its min, max, 0, just outside each bound, NaN and inf), and checks that each range lies within
its quantity's bound.

Boxes draw without Streamlit's own min/max, so a typed value outside the range reaches the
page: it is rejected with a warning under the box naming the value, the range and the value
the results use instead (issue 28: "Batch −5 turns the box red and the results silently stay
at the old value").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmpara_core.limits import bound

from .format import escape_md


@dataclass(frozen=True)
class NumberBox:
    page: str                  # the page file under app_pages/ ("" = the sidebar, every page)
    key: str                   # URL key and widget key
    quantity: str | None       # llmpara_core.limits bound of the quantity (None: a UI count)
    lo: float
    hi: float
    is_int: bool = False
    lo_open: bool = False

    def contains(self, v) -> bool:
        return (v is not None and not isinstance(v, bool) and math.isfinite(v)
                and self.lo <= v <= self.hi and not (self.lo_open and v == self.lo))


def _box(page, key, quantity, lo=None, hi=None, is_int=False, lo_open=False) -> NumberBox:
    """A box whose range is ``quantity``'s bound narrowed to [lo, hi] where given."""
    if quantity is not None:
        b = bound(quantity)
        lo = b.lo if lo is None else lo
        hi = b.hi if hi is None else hi
    return NumberBox(f"app_pages/{page}" if page else "", key, quantity, lo, hi, is_int, lo_open)


_P = "_page.py"
BOXES: tuple[NumberBox, ...] = (
    # Design space
    _box("design_space" + _P, "ds_n", "samples", 100, 1_000_000, True),
    _box("design_space" + _P, "ds_seed", None, 0, 1_000_000, True),
    _box("design_space" + _P, "ds_pop", "population", 8, 1000, True),
    _box("design_space" + _P, "ds_gen", "generations", 1, 500, True),
    # Fleet
    _box("fleet" + _P, "fl_req", "requests", 20, 5000, True),
    _box("fleet" + _P, "fl_budget", None, 0, 100_000, True),            # GPUs, 0 = none
    _box("fleet" + _P, "fl_power", None, 0.0, 1e6),                     # kW, 0 = none
    _box("fleet" + _P, "fl_seed", None, 0, 2**31 - 1, True),
    # Memory
    _box("memory" + _P, "mtop", None, 1, 100, True),
    # Memory tiers
    _box("memory_tiers" + _P, "mt_zipf", "expert_zipf_s"),
    _box("memory_tiers" + _P, "mt_maxb", "batch", 1, 4096, True),
    # Metrics
    _box("metrics" + _P, "m_alpha", "alpha"),
    _box("metrics" + _P, "m_pue", "pue", 1.0, 3.0),
    _box("metrics" + _P, "m_kwh", "usd_per_kwh", 0.0, 2.0),
    _box("metrics" + _P, "m_life", "lifetime_years", 0.5, 15.0),
    _box("metrics" + _P, "m_util", None, 1, 100, True),               # percent
    _box("metrics" + _P, "m_topn", None, 3, 80, True),
    _box("metrics" + _P, "m_emb", "embodied_kgco2e", 0.0, 1e6),
    _box("metrics" + _P, "m_static", "power_w", 0.0, 1e5),
    _box("metrics" + _P, "m_pjflop", None, 0.0, 1e4),                  # pJ/FLOP
    _box("metrics" + _P, "m_pjbyte", None, 0.0, 1e5),                  # pJ/B
    # Serving
    _box("serving" + _P, "sv_tp", "degree", 1, 1024, True),
    _box("serving" + _P, "sv_pp", "degree", 1, 1024, True),
    _box("serving" + _P, "sv_rate", "rate_per_s", 0.001, 1e6),
    _box("serving" + _P, "sv_burst", "burstiness", 0.01, 100.0),
    _box("serving" + _P, "sv_requests", "requests", 10, 20_000, True),
    _box("serving" + _P, "sv_seed", None, 0, 2**31 - 1, True),
    _box("serving" + _P, "sv_maxbatch", None, 0, 100_000, True),       # 0 = the stack's
    _box("serving" + _P, "sv_spread", "unit_fraction"),
    _box("serving" + _P, "sv_maxtokens", None, 0, 1_000_000, True),    # 0 = the stack's
    _box("serving" + _P, "sv_block", None, 0, 4096, True),             # 0 = the stack's
    _box("serving" + _P, "sv_hit", "unit_fraction", 0.0, 0.99),
    _box("serving" + _P, "sv_kvfrac", "unit_fraction"),                # 0 = the stack's
    _box("serving" + _P, "sv_reserve", None, 0.0, 931.0),              # GiB (< 1e12 B), empty = the stack's
    _box("serving" + _P, "sv_slo_ttft", "slo_ms", 1.0, 1e7),
    _box("serving" + _P, "sv_slo_tpot", "slo_ms", 0.1, 1e6),
    _box("serving" + _P, "sv_slo_pct", "percentile"),
    _box("serving" + _P, "sv_target", None, 0.0, 1e9),                 # 0 = no target
    _box("serving" + _P, "sv_points", None, 3, 30, True),
    _box("serving" + _P, "sv_dgpus", "devices", 2, 4096, True),
    _box("serving" + _P, "sv_kvlink", None, 0.0, 1e6),                 # GB/s, 0 = preset's
    # Sharding
    _box("sharding" + _P, "sh_tp", "degree", is_int=True),
    _box("sharding" + _P, "sh_pp", "degree", is_int=True),
    _box("sharding" + _P, "sh_dp", "degree", is_int=True),
    _box("sharding" + _P, "sh_ep", "degree", is_int=True),
    _box("sharding" + _P, "sh_mb", None, 0, 100_000, True),            # 0 = automatic
    _box("sharding" + _P, "sh_overlap", "unit_fraction"),
    _box("sharding" + _P, "sh_maxdev", "devices", is_int=True),
    _box("sharding" + _P, "sh_linkbw", None, 0.001, 1e6),              # GB/s
    _box("sharding" + _P, "sh_linklat", None, 0.0, 1e6),               # µs
    # Speculative
    _box("speculative" + _P, "sp_head_m", None, 0.0, 100_000.0),       # M parameters, 0 = derived
    _box("speculative" + _P, "sp_head_layers", None, 1, 8, True),
    _box("speculative" + _P, "sp_gamma", None, 0, 32, True),           # 0 = no speculation
    _box("speculative" + _P, "sp_alpha", "unit_fraction"),
    _box("speculative" + _P, "sp_e", None, 1.0, 33.0),
    # Validation
    _box("validation" + _P, "v_worst", None, 1, 100, True),
)
REGISTRY: dict[str, NumberBox] = {b.key: b for b in BOXES}


def box_range(key: str, lo, hi) -> tuple:
    """The range of box ``key``: its registered range, narrowed by the page's ``lo``/``hi``
    (the page may narrow it at run time; it never widens it). Unregistered keys keep the
    page's range (tests/test_hostile.py fails on an unregistered page box)."""
    b = REGISTRY.get(key)
    if b is None:
        return lo, hi
    lo2 = b.lo if lo is None else max(b.lo, lo)
    hi2 = b.hi if hi is None else min(b.hi, hi)
    cast = int if b.is_int else float
    return cast(lo2), cast(hi2)


def _num(v) -> str:
    if isinstance(v, float) and (not math.isfinite(v) or abs(v) >= 1e6 or 0 < abs(v) < 1e-3):
        return f"{v:g}"
    return f"{v:,}" if isinstance(v, int) else f"{v:,.6g}"


def in_range(v, lo, hi, lo_open: bool = False) -> bool:
    return (v is not None and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi
            and not (lo_open and v == lo))


def reject(where, label: str, v, lo, hi, using, lo_open: bool = False) -> None:
    """The warning under a box whose typed value ``v`` is outside [lo, hi]: what was rejected,
    why, and what the results use instead."""
    br = "(" if lo_open else "["
    use = "the default" if using is None else _num(using)
    where.warning(f"**{escape_md(label)}**: {escape_md(_num(v))} rejected: it must be in "
                  f"{br}{escape_md(_num(lo))}, {escape_md(_num(hi))}]. The results use "
                  f"{escape_md(use)}.", icon=":material/block:")
