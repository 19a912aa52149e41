"""Speculative decoding: a cheap draft proposes gamma tokens, the target verifies them in one
forward pass over gamma + 1 tokens, and a run of accepted drafts plus one target token is kept.

Model (Leviathan, Kalman & Matias, ICML 2023, arXiv 2211.17192, eq. 1 and Thm 3.8; Chen et al.
2023, arXiv 2302.01318):

* expected tokens per step E = (1 - alpha^(gamma+1)) / (1 - alpha) (gamma + 1 when alpha = 1), or,
  with per-position acceptance rates a_i (probability that draft i is accepted given drafts
  1..i-1 were), E = 1 + sum_i prod_{j<=i} a_j; or a measured E (tokens per target pass) directly;
* one step with committed length L: the draft runs gamma passes of one token at contexts
  L .. L + gamma - 1 (a separate model or an EAGLE/MTP-style head; Medusa heads run once, an
  n-gram lookup costs nothing), then the target verifies gamma + 1 tokens whose last sees
  L + gamma positions, with logits for all of them. Every pass is the core's ``forward_ops``, so
  KV reads, the LM head and the MoE experts touched by batch x (gamma + 1) tokens are charged;
* contexts advance by E per step. Per-operator FLOPs and bytes are affine in the context (between
  sliding-window breakpoints), so the sum over all steps of each operator's roofline time
  max(compute, memory) is computed exactly in closed form, as ``analysis.integrate_decode`` does for
  plain decode (the only approximation: within the gamma-token transition where a sliding window
  starts to cap the new queries, counts are interpolated linearly). The number of steps is the
  expected (gen_len - 1) / E, the last one fractional; "context advances by exactly E" is the
  mean-field (linearity-of-expectation) approximation;
* speedup = vanilla decode time (the core's ``integrate_decode``, i.e. TPOT x steps) / speculative
  decode time over the same generated tokens. With gamma = 0 the step *is* a decode step and the
  speedup is exactly 1.

Fixes relative to the reference tool (reference-tool.md section 7.2 / defect 19): time from the
full forward pass in decimal bytes (not GiB x 1e9, not weights only), KV reads included, MoE
experts touched by gamma + 1 tokens (not all experts), peak of the compute data type (not FP32),
kernel overheads and the device's own ridge point (so speedup differs between devices), draft
precision and device independent of the target's, and a vocabulary compatibility check.

Drafters, draft presets and the vocabulary check live in ``speculative_drafts`` (re-exported
here), the exact step sums in ``speculative_passes``, the published measurements in
``speculative_measurements``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from ..analysis import integrate_decode
from ..errors import ConfigError, require_float, require_int
from ..forward import forward_ops
from ..hardware import Efficiency, Hardware
from ..memory import activation_peak_bytes, kv_cache_bytes, weight_bytes
from ..model import Model, count_params
from ..operators import Operator
from ..precision import Precision
from ..roofline import Rates, launches, op_time_s, rates
from .drafts import (DRAFT_PRESETS, SHARED_TOKENIZERS, Draft, DraftKind,  # noqa: F401
                                 VocabCheck, default_draft_slug, draft_preset_slugs,
                                 head_draft, medusa_draft,
                                 medusa_ops, medusa_weight_bytes, model_draft, ngram_draft,
                                 vocab_check)
from .costs import SpecCosts, spec_costs
from .passes import _Pass, _Sum, _pass_time_s, _steps
from ..units import S_PER_US, bits_to_bytes
from ..workload import Workload

MAX_GAMMA = 64
DEFAULT_ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


# ---- inputs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Speculation:
    """Draft length ``gamma`` and acceptance: ``expected_tokens`` (a measured E, tokens per target
    pass including the bonus token) takes precedence over per-position ``acceptance`` rates, which
    take precedence over a constant ``alpha``. ``verify_tokens`` > gamma + 1 models tree
    verification (e.g. 60 tree nodes for EAGLE-2); give E directly then."""
    gamma: int
    alpha: float | None = None
    acceptance: tuple[float, ...] | None = None
    expected_tokens: float | None = None
    verify_tokens: int | None = None

    def __post_init__(self):
        require_int("gamma", self.gamma, 0, MAX_GAMMA)
        require_float("alpha", self.alpha, lo=0, hi=1, allow_none=True)
        if self.acceptance is not None:
            acc = tuple(require_float("acceptance rate", a, lo=0, hi=1) for a in self.acceptance)
            if len(acc) < self.gamma:
                raise ConfigError(f"{len(acc)} per-position acceptance rates for gamma = "
                                  f"{self.gamma}; give at least gamma")
            object.__setattr__(self, "acceptance", acc)
        if self.verify_tokens is not None:
            require_int("verify_tokens", self.verify_tokens, self.gamma + 1, 4096)
        if self.expected_tokens is not None:
            hi = max(self.gamma + 1, 1)
            require_float("expected_tokens", self.expected_tokens, lo=1, hi=hi)
        elif self.gamma and self.alpha is None and self.acceptance is None:
            raise ConfigError("give alpha, per-position acceptance rates or expected_tokens")

    @property
    def tokens_per_step(self) -> float:
        if self.gamma == 0:
            return 1.0
        if self.expected_tokens is not None:
            return self.expected_tokens
        if self.acceptance is not None:
            return expected_tokens_from_rates(self.acceptance[:self.gamma])
        return expected_tokens_per_step(self.alpha, self.gamma)

    @property
    def verified_tokens(self) -> int:
        return self.verify_tokens if self.verify_tokens is not None else self.gamma + 1


def expected_tokens_per_step(alpha: float, gamma: int) -> float:
    """E = (1 - alpha^(gamma+1)) / (1 - alpha); gamma + 1 at alpha = 1 (Leviathan et al. eq. 1)."""
    alpha = require_float("alpha", alpha, lo=0, hi=1)
    gamma = require_int("gamma", gamma, 0, MAX_GAMMA)
    if alpha == 1.0:
        return gamma + 1.0
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def expected_tokens_from_rates(rates_: tuple[float, ...] | list[float]) -> float:
    """E = 1 + sum_i prod_{j<=i} a_j for per-position conditional acceptance rates a_1..a_gamma."""
    e, p = 1.0, 1.0
    for a in rates_:
        p *= a
        e += p
    return e


@dataclass(frozen=True)
class Setup:
    """Everything but the speculation settings. ``efficiency`` overrides the target device's."""
    target: Model
    hardware: Hardware
    precision: Precision
    workload: Workload
    draft: Draft
    efficiency: Efficiency | None = None

    @property
    def draft_precision(self) -> Precision:
        return self.draft.precision or self.precision

    @property
    def draft_hardware(self) -> Hardware:
        return self.draft.hardware or self.hardware

    @property
    def same_device(self) -> bool:
        return self.draft.hardware is None or self.draft.hardware == self.hardware


