"""Parallelism plans (TP, PP, DP, EP): validation against a model, a device and a workload,
the device's slice of the model, and MoE expert-placement statistics. Conventions: see
:mod:`llmpara_core.parallel`."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError, require_float, require_int
from ..hardware import Hardware
from ..limits import bound
from ..model import Model
from ..units import MAX_SIZE
from ..workload import Workload

MAX_DEGREE = int(bound("devices").hi)     # 65,536: also the most devices of a cluster


# ---- plan -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParallelPlan:
    """Degrees of parallelism. ``microbatches`` None = min(replica batch, PP) when PP > 1;
    ``stage_layers`` None = even split; ``overlap`` = fraction [0, 1] of communication time that
    may hide under the same stage's compute; ``vocab_parallel`` False keeps the embedding and LM
    head whole on every TP rank (gpt-fast) instead of splitting the vocabulary (Megatron, vLLM)."""
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    microbatches: int | None = None
    stage_layers: tuple[int, ...] | None = None
    overlap: float = 0.0
    vocab_parallel: bool = True

    def __post_init__(self):
        for f in ("tp", "pp", "dp", "ep"):
            require_int(f.upper(), getattr(self, f), 1, MAX_DEGREE)
        if self.microbatches is not None:
            require_int("microbatches", self.microbatches, 1, MAX_SIZE)
        if self.stage_layers is not None:
            layers = tuple(self.stage_layers)
            object.__setattr__(self, "stage_layers", layers)
            if len(layers) != self.pp:
                raise ConfigError(f"stage_layers has {len(layers)} entries for PP={self.pp}")
            for i, n in enumerate(layers):
                require_int(f"stage_layers[{i}]", n, 1, MAX_SIZE)
        object.__setattr__(self, "overlap", require_float("overlap", self.overlap, lo=0, hi=1))
        if not isinstance(self.vocab_parallel, bool):
            raise ConfigError(f"vocab_parallel must be true or false, got {self.vocab_parallel!r}")

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def label(self) -> str:
        s = f"TP{self.tp}·PP{self.pp}·DP{self.dp}"
        return s + (f"·EP{self.ep}" if self.ep > 1 else "")


@dataclass(frozen=True)
class Layout:
    """A plan resolved against a model, a device and a workload."""
    plan: ParallelPlan
    replica_batch: int                       # ceil(B / DP) sequences per replica
    microbatches: int
    microbatch: int                          # ceil(replica_batch / microbatches) sequences
    stages: tuple[tuple[int, int], ...]      # (first layer, layers) per pipeline stage
    expert_tp: int                           # TP*DP/EP: ways each expert is split (1 if dense)
    kv_replication: int                      # copies of each KV head in a TP group
    notes: tuple[str, ...] = ()


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def resolve_plan(model: Model, hardware: Hardware, plan: ParallelPlan,
                 workload: Workload) -> Layout:
    """Check ``plan`` against the model, the links and the workload; ConfigError with the reason
    (and the valid choices) otherwise."""
    notes: list[str] = []
    rep = _check_heads(model, plan, notes)
    stages = _stages(model, plan)
    etp = _check_experts(model, plan, notes)
    _check_links(model, hardware, plan)
    br, m = _batches(plan, workload.batch, notes)
    return Layout(plan, br, m, math.ceil(br / m), stages, etp, rep, tuple(notes))


def _check_heads(model: Model, plan: ParallelPlan, notes: list[str]) -> int:
    """TP against the attention and KV heads; returns the KV-head replication factor."""
    n, nkv, tp = model.num_attention_heads, model.num_key_value_heads, plan.tp
    if n % tp:
        raise ConfigError(f"TP={tp} must divide the {n} attention heads of {model.name} "
                          f"(valid TP: {', '.join(map(str, divisors(n)))})")
    rep = 1
    if model.mla is None:
        if nkv % tp and tp % nkv:
            raise ConfigError(
                f"TP={tp} must divide the {nkv} KV heads of {model.name} or be a multiple of "
                f"them (each KV head is then replicated TP/KV times, as vLLM does)")
        rep = max(1, tp // nkv)
        if rep > 1:
            notes.append(f"TP={tp} > {nkv} KV heads: each device keeps one KV head, "
                         f"replicated {rep}x across the TP group (vLLM)")
    elif tp > 1:
        notes.append(f"MLA: the latent KV cache and the latent down-projections are replicated "
                     f"on all {tp} TP ranks (only the per-head parts are split)")
    for what, size in (("intermediate size", model.intermediate_size),
                       ("vocabulary", model.vocab_size if plan.vocab_parallel else tp)):
        if size % tp:
            notes.append(f"{what} {size} is not divisible by TP={tp}: padded to "
                         f"{math.ceil(size / tp)} per device")
    return rep


def _check_experts(model: Model, plan: ParallelPlan, notes: list[str]) -> int:
    """EP against the model's experts and the TP x DP group; returns the expert-TP width."""
    moe, group = model.moe, plan.tp * plan.dp
    if plan.ep > 1:
        if moe is None:
            raise ConfigError(f"EP={plan.ep} needs a mixture-of-experts model; "
                              f"{model.name} is dense")
        if moe.num_experts % plan.ep:
            raise ConfigError(f"EP={plan.ep} must divide the {moe.num_experts} experts of "
                              f"{model.name} (valid EP: "
                              f"{', '.join(map(str, divisors(moe.num_experts)))})")
        if group % plan.ep:
            raise ConfigError(f"EP={plan.ep} must divide TP x DP = {group}: MoE layers run on "
                              f"the TP x DP devices of a pipeline stage")
        notes.append("EP: the busiest expert rank (expected maximum of distinct experts "
                     "touched) sets the expert weight traffic")
    etp = group // plan.ep if moe is not None else 1
    if moe is not None and plan.dp > 1:
        notes.append(f"MoE layers span TP x DP = {group} devices (EP {plan.ep} x expert-TP "
                     f"{etp}); tokens of other replicas arrive by all-to-all")
    return etp


