"""Design-space evaluation: the real scenario analysis of the core applied to arrays of
hardware designs with numpy, chunk by chunk.

``profile`` computes a scenario's FLOPs and bytes once (hardware-independent) and ``times`` its
roofline times for arrays of designs; ``DesignContext.chunks`` adds the coupled area / price /
memory / power / embodied models of ``physics`` and the energy, cost and carbon formulas of
``energy`` (component model, TDP calibration of ``energy_params``), ``cost.tco`` and
``carbon.carbon_per_million_tokens``, written for arrays. ``tests/test_dse.py`` checks every
objective against ``analysis.analyze`` + ``cost.scenario_metrics`` of the same design
(``DesignContext.hardware``) to 1e-9 relative (all arithmetic is float64). A run over a whole
space, reduced to its front without keeping every design, is ``run.explore``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Sequence

import numpy as np

from . import physics as phys
from ..metrics.carbon import grid_region
from ..metrics.cost import MetricsSettings
from .space import base_key, key_dtype
from ..errors import ConfigError
from ..limits import check_time_budget
from ..hardware import Efficiency, Hardware, MemoryTier
from ..model import Model
from .pareto import pareto_mask
from ..precision import DType, Precision
from .profile import Profile, profile, times
from ..units import (BYTES_PER_GB, FLOPS_PER_TFLOP, G_PER_KG, HOURS_PER_YEAR, J_PER_KWH,
                    S_PER_HOUR, TOKENS_PER_MILLION)
from ..workload import Workload

W_PER_KW = 1000.0
CHUNK_POINTS = 1 << 15          # designs per numpy pass: ~40 float64 temporaries stay in L2


@dataclass(frozen=True)
class Objective:
    key: str
    label: str
    unit: str
    sense: str              # "min" or "max"


OBJECTIVES: dict[str, Objective] = {o.key: o for o in (
    Objective("tokens_per_s", "Decode tokens/s", "tokens/s", "max"),
    Objective("ttft_s", "TTFT", "s", "min"),
    Objective("j_per_token", "Energy / output token", "J", "min"),
    Objective("usd_per_mtok", "Cost / M output tokens", "USD", "min"),
    Objective("gco2e_per_mtok", "CO2e / M output tokens", "g", "min"),
    Objective("memory_headroom", "Free memory", "fraction of capacity", "max"),
    Objective("price_usd", "Price", "USD", "min"),
    Objective("tdp_w", "TDP", "W", "min"),
)}
DEFAULT_OBJECTIVES = ("tokens_per_s", "usd_per_mtok", "j_per_token")

# Columns of an evaluation (display units where the name says so, SI otherwise).
DESIGN_COLUMNS = ("peak_tflops", "bw_gbps", "cap_gb", "sram_mb", "tdp_w", "price_usd")
AXIS_COLUMN = {"peak": "peak_tflops", "bw": "bw_gbps", "cap": "cap_gb", "sram": "sram_mb",
               "tdp": "tdp_w", "price": "price_usd"}


# ---- evaluation ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Evaluation:
    """Every design's inputs, derived quantities and objectives (one array per column) and
    its infeasibility bit mask (0 = feasible; ``dse_physics.REASONS``)."""
    columns: dict
    reasons: np.ndarray
    memory_names: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.reasons)

    @property
    def feasible(self) -> np.ndarray:
        return self.reasons == 0

    def __getitem__(self, key: str) -> np.ndarray:
        return self.columns[key]

    def take(self, idx) -> "Evaluation":
        idx = np.asarray(idx)
        return Evaluation({k: v[idx] for k, v in self.columns.items()}, self.reasons[idx],
                          self.memory_names)

    @staticmethod
    def concat(parts: Sequence["Evaluation"]) -> "Evaluation":
        """The designs of ``parts`` one after the other (one part: itself, no copy)."""
        if len(parts) == 1:
            return parts[0]
        cols = {k: np.concatenate([p.columns[k] for p in parts]) for k in parts[0].columns}
        return Evaluation(cols, np.concatenate([p.reasons for p in parts]),
                          parts[0].memory_names)

    def point(self, i: int) -> dict:
        """One design as plain numbers (display units), its memory and infeasibility."""
        d = {k: float(v[i]) for k, v in self.columns.items() if k != "memory_index"}
        d["memory"] = self.memory_names[int(self.columns["memory_index"][i])]
        d["feasible"] = bool(self.reasons[i] == 0)
        d["infeasible_reasons"] = phys.reason_names(self.reasons[i])
        return d

    def points(self, rows) -> list[dict]:
        """``point`` of each of ``rows``, converting each column once (a front of thousands
        of designs)."""
        rows = np.asarray(rows, dtype=np.intp)
        cols = {k: v[rows].astype(float).tolist() for k, v in self.columns.items()
                if k != "memory_index"}
        mem = self.columns["memory_index"][rows].tolist()
        reasons = self.reasons[rows].tolist()
        out = []
        for j, r in enumerate(reasons):
            d = {k: v[j] for k, v in cols.items()}
            d["memory"] = self.memory_names[mem[j]]
            d["feasible"] = r == 0
            d["infeasible_reasons"] = phys.reason_names(r)
            out.append(d)
        return out


@dataclass(frozen=True)
class DesignContext:
    """One scenario (model, precision, workload, money/carbon settings) and the base hardware
    whose class (efficiency, energy constants, memories) every design shares."""
    model: Model
    precision: Precision
    workload: Workload
    base: Hardware
    settings: MetricsSettings = field(default_factory=MetricsSettings)
    prof: Profile | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        s = self.settings.resolved()
        if s.energy_model not in ("components", "auto"):
            raise ConfigError("the design space uses the component energy model "
                              "(energy_model='components')")
        s = replace(s, energy_model="components")
        if s.price_usd is not None or s.embodied_kgco2e is not None:
            raise ConfigError("price and embodied carbon are design quantities here; do not "
                              "override them in the settings")
        object.__setattr__(self, "settings", s)
        if self.prof is None:
            object.__setattr__(self, "prof", profile(self.model, self.precision, self.workload,
                                                     efficiency=self.efficiency))

    @property
    def dtype(self) -> DType:
        return self.precision.compute_dtype

    @property
    def efficiency(self) -> Efficiency:
        return self.base.effective_efficiency

    @property
    def physics(self) -> phys.ClassPhysics:
        return phys.class_physics(self.base.hw_class)

    def base_design(self) -> dict[str, float]:
        """The base hardware as a design (display units; TDP and price derived)."""
        return {"peak": self.base.peak_flops_per_s(self.dtype)[0] / FLOPS_PER_TFLOP,
                "bw": self.base.memory_bandwidth_bytes_per_s / BYTES_PER_GB,
                "cap": self.base.memory_capacity_bytes / BYTES_PER_GB, "sram": 0.0}

    def check_keys(self, keys) -> None:
        for k in keys:
            d = key_dtype(k)
            if d is not None and d is not self.dtype:
                raise ConfigError(f"axis {k}: the scenario computes in {self.dtype.value}, so "
                                  f"a {d.value} peak changes nothing; sweep 'peak' or "
                                  f"'peak_{self.dtype.value}'")

    def evaluate(self, design: dict, progress: Callable[[float], None] | None = None) -> Evaluation:
        """All designs of ``design`` ({axis key: array or number}, display units; missing
        peak / bw / cap from the base hardware, sram 0, TDP and price derived)."""
        return Evaluation.concat([part for _, part in self.chunks(design, progress)])

    def chunks(self, design: dict, progress: Callable[[float], None] | None = None,
               chunk_points: int | None = None) -> Iterator[tuple[int, Evaluation]]:
        """The designs of ``design`` (as ``evaluate``) evaluated ``chunk_points`` at a time:
        (index of the chunk's first design, its Evaluation). Every design's numbers are the
        same whatever the chunking (element-wise arithmetic)."""
        self.check_keys(design)
        vals = {base_key(k): np.asarray(v, dtype=float) for k, v in design.items()}
        full = {**{k: np.asarray(v) for k, v in self.base_design().items()}, **vals}
        n = int(np.broadcast(*full.values()).size) if full else 1
        cols = {k: np.broadcast_to(v, (n,)) for k, v in full.items()}
        step = max(1, int(chunk_points or CHUNK_POINTS))
        names = tuple(m.name for m in self.physics.memories)
        for s in range(0, n, step):
            check_time_budget(f"{s:,} of {n:,} designs evaluated")
            part = {k: v[s:s + step] for k, v in cols.items()}
            c, r = self._evaluate_chunk(part, "tdp" in vals, "price" in vals)
            yield s, Evaluation(c, r, names)
            if progress is not None:
                progress(min(1.0, (s + step) / n))

    def _evaluate_chunk(self, d: dict, tdp_swept: bool, price_swept: bool):
        cp, eff, prof, dt = self.physics, self.efficiency, self.prof, self.dtype
        peak, bw, cap, sram = (np.ascontiguousarray(d[k], dtype=float)
                               for k in ("peak", "bw", "cap", "sram"))
        pe = peak * (FLOPS_PER_TFLOP * eff.compute)
        be = bw * (BYTES_PER_GB * eff.memory)
        pre_s, dec_s = times(prof, pe, be, eff.kernel_overhead_s)
        per_pass = eff.pass_overhead_s(prof.batch)       # as analysis.analyze adds it
        pre_s = pre_s + (per_pass if prof.prompt_len else 0.0)
        dec_s = dec_s + prof.n_dec * per_pass
        mem_idx, mem_ok = phys.choose_memory(bw, cap, cp)
        rows = mem_idx.astype(np.intp)
        lut = lambda attr: np.array([getattr(m, attr) for m in cp.memories]).take(rows)  # noqa: E731
        e_mem = lut("j_per_byte")
        area = phys.die_area_mm2(peak, sram, dt, cp)
        die_yield = phys.die_yield(area)
        die_usd = phys.die_cost_usd(area, die_yield)
        mem_usd = cap * lut("usd_per_gb")
        cost_floor = die_usd + mem_usd
        price = np.ascontiguousarray(d["price"], dtype=float) if price_swept else cp.markup * cost_floor
        need_w = phys.required_tdp_w(pe, be, e_mem, cp, dt)
        tdp = np.ascontiguousarray(d["tdp"], dtype=float) if tdp_swept else need_w
        emb = phys.die_kgco2e(area, die_yield)
        emb += cap * lut("kgco2e_per_gb")
        emb += cp.package_kgco2e
        cols = {"peak_tflops": peak, "bw_gbps": bw, "cap_gb": cap, "sram_mb": sram,
                "tdp_w": tdp, "price_usd": price, "area_mm2": area, "die_usd": die_usd,
                "memory_usd": mem_usd, "tdp_required_w": need_w, "embodied_kgco2e": emb,
                "memory_index": mem_idx}
        cols.update(self._metrics(pre_s, dec_s, pe, be, e_mem, tdp, price, emb, cap))
        reasons = np.zeros(len(area), dtype=np.uint8)
        flag = lambda bit, mask: np.bitwise_or(reasons, bit, out=reasons, where=mask)  # noqa: E731
        flag(phys.REASON_MEMORY, cols["memory_headroom"] < 0)
        flag(phys.REASON_AREA, area > phys.die_constants().reticle_mm2)
        flag(phys.REASON_BANDWIDTH, ~mem_ok)
        if tdp_swept:
            flag(phys.REASON_POWER, tdp < need_w * (1 - 1e-12))
        if price_swept:
            flag(phys.REASON_PRICE, price < cost_floor)
        return cols, reasons

    def _metrics(self, pre_s, dec_s, pe, be, e_mem, tdp, price, emb, cap) -> dict:
        """Timing, energy (energy_params calibration + component model), TCO and carbon;
        scalar factors folded and array passes done in place (the formulas are those of
        ``energy``, ``cost.tco`` and ``carbon``, rearranged: equal to 1e-15 relative)."""
        cp, prof, s = self.physics, self.prof, self.settings
        tpot = dec_s
        tpot *= 1.0 / prof.n_dec
        ttft = pre_s if prof.prompt_len else tpot
        total_s = tpot * float(prof.steps)
        total_s += pre_s
        idle = tdp * cp.idle_fraction_of_tdp
        static = idle + cp.active_increment_w
        budget = tdp - static
        budget -= e_mem * be
        e_flop = np.full(len(budget), cp.class_flop_j(self.dtype))
        np.divide(budget, pe, out=e_flop, where=budget > 0)
        total_j = e_flop
        total_j *= prof.flops_total
        total_j += e_mem * prof.bytes_total
        total_j += static * total_s
        avg_w = total_j / total_s
        per_out = 1.0 / prof.output_tokens
        j_tok, s_tok = total_j * per_out, total_s * per_out
        u, pue = s.utilisation, s.pue
        idle_share = (1 - u) / u if s.include_idle else 0.0
        hours = s.lifetime_years * HOURS_PER_YEAR
        kw = s.usd_per_kwh * pue / W_PER_KW
        usd_mtok = price * (1.0 / (hours * u))      # capital per hour + electricity per hour
        usd_mtok += avg_w * kw
        if idle_share:
            usd_mtok += idle * (kw * idle_share)
        usd_mtok *= s_tok
        usd_mtok *= TOKENS_PER_MILLION / S_PER_HOUR
        g_per_j = pue / J_PER_KWH * grid_region(s.region).gco2e_per_kwh * TOKENS_PER_MILLION
        co2 = idle * s_tok
        co2 *= idle_share
        co2 += j_tok
        co2 *= g_per_j
        co2 += emb * s_tok * (G_PER_KG * TOKENS_PER_MILLION / (hours * S_PER_HOUR * u))
        headroom = (prof.needed_bytes / BYTES_PER_GB) / cap
        np.subtract(1.0, headroom, out=headroom)
        return {"tokens_per_s": prof.batch / tpot, "ttft_s": ttft, "tpot_s": tpot,
                "e2e_s": total_s, "j_per_token": j_tok, "usd_per_mtok": usd_mtok,
                "gco2e_per_mtok": co2, "avg_power_w": avg_w, "memory_headroom": headroom}

    def hardware(self, point: dict) -> Hardware:
        """The design as a ``Hardware`` that ``analysis.analyze`` and ``cost.scenario_metrics``
        evaluate to the same numbers (``point``: an ``Evaluation.point``)."""
        mem = next(m for m in self.physics.memories if m.name == point["memory"])
        cap, bw = point["cap_gb"] * BYTES_PER_GB, point["bw_gbps"] * BYTES_PER_GB
        peaks = {f"peak_{d.value}_flops_per_s": None for d in DType}
        peaks[f"peak_{self.dtype.value}_flops_per_s"] = point["peak_tflops"] * FLOPS_PER_TFLOP
        # one peak per design: the base card's faster FP16-accumulate mode is not a variable
        peaks["peak_fp16_acc16_flops_per_s"] = None
        return replace(self.base, name=design_name(point), slug="", aliases=(), **peaks,
                       memory_bandwidth_bytes_per_s=bw, memory_capacity_bytes=cap,
                       tdp_w=point["tdp_w"], idle_w=None, price_usd=point["price_usd"],
                       embodied_kgco2e=point["embodied_kgco2e"], interconnect=None,
                       memory_tiers=(MemoryTier(mem.name, cap, bw, mem.j_per_byte),),
                       efficiency=self.efficiency, source="design-space point", notes="",
                       compute_units=None)   # not a design variable: no streaming bound


def design_name(point: dict) -> str:
    """A readable unique label of a design (every swept quantity in it)."""
    return (f"{point['peak_tflops']:.4g} TFLOP/s · {point['bw_gbps']:.4g} GB/s · "
            f"{point['cap_gb']:.4g} GB {point.get('memory', '')} · {point['tdp_w']:.4g} W · "
            f"${point['price_usd']:.5g}" + (f" · {point['sram_mb']:.4g} MB SRAM"
                                           if point.get("sram_mb") else ""))


# ---- fronts ----------------------------------------------------------------------------------

def check_objectives(objectives: Sequence[str]) -> tuple[str, ...]:
    objs = tuple(objectives)
    bad = [o for o in objs if o not in OBJECTIVES]
    if bad:
        raise ConfigError(f"unknown objective {bad[0]!r} (objectives: {', '.join(OBJECTIVES)})")
    if not 2 <= len(objs) <= 4 or len(set(objs)) != len(objs):
        raise ConfigError("pick 2 to 4 different objectives")
    return objs


def objective_matrix(ev: Evaluation, objectives: Sequence[str], idx=None) -> np.ndarray:
    cols = [ev[o] if idx is None else ev[o][idx] for o in objectives]
    return np.column_stack(cols)


def pareto_front(ev: Evaluation, objectives: Sequence[str]) -> np.ndarray:
    """Indices of the feasible non-dominated designs, sorted by the first objective (best
    first)."""
    objs = check_objectives(objectives)
    feas = np.flatnonzero(ev.feasible)
    if len(feas) == 0:
        return feas
    f = objective_matrix(ev, objs, feas)
    senses = [OBJECTIVES[o].sense for o in objs]
    front = feas[pareto_mask(f, senses)]
    first = ev[objs[0]][front]
    return front[np.argsort(-first if senses[0] == "max" else first, kind="stable")]


def _bounds(ev: Evaluation, objs) -> tuple[np.ndarray, np.ndarray]:
    """(ideal, nadir) of the feasible cloud, in the objectives' units."""
    f = objective_matrix(ev, objs, np.flatnonzero(ev.feasible))
    best, worst = [], []
    for j, o in enumerate(objs):
        col = f[:, j][np.isfinite(f[:, j])]
        lo, hi = (col.min(), col.max()) if len(col) else (0.0, 1.0)
        mx = OBJECTIVES[o].sense == "max"
        best.append(hi if mx else lo)
        worst.append(lo if mx else hi)
    return np.array(best), np.array(worst)


# ---- sensitivity -----------------------------------------------------------------------------

SENSITIVITY_MULTIPLIERS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Sensitivity:
    """One-at-a-time multipliers around a base design: for every (axis, multiplier) pair the
    evaluated design (``evaluation`` rows in ``pairs`` order; the base is row 0)."""
    base: dict
    pairs: tuple[tuple[str, float], ...]
    evaluation: Evaluation

    def relative(self, objective: str) -> dict[str, list[tuple[float, float | None]]]:
        """Per axis: (multiplier, objective / base objective), None where infeasible."""
        col, ok = self.evaluation[objective], self.evaluation.feasible
        base = col[0]
        out: dict[str, list] = {}
        for i, (key, m) in enumerate(self.pairs):
            if key == "base":
                continue
            r = float(col[i] / base) if ok[i] and base and math.isfinite(base) else None
            out.setdefault(key, []).append((m, r))
        return out


def sensitivity(ctx: DesignContext, base: dict | None = None,
                multipliers: Sequence[float] = SENSITIVITY_MULTIPLIERS,
                keys: Sequence[str] | None = None) -> Sensitivity:
    """Each axis of ``base`` (display units; default: the base hardware with TDP and price
    derived) multiplied by each multiplier, the others held; one vectorised evaluation."""
    design = dict(ctx.base_design() if base is None else base)
    mults = [float(m) for m in multipliers]
    if not mults or any(not math.isfinite(m) or m <= 0 for m in mults):
        raise ConfigError("multipliers must be positive numbers")
    keys = [k for k in (keys or design) if design.get(k)]
    pairs = [("base", 1.0)] + [(k, m) for k in keys for m in mults]
    cols = {k: np.array([design[k] * (m if key == k else 1.0) for key, m in pairs])
            for k in design}
    return Sensitivity(design, tuple(pairs), ctx.evaluate(cols))