# ---- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpecTiming:
    """Decode-phase times at one set of rates (ideal or estimated); per-step values are means."""
    draft_s_per_step: float          # all draft passes of one step
    verify_s_per_step: float
    step_s: float
    vanilla_tpot_s: float             # the core's TPOT (plain decode)
    tpot_s: float                     # speculative time per generated token per sequence
    speedup: float                    # vanilla decode time / speculative decode time
    decode_tokens_per_s: float        # per sequence
    throughput_tokens_per_s: float    # aggregate over the batch
    vanilla_decode_tokens_per_s: float
    vanilla_throughput_tokens_per_s: float
    decode_total_s: float
    vanilla_decode_total_s: float
    ttft_s: float                     # target prefill (+ draft prefill)
    e2e_latency_s: float
    vanilla_e2e_latency_s: float

    @property
    def verify_overhead_s(self) -> float:
        """Extra cost of verifying gamma + 1 tokens over decoding one."""
        return self.verify_s_per_step - self.vanilla_tpot_s


@dataclass(frozen=True)
class SpecMemory:
    """Memory of speculation in bytes (GB = 1e9). KV at the full context (+ gamma slots)."""
    target_weight_bytes: float
    target_kv_bytes: float
    target_activation_bytes: float
    draft_weight_bytes: float         # the draft's own weights (shared embedding/LM head excluded)
    draft_kv_bytes: float
    extra_target_kv_bytes: float      # gamma speculative slots in the target's cache
    extra_activation_bytes: float     # verification activations (gamma + 1 tokens' logits, ...)
    target_capacity_bytes: float
    draft_capacity_bytes: float
    same_device: bool

    @property
    def overhead_bytes(self) -> float:
        return (self.draft_weight_bytes + self.draft_kv_bytes + self.extra_target_kv_bytes
                + self.extra_activation_bytes)

    @property
    def baseline_bytes(self) -> float:
        return self.target_weight_bytes + self.target_kv_bytes + self.target_activation_bytes

    @property
    def overhead_fraction(self) -> float:
        return self.overhead_bytes / self.baseline_bytes

    @property
    def fits(self) -> bool:
        draft = self.draft_weight_bytes + self.draft_kv_bytes
        target = self.baseline_bytes + self.extra_target_kv_bytes + self.extra_activation_bytes
        if self.same_device:
            return target + draft <= self.target_capacity_bytes
        return target <= self.target_capacity_bytes and draft <= self.draft_capacity_bytes