def _batches(plan: ParallelPlan, batch: int, notes: list[str]) -> tuple[int, int]:
    """(sequences per replica, microbatches) of the global ``batch``."""
    if plan.dp > batch:
        raise ConfigError(f"DP={plan.dp} replicas need at least {plan.dp} sequences; "
                          f"the batch is {batch}")
    br = math.ceil(batch / plan.dp)
    if batch % plan.dp:
        notes.append(f"batch {batch} over DP={plan.dp}: the fullest replica serves {br}")
    m = plan.microbatches
    if plan.pp == 1:
        if m not in (None, 1):
            notes.append("microbatches apply only with PP > 1; ignored")
        m = 1
    elif m is None:
        m = min(br, plan.pp)
    elif m > br:
        raise ConfigError(f"{m} microbatches need at least {m} sequences per replica; "
                          f"there are {br}")
    return br, m


def _stages(model: Model, plan: ParallelPlan) -> tuple[tuple[int, int], ...]:
    n_layers, pp = model.num_hidden_layers, plan.pp
    if plan.stage_layers is not None:
        sizes = plan.stage_layers
        if sum(sizes) != n_layers:
            raise ConfigError(f"stage_layers {list(sizes)} sum to {sum(sizes)}, but "
                              f"{model.name} has {n_layers} layers")
    else:
        if pp > n_layers:
            raise ConfigError(f"PP={pp} exceeds the {n_layers} layers of {model.name}")
        base, extra = divmod(n_layers, pp)
        sizes = tuple(base + (1 if i < extra else 0) for i in range(pp))
    firsts = np.cumsum((0,) + tuple(sizes[:-1]))
    return tuple((int(f), int(s)) for f, s in zip(firsts, sizes))


def _check_links(model: Model, hardware: Hardware, plan: ParallelPlan) -> None:
    ic = hardware.interconnect
    needs = plan.tp > 1 or plan.pp > 1 or plan.ep > 1 or (plan.dp > 1 and model.moe is not None)
    if ic is None:
        if needs:
            raise ConfigError(
                f"{hardware.name} has no [interconnect] section; TP, PP and EP (and DP of a "
                f"MoE model) need links between devices: choose a cluster preset or add "
                f"[interconnect] to the hardware file")
        return
    if plan.devices > ic.devices:
        raise ConfigError(f"{plan.label} needs {plan.devices} devices; {hardware.name} has "
                          f"{ic.devices}")


# ---- the device's slice of the model --------------------------------------------------------

