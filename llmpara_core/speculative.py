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
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np

from .analysis import integrate_decode
from .errors import ConfigError, require_float, require_int
from .forward import forward_ops
from .hardware import Efficiency, Hardware
from .memory import activation_peak_bytes, kv_cache_bytes, weight_bytes
from .model import FFNKind, Model, MoE, count_params
from .operators import OpKind, Operator, elementwise, linear
from .precision import Precision
from .roofline import Rates, op_time_s, rates
from .units import bits_to_bytes
from .workload import Workload

MAX_GAMMA = 64
DEFAULT_ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


# ---- inputs ---------------------------------------------------------------------------------

class DraftKind(Enum):
    """How draft tokens are produced."""
    MODEL = "model"      # a separate small model, gamma autoregressive passes
    HEAD = "head"        # EAGLE / DeepSeek-MTP style: decoder layer(s) on the target's features,
                         # gamma autoregressive passes, the target's embedding and LM head shared
    MEDUSA = "medusa"    # gamma parallel heads (ResBlock + own LM head) in one pass per step
    NGRAM = "ngram"      # prompt lookup / n-gram: no network, no cost


@dataclass(frozen=True)
class Draft:
    """The drafter. ``precision``/``hardware`` None mean the target's (same device: draft and
    target share its memory and run one after the other)."""
    kind: DraftKind
    model: Model | None = None
    precision: Precision | None = None
    hardware: Hardware | None = None
    shares_lm_head: bool = False     # HEAD: the LM head read each step is the target's

    def __post_init__(self):
        if not isinstance(self.kind, DraftKind):
            raise ConfigError(f"draft kind must be a DraftKind, got {self.kind!r}")
        if self.kind in (DraftKind.MODEL, DraftKind.HEAD) and self.model is None:
            raise ConfigError(f"a {self.kind.value} draft needs a model")

    @property
    def name(self) -> str:
        if self.kind in (DraftKind.MODEL, DraftKind.HEAD):
            return self.model.name
        return "Medusa heads" if self.kind is DraftKind.MEDUSA else "n-gram lookup"


def model_draft(model: Model, precision: Precision | None = None,
                hardware: Hardware | None = None) -> Draft:
    """A separate draft model (Leviathan/Chen), optionally at its own precision and device."""
    return Draft(DraftKind.MODEL, model, precision, hardware)


def head_draft(target: Model, style: str = "eagle", params: float | None = None,
               layers: int = 1, vocab_size: int | None = None,
               precision: Precision | None = None, hardware: Hardware | None = None) -> Draft:
    """A self-drafting head run autoregressively on the target's features.

    ``style`` "eagle" (EAGLE-1/2/3: dense decoder layer(s) of the target's attention shape and dense
    FFN width, plus the 2h -> h feature fusion) or "mtp" (DeepSeek-V3 multi-token prediction: one
    full target layer, MoE included, plus the 2h -> h projection). ``params`` [parameters]
    replaces the derived size by a dense head of that many own parameters (embedding and LM head,
    shared with the target, excluded). ``vocab_size`` gives the head its own reduced LM head
    (EAGLE-3's draft vocabulary); otherwise it reads the target's LM head every step.
    The 2h -> h projection (2h^2 weights) is folded into the FFN width (same bytes and FLOPs).
    """
    style = str(style).lower()
    if style not in ("eagle", "mtp"):
        raise ConfigError(f"head style must be 'eagle' or 'mtp', got {style!r}")
    layers = require_int("head layers", layers, 1, 64)
    h = target.hidden_size
    gated = target.ffn_kind is FFNKind.GATED
    fold = round(2 * h / (3 if gated else 2))        # 2h*h params as extra FFN width
    base = replace(target, name=f"{target.name} {style.upper()} head", num_hidden_layers=layers,
                   sliding_layers=None if target.sliding_layers is None
                   else target.sliding_layers[:layers],
                   tie_word_embeddings=False, warnings=(), source="derived from the target",
                   moe=None)
    if vocab_size is not None:
        base = replace(base, vocab_size=require_int("head vocab_size", vocab_size, 1, 10**7))
    if params is not None:
        params = require_float("head params", params, lo=0, lo_open=True)
        dense = replace(base, intermediate_size=1)
        pc = count_params(dense)
        fixed = pc.total - pc.embedding - pc.lm_head - pc.ffn_dense
        per_width = (3 if gated else 2) * h * layers
        inter = int(round((params - fixed) / per_width))
        if inter < 1:
            raise ConfigError(
                f"head params {params:.3g} is smaller than {layers} attention layer(s) of "
                f"{target.name} ({fixed:.3g} parameters)")
        model = replace(dense, intermediate_size=inter)
    elif style == "mtp" and target.moe is not None:
        moe = replace(target.moe, first_dense_layers=0,
                      shared_intermediate_size=target.moe.shared_intermediate_size + fold)
        model = replace(base, moe=moe)
    else:
        model = replace(base, intermediate_size=target.intermediate_size + fold)
    return Draft(DraftKind.HEAD, model, precision, hardware, shares_lm_head=vocab_size is None)