@dataclass(frozen=True)
class SpecEnergy:
    """Decode energy per generated token [J], vanilla vs speculative (the wasted work on rejected
    drafts included)."""
    vanilla_j_per_token: float
    speculative_j_per_token: float
    method: str
    assumptions: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        return self.speculative_j_per_token / self.vanilla_j_per_token


@dataclass(frozen=True)
class SpecReport:
    setup: Setup
    speculation: Speculation
    expected_tokens_per_step: float
    steps: float                      # expected target passes over the decode phase
    estimated: SpecTiming
    ideal: SpecTiming
    memory: SpecMemory
    energy: SpecEnergy
    vocab: VocabCheck
    draft_ops: tuple[Operator, ...]   # one draft pass at the mean step context
    verify_ops: tuple[Operator, ...]  # the verification pass at the mean step context
    decode_ops: tuple[Operator, ...]  # a plain decode step at the mean context
    notes: tuple[str, ...] = field(default=())


# ---- the engine ------------------------------------------------------------------------------

class _Engine:
    """Cached passes and rates of one ``Setup``; evaluates any ``Speculation`` quickly."""

    def __init__(self, setup: Setup, costs: SpecCosts):
        self.su = su = setup
        self.costs = costs
        wl = su.workload
        first, last = wl.decode_contexts
        self.first, self.n_tokens = first, max(0, last - first + 1)
        if self.n_tokens == 0:
            raise ConfigError("speculative decoding needs at least 2 generated tokens "
                              "(the first comes from prefill)")
        dt, ddt = su.precision.compute_dtype, su.draft_precision.compute_dtype
        b = wl.batch
        self.r = {True: rates(su.hardware, dt, True, su.efficiency, tokens_in_flight=b, batch=b),
                  False: rates(su.hardware, dt, False)}
        deff = su.efficiency if su.same_device else None
        # a draft pass pays the per-sequence cost (inputs prepared per sequence) but not the
        # scheduler's per-iteration cost, paid once per draft+verify iteration with the verify
        deff_used = deff or su.draft_hardware.effective_efficiency
        self.rd = {True: replace(rates(su.draft_hardware, ddt, True, deff, tokens_in_flight=b),
                                 pass_overhead_s=costs.draft_seq_share
                                 * deff_used.seq_overhead_s * b),
                   False: rates(su.draft_hardware, ddt, False)}
        self._verify: dict[int, _Pass] = {}
        self._draft: _Pass | None = None
        self._medusa: dict[int, _Pass] = {}
        self._totals: dict = {}        # (Speculation, estimated) -> totals (curves, grids reuse)
        self.vanilla = {}
        _, ideal_tot, est_tot = integrate_decode(su.target, su.precision, wl.batch, first, last,
                                                 wl.flash_attention, self.r[False], self.r[True])
        self.vanilla = {False: ideal_tot,
                        True: est_tot + self.n_tokens * self.r[True].pass_overhead_s}

    def verify_rates(self, s: int, estimated: bool, speculating: bool = True) -> Rates:
        """Target rates of a verification pass: batch x ``s`` tokens in flight per GEMM, and
        the host work per sequence the stack pays serially when it speculates
        (``Efficiency.spec_host_seq_s``), once per draft + verify iteration, and, when
        ``speculating`` (gamma > 0), speculation's own host work per sequence per iteration
        (``costs.SpecCosts.iteration_seq_s``, fitted)."""
        if not estimated:
            return self.r[False]
        su = self.su
        b = su.workload.batch
        r = rates(su.hardware, su.precision.compute_dtype, True, su.efficiency,
                  tokens_in_flight=b * s, batch=b)
        host_s = ((su.efficiency or su.hardware.effective_efficiency).spec_host_seq_s
                  + (self.costs.iteration_seq_s if speculating else 0.0)) * b
        return replace(r, pass_overhead_s=r.pass_overhead_s + host_s) if host_s else r

    def verify(self, s: int) -> _Pass:
        if s not in self._verify:
            su, wl = self.su, self.su.workload
            t = su.target
            self._verify[s] = _Pass(
                lambda c: forward_ops(t, su.precision, wl.batch, s, c, wl.flash_attention, s),
                s, t.sliding_window, t.mla is not None)
        return self._verify[s]

    def draft_pass(self) -> _Pass:
        if self._draft is None:
            su, wl = self.su, self.su.workload
            d, dp = su.draft.model, su.draft_precision
            self._draft = _Pass(
                lambda c: forward_ops(d, dp, wl.batch, 1, c, wl.flash_attention, 1),
                1, d.sliding_window, d.mla is not None)
        return self._draft

    def medusa(self, gamma: int) -> _Pass:
        if gamma not in self._medusa:
            su = self.su
            ops = medusa_ops(su.target, su.draft_precision, su.workload.batch, gamma)
            self._medusa[gamma] = _Pass(lambda c: ops, 1, None, False, constant=True)
        return self._medusa[gamma]

    def totals(self, spec: Speculation, estimated: bool) -> tuple[_Sum, _Sum, float, float]:
        """(draft totals, verify totals, E, expected steps) over the decode phase."""
        key = (spec, estimated)
        if key not in self._totals:
            if len(self._totals) > 4096:
                self._totals.clear()
            self._totals[key] = self._compute_totals(spec, estimated)
        return self._totals[key]

    def _compute_totals(self, spec: Speculation, estimated: bool):
        e = spec.tokens_per_step
        n_steps = self.n_tokens / e
        s = spec.verified_tokens
        verify = _steps(self.verify(s), self.verify_rates(s, estimated, spec.gamma > 0),
                        [self.first + s - 1],
                        e, n_steps)
        draft = _Sum()
        kind, g = self.su.draft.kind, spec.gamma
        if g and kind in (DraftKind.MODEL, DraftKind.HEAD):
            draft = _steps(self.draft_pass(), self.rd[estimated],
                           [self.first + i for i in range(g)], e, n_steps)
        elif g and kind is DraftKind.MEDUSA:
            draft = _steps(self.medusa(g), self.rd[estimated], [self.first], e, n_steps)
        return draft, verify, e, n_steps

    def speedup(self, spec: Speculation, estimated: bool = True) -> float:
        draft, verify, _, _ = self.totals(spec, estimated)
        return self.vanilla[estimated] / (draft.time_s + verify.time_s)