def shard_model(model: Model, tp: int = 1, expert_tp: int = 1, first_layer: int = 0,
                layers: int | None = None, vocab_parallel: bool = True) -> Model:
    """The part of ``model`` one device holds: heads, FFN columns, shared experts and the
    vocabulary split ``tp`` ways, each routed expert split ``expert_tp`` ways in width (all
    experts kept; EP is applied to the operators), layers [first_layer, first_layer + layers).
    Sizes that do not divide are rounded up (frameworks pad them). Returns ``model`` itself
    when nothing is split."""
    n_layers = model.num_hidden_layers - first_layer if layers is None else layers
    ch: dict = {}
    if tp > 1:
        heads = model.num_attention_heads // tp
        ch.update(num_attention_heads=heads,
                  intermediate_size=math.ceil(model.intermediate_size / tp))
        if vocab_parallel:
            ch["vocab_size"] = math.ceil(model.vocab_size / tp)
        if model.mla is None:
            ch.update(head_dim=model.head_size,
                      num_key_value_heads=max(1, model.num_key_value_heads // tp))
        else:
            ch.update(num_key_value_heads=heads)   # unused by MLA; keeps heads % kv valid
    if first_layer or n_layers != model.num_hidden_layers:
        ch["num_hidden_layers"] = n_layers
        if model.sliding_layers is not None:
            ch["sliding_layers"] = model.sliding_layers[first_layer:first_layer + n_layers]
    if model.moe is not None:
        m = model.moe
        moe = replace(m, expert_intermediate_size=math.ceil(m.expert_intermediate_size / expert_tp),
                      shared_intermediate_size=math.ceil(m.shared_intermediate_size / tp),
                      first_dense_layers=min(max(m.first_dense_layers - first_layer, 0),
                                             n_layers))
        if moe != m:
            ch["moe"] = moe
    if not ch:
        return model
    return replace(model, name=f"{model.name} [device shard]", **ch)


def busiest_rank_experts(num_experts: int, ranks: int, touched: float) -> float:
    """Expected largest number of distinct touched experts on one of ``ranks`` equal expert
    groups when ``touched`` distinct experts (of ``num_experts``) are drawn uniformly without
    replacement; linear between integer counts. Exact: P(max <= m) = [x^d] (sum_{j<=m}
    C(c, j) x^j)^ranks / C(E, d) with c = E / ranks (multivariate hypergeometric)."""
    if ranks <= 1:
        return touched
    lo = math.floor(touched)
    frac = touched - lo
    v_lo = _busiest_int(num_experts, ranks, lo)
    if frac == 0:
        return v_lo
    return v_lo + frac * (_busiest_int(num_experts, ranks, min(lo + 1, num_experts)) - v_lo)


# Multiply-adds the exact sum may spend; larger cases use independent binomial groups.
_EXACT_WORK = 2e7
_TAIL = 1e-12          # P(max > m) below this ends the sum


def _log_binom_pmf(n: int, p: float, j: np.ndarray) -> np.ndarray:
    """log P(Binomial(n, p) = j), 0 < p < 1, through log-gamma (no overflow for any n)."""
    lg = np.vectorize(math.lgamma, otypes=[float])
    return (math.lgamma(n + 1) - lg(j + 1.0) - lg(n - j + 1.0)
            + j * math.log(p) + (n - j) * math.log1p(-p))


@functools.lru_cache(maxsize=4096)
def _busiest_int(e: int, ranks: int, d: int) -> float:
    """E[max over ``ranks`` groups of c = E/ranks experts of the distinct experts drawn], d of
    E drawn without replacement. Each group's count is Binomial(c, p = d/E) conditioned on the
    counts summing to d (exact; the ratio of probabilities keeps every number in [0, 1], so any
    E answers): P(max <= m) = [x^d] (sum_{j<=m} b_j x^j)^ranks / P(Binomial(E, p) = d). When
    that sum would cost more than ``_EXACT_WORK`` the groups are taken as independent binomials
    (P(max <= m) = F(m)^ranks; 3e-5 relative off the exact sum at 1,024 experts, EP8)."""
    c = e // ranks
    if d <= 0:
        return 0.0
    if d >= ranks * c:
        return float(c)
    p = d / e
    pmf = np.exp(_log_binom_pmf(c, p, np.arange(c + 1, dtype=float)))
    m0 = -(-d // ranks)                       # some group holds at least ceil(d / ranks)
    spread = 8.0 * math.sqrt(c * p * (1 - p)) + 2.0
    if spread * ranks * min(c, m0 + spread) * (d + 1) <= _EXACT_WORK:
        norm = math.exp(_log_binom_pmf(e, p, np.array([float(d)]))[0])
        p_le = lambda m: _conditional_le(pmf[:m + 1], ranks, d) / norm      # noqa: E731
    else:
        cdf = np.minimum(np.cumsum(pmf), 1.0)
        p_le = lambda m: float(cdf[m]) ** ranks                              # noqa: E731
    expected = float(m0)                      # P(max > m) = 1 for m < m0
    for m in range(m0, c):                    # E[max] = sum_m P(max > m)
        tail = 1.0 - min(1.0, p_le(m))
        if tail < _TAIL:
            break
        expected += tail
    return expected


def _conditional_le(poly: np.ndarray, ranks: int, d: int) -> float:
    """[x^d] of poly(x)^ranks, truncated at degree d as it is built."""
    acc = np.array([1.0])
    for _ in range(ranks):
        acc = np.convolve(acc, poly)[:d + 1]
    return float(acc[d]) if d < len(acc) else 0.0


def ranks_hit_per_token(num_experts: int, experts_per_token: int, ranks: int) -> float:
    """Expected number of the ``ranks`` expert groups one token's k experts fall in:
    ranks x (1 - C(E - E/ranks, k) / C(E, k))."""
    e, k, c = num_experts, experts_per_token, num_experts // ranks
    return ranks * (1.0 - math.comb(e - c, k) / math.comb(e, k))