def medusa_draft(precision: Precision | None = None, hardware: Hardware | None = None) -> Draft:
    """Medusa heads (Cai et al. 2024, arXiv 2401.10774): head i = ResBlock (h x h + bias, SiLU,
    residual) + its own h x V LM head; all gamma heads run once per step on the last hidden state."""
    return Draft(DraftKind.MEDUSA, None, precision, hardware)


def ngram_draft() -> Draft:
    """Prompt lookup / n-gram drafting: no model and no device time."""
    return Draft(DraftKind.NGRAM)


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
class VocabCheck:
    compatible: bool | None           # None: could not tell
    message: str


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


# ---- piecewise-affine passes ----------------------------------------------------------------

_FLOPS, _MEM, _COMM, _WEIGHT, _KV = range(5)


def _table(ops: tuple[Operator, ...]) -> tuple[np.ndarray, float]:
    """Per-operator totals (x count) of one pass: rows FLOPs, memory bytes, communication bytes,
    weight bytes, KV bytes; and the number of kernel launches."""
    arr = np.array([[o.flops * o.count, o.memory_bytes * o.count, o.comm_bytes * o.count,
                     o.weight_bytes * o.count, (o.kv_read_bytes + o.kv_write_bytes) * o.count]
                    for o in ops], float).reshape(-1, 5).T
    return arr, float(sum(o.count for o in ops))


class _Pass:
    """A forward pass over ``s`` new tokens per sequence as a function of its context c: the
    per-operator FLOPs and bytes are affine in c between breakpoints (sliding window w: c = w and
    c = w + s - 1; MLA: c = s, below which the pass takes the expanded prefill form)."""

    def __init__(self, build, s: int, window: int | None, mla: bool, constant: bool = False):
        self._build, self.s, self.constant = build, s, constant
        bps = set()
        if mla:
            bps.add(s)
        if window is not None:
            bps.update({window, window + s - 1})
        self.bps = sorted(b for b in bps if b >= s)
        self._cache: dict[int, tuple[np.ndarray, float]] = {}

    def ops(self, c: int) -> tuple[Operator, ...]:
        return self._build(max(int(c), self.s))

    def table(self, c: int) -> tuple[np.ndarray, float]:
        c = max(int(c), self.s)
        if c not in self._cache:
            self._cache[c] = _table(self._build(c))
        return self._cache[c]

    def pieces(self, c_first: float, dc: float, n: int):
        """Split steps j = 0..n-1 at contexts c_first + j*dc into affine pieces; yield
        (j0, j1, anchor a, table at a, anchor z, table at z)."""
        if self.constant:
            t = self.table(self.s)
            yield 0, n - 1, self.s, t, self.s, t
            return
        bounds = [-math.inf] + self.bps + [math.inf]
        for lo_b, hi_b in zip(bounds[:-1], bounds[1:]):
            j0 = 0 if lo_b == -math.inf else max(0, math.floor((lo_b - c_first) / dc + 1e-9) + 1)
            j1 = n - 1 if hi_b == math.inf else min(n - 1, math.floor((hi_b - c_first) / dc + 1e-9))
            if j1 < j0:
                continue
            c0, c1 = c_first + j0 * dc, c_first + j1 * dc
            a = math.floor(c0 + 1e-9)
            z = math.ceil(c1 - 1e-9)
            if lo_b != -math.inf:
                a = max(a, int(lo_b) + 1)
            if hi_b != math.inf:
                z = min(z, int(hi_b))
            a = max(a, self.s)
            z = max(z, a)
            yield j0, j1, a, self.table(a), z, self.table(z)


def _at(ta: np.ndarray, tz: np.ndarray, a: int, z: int, c: float) -> np.ndarray:
    """Per-operator values at context ``c`` from the tables at anchors a and z (affine)."""
    if z == a:
        return ta
    return ta + (tz - ta) * ((c - a) / (z - a))