def _engine(setup: Setup) -> _Engine:
    """The cached engine of ``setup`` under the speculation costs in force."""
    return _engine_for(setup, spec_costs())


@functools.lru_cache(maxsize=32)
def _engine_for(setup: Setup, costs: SpecCosts) -> _Engine:
    return _Engine(setup, costs)


# ---- public analyses -------------------------------------------------------------------------

def analyze_speculative(setup: Setup, spec: Speculation) -> SpecReport:
    """Full analysis of speculative decoding for one setup and speculation setting."""
    eng = _engine(setup)
    su, wl = setup, setup.workload
    timings, sums = {}, {}
    prefill = _prefill_s(su)
    for est in (True, False):
        draft, verify, e, n_steps = eng.totals(spec, est)
        sums[est] = (draft, verify)
        total = draft.time_s + verify.time_s
        van = eng.vanilla[est]
        ttft, van_ttft = prefill[est]
        timings[est] = SpecTiming(
            draft_s_per_step=draft.time_s / n_steps, verify_s_per_step=verify.time_s / n_steps,
            step_s=total / n_steps, vanilla_tpot_s=van / eng.n_tokens,
            tpot_s=total / eng.n_tokens, speedup=van / total,
            decode_tokens_per_s=eng.n_tokens / total,
            throughput_tokens_per_s=wl.batch * eng.n_tokens / total,
            vanilla_decode_tokens_per_s=eng.n_tokens / van,
            vanilla_throughput_tokens_per_s=wl.batch * eng.n_tokens / van,
            decode_total_s=total, vanilla_decode_total_s=van, ttft_s=ttft,
            e2e_latency_s=ttft + total, vanilla_e2e_latency_s=van_ttft + van)
    e = spec.tokens_per_step
    n_steps = eng.n_tokens / e
    mean_l = eng.first + e * (n_steps - 1) / 2
    s = spec.verified_tokens
    verify_ops = eng.verify(s).ops(round(mean_l + s - 1))
    if su.draft.kind in (DraftKind.MODEL, DraftKind.HEAD) and spec.gamma:
        draft_ops = eng.draft_pass().ops(round(mean_l + (spec.gamma - 1) / 2))
    elif su.draft.kind is DraftKind.MEDUSA:
        draft_ops = eng.medusa(spec.gamma).ops(1)
    else:
        draft_ops = ()
    decode_ops = eng.verify(1).ops(round(eng.first + (eng.n_tokens - 1) / 2))
    mem = speculative_memory(setup, spec)
    vocab = vocab_check(su.target, su.draft)
    notes = list(_notes(su, spec))
    if vocab.compatible is not True:
        notes.insert(0, vocab.message)
    return SpecReport(setup, spec, e, n_steps, timings[True], timings[False],
                      mem, _energy(eng, spec, mem, timings[True], sums[True]),
                      vocab, draft_ops, verify_ops, decode_ops, tuple(notes))


