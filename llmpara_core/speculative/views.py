"""Plain-data views of speculative decoding for the Speculative page and exports: speedup
against gamma for several acceptance rates, the per-step latency split by phase and operator
kind, speedup against batch with memory fit, and the memory parts of vanilla vs speculative.

Every number comes from ``speculative`` (the core's forward pass and roofline); this module
only evaluates and arranges it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import require_int
from .engine import (MAX_GAMMA, BatchPoint, SpecMemory, SpecReport, Setup, Speculation,
                          batch_sweep, expected_tokens_per_step, setup_rates,
                          speculative_memory, speedup, time_by_kind)
from .drafts import DraftKind

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class GammaCurve:
    """Speedup for gamma = 0..gamma_max at one constant acceptance rate."""
    alpha: float
    gammas: tuple[int, ...]
    speedups: tuple[float, ...]
    expected_tokens: tuple[float, ...]

    @property
    def best_gamma(self) -> int:
        return self.gammas[max(range(len(self.gammas)), key=lambda i: self.speedups[i])]

    @property
    def best_speedup(self) -> float:
        return max(self.speedups)


def gamma_curves(setup: Setup, alphas, gamma_max: int = 16,
                 estimated: bool = True) -> tuple[GammaCurve, ...]:
    """One curve per alpha (gamma 0 included: speedup 1 by construction)."""
    gamma_max = require_int("gamma_max", gamma_max, 1, MAX_GAMMA)
    gammas = tuple(range(gamma_max + 1))
    out = []
    for a in alphas:
        a = float(a)
        sps = tuple(speedup(setup, Speculation(g, alpha=a), estimated) for g in gammas)
        out.append(GammaCurve(a, gammas, sps,
                              tuple(expected_tokens_per_step(a, g) for g in gammas)))
    return tuple(out)


@dataclass(frozen=True)
class StepPart:
    """Time of one phase and operator kind: per step (one draft-verify round; for vanilla, one
    decode step) and per generated token (per sequence)."""
    phase: str                      # "vanilla decode" | "draft" | "verification"
    kind: str                       # operator kind (llmpara_core.operators.OpKind value)
    per_step_s: float
    per_token_s: float


def _split(ops, r, total_s: float) -> dict[str, float]:
    """``total_s`` split over operator kinds in proportion to one pass's roofline times."""
    by_kind = time_by_kind(ops, r, True)
    s = sum(by_kind.values())
    if s <= 0 or total_s <= 0:
        return {}
    return {k: total_s * v / s for k, v in by_kind.items() if v > 0}


def step_breakdown(report: SpecReport) -> tuple[StepPart, ...]:
    """Estimated step time by phase and operator kind. The kind shares come from the passes at
    the mean context (``report.*_ops``); they are scaled to the exact decode-phase totals, so the
    parts add up to the headline draft, verification and vanilla times."""
    t, e = report.estimated, report.expected_tokens_per_step
    r, rd = setup_rates(report.setup, True)
    draft_ops = report.draft_ops
    if report.setup.draft.kind in (DraftKind.MODEL, DraftKind.HEAD):
        draft_ops = tuple(replace(o, count=o.count * report.speculation.gamma) for o in draft_ops)
    out = []
    for phase, ops, rates_, per_step, tokens in (
            ("vanilla decode", report.decode_ops, r, t.vanilla_tpot_s, 1.0),
            ("draft", draft_ops, rd, t.draft_s_per_step, e),
            ("verification", report.verify_ops, r, t.verify_s_per_step, e)):
        for kind, s in _split(ops, rates_, per_step).items():
            out.append(StepPart(phase, kind, s, s / tokens))
    return tuple(out)


@dataclass(frozen=True)
class BatchRow(BatchPoint):
    """A batch-sweep point and whether target, draft and their KV caches fit at it."""
    fits: bool = True


def batch_rows(setup: Setup, spec: Speculation, batches=DEFAULT_BATCHES) -> tuple[BatchRow, ...]:
    """Speedup and aggregate throughput against batch (``speculative.batch_sweep``), with
    whether target, draft and their KV caches fit at that batch."""
    out = []
    for p in batch_sweep(setup, spec, batches, True):
        su = replace(setup, workload=replace(setup.workload, batch=p.batch))
        fits = speculative_memory(su, spec).fits
        out.append(BatchRow(**vars(p), fits=fits))
    return tuple(out)


@dataclass(frozen=True)
class MemoryPart:
    scenario: str                   # "vanilla" | "speculative"
    device: str                     # "target" | "draft"
    part: str
    bytes: float


def memory_parts(mem: SpecMemory) -> tuple[MemoryPart, ...]:
    """Bytes (GB = 1e9 B) of vanilla decoding and of speculation, by device and part."""
    base = (("target weights", mem.target_weight_bytes), ("target KV cache", mem.target_kv_bytes),
            ("activations", mem.target_activation_bytes))
    extra = (("draft weights", mem.draft_weight_bytes), ("draft KV cache", mem.draft_kv_bytes))
    spec = (("speculative KV slots", mem.extra_target_kv_bytes),
            ("verification activations", mem.extra_activation_bytes))
    out = [MemoryPart("vanilla", "target", p, b) for p, b in base]
    out += [MemoryPart("speculative", "target", p, b) for p, b in base + spec]
    draft_device = "target" if mem.same_device else "draft"
    out += [MemoryPart("speculative", draft_device, p, b) for p, b in extra]
    return tuple(out)