def _sum_max_affine_vec(u0, u1, v0, v1, n) -> np.ndarray:
    """Element-wise exact sum over k = 0..n-1 of max(u_k, v_k) for u, v affine in k with the
    given values at k = 0 and k = n - 1 (vectorised ``analysis._sum_max_affine``; ``n`` may be an
    array broadcasting against the others)."""
    n = np.asarray(n, float)
    span = np.maximum(n - 1, 1.0)
    g0, g1 = u0 - v0, u1 - v1
    same = (g0 * g1 >= 0) | (n == 1)
    whole = np.where(g0 + g1 >= 0, n * (u0 + u1) / 2, n * (v0 + v1) / 2)
    whole = np.where(n == 1, np.maximum(u0, v0), whole)
    with np.errstate(divide="ignore", invalid="ignore"):
        ks = np.floor(np.where(same, 0.0, g0 / (g0 - g1)) * span)
    ks = np.clip(ks, 0, np.maximum(n - 2, 0))
    first_u = g0 > 0
    f0, f1 = np.where(first_u, u0, v0), np.where(first_u, u1, v1)
    s0, s1 = np.where(first_u, v0, u0), np.where(first_u, v1, u1)

    def series(x0, x1, i, j):      # sum over k = i..j of affine x
        return (j - i + 1) * (x0 + (x1 - x0) / span * (i + j) / 2)
    split = series(f0, f1, 0, ks) + series(s0, s1, ks + 1, n - 1)
    return np.where(same, whole, split)


@dataclass
class _Sum:
    """Totals over steps: time [s], FLOPs, memory bytes, weight bytes, KV bytes."""
    time_s: float = 0.0
    flops: float = 0.0
    mem: float = 0.0
    weight: float = 0.0
    kv: float = 0.0

    def add(self, other: "_Sum", w: float = 1.0) -> None:
        for k in ("time_s", "flops", "mem", "weight", "kv"):
            setattr(self, k, getattr(self, k) + w * getattr(other, k))


def _steps(p: _Pass, r: Rates, c_firsts, dc: float, n_steps: float) -> _Sum:
    """Exact totals of pass ``p`` over steps at contexts c + j*dc for every c in ``c_firsts``:
    floor(n_steps) whole steps, then the remainder as a weighted share of one more step."""
    full = int(math.floor(n_steps + 1e-12))
    frac = n_steps - full
    runs = [(c, full, 1.0) for c in c_firsts if full > 0]
    if frac > 1e-12:
        runs += [(c + full * dc, 1, frac) for c in c_firsts]
    v0s, v1s, ms, ws, kerns = [], [], [], [], []
    for c_first, n, w in runs:
        for j0, j1, a, (ta, kern), z, (tz, _) in p.pieces(c_first, dc, n):
            v0s.append(_at(ta, tz, a, z, c_first + j0 * dc))
            v1s.append(_at(ta, tz, a, z, c_first + j1 * dc))
            ms.append(j1 - j0 + 1)
            ws.append(w)
            kerns.append(kern)
    out = _Sum()
    if not ms:
        return out
    v0, v1 = np.stack(v0s), np.stack(v1s)             # (runs, field, op)
    m, w = np.array(ms, float), np.array(ws, float)
    t = _sum_max_affine_vec(v0[:, _FLOPS] / r.flops_per_s, v1[:, _FLOPS] / r.flops_per_s,
                            v0[:, _MEM] / r.bytes_per_s, v1[:, _MEM] / r.bytes_per_s, m[:, None])
    out.time_s = float((t.sum(axis=1) * w).sum() + (m * w * np.array(kerns)).sum()
                       * r.kernel_overhead_s)
    tot = ((v0 + v1).sum(axis=2) * (m * w / 2)[:, None]).sum(axis=0)   # per field
    if r.link_bytes_per_s:
        out.time_s += tot[_COMM] / r.link_bytes_per_s
    out.flops, out.mem, out.weight, out.kv = tot[_FLOPS], tot[_MEM], tot[_WEIGHT], tot[_KV]
    return out


def _pass_time_s(ops: tuple[Operator, ...], r: Rates, estimated: bool) -> float:
    return sum(op_time_s(o.flops * o.count, o.memory_bytes * o.count,
                         o.count if estimated else 0, r, o.comm_bytes * o.count) for o in ops)


# ---- Medusa heads as operators ---------------------------------------------------------------

def medusa_ops(target: Model, precision: Precision, batch: int, heads: int) -> tuple[Operator, ...]:
    """One pass of ``heads`` Medusa heads on ``batch`` hidden states: per head a biased h x h
    linear, SiLU, the residual add and an h x V LM head (its own weights)."""
    if heads <= 0:
        return ()
    h, v, a = target.hidden_size, target.vocab_size, precision.activation_bits
    one = (linear("medusa_resblock", OpKind.FFN, batch, h, h, precision.weight_ffn_bits, a, True),
           elementwise("medusa_silu_residual", OpKind.ELEMENTWISE, batch * h, 6.0, 2, a),
           linear("medusa_lm_head", OpKind.LM_HEAD, batch, h, v, precision.weight_embed_bits, a))
    return tuple(replace(o, count=heads, group="medusa") for o in one)


def medusa_weight_bytes(target: Model, precision: Precision, heads: int) -> float:
    h, v = target.hidden_size, target.vocab_size
    return heads * (bits_to_bytes(h * h + h, precision.weight_ffn_bits)
                    + bits_to_bytes(h * v, precision.weight_embed_bits))