def speedup(setup: Setup, spec: Speculation, estimated: bool = True) -> float:
    """Speculative over vanilla decode speed (> 1 is faster)."""
    return _engine(setup).speedup(spec, estimated)


def speedup_grid(setup: Setup, alphas, gammas, estimated: bool = True) -> np.ndarray:
    """Speedup for every (alpha, gamma): array of shape (len(alphas), len(gammas))."""
    eng = _engine(setup)
    out = np.empty((len(alphas), len(gammas)))
    for i, a in enumerate(alphas):
        for j, g in enumerate(gammas):
            out[i, j] = eng.speedup(Speculation(int(g), alpha=float(a)), estimated)
    return out


def optimal_gamma(setup: Setup, alpha: float | None = None, gamma_max: int = 16,
                  acceptance: tuple[float, ...] | None = None,
                  estimated: bool = True) -> tuple[int, float]:
    """The gamma in 0..gamma_max with the largest speedup for a constant ``alpha`` (or
    per-position ``acceptance`` rates, which cap gamma at their length), and that speedup."""
    gamma_max = require_int("gamma_max", gamma_max, 0, MAX_GAMMA)
    if acceptance is not None:
        gamma_max = min(gamma_max, len(acceptance))
    elif alpha is None:
        raise ConfigError("optimal_gamma needs alpha or acceptance rates")
    eng = _engine(setup)
    best = (0, 1.0)
    for g in range(1, gamma_max + 1):
        sp = eng.speedup(Speculation(g, alpha=alpha, acceptance=acceptance), estimated)
        if sp > best[1]:
            best = (g, sp)
    return best


def break_even_alpha(setup: Setup, gamma: int, estimated: bool = True,
                     tol: float = 1e-6) -> float | None:
    """Smallest constant alpha at which speculation with ``gamma`` drafts is no slower than plain
    decoding; None when even alpha = 1 does not pay off (0.0 when alpha = 0 already does)."""
    gamma = require_int("gamma", gamma, 1, MAX_GAMMA)
    eng = _engine(setup)

    def f(a):
        return eng.speedup(Speculation(gamma, alpha=a), estimated) - 1.0
    if f(1.0) < 0:
        return None
    if f(0.0) >= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return hi


