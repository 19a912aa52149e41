"""Design-space exploration: the real scenario analysis of the core, evaluated for a million
hardware designs at once with numpy, reduced to exact Pareto fronts.

The trick: for a fixed model, precision and workload, the FLOPs and bytes of every operator do
not depend on the hardware. ``profile`` computes them once with the core's forward pass
(``forward.forward_ops``) and the same decode segmentation as ``analysis.integrate_decode``;
``DesignContext.evaluate`` then applies the roofline (``roofline.op_time_s``'s rule: per
operator max(FLOPs / peak, bytes / bandwidth) + launches x overhead) to all designs:

* operators whose FLOPs and bytes are the same at every decode context are sorted by
  arithmetic intensity once; a design with ridge R = P_eff / BW_eff has every operator of
  intensity <= R memory-bound and the others compute-bound, so its time is
  M_below(R) / BW_eff + F_above(R) / P_eff from cumulative sums (one ``searchsorted``);
* operators that grow with the context (attention over the KV cache) are summed exactly over
  the decode steps with the vectorised form of ``analysis._sum_max_affine``.

Energy, cost and carbon are the formulas of ``energy`` (component model, TDP calibration of
``energy_params``), ``cost.tco`` and ``carbon.carbon_per_million_tokens``, written for arrays;
``tests/test_dse.py`` checks them against ``analysis.analyze`` + ``cost.scenario_metrics`` of
the same design (``DesignContext.hardware``) to 1e-9. The coupled area / price / memory /
power / embodied models are in ``dse_physics``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from . import physics as phys
from ..analysis import decode_segments
from ..metrics.carbon import grid_region
from ..metrics.cost import MetricsSettings
from .space import SearchSpace, base_key, key_dtype, sample
from ..errors import ConfigError
from ..forward import forward_ops
from ..hardware import Efficiency, Hardware, MemoryTier
from ..memory import activation_peak_bytes, kv_cache_bytes, weight_bytes
from ..model import Model
from ..operators import OpKind
from .pareto import hypervolume, pareto_mask
from ..precision import DType, Precision
from ..units import (BYTES_PER_GB, FLOPS_PER_TFLOP, G_PER_KG, HOURS_PER_YEAR, J_PER_KWH,
                    S_PER_HOUR, TOKENS_PER_MILLION)
from ..workload import Workload

try:        # KV-read derating of the estimated roofline (absent in older cores: no derating)
    from ..roofline import effective_memory_bytes as _effective_memory_bytes
except ImportError:     # pragma: no cover
    _effective_memory_bytes = None

W_PER_KW = 1000.0
CHUNK_POINTS = 1 << 17          # designs evaluated per numpy pass (fits the CPU caches)


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


# ---- the hardware-independent profile --------------------------------------------------------

@dataclass(frozen=True)
class Profile:
    """FLOPs and bytes of one scenario, ready for vectorised roofline evaluation.

    ``intensity`` (sorted) with reverse-cumulative FLOPs and forward-cumulative bytes per
    phase for the context-independent operators (prefill: one pass; decode: all steps);
    ``varying``: (F_a, F_z, M_a, M_z, n) of decode operators that change with the context
    inside a segment of n steps. Totals are over the whole run (prefill + every decode step)."""
    dtype: DType
    batch: int
    prompt_len: int
    output_tokens: int
    steps: int
    n_dec: int
    intensity: np.ndarray
    pre_f_above: np.ndarray
    pre_m_below: np.ndarray
    dec_f_above: np.ndarray
    dec_m_below: np.ndarray
    varying: tuple[tuple[float, float, float, float, int], ...]
    pre_kernels: float
    dec_kernels: float
    flops_total: float
    bytes_total: float
    needed_bytes: float


class _KVRate:
    """The one field of ``roofline.Rates`` that ``effective_memory_bytes`` reads."""
    def __init__(self, kv_read_efficiency: float):
        self.kv_read_efficiency = kv_read_efficiency


def _time_bytes(mem_bytes: float, kv_read_bytes: float, kv_read: float) -> float:
    """Bytes as the estimated roofline streams them (KV-cache reads at ``kv_read`` of the
    bandwidth, ``roofline.effective_memory_bytes``)."""
    if _effective_memory_bytes is None or kv_read == 1.0:
        return mem_bytes
    return _effective_memory_bytes(mem_bytes, kv_read_bytes, _KVRate(kv_read))


def _flop_scales(efficiency, wl: Workload) -> tuple[float, float, float]:
    """(prefill, decode, attention) factors on the time FLOPs that reproduce the estimated
    roofline's compute rate with the peak x ``compute`` of every design: the GEMM curve
    (``Efficiency.compute_at``: a pass with M tokens in flight runs at M / (M + M_half)) and
    prefill attention FLOPs counted 1 / attention_compute times (``roofline.op_time_s``)."""
    if efficiency is None:
        return 1.0, 1.0, 1.0
    c = efficiency.compute
    return (c / efficiency.compute_at(wl.batch * max(1, wl.prompt_len)),
            c / efficiency.compute_at(wl.batch), 1.0 / efficiency.attention_compute)


def _time_flops(o, scale: float, attention: float) -> float:
    return o.flops * o.count * scale * (attention if o.kind is OpKind.ATTENTION else 1.0)


def profile(model: Model, precision: Precision, workload: Workload,
            kv_read: float = 1.0, efficiency=None) -> Profile:
    """Per-operator FLOPs and bytes of the scenario, computed once (see the module docstring).
    ``kv_read``: the efficiency's KV-read factor (the time terms count KV-cache reads as
    the estimated roofline does; energy counts the bytes themselves); ``efficiency`` (when
    given, its kv_read wins) also scales the time FLOPs (``_flop_scales``)."""
    wl = workload
    if efficiency is not None:
        kv_read = efficiency.kv_read
    pre_sc, dec_sc, att = _flop_scales(efficiency, wl)
    if wl.gen_len < 1:
        raise ConfigError("gen_len is 0: the design space needs output tokens to rank designs")
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    pre_ops = forward_ops(model, precision, wl.batch, wl.prompt_len, wl.prompt_len,
                          wl.flash_attention, logits)
    first, last = wl.decode_contexts
    steps = max(0, last - first + 1)
    lo, hi = (first, last) if steps else (wl.prompt_len + 1, wl.prompt_len + 1)
    entries = [(_time_flops(o, pre_sc, att), _time_bytes(o.memory_bytes * o.count,
                                                         o.kv_read_bytes * o.count, kv_read), 0)
               for o in pre_ops]
    varying, dec_k, dec_f, dec_m = _decode_terms(model, precision, wl, lo, hi, kv_read, entries,
                                                 (dec_sc, 1.0))     # attention: prefill only
    act = max(activation_peak_bytes(pre_ops),
              activation_peak_bytes(forward_ops(model, precision, wl.batch, 1, hi,
                                                wl.flash_attention)))
    needed = (weight_bytes(model, precision) + kv_cache_bytes(model, precision, wl.batch,
                                                              wl.max_context) + act)
    share = steps / (hi - lo + 1)
    pre_f = sum(o.flops * o.count for o in pre_ops)
    pre_m = sum(o.memory_bytes * o.count for o in pre_ops)
    arrays = _sorted_sums(entries)
    return Profile(precision.compute_dtype, wl.batch, wl.prompt_len, wl.batch * wl.gen_len,
                   steps, hi - lo + 1, *arrays, tuple(varying),
                   float(sum(o.count for o in pre_ops)), dec_k,
                   pre_f + share * dec_f, pre_m + share * dec_m, needed)


def _decode_terms(model, precision, wl, lo, hi, kv_read, entries, scales=(1.0, 1.0)):
    """Decode operators over contexts lo..hi: context-independent ones appended to
    ``entries`` (times n steps), the others returned as affine (F_a, F_z, M_a, M_z, n);
    plus kernel launches, FLOPs and bytes summed over the steps."""
    varying, dec_k, dec_f, dec_m = [], 0.0, 0.0, 0.0
    for a, z in decode_segments(model, lo, hi):
        n = z - a + 1
        ops_a = forward_ops(model, precision, wl.batch, 1, a, wl.flash_attention)
        ops_z = forward_ops(model, precision, wl.batch, 1, z, wl.flash_attention) if z > a else ops_a
        for oa, oz in zip(ops_a, ops_z):
            c = oa.count
            fa, fz, ma, mz = oa.flops * c, oz.flops * c, oa.memory_bytes * c, oz.memory_bytes * c
            ta = _time_bytes(ma, oa.kv_read_bytes * c, kv_read)
            tz = _time_bytes(mz, oz.kv_read_bytes * c, kv_read)
            ga, gz = _time_flops(oa, *scales), _time_flops(oz, *scales)
            if ga == gz and ta == tz:
                entries.append((n * ga, n * ta, 1))
            else:
                varying.append((ga, gz, ta, tz, n))
            dec_k += n * c
            dec_f += n * (fa + fz) / 2
            dec_m += n * (ma + mz) / 2
    return varying, dec_k, dec_f, dec_m


def _sorted_sums(entries) -> tuple[np.ndarray, ...]:
    """Intensities sorted ascending; per phase, FLOPs of entries at index >= k (reverse
    cumulative) and bytes of entries at index < k (cumulative), for k = 0..m."""
    kept = [e for e in entries if e[0] > 0 or e[1] > 0]
    inten = np.array([f / m if m > 0 else np.inf for f, m, _ in kept])
    order = np.argsort(inten, kind="stable")
    out = [inten[order]]
    for ph in (0, 1):
        f = np.array([kept[i][0] if kept[i][2] == ph else 0.0 for i in order])
        m = np.array([kept[i][1] if kept[i][2] == ph else 0.0 for i in order])
        f_above = np.concatenate([np.cumsum(f[::-1])[::-1], [0.0]]) if len(f) else np.zeros(1)
        m_below = np.concatenate([[0.0], np.cumsum(m)])
        out += [f_above, m_below]
    return tuple(out)


def _sum_max_affine(u0, u1, v0, v1, n: int):
    """Vectorised ``analysis._sum_max_affine``: sum over k = 0..n-1 of max(u(k), v(k)) for
    affine u, v given at k = 0 and k = n - 1 (exact; splits at the crossover)."""
    if n == 1:
        return np.maximum(u0, v0)
    g0, g1 = u0 - v0, u1 - v1
    out = n * np.where(g0 + g1 >= 0, (u0 + u1) / 2, (v0 + v1) / 2)
    cross = np.flatnonzero(g0 * g1 < 0)          # rare: the winner changes inside the segment
    if len(cross):
        a0, a1, b0, b1 = u0[cross], u1[cross], v0[cross], v1[cross]
        c0, c1 = g0[cross], g1[cross]
        k = np.floor(c0 / (c0 - c1) * (n - 1))
        up = c0 > 0
        first = _series(np.where(up, a0, b0), np.where(up, a1, b1), n, 0.0, k)
        second = _series(np.where(up, b0, a0), np.where(up, b1, a1), n, k + 1, float(n - 1))
        out[cross] = first + second
    return out


def _series(x0, x1, n: int, i, j):
    """Sum over k = i..j of the affine x (x0 at k = 0, x1 at k = n - 1); 0 when j < i."""
    a_i = x0 + (x1 - x0) * i / (n - 1)
    a_j = x0 + (x1 - x0) * j / (n - 1)
    return np.where(j >= i, (j - i + 1) * (a_i + a_j) / 2, 0.0)


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

    def point(self, i: int) -> dict:
        """One design as plain numbers (display units), its memory and infeasibility."""
        d = {k: float(v[i]) for k, v in self.columns.items() if k != "memory_index"}
        d["memory"] = self.memory_names[int(self.columns["memory_index"][i])]
        d["feasible"] = bool(self.reasons[i] == 0)
        d["infeasible_reasons"] = phys.reason_names(self.reasons[i])
        return d


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
        if s.energy_model != "components":
            raise ConfigError("the design space uses the component energy model "
                              "(energy_model='components')")
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
        self.check_keys(design)
        vals = {base_key(k): np.asarray(v, dtype=float) for k, v in design.items()}
        full = {**{k: np.asarray(v) for k, v in self.base_design().items()}, **vals}
        n = int(np.broadcast(*full.values()).size) if full else 1
        cols = {k: np.broadcast_to(v, (n,)) for k, v in full.items()}
        c, r = None, np.empty(n, dtype=np.uint8)
        for s in range(0, n, CHUNK_POINTS):
            chunk = {k: v[s:s + CHUNK_POINTS] for k, v in cols.items()}
            part, r[s:s + CHUNK_POINTS] = self._evaluate_chunk(chunk, "tdp" in vals,
                                                                "price" in vals)
            if c is None:
                c = part if len(r) <= CHUNK_POINTS else {
                    k: np.empty(n, dtype=v.dtype) for k, v in part.items()}
            if c is not part:
                for k, v in part.items():
                    c[k][s:s + CHUNK_POINTS] = v
            if progress is not None:
                progress(min(1.0, (s + CHUNK_POINTS) / n))
        return Evaluation(c, r, tuple(m.name for m in self.physics.memories))

    def _evaluate_chunk(self, d: dict, tdp_swept: bool, price_swept: bool):
        cp, eff, prof, dt = self.physics, self.efficiency, self.prof, self.dtype
        peak, bw, cap, sram = d["peak"], d["bw"], d["cap"], d["sram"]
        pe = peak * FLOPS_PER_TFLOP * eff.compute
        be = bw * BYTES_PER_GB * eff.memory
        pre_s, dec_s = _times(prof, pe, be, eff.kernel_overhead_s)
        per_pass = eff.pass_overhead_s(prof.batch)       # as analysis.analyze adds it
        pre_s = pre_s + (per_pass if prof.prompt_len else 0.0)
        dec_s = dec_s + prof.n_dec * per_pass
        mem_idx, mem_ok = phys.choose_memory(bw, cap, cp)
        mem = cp.memories
        lut = lambda attr: np.array([getattr(m, attr) for m in mem])[mem_idx]   # noqa: E731
        e_mem = lut("j_per_byte")
        area = phys.die_area_mm2(peak, sram, dt, cp)
        die_yield = phys.die_yield(area)
        die_usd = phys.die_cost_usd(area, die_yield)
        mem_usd = cap * lut("usd_per_gb")
        cost_floor = die_usd + mem_usd
        price = d["price"] if price_swept else cp.markup * cost_floor
        need_w = phys.required_tdp_w(pe, be, e_mem, cp, dt)
        tdp = d["tdp"] if tdp_swept else need_w
        emb = phys.die_kgco2e(area, die_yield) + cap * lut("kgco2e_per_gb") + cp.package_kgco2e
        cols = {"peak_tflops": peak, "bw_gbps": bw, "cap_gb": cap, "sram_mb": sram,
                "tdp_w": tdp, "price_usd": price, "area_mm2": area, "die_usd": die_usd,
                "memory_usd": mem_usd, "tdp_required_w": need_w, "embodied_kgco2e": emb,
                "memory_index": mem_idx}
        cols.update(self._metrics(pre_s, dec_s, pe, be, e_mem, tdp, price, emb, cap))
        reasons = np.zeros(len(area), dtype=np.uint8)
        reasons |= np.where(cols["memory_headroom"] < 0, phys.REASON_MEMORY, 0).astype(np.uint8)
        reasons |= np.where(area > phys.die_constants().reticle_mm2, phys.REASON_AREA, 0
                            ).astype(np.uint8)
        reasons |= np.where(mem_ok, 0, phys.REASON_BANDWIDTH).astype(np.uint8)
        if tdp_swept:
            reasons |= np.where(tdp < need_w * (1 - 1e-12), phys.REASON_POWER, 0).astype(np.uint8)
        if price_swept:
            reasons |= np.where(price < cost_floor, phys.REASON_PRICE, 0).astype(np.uint8)
        return {k: np.ascontiguousarray(v, dtype=float) if k != "memory_index" else v
                for k, v in cols.items()}, reasons

    def _metrics(self, pre_s, dec_s, pe, be, e_mem, tdp, price, emb, cap) -> dict:
        """Timing, energy (energy_params calibration + component model), TCO and carbon."""
        cp, prof, s = self.physics, self.prof, self.settings
        tpot = dec_s / prof.n_dec
        ttft = pre_s if prof.prompt_len else tpot
        total_s = pre_s + prof.steps * tpot
        idle = tdp * cp.idle_fraction_of_tdp
        static = idle + cp.active_increment_w
        budget = tdp - static - e_mem * be
        e_flop = np.where(budget > 0, budget / pe, cp.class_flop_j(self.dtype))
        total_j = e_flop * prof.flops_total + e_mem * prof.bytes_total + static * total_s
        out = prof.output_tokens
        j_tok, s_tok = total_j / out, total_s / out
        u, pue = s.utilisation, s.pue
        idle_share = (1 - u) / u if s.include_idle else 0.0
        hours = s.lifetime_years * HOURS_PER_YEAR
        elec = s.usd_per_kwh * pue * (total_j / total_s + idle * idle_share) / W_PER_KW
        usd_mtok = (price / (hours * u) + elec) * s_tok / S_PER_HOUR * TOKENS_PER_MILLION
        ci = grid_region(s.region).gco2e_per_kwh
        op_g = (j_tok + idle * s_tok * idle_share) * pue / J_PER_KWH * ci
        emb_g = G_PER_KG * emb * s_tok / (hours * S_PER_HOUR * u)
        return {"tokens_per_s": prof.batch / tpot, "ttft_s": ttft, "tpot_s": tpot,
                "e2e_s": total_s, "j_per_token": j_tok, "usd_per_mtok": usd_mtok,
                "gco2e_per_mtok": (op_g + emb_g) * TOKENS_PER_MILLION,
                "avg_power_w": total_j / total_s,
                "memory_headroom": 1.0 - prof.needed_bytes / (cap * BYTES_PER_GB)}

    def hardware(self, point: dict) -> Hardware:
        """The design as a ``Hardware`` that ``analysis.analyze`` and ``cost.scenario_metrics``
        evaluate to the same numbers (``point``: an ``Evaluation.point``)."""
        mem = next(m for m in self.physics.memories if m.name == point["memory"])
        cap, bw = point["cap_gb"] * BYTES_PER_GB, point["bw_gbps"] * BYTES_PER_GB
        peaks = {f"peak_{d.value}_flops_per_s": None for d in DType}
        peaks[f"peak_{self.dtype.value}_flops_per_s"] = point["peak_tflops"] * FLOPS_PER_TFLOP
        return replace(self.base, name=design_name(point), slug="", aliases=(), **peaks,
                       memory_bandwidth_bytes_per_s=bw, memory_capacity_bytes=cap,
                       tdp_w=point["tdp_w"], idle_w=None, price_usd=point["price_usd"],
                       embodied_kgco2e=point["embodied_kgco2e"], interconnect=None,
                       memory_tiers=(MemoryTier(mem.name, cap, bw, mem.j_per_byte),),
                       efficiency=self.efficiency, source="design-space point", notes="")


def design_name(point: dict) -> str:
    """A readable unique label of a design (every swept quantity in it)."""
    return (f"{point['peak_tflops']:.4g} TFLOP/s · {point['bw_gbps']:.4g} GB/s · "
            f"{point['cap_gb']:.4g} GB {point.get('memory', '')} · {point['tdp_w']:.4g} W · "
            f"${point['price_usd']:.5g}" + (f" · {point['sram_mb']:.4g} MB SRAM"
                                           if point.get("sram_mb") else ""))


def _times(prof: Profile, pe, be, overhead_s: float):
    """(prefill time, total decode time over the n_dec evaluated steps) [s], estimated rates."""
    k = np.searchsorted(prof.intensity, pe / be, side="right")
    pre = prof.pre_m_below[k] / be + prof.pre_f_above[k] / pe + prof.pre_kernels * overhead_s
    dec = prof.dec_m_below[k] / be + prof.dec_f_above[k] / pe + prof.dec_kernels * overhead_s
    for fa, fz, ma, mz, n in prof.varying:
        dec = dec + _sum_max_affine(fa / pe, fz / pe, ma / be, mz / be, n)
    return pre, dec


# ---- a run -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DSEResult:
    """A sweep: every evaluated design, the Pareto front of the feasible ones (indices into
    ``evaluation``, sorted by the first objective) and the run's settings."""
    space: SearchSpace
    method: str
    seed: int
    objectives: tuple[str, ...]
    evaluation: Evaluation
    front: np.ndarray
    hypervolume: object | None = None

    @property
    def points_evaluated(self) -> int:
        return self.evaluation.n

    def infeasible_counts(self) -> dict[str, int]:
        r = self.evaluation.reasons
        return {name: int(np.count_nonzero(r & bit)) for bit, name in phys.REASONS.items()}


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


def explore(ctx: DesignContext, space: SearchSpace, method: str = "grid",
            samples: int | None = None, seed: int = 0,
            objectives: Sequence[str] = DEFAULT_OBJECTIVES, with_hypervolume: bool = False,
            progress: Callable[[float], None] | None = None) -> DSEResult:
    """Sample ``space``, evaluate every design and reduce the feasible ones to the front."""
    objs = check_objectives(objectives)
    ctx.check_keys(space.keys)
    design = sample(space, method, samples, seed)
    design.update({k: v for k, v in space.fixed})
    ev = ctx.evaluate(design, progress)
    front = pareto_front(ev, objs)
    hv = None
    if with_hypervolume and len(front):
        senses = [OBJECTIVES[o].sense for o in objs]
        hv = hypervolume(objective_matrix(ev, objs, front), senses,
                         *_bounds(ev, objs))
    return DSEResult(space, method, seed, objs, ev, front, hv)


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