# ---- the engine ------------------------------------------------------------------------------

class _Engine:
    """Cached passes and rates of one ``Setup``; evaluates any ``Speculation`` quickly."""

    def __init__(self, setup: Setup):
        self.su = su = setup
        wl = su.workload
        first, last = wl.decode_contexts
        self.first, self.n_tokens = first, max(0, last - first + 1)
        if self.n_tokens == 0:
            raise ConfigError("speculative decoding needs at least 2 generated tokens "
                              "(the first comes from prefill)")
        dt, ddt = su.precision.compute_dtype, su.draft_precision.compute_dtype
        self.r = {True: rates(su.hardware, dt, True, su.efficiency),
                  False: rates(su.hardware, dt, False)}
        deff = su.efficiency if su.same_device else None
        self.rd = {True: rates(su.draft_hardware, ddt, True, deff),
                   False: rates(su.draft_hardware, ddt, False)}
        self._verify: dict[int, _Pass] = {}
        self._draft: _Pass | None = None
        self._medusa: dict[int, _Pass] = {}
        self.vanilla = {}
        _, ideal_tot, est_tot = integrate_decode(su.target, su.precision, wl.batch, first, last,
                                                 wl.flash_attention, self.r[False], self.r[True])
        self.vanilla = {False: ideal_tot, True: est_tot}

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
        e = spec.tokens_per_step
        n_steps = self.n_tokens / e
        s = spec.verified_tokens
        verify = _steps(self.verify(s), self.r[estimated], [self.first + s - 1], e, n_steps)
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


@functools.lru_cache(maxsize=32)
def _engine(setup: Setup) -> _Engine:
    return _Engine(setup)


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
        t = op_time_s(o.flops * o.count, o.memory_bytes * o.count, o.count if estimated else 0,
                      r, o.comm_bytes * o.count)
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
        t = _pass_time_s(t_ops, eng.r[est], est)
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
    ``llmpara_core.energy`` (Choi et al. energy roofline: static power x estimated time + e_flop x
    FLOPs + e_byte x bytes by kind) applied to the step totals."""
    from .energy import energy_params
    su = eng.su
    tokens = su.workload.batch * eng.n_tokens
    sizes = {"weight": mem.target_weight_bytes, "kv": mem.target_kv_bytes,
             "act": mem.target_activation_bytes}
    pt = energy_params(su.hardware, su.precision.compute_dtype, su.efficiency, sizes)
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


def _family(model: Model) -> str | None:
    from .presets import find_preset
    try:
        return find_preset("models", model.name).category or None
    except ConfigError:
        return None


def vocab_check(target: Model, draft: Draft) -> VocabCheck:
    """Can the draft's tokens be verified by the target directly? Heads and n-gram drafts share
    the target's tokenizer; a separate model must use the same tokenizer (same family and a
    vocabulary of about the same size: checkpoints pad embeddings differently)."""
    if draft.kind is not DraftKind.MODEL:
        return VocabCheck(True, "the draft shares the target's tokenizer")
    d = draft.model
    vt, vd = target.vocab_size, d.vocab_size
    ft, fd = _family(target), _family(d)
    close = abs(vt - vd) <= 0.01 * max(vt, vd)
    if ft and fd and ft.lower() != fd.lower():
        if vt == vd:
            return VocabCheck(None, f"draft family {fd!r} differs from target family {ft!r}; "
                              f"vocabularies have the same size ({vt}) but may not be the same "
                              "tokenizer")
        return VocabCheck(False, f"tokenizers differ: {d.name} ({fd}, vocabulary {vd}) cannot draft "
                          f"for {target.name} ({ft}, vocabulary {vt}) without token translation, "
                          "which lowers acceptance")
    if not close:
        return VocabCheck(False, f"vocabulary sizes differ ({d.name}: {vd}, {target.name}: {vt}); "
                          "the draft's token ids do not map onto the target's")
    if ft is None or fd is None:
        return VocabCheck(None, f"vocabulary sizes match ({vd} vs {vt}) but the tokenizer "
                          "families are unknown")
    return VocabCheck(True, f"same tokenizer family ({ft})")


def _notes(su: Setup, spec: Speculation) -> list[str]:
    notes = []
    d = su.draft
    ctx = su.workload.max_context + spec.gamma
    if d.kind is DraftKind.MODEL and d.model.max_position_embeddings \
            and ctx > d.model.max_position_embeddings:
        notes.append(f"context {ctx} exceeds the draft's {d.model.max_position_embeddings} "
                     "positions")
    if spec.verify_tokens is not None and spec.verify_tokens > spec.gamma + 1:
        notes.append(f"tree verification: {spec.verify_tokens} tokens per target pass")
    if d.kind is DraftKind.MEDUSA:
        notes.append("Medusa: one pass of gamma heads per step (not gamma sequential passes)")
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