def implied_alpha(setup: Setup, gamma: int, measured_speedup: float, estimated: bool = True,
                  tol: float = 1e-6) -> float | None:
    """The constant alpha at which the predicted speedup with ``gamma`` drafts equals
    ``measured_speedup`` (for measurements that publish no acceptance); None when no alpha in
    [0, 1] reaches it."""
    gamma = require_int("gamma", gamma, 1, MAX_GAMMA)
    measured_speedup = require_float("measured speedup", measured_speedup, lo=0, lo_open=True)
    eng = _engine(setup)

    def f(a):
        return eng.speedup(Speculation(gamma, alpha=a), estimated) - measured_speedup
    lo_v, hi_v = f(0.0), f(1.0)
    if lo_v > 0 or hi_v < 0:
        return None
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class BatchPoint:
    batch: int
    speedup: float
    vanilla_throughput_tokens_per_s: float
    throughput_tokens_per_s: float
    verify_s_per_step: float
    vanilla_tpot_s: float


def batch_sweep(setup: Setup, spec: Speculation, batches, estimated: bool = True
                ) -> tuple[BatchPoint, ...]:
    """Speedup and aggregate throughput against batch size (verification turns compute-bound
    as batch x (gamma + 1) grows, so the benefit shrinks)."""
    out = []
    for b in batches:
        su = replace(setup, workload=replace(setup.workload, batch=int(b)))
        eng = _engine(su)
        draft, verify, e, n = eng.totals(spec, estimated)
        total = draft.time_s + verify.time_s
        van = eng.vanilla[estimated]
        out.append(BatchPoint(int(b), van / total, int(b) * eng.n_tokens / van,
                              int(b) * eng.n_tokens / total, verify.time_s / n,
                              van / eng.n_tokens))
    return tuple(out)


def time_by_kind(ops: tuple[Operator, ...], r: Rates, estimated: bool = True) -> dict[str, float]:
    """Roofline time [s] of a pass grouped by operator kind (for breakdown charts)."""
    out: dict[str, float] = {}
    for o in ops:
        t = op_time_s(o.flops * o.count, o.memory_bytes * o.count,
                      launches(o.count, o.quantized, r, o.name) if estimated else 0,
                      r, o.comm_bytes * o.count, o.kv_read_bytes * o.count,
                      kv_reread_bytes=o.kv_reread_bytes * o.count,
                      weight_bytes=o.weight_bytes * o.count, quantized=o.quantized)
        out[o.kind.value] = out.get(o.kind.value, 0.0) + t
    return out


def setup_rates(setup: Setup, estimated: bool = True) -> tuple[Rates, Rates]:
    """(target rates, draft rates) of a setup."""
    eng = _engine(setup)
    return eng.r[estimated], eng.rd[estimated]


# ---- prefill, memory, energy, vocabulary -----------------------------------------------------

def _prefill_s(su: Setup) -> dict[bool, tuple[float, float]]:
    """{estimated: (speculative TTFT, vanilla TTFT)}: target prefill plus the draft's own prefill
    (serial on one device, overlapped on two)."""
    wl = su.workload
    eng = _engine(su)
    out = {}
    p = wl.prompt_len
    logits = p if wl.logits_all_tokens else 1
    t_ops = forward_ops(su.target, su.precision, wl.batch, p, p, wl.flash_attention, logits)
    d_ops = ()
    if p and su.draft.kind in (DraftKind.MODEL, DraftKind.HEAD):
        d_ops = forward_ops(su.draft.model, su.draft_precision, wl.batch, p, p,
                            wl.flash_attention, 1)
    for est in (True, False):
        t = _pass_time_s(t_ops, eng.verify_rates(max(1, p), est, False), est)   # batch x p
        d = _pass_time_s(d_ops, eng.rd[est], est)
        if not p:      # no prefill: the first token takes a decode step
            t = eng.vanilla[est] / eng.n_tokens
        out[est] = ((t + d) if su.same_device else max(t, d), t)
    return out


def draft_weight_bytes(setup: Setup, gamma: int) -> float:
    """The draft's own weights [bytes]; a head's shared embedding (and LM head) excluded."""
    d, dp = setup.draft, setup.draft_precision
    if d.kind is DraftKind.MODEL:
        return weight_bytes(d.model, dp)
    if d.kind is DraftKind.HEAD:
        pc = count_params(d.model)
        shared = pc.embedding + (pc.lm_head if d.shares_lm_head else 0)
        return weight_bytes(d.model, dp) - bits_to_bytes(shared, dp.weight_embed_bits)
    if d.kind is DraftKind.MEDUSA:
        return medusa_weight_bytes(setup.target, dp, gamma)
    return 0.0


def speculative_memory(setup: Setup, spec: Speculation) -> SpecMemory:
    """Weights, KV cache and activations of target and draft at the full context."""
    su, wl = setup, setup.workload
    t, p, b = su.target, su.precision, wl.batch
    ctx = wl.max_context
    s = spec.verified_tokens
    d = su.draft
    d_kv = 0.0
    if d.kind in (DraftKind.MODEL, DraftKind.HEAD):
        d_kv = kv_cache_bytes(d.model, su.draft_precision, b, ctx + spec.gamma)
    dec_ops = forward_ops(t, p, b, 1, max(ctx, 1), wl.flash_attention)
    ver_ops = forward_ops(t, p, b, s, max(ctx, s), wl.flash_attention, s)
    act = activation_peak_bytes(dec_ops)
    extra_act = max(0.0, activation_peak_bytes(ver_ops) - act)
    return SpecMemory(
        target_weight_bytes=weight_bytes(t, p), target_kv_bytes=kv_cache_bytes(t, p, b, ctx),
        target_activation_bytes=act, draft_weight_bytes=draft_weight_bytes(su, spec.gamma),
        draft_kv_bytes=d_kv,
        extra_target_kv_bytes=kv_cache_bytes(t, p, b, ctx + s - 1) - kv_cache_bytes(t, p, b, ctx),
        extra_activation_bytes=extra_act,
        target_capacity_bytes=su.hardware.memory_capacity_bytes,
        draft_capacity_bytes=su.draft_hardware.memory_capacity_bytes,
        same_device=su.same_device)


def _device_energy_j(params, s: "_Sum", busy_s: float, idle_s: float) -> float:
    """Energy of one device [J]: static power while busy, idle power while waiting for the other
    device, FLOPs and bytes (weights, KV, activations) at ``energy.energy_params`` prices."""
    act = max(s.mem - s.weight - s.kv, 0.0)
    return (params.static_w * busy_s + (params.idle_w or 0.0) * idle_s + params.flop_j * s.flops
            + params.weight_j_per_byte * s.weight + params.kv_j_per_byte * s.kv
            + params.act_j_per_byte * act)


def _energy(eng: _Engine, spec: Speculation, mem: SpecMemory, t: SpecTiming, sums) -> SpecEnergy:
    """Decode energy per generated token, vanilla vs speculative, with the component model of
    ``llmpara_core.metrics.energy`` (Choi et al. energy roofline: static power x estimated time + e_flop x
    FLOPs + e_byte x bytes by kind) applied to the step totals."""
    from ..metrics.energy import energy_params
    su = eng.su
    tokens = su.workload.batch * eng.n_tokens
    sizes = {"weight": mem.target_weight_bytes, "kv": mem.target_kv_bytes,
             "act": mem.target_activation_bytes}
    pt = energy_params(su.hardware, su.precision.compute_dtype, None, sizes)
    van = _steps(eng.verify(1), eng.r[True], [eng.first], 1.0, eng.n_tokens)
    van_j = _device_energy_j(pt, van, t.vanilla_decode_total_s, 0.0)
    draft, verify = sums
    if su.same_device:
        both = _Sum()
        both.add(draft)
        both.add(verify)
        spec_j = _device_energy_j(pt, both, t.decode_total_s, 0.0)
    else:
        dsizes = {"weight": mem.draft_weight_bytes, "kv": mem.draft_kv_bytes, "act": 0.0}
        pd = energy_params(su.draft_hardware, su.draft_precision.compute_dtype, None, dsizes)
        spec_j = (_device_energy_j(pt, verify, verify.time_s, draft.time_s)
                  + _device_energy_j(pd, draft, draft.time_s, verify.time_s))
    notes = tuple(dict.fromkeys(pt.assumptions))
    return SpecEnergy(van_j / tokens, spec_j / tokens,
                      "energy.energy_params component model: static x time + e_flop x FLOPs + "
                      "e_byte x bytes (weights, KV, activations)", notes)


def _notes(su: Setup, spec: Speculation) -> list[str]:
    notes = []
    d = su.draft
    ctx = su.workload.max_context + spec.gamma
    models = [("target", su.target)] + ([("draft", d.model)] if d.kind is DraftKind.MODEL else [])
    for role, m in models:
        if m.max_position_embeddings and ctx > m.max_position_embeddings:
            notes.append(f"context {ctx} exceeds the {role}'s {m.max_position_embeddings} "
                         "positions")
    if spec.verify_tokens is not None and spec.verify_tokens > spec.gamma + 1:
        notes.append(f"tree verification: {spec.verify_tokens} tokens per target pass")
    if d.kind is DraftKind.MEDUSA:
        notes.append("Medusa: one pass of gamma heads per step (not gamma sequential passes)")
    host = (su.efficiency or su.hardware.effective_efficiency).spec_host_seq_s
    if host:
        notes.append(f"the stack switches its overlap scheduler off when it speculates: each "
                     f"draft + verify iteration also pays {host / S_PER_US:.3g} µs of host work "
                     f"per sequence ({host * su.workload.batch / S_PER_US:.3g} µs at batch "
                     f"{su.workload.batch}) that plain decoding hides behind the GPU")
    return notes


# ---- plain data ------------------------------------------------------------------------------

def _timing_dict(t: SpecTiming) -> dict:
    return {
        "speedup": t.speedup,
        "decode_tokens_per_s": t.decode_tokens_per_s,
        "throughput_tokens_per_s": t.throughput_tokens_per_s,
        "vanilla_decode_tokens_per_s": t.vanilla_decode_tokens_per_s,
        "vanilla_throughput_tokens_per_s": t.vanilla_throughput_tokens_per_s,
        "tpot_s": t.tpot_s,
        "ttft_s": t.ttft_s,
        "e2e_latency_s": t.e2e_latency_s,
        "vanilla_e2e_latency_s": t.vanilla_e2e_latency_s,
        "step_time": {
            "draft_s": t.draft_s_per_step,
            "verify_s": t.verify_s_per_step,
            "step_s": t.step_s,
            "vanilla_tpot_s": t.vanilla_tpot_s,
            "verify_overhead_s": t.verify_overhead_s,
            "decode_total_s": t.decode_total_s,
            "vanilla_decode_total_s": t.vanilla_decode_total_s,
        },
    }


def report_to_dict(r: SpecReport) -> dict:
    """JSON-ready view of a report (SI units: s, bytes, J, tokens/s); estimated figures at the
    top level, the same at peak rates under ``ideal``."""
    su, sp, m, e = r.setup, r.speculation, r.memory, r.energy
    wl = su.workload
    return {
        "target": su.target.name,
        "draft": su.draft.name,
        "draft_kind": su.draft.kind.value,
        "hardware": su.hardware.name,
        "draft_hardware": su.draft_hardware.name,
        "precision": su.precision.name,
        "draft_precision": su.draft_precision.name,
        "batch": wl.batch, "prompt_len": wl.prompt_len, "gen_len": wl.gen_len,
        "gamma": sp.gamma,
        "alpha": sp.alpha,
        "acceptance": list(sp.acceptance) if sp.acceptance is not None else None,
        "verify_tokens": sp.verified_tokens,
        "expected_tokens_per_step": r.expected_tokens_per_step,
        "target_passes": r.steps,
        **_timing_dict(r.estimated),
        "ideal": _timing_dict(r.ideal),
        "memory_overhead": {
            "draft_weight_bytes": m.draft_weight_bytes,
            "draft_kv_cache_bytes": m.draft_kv_bytes,
            "extra_target_kv_cache_bytes": m.extra_target_kv_bytes,
            "extra_activation_bytes": m.extra_activation_bytes,
            "overhead_bytes": m.overhead_bytes,
            "overhead_fraction": m.overhead_fraction,
            "target_weight_bytes": m.target_weight_bytes,
            "target_kv_cache_bytes": m.target_kv_bytes,
            "fits": m.fits,
            "same_device": m.same_device,
        },
        "energy_per_token": {
            "vanilla_j": e.vanilla_j_per_token,
            "speculative_j": e.speculative_j_per_token,
            "ratio": e.ratio,
            "method": e.method,
        },
        "vocab": {"compatible": r.vocab.compatible, "message": r.vocab.message},
        "notes": list(r.notes),
    }
