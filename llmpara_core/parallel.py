"""Multi-device sharding: tensor (TP), pipeline (PP), data (DP) and expert (EP) parallelism,
with collective costs from an alpha-beta model of the links.

How a plan runs (the conventions every number below follows)
------------------------------------------------------------
* Devices = TP x PP x DP. Ranks are laid out TP-innermost (``rank = tp_rank + TP * (dp_rank +
  DP * pp_rank)``), so TP groups sit on the fastest links and pipeline stages are the outermost
  split (across nodes first).
* **TP** (Megatron-LM): attention heads, FFN columns and the vocabulary are split TP ways;
  Q/K/V and up/gate are column-parallel, O and down row-parallel, each followed by an
  all-reduce of the hidden states (2 per layer). Norms, residual adds and the MoE router are
  replicated. KV heads: KV/TP per device, or, when TP > KV heads, one KV head per device
  replicated TP/KV times (vLLM). MLA: the latent down-projections and the latent KV cache are
  replicated on every TP rank; the per-head up-projections and O are split. Embedding and LM
  head are vocabulary-parallel (one all-reduce after the lookup, one all-gather of logits).
  The device's operators are ``forward_ops`` of :func:`shard_model` -- the one forward builder
  run on the device's slice of the model (sizes that do not divide are padded up).
* **PP**: contiguous layer stages (even split, extra layers on the first stages, or
  ``stage_layers``); the embedding on the first stage, final norm and LM head on the last (a
  tied embedding is held again by the last stage). Hidden states go stage to stage
  (point-to-point); in decode the sampled token ids return from the last stage to the first.
  With ``m`` microbatches: TTFT = sum of stage times + (m - 1) x slowest stage (GPipe fill);
  TPOT = max(sum of stage times, m x slowest stage). With m = 1 (always at batch 1) a token
  passes every stage in turn, so PP alone can never lower batch-1 TPOT.
* **DP**: independent replicas; the workload's batch is the global batch, ceil(B/DP) per
  replica (aggregate throughput = B / TPOT of the fullest replica).
* **EP / MoE layers** run on the TP x DP devices of a stage (vLLM folds them the same way):
  EP groups of experts, each expert split ETP = TP*DP/EP ways in width; expert weights are
  therefore never replicated across DP. With DP > 1, tokens of the other replicas reach a
  device by an all-to-all (dispatch) and return by another (combine). Weight traffic of the
  busiest expert rank (expected maximum of distinct experts touched per rank) sets the time,
  so EP at small batch pays its load imbalance; FLOPs and activations use the mean.

Collectives (alpha-beta; alpha = link latency per step, beta = per-device unidirectional link
bandwidth, M = message bytes; see :func:`collective_terms`)
* ring all-reduce: 2(N-1) alpha + 2(N-1)/N M / beta (Patarasuk & Yuan 2009); fully connected
  (NVSwitch, xGMI mesh): reduce-scatter and all-gather in one step each, 2 alpha + same bytes;
  2D torus/mesh a x b: 2(a-1 + b-1) alpha + same bytes (2D ring, bandwidth-optimal).
* all-gather / reduce-scatter: half of the all-reduce.
* all-to-all: M = bytes each device sends to the others; M x mean hop distance / beta plus
  alpha x network diameter.
* point-to-point: alpha + M / beta.
* across nodes: hierarchical (reduce-scatter in node, all-reduce of M/g across nodes,
  all-gather in node); all-to-all splits its bytes between the two links.
* The bandwidth term goes through ``roofline.op_time_s`` with the link rate (estimated: the
  link derated like memory bandwidth, plus one kernel launch per collective); the latency term
  is added in both ideal and estimated times.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from .analysis import OpRow, Phase, Timing, _row, _timing, analyze, integrate_decode
from .errors import ConfigError, require_float, require_int
from .forward import forward_ops
from .hardware import Hardware, Interconnect, Topology
from .memory import activation_peak_bytes, kv_cache_bytes
from .model import Model, NormKind, count_params
from .operators import OpKind, Operator
from .precision import Precision
from .roofline import Rates, op_time_s, rates
from .units import BITS_PER_BYTE, MAX_SIZE, bits_to_bytes
from .workload import Workload

MAX_DEGREE = 65536
TOKEN_ID_BYTES = 4.0          # int32 token ids sent back from the last stage in decode


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
    notes = []
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
    stages = _stages(model, plan)
    moe = model.moe
    group = tp * plan.dp
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
    etp = group // plan.ep if moe is not None else 1
    if moe is not None and plan.dp > 1:
        notes.append(f"MoE layers span TP x DP = {group} devices (EP {plan.ep} x expert-TP "
                     f"{etp}); tokens of other replicas arrive by all-to-all")
    if plan.ep > 1:
        notes.append("EP: the busiest expert rank (expected maximum of distinct experts "
                     "touched) sets the expert weight traffic")
    _check_links(model, hardware, plan)
    b = workload.batch
    if plan.dp > b:
        raise ConfigError(f"DP={plan.dp} replicas need at least {plan.dp} sequences; "
                          f"the batch is {b}")
    br = math.ceil(b / plan.dp)
    if b % plan.dp:
        notes.append(f"batch {b} over DP={plan.dp}: the fullest replica serves {br}")
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
    return Layout(plan, br, m, math.ceil(br / m), stages, etp, rep, tuple(notes))


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


@functools.lru_cache(maxsize=4096)
def _busiest_int(e: int, ranks: int, d: int) -> float:
    c = e // ranks
    if d <= 0:
        return 0.0
    total = float(math.comb(e, d))
    expected = 0.0
    for m in range(c):                        # E[max] = sum_m P(max > m)
        poly = np.array([float(math.comb(c, j)) for j in range(m + 1)])
        acc = np.array([1.0])
        for _ in range(ranks):
            acc = np.convolve(acc, poly)[:d + 1]
        p_le = acc[d] / total if d < len(acc) else 0.0
        expected += 1.0 - min(1.0, p_le)
    return expected


def ranks_hit_per_token(num_experts: int, experts_per_token: int, ranks: int) -> float:
    """Expected number of the ``ranks`` expert groups one token's k experts fall in:
    ranks x (1 - C(E - E/ranks, k) / C(E, k))."""
    e, k, c = num_experts, experts_per_token, num_experts // ranks
    return ranks * (1.0 - math.comb(e - c, k) / math.comb(e, k))


# ---- collectives ----------------------------------------------------------------------------

class Collective(Enum):
    ALL_REDUCE = "all-reduce"
    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_TO_ALL = "all-to-all"
    SEND_RECV = "send-recv"


def grid_dims(n: int) -> tuple[int, int]:
    """a x b = n with a the largest divisor <= sqrt(n) (2D torus/mesh shape)."""
    a = max(d for d in divisors(n) if d * d <= n)
    return a, n // a


def mean_hops(topology: Topology, n: int) -> float:
    """Mean shortest-path hops from a device to the other n - 1 (bidirectional links)."""
    if n <= 1 or topology is Topology.FULLY_CONNECTED:
        return 1.0
    if topology is Topology.RING:
        return (n * n // 4) / (n - 1)
    a, b = grid_dims(n)
    if topology is Topology.TORUS_2D:
        return (b * (a * a // 4) + a * (b * b // 4)) / (n - 1)
    return (b * (a * a - 1) / 3 + a * (b * b - 1) / 3) / (n - 1)      # mesh: line distances


def collective_terms(kind: Collective, n: int, message_bytes: float,
                     topology: Topology) -> tuple[int, float, float]:
    """(latency steps, bytes each device sends, mean hops per byte) of one collective among
    ``n`` devices. ``message_bytes``: the full tensor for all-reduce/all-gather/reduce-scatter,
    the bytes each device sends to the others for all-to-all, the payload for send-recv."""
    if kind is Collective.SEND_RECV:
        return 1, message_bytes, 1.0
    if n <= 1:
        return 0, 0.0, 1.0
    if topology is Topology.FULLY_CONNECTED:
        one_pass = 1
        diameter = 1
    elif topology is Topology.RING:
        one_pass, diameter = n - 1, n // 2
    else:
        a, b = grid_dims(n)
        one_pass = (a - 1) + (b - 1)
        diameter = a // 2 + b // 2 if topology is Topology.TORUS_2D else one_pass
    share = (n - 1) / n * message_bytes
    if kind is Collective.ALL_REDUCE:
        return 2 * one_pass, 2.0 * share, 1.0
    if kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return one_pass, share, 1.0
    return diameter, message_bytes, mean_hops(topology, n)


def collective_time_s(kind: Collective, n: int, message_bytes: float, link: Rates,
                      latency_s: float, topology: Topology, kernels: int = 0) -> float:
    """alpha-beta time [s] of one collective on one level of links: latency_s x steps + the
    bytes each device sends x mean hops through ``roofline.op_time_s`` at ``link``'s rate (plus
    ``kernels`` launches). Ring all-reduce: 2(N-1) alpha + 2(N-1)/N M / beta."""
    steps, sent, hops = collective_terms(kind, n, message_bytes, topology)
    return latency_s * steps + op_time_s(0.0, 0.0, kernels, link, sent * hops)


@dataclass(frozen=True)
class _Net:
    """The links seen from one device: intra-node and (optionally) inter-node levels."""
    ic: Interconnect
    intra: tuple[Rates, Rates]          # (ideal, estimated) with the link rate
    inter: tuple[Rates, Rates] | None
    per_node: int

    @classmethod
    def of(cls, hardware: Hardware, precision: Precision) -> "_Net | None":
        ic = hardware.interconnect
        if ic is None:
            return None
        ri = rates(hardware, precision.compute_dtype, estimated=False)
        re_ = rates(hardware, precision.compute_dtype, estimated=True)
        inter = None
        if ic.inter_node_bandwidth_bytes_per_s:
            derate = re_.link_bytes_per_s / ri.link_bytes_per_s
            bw = ic.inter_node_bandwidth_bytes_per_s
            inter = (replace(ri, link_bytes_per_s=bw), replace(re_, link_bytes_per_s=bw * derate))
        per_node = ic.devices_per_node or ic.devices
        return cls(ic, (ri, re_), inter, per_node)

    def node(self, rank: int) -> int:
        return rank // self.per_node

    def time(self, kind: Collective, n: int, m_bytes: float, nodes: int, est: bool) -> float:
        """One collective among ``n`` devices spread over ``nodes`` nodes (aligned groups)."""
        i = 1 if est else 0
        ic, intra = self.ic, self.intra[i]
        k = 1 if est else 0
        if nodes <= 1 or self.inter is None:
            return collective_time_s(kind, n, m_bytes, intra, ic.latency_s, ic.topology, k)
        inter, a_inter = self.inter[i], ic.inter_node_latency_s or 0.0
        g = math.ceil(n / nodes)
        fc = Topology.FULLY_CONNECTED          # switched fabric between nodes

        def local(kd, m):
            return collective_time_s(kd, g, m, intra, ic.latency_s, ic.topology)

        def remote(kd, m):
            return collective_time_s(kd, nodes, m, inter, a_inter, fc)
        launch = op_time_s(0.0, 0.0, k, intra)
        if kind is Collective.SEND_RECV:
            return collective_time_s(kind, 2, m_bytes, inter, a_inter, fc, k)
        if kind is Collective.ALL_REDUCE:
            t = (local(Collective.REDUCE_SCATTER, m_bytes)
                 + remote(Collective.ALL_REDUCE, m_bytes / g)
                 + local(Collective.ALL_GATHER, m_bytes))
        elif kind is Collective.ALL_GATHER:
            t = remote(Collective.ALL_GATHER, m_bytes / g) + local(Collective.ALL_GATHER, m_bytes)
        elif kind is Collective.REDUCE_SCATTER:
            t = local(Collective.REDUCE_SCATTER, m_bytes) + remote(Collective.REDUCE_SCATTER,
                                                                   m_bytes / g)
        else:                                  # all-to-all: both links at once
            t = max(local(kind, m_bytes * (g - 1) / (n - 1)),
                    remote(kind, m_bytes * (n - g) / (n - 1)))
        return t + launch


@dataclass(frozen=True)
class CommCost:
    """One collective of a device's pass: per execution, ``count`` executions per pass."""
    phase: str
    stage: int
    name: str
    collective: Collective
    participants: int
    message_bytes: float
    sent_bytes: float          # bytes this device puts on its links per execution
    count: int
    group: str
    nodes: int                 # nodes the group spans (> 1: inter-node links)
    ideal_s: float             # per execution
    estimated_s: float


# ---- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageMemory:
    """Memory of one device of pipeline stage ``stage`` [bytes]."""
    stage: int
    first_layer: int
    layers: int
    weight_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def utilisation(self) -> float:
        return self.total_bytes / self.capacity_bytes


@dataclass(frozen=True)
class TimeBreakdown:
    """Where the time of TTFT or of one output token (TPOT) goes [s]: compute-bound and
    memory-bound operator time, kernel launches, exposed communication, and pipeline wait
    (other microbatches ahead in the pipeline). Sums to the phase time."""
    compute_s: float
    memory_s: float
    overhead_s: float
    communication_s: float
    pipeline_wait_s: float

    @property
    def total_s(self) -> float:
        return (self.compute_s + self.memory_s + self.overhead_s + self.communication_s
                + self.pipeline_wait_s)

    @property
    def communication_share(self) -> float | None:
        t = self.total_s
        return self.communication_s / t if t > 0 else None


@dataclass(frozen=True)
class ShardReport:
    """A sharded scenario. ``prefill``/``decode`` hold, per pipeline stage, one device's
    operator rows for one microbatch (decode: mean per step), communication rows included."""
    model: Model
    hardware: Hardware
    precision: Precision
    workload: Workload
    layout: Layout
    memory: tuple[StageMemory, ...]
    prefill: tuple[Phase, ...]
    decode: tuple[Phase, ...]
    collectives: tuple[CommCost, ...]
    estimated: Timing
    ideal: Timing
    prefill_breakdown: TimeBreakdown
    decode_breakdown: TimeBreakdown
    prefill_bubble_fraction: float
    decode_bubble_fraction: float
    single_device: Timing
    single_device_fits: bool
    max_batch: int
    notes: tuple[str, ...]

    @property
    def plan(self) -> ParallelPlan:
        return self.layout.plan

    @property
    def devices(self) -> int:
        return self.plan.devices

    @property
    def worst_stage(self) -> StageMemory:
        return max(self.memory, key=lambda s: s.total_bytes)

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.memory)

    @property
    def tpot_speedup(self) -> float:
        """Single-device TPOT / this plan's TPOT (same global batch)."""
        return self.single_device.tpot_s / self.estimated.tpot_s

    @property
    def throughput_speedup(self) -> float:
        return self.estimated.throughput_tokens_per_s / self.single_device.throughput_tokens_per_s

    @property
    def parallel_efficiency(self) -> float:
        """Aggregate decode throughput / (devices x single-device throughput)."""
        return self.throughput_speedup / self.devices

    @property
    def throughput_per_device(self) -> float:
        return self.estimated.throughput_tokens_per_s / self.devices


# ---- evaluation -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Ctx:
    model: Model
    hardware: Hardware
    precision: Precision
    workload: Workload
    layout: Layout
    stage_models: tuple[Model, ...]
    net: _Net | None
    ideal_r: Rates
    est_r: Rates


def _device_ops(ctx: _Ctx, s: int, batch: int, new: int, context: int,
                logits: int) -> tuple[Operator, ...]:
    """One device's operators of stage ``s`` for ``batch`` sequences (compute only)."""
    ops = list(forward_ops(ctx.stage_models[s], ctx.precision, batch, new, context,
                           ctx.workload.flash_attention, logits))
    if not ops:
        return ()
    if s > 0:                                      # embedding lives on the first stage
        while ops and ops[0].group == "model":
            ops.pop(0)
    if s < len(ctx.stage_models) - 1:              # final norm + LM head on the last stage
        while ops and ops[-1].group == "model":
            ops.pop()
    plan, moe = ctx.layout.plan, ctx.model.moe
    if moe is not None and (plan.dp > 1 or plan.ep > 1):
        tokens = batch * new
        base = moe.expected_active_experts(tokens)
        dev = busiest_rank_experts(moe.num_experts, plan.ep,
                                   moe.expected_active_experts(plan.dp * tokens))
        f, w = plan.dp / plan.ep, dev / base
        ops = [replace(o, flops=o.flops * f, weight_bytes=o.weight_bytes * w,
                       act_read_bytes=o.act_read_bytes * f, act_write_bytes=o.act_write_bytes * f)
               if o.kind is OpKind.MOE_EXPERT else o for o in ops]
    return tuple(ops)


def _device_comms(ctx: _Ctx, s: int, batch: int, new: int, logits: int,
                  phase: str) -> list[CommCost]:
    """The collectives one device of stage ``s`` takes part in during one pass."""
    if new <= 0 or ctx.net is None:
        return []
    lay, plan, model, net = ctx.layout, ctx.layout.plan, ctx.model, ctx.net
    a = ctx.precision.activation_bits / BITS_PER_BYTE
    hidden = batch * new * model.hidden_size * a
    specs = []        # (name, kind, n, bytes, count, group, first rank of group, last rank)
    tp, grp = plan.tp, plan.tp * plan.dp
    base = s * grp
    last = s == plan.pp - 1
    if tp > 1:
        if s == 0 and plan.vocab_parallel:
            specs.append(("embedding_all_reduce", Collective.ALL_REDUCE, tp, hidden, 1, "model"))
        for kind, n in ctx.stage_models[s].layer_groups():
            specs.append(("tp_all_reduce_attn", Collective.ALL_REDUCE, tp, hidden, n, kind.label))
            specs.append(("tp_all_reduce_ffn", Collective.ALL_REDUCE, tp, hidden, n, kind.label))
        if last and plan.vocab_parallel:
            specs.append(("lm_head_all_gather", Collective.ALL_GATHER, tp,
                          batch * min(logits, new) * model.vocab_size * a, 1, "model"))
    moe = model.moe
    if moe is not None and plan.dp > 1:
        hit = ranks_hit_per_token(moe.num_experts, moe.experts_per_token, plan.ep)
        remote = hidden * hit * (plan.dp - 1) / plan.ep
        for kind, n in ctx.stage_models[s].layer_groups():
            if kind.moe:
                specs.append(("moe_dispatch_all_to_all", Collective.ALL_TO_ALL, grp, remote, n,
                              kind.label))
                specs.append(("moe_combine_all_to_all", Collective.ALL_TO_ALL, grp, remote, n,
                              kind.label))
    out = []
    for name, kind, n, m, count, group in specs:
        span = n if kind is not Collective.ALL_TO_ALL else grp
        nodes = net.node(base + span - 1) - net.node(base) + 1
        out.append(_cost(net, phase, s, name, kind, n, m, count, group, nodes))
    if plan.pp > 1:
        if not last:
            nodes = 1 + any(net.node(r) != net.node(r + grp) for r in range(base, base + grp))
            out.append(_cost(net, phase, s, "pp_send_hidden", Collective.SEND_RECV, 2, hidden,
                             1, "model", nodes))
        elif phase == "decode":
            nodes = 1 + any(net.node(r) != net.node(r - base) for r in range(base, base + grp))
            out.append(_cost(net, phase, s, "pp_return_tokens", Collective.SEND_RECV, 2,
                             batch * TOKEN_ID_BYTES, 1, "model", nodes))
    return out


def _cost(net: _Net, phase, s, name, kind, n, m, count, group, nodes) -> CommCost:
    topo = net.ic.topology if nodes <= 1 else Topology.FULLY_CONNECTED
    sent = collective_terms(kind, n, m, topo)[1]
    return CommCost(phase, s, name, kind, n, m, sent, count, group, nodes,
                    net.time(kind, n, m, nodes, est=False), net.time(kind, n, m, nodes, est=True))


def _comm_row(c: CommCost) -> OpRow:
    k = c.count
    return OpRow(c.phase, c.name, OpKind.COMM, c.group, k, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                 c.sent_bytes * k, compute_s=0.0, memory_s=0.0, ideal_s=c.ideal_s * k,
                 estimated_s=c.estimated_s * k)


@dataclass(frozen=True)
class _StageTimes:
    """Per-stage phase time split: (compute rows, communication rows), ideal and estimated."""
    comp_ideal: float
    comp_est: float
    comm_ideal: float
    comm_est: float


def _stage_time(t: _StageTimes, overlap: float, est: bool) -> float:
    comp, comm = (t.comp_est, t.comm_est) if est else (t.comp_ideal, t.comm_ideal)
    return comp + comm - min(overlap * comm, comp)


def _pipeline(times: list[float], m: int, decode: bool) -> float:
    """Phase time of a pipeline: TTFT = sum + (m - 1) max; TPOT = max(sum, m max)."""
    total, slowest = sum(times), max(times)
    return max(total, m * slowest) if decode else total + (m - 1) * slowest


def _breakdown(phases: tuple[Phase, ...], times: list[_StageTimes], phase_s: float,
               ctx: _Ctx) -> TimeBreakdown:
    """Estimated split of the latency path (every stage once) plus pipeline wait."""
    ov = ctx.layout.plan.overlap
    comp = mem = overhead = comm = 0.0
    ir, er = ctx.ideal_r, ctx.est_r
    for ph, t in zip(phases, times):
        for r in ph.rows:
            if r.kind is OpKind.COMM:
                continue
            o = r.count * er.kernel_overhead_s
            rest = r.estimated_s - o
            c_est = r.compute_s * ir.flops_per_s / er.flops_per_s
            m_est = r.memory_s * ir.bytes_per_s / er.bytes_per_s
            overhead += o
            if c_est > m_est:
                comp += rest
            else:
                mem += rest
        comm += t.comm_est - min(ov * t.comm_est, t.comp_est)
    path = sum(_stage_time(t, ov, True) for t in times)
    return TimeBreakdown(comp, mem, overhead, comm, max(0.0, phase_s - path))


def _bubble(times: list[float], m: int, phase_s: float) -> float:
    """Idle share of a device: 1 - (m x mean stage time) / phase time."""
    if phase_s <= 0:
        return 0.0
    return max(0.0, 1.0 - m * sum(times) / len(times) / phase_s)


def shard_analyze(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                  plan: ParallelPlan) -> ShardReport:
    """Per-device memory and time of ``model`` run as ``plan`` on devices like ``hardware``
    (whose ``interconnect`` describes the links). TP = PP = DP = 1 reproduces
    ``analysis.analyze`` exactly."""
    return _shard_cached(model, hardware, precision, workload, plan)


@functools.lru_cache(maxsize=256)
def _shard_cached(model, hardware, precision, workload, plan) -> ShardReport:
    lay = resolve_plan(model, hardware, plan, workload)
    stage_models = tuple(shard_model(model, plan.tp, lay.expert_tp, f, n, plan.vocab_parallel)
                         for f, n in lay.stages)
    ctx = _Ctx(model, hardware, precision, workload, lay, stage_models,
               _Net.of(hardware, precision),
               rates(hardware, precision.compute_dtype, estimated=False),
               rates(hardware, precision.compute_dtype, estimated=True))
    wl, mb, m = workload, lay.microbatch, lay.microbatches
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    first, last = wl.decode_contexts
    steps = max(0, last - first + 1)
    lo, hi = (first, last) if steps else (wl.prompt_len + 1, wl.prompt_len + 1)
    n_dec = hi - lo + 1
    pre_ph, dec_ph, pre_t, dec_t, comms, mem = [], [], [], [], [], []
    for s, sm in enumerate(stage_models):
        pre_ops = _device_ops(ctx, s, mb, wl.prompt_len, wl.prompt_len, logits)
        pre_rows = [_row("prefill", o, ctx.ideal_r, ctx.est_r) for o in pre_ops]
        pre_c = _device_comms(ctx, s, mb, wl.prompt_len, logits, "prefill")
        dec_phase, d_ideal, d_est = integrate_decode(
            sm, precision, mb, lo, hi, wl.flash_attention, ctx.ideal_r, ctx.est_r,
            ops_at=lambda c, s=s: _device_ops(ctx, s, mb, 1, c, 1))
        dec_c = _device_comms(ctx, s, mb, 1, 1, "decode")
        comms += pre_c + dec_c
        pre_ph.append(Phase("prefill", tuple(pre_rows) + tuple(_comm_row(c) for c in pre_c)))
        dec_ph.append(Phase("decode", dec_phase.rows + tuple(_comm_row(c) for c in dec_c)))
        pre_t.append(_StageTimes(sum(r.ideal_s for r in pre_rows),
                                 sum(r.estimated_s for r in pre_rows),
                                 sum(c.ideal_s * c.count for c in pre_c),
                                 sum(c.estimated_s * c.count for c in pre_c)))
        dec_t.append(_StageTimes(d_ideal / n_dec, d_est / n_dec,
                                 sum(c.ideal_s * c.count for c in dec_c),
                                 sum(c.estimated_s * c.count for c in dec_c)))
        act = max(activation_peak_bytes(pre_ops),
                  activation_peak_bytes(_device_ops(ctx, s, mb, 1, hi, 1)))
        mem.append(StageMemory(s, lay.stages[s][0], lay.stages[s][1],
                               _stage_weight_bytes(ctx, s), kv_cache_bytes(
                                   sm, precision, lay.replica_batch, wl.max_context),
                               act, hardware.memory_capacity_bytes))
    ov = plan.overlap
    timings, phase_s = {}, {}
    for est in (False, True):
        pre = _pipeline([_stage_time(t, ov, est) for t in pre_t], m, decode=False)
        dec = _pipeline([_stage_time(t, ov, est) for t in dec_t], m, decode=True)
        timings[est] = _timing(wl, pre, dec, steps)
        phase_s[est] = (pre, dec)
    pre_e, dec_e = phase_s[True]
    single = analyze(model, hardware, precision, workload)
    notes = list(lay.notes)
    if not single.memory.fits:
        notes.append("the single-device baseline does not fit in one device's memory "
                     "(speedups compare with a hypothetical device)")
    return ShardReport(
        model, hardware, precision, workload, lay, tuple(mem), tuple(pre_ph), tuple(dec_ph),
        tuple(comms), timings[True], timings[False],
        _breakdown(tuple(pre_ph), pre_t, pre_e, ctx), _breakdown(tuple(dec_ph), dec_t, dec_e, ctx),
        _bubble([_stage_time(t, ov, True) for t in pre_t], m, pre_e),
        _bubble([_stage_time(t, ov, True) for t in dec_t], m, dec_e),
        single.estimated, single.memory.fits, _max_batch(mem, lay, ctx), tuple(notes))


def _stage_weight_bytes(ctx: _Ctx, s: int) -> float:
    """Weights one device of stage ``s`` holds: the shard's parameters at their precisions,
    routed experts divided by EP, the embedding on the first stage, final norm and LM head on
    the last (a tied embedding again on the last when PP > 1)."""
    p, plan = ctx.precision, ctx.layout.plan
    pc = count_params(ctx.stage_models[s])
    first, last = s == 0, s == plan.pp - 1
    embed = (pc.embedding if first else 0) + (pc.lm_head if last else 0)
    if last and not first and ctx.model.tie_word_embeddings:
        embed += ctx.stage_models[s].vocab_size * ctx.model.hidden_size
    norms = pc.norms
    if not last and ctx.model.final_norm:
        h = ctx.model.hidden_size
        norms -= 2 * h if ctx.model.norm_kind is NormKind.LAYER else h
    ffn = pc.ffn_dense + pc.moe_router + pc.moe_experts // plan.ep + pc.moe_shared
    return (bits_to_bytes(pc.attention, p.weight_attn_bits)
            + bits_to_bytes(ffn, p.weight_ffn_bits)
            + bits_to_bytes(embed, p.weight_embed_bits)
            + bits_to_bytes(norms, p.norm_bits))


def _max_batch(mem: list[StageMemory], lay: Layout, ctx: _Ctx) -> int:
    """Largest global batch whose per-device weights + KV cache + activations fit on every
    stage (activations per sequence taken from this run; 0 if the weights alone do not fit)."""
    best = MAX_SIZE
    wl = ctx.workload
    for sm, st in zip(ctx.stage_models, mem):
        free = st.capacity_bytes - st.weight_bytes
        if free <= 0:
            return 0
        per_seq = (kv_cache_bytes(sm, ctx.precision, 1, wl.max_context)
                   + st.activation_bytes / lay.microbatch / lay.microbatches)
        best = min(best, int(min(MAX_SIZE, free // per_seq)) if per_seq > 0 else MAX_SIZE)
    return min(MAX_SIZE, best * lay.plan.dp)


# ---- scaling curves and plan search ---------------------------------------------------------

STRATEGIES = ("tp", "pp", "dp", "ep", "best-tpot", "best-throughput")


@dataclass(frozen=True)
class ScalingPoint:
    """One device count of a scaling curve. ``speedup`` = aggregate decode throughput / that of
    one device serving the per-replica batch (TP, PP, EP: the same global batch, so also the
    TPOT ratio; DP: weak scaling, DP x batch sequences); ideal = devices. None = no valid or
    fitting plan (``note`` says why)."""
    devices: int
    plan: ParallelPlan | None
    tpot_s: float | None
    ttft_s: float | None
    throughput_tokens_per_s: float | None
    speedup: float | None
    ideal_speedup: float
    efficiency: float | None
    communication_share: float | None
    fits: bool | None
    note: str = ""


def default_device_counts(hardware: Hardware) -> tuple[int, ...]:
    """1, 2, 4, ... up to the cluster's device count (and the count itself)."""
    n = hardware.interconnect.devices if hardware.interconnect else 1
    counts = {1 << i for i in range(n.bit_length()) if 1 << i <= n} | {n}
    return tuple(sorted(counts))


def scaling_curve(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                  strategy: str = "tp",
                  device_counts: tuple[int, ...] | None = None) -> tuple[ScalingPoint, ...]:
    """Modelled vs ideal scaling of one strategy over device counts (see ``STRATEGIES``):
    pure TP, PP, DP (weak scaling), EP (TP = EP = n, MoE only), or the best plan for TPOT or
    throughput per device at each count."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown scaling strategy {strategy!r}; choose from "
                          f"{', '.join(STRATEGIES)}")
    counts = device_counts or default_device_counts(hardware)
    base = analyze(model, hardware, precision, workload).estimated.throughput_tokens_per_s
    points = []
    for n in counts:
        wl = replace(workload, batch=workload.batch * n) if strategy == "dp" else workload
        try:
            if strategy.startswith("best"):
                objective = "min_tpot" if strategy == "best-tpot" else "max_throughput_per_device"
                found = search_plans(model, hardware, precision, wl, objective,
                                     exact_devices=n)
                if not found:
                    points.append(_empty_point(n, "no valid plan fits"))
                    continue
                plan = found[0].plan
            else:
                plan = ParallelPlan(**{"tp": {"tp": n}, "pp": {"pp": n}, "dp": {"dp": n},
                                       "ep": {"tp": n, "ep": n}}[strategy])
            r = shard_analyze(model, hardware, precision, wl, plan)
        except ConfigError as e:
            points.append(_empty_point(n, str(e)))
            continue
        sp = r.estimated.throughput_tokens_per_s / base
        points.append(ScalingPoint(n, plan, r.estimated.tpot_s, r.estimated.ttft_s,
                                   r.estimated.throughput_tokens_per_s, sp, float(n), sp / n,
                                   r.decode_breakdown.communication_share, r.fits,
                                   "" if r.fits else "does not fit in memory"))
    return tuple(points)


def _empty_point(n: int, note: str) -> ScalingPoint:
    return ScalingPoint(n, None, None, None, None, None, float(n), None, None, None, note)


OBJECTIVES = ("min_tpot", "max_throughput_per_device")


@dataclass(frozen=True)
class PlanCandidate:
    """A feasible plan of a search, with its batch and headline figures."""
    plan: ParallelPlan
    batch: int
    tpot_s: float
    ttft_s: float
    throughput_tokens_per_s: float
    throughput_per_device: float
    memory_per_device_bytes: float       # the fullest device
    communication_share: float | None
    parallel_efficiency: float


def candidate_plans(model: Model, max_devices: int, batch: int,
                    exact_devices: int | None = None) -> list[ParallelPlan]:
    """Power-of-two (and the device count itself) TP x PP x DP, and EP options for MoE,
    using at most ``max_devices`` (exactly ``exact_devices`` when given)."""
    top = exact_devices or max_devices
    degrees = sorted({1 << i for i in range(top.bit_length()) if 1 << i <= top} | {top})
    plans = []
    for tp in degrees:
        for pp in degrees:
            for dp in degrees:
                n = tp * pp * dp
                if n > top or (exact_devices and n != exact_devices) or dp > batch:
                    continue
                eps = [1]
                if model.moe is not None:
                    eps = [e for e in divisors(tp * dp)
                           if e > 1 and model.moe.num_experts % e == 0] + [1]
                plans += [ParallelPlan(tp=tp, pp=pp, dp=dp, ep=e) for e in eps]
    return plans


def search_plans(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                 objective: str = "min_tpot", max_devices: int | None = None,
                 exact_devices: int | None = None, fill_batch: bool = False,
                 batch_cap: int = 1024, tpot_limit_s: float | None = None,
                 progress=None) -> tuple[PlanCandidate, ...]:
    """Feasible plans (valid and fitting every device's memory), best first for ``objective``:
    ``min_tpot`` (ties: fewer devices) or ``max_throughput_per_device`` (ties: lower TPOT).
    ``fill_batch`` runs each plan at the largest global batch that fits (at most
    ``batch_cap``); ``tpot_limit_s`` drops plans slower per token. ``progress(fraction)`` is
    called as plans are evaluated."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
    ic = hardware.interconnect
    limit = max_devices or (ic.devices if ic else 1)
    batch_room = max(workload.batch, batch_cap) if fill_batch else workload.batch
    plans = candidate_plans(model, limit, batch_room, exact_devices)
    found = []
    for i, plan in enumerate(plans):
        if progress is not None:
            progress(i / max(1, len(plans)))
        cand = _evaluate(model, hardware, precision, workload, plan, fill_batch, batch_cap)
        if cand is not None and (tpot_limit_s is None or cand.tpot_s <= tpot_limit_s):
            found.append(cand)
    if progress is not None:
        progress(1.0)
    if objective == "min_tpot":
        key = lambda c: (c.tpot_s, c.plan.devices, c.ttft_s)           # noqa: E731
    else:
        key = lambda c: (-c.throughput_per_device, c.tpot_s)            # noqa: E731
    return tuple(sorted(found, key=key))


def _evaluate(model, hardware, precision, workload, plan, fill_batch, batch_cap):
    try:
        r = shard_analyze(model, hardware, precision, workload, plan)
        if fill_batch:
            b = min(batch_cap, r.max_batch)
            while b >= plan.dp:
                r = shard_analyze(model, hardware, precision, replace(workload, batch=b), plan)
                if r.fits:
                    break
                b = int(b * 0.9)
    except ConfigError:
        return None
    if not r.fits:
        return None
    return PlanCandidate(plan, r.workload.batch, r.estimated.tpot_s, r.estimated.ttft_s,
                         r.estimated.throughput_tokens_per_s, r.throughput_per_device,
                         r.worst_stage.total_bytes, r.decode_breakdown.communication_share,
                         r.parallel_efficiency)


# ---- published tensor-parallel measurements -------------------------------------------------

@dataclass(frozen=True)
class TPMeasurement:
    """A published decode throughput (tokens/s per sequence) of one model at one TP degree."""
    row_id: str
    model: str               # model preset name
    precision: str           # precision preset name
    weight_bits: float | None
    batch: int
    prompt_len: int
    gen_len: int
    tp: int
    decode_tokens_per_s: float
    source: str
    vocab_parallel: bool = True


@dataclass(frozen=True)
class TPComparison:
    """Prediction for one measurement. Speedups are relative to the smallest TP of the same
    series (model, precision, batch); error = predicted / measured - 1."""
    measurement: TPMeasurement
    series: str
    predicted_tokens_per_s: float
    error: float
    measured_speedup: float
    predicted_speedup: float


def load_tp_measurements() -> tuple[Hardware, tuple[TPMeasurement, ...], str]:
    """The published TP series in ``presets/tables/tp_measurements.toml``: the cluster they ran
    on (the device preset with the named cluster's links and device count), the rows, and the
    table's note."""
    from .presets import load_hardware, load_table
    t = load_table("tp_measurements")
    hw = load_hardware(t["cluster"])
    hw = replace(hw, interconnect=replace(hw.interconnect, devices=int(t["devices"])))
    rows = tuple(TPMeasurement(r["id"], r["model"], r["precision"], r.get("weight_bits"),
                               int(r["batch"]), int(r["prompt_len"]), int(r["gen_len"]),
                               int(r["tp"]), float(r["decode_tokens_per_s"]), r["source"],
                               bool(r.get("vocab_parallel", True)))
                 for r in t["row"])
    return hw, rows, str(t.get("note", ""))


def compare_tp_measurements(hardware: Hardware,
                            rows: tuple[TPMeasurement, ...]) -> tuple[TPComparison, ...]:
    """Predicted decode tokens/s (generated tokens / end-to-end time, as the benchmarks count
    them) for each measurement, with TP speedups within each series."""
    from .precision import precision_preset
    from .presets import load_model
    preds = {}
    for r in rows:
        p = precision_preset(r.precision)
        if r.weight_bits is not None:
            p = replace(p, name="custom", weight_attn_bits=r.weight_bits,
                        weight_ffn_bits=r.weight_bits, weight_embed_bits=r.weight_bits)
        wl = Workload(batch=r.batch, prompt_len=r.prompt_len, gen_len=r.gen_len)
        plan = ParallelPlan(tp=r.tp, vocab_parallel=r.vocab_parallel)
        rep = shard_analyze(load_model(r.model), hardware, p, wl, plan)
        preds[r.row_id] = r.gen_len / rep.estimated.e2e_latency_s

    def series(r):
        return f"{r.model} · {r.precision}" + (f" ({r.weight_bits:g}-bit)" if r.weight_bits
                                               else "") + f" · batch {r.batch}"
    base = {}
    for r in sorted(rows, key=lambda r: r.tp):
        base.setdefault(series(r), r)
    out = []
    for r in rows:
        b = base[series(r)]
        out.append(TPComparison(r, series(r), preds[r.row_id],
                                preds[r.row_id] / r.decode_tokens_per_s - 1.0,
                                r.decode_tokens_per_s / b.decode_tokens_per_s,
                                preds[r.row_id] / preds[b.row_id]))
    return tuple(out)


# ---- plain-data view ------------------------------------------------------------------------

def shard_report_to_dict(r: ShardReport, include_operators: bool = False) -> dict:
    """JSON-ready dict (SI units) of a sharded scenario: estimated timing at the top level,
    ``ideal`` beside it, per-device memory of the fullest stage and per stage, the time
    breakdowns, collectives and efficiency."""
    from .export import _plain, row_to_dict, timing_to_dict
    st = r.worst_stage
    out = {
        "model": r.model.name,
        "hardware": r.hardware.name,
        "plan": {**_plain(r.plan), "devices": r.devices, "label": r.plan.label,
                 "microbatches": r.layout.microbatches, "replica_batch": r.layout.replica_batch,
                 "expert_tp": r.layout.expert_tp,
                 "stage_layers": [n for _, n in r.layout.stages]},
        **timing_to_dict(r.estimated),
        "ideal": timing_to_dict(r.ideal),
        "weight_bytes_per_device": st.weight_bytes,
        "kv_cache_bytes_per_device": st.kv_cache_bytes,
        "activation_bytes_per_device": st.activation_bytes,
        "memory_bytes_per_device": st.total_bytes,
        "memory_capacity_bytes": st.capacity_bytes,
        "fits_in_memory": r.fits,
        "max_batch": r.max_batch,
        "stages": [{**_plain(s), "total_bytes": s.total_bytes, "fits": s.fits}
                   for s in r.memory],
        "prefill_breakdown": {**_plain(r.prefill_breakdown),
                              "communication_share": r.prefill_breakdown.communication_share},
        "decode_breakdown": {**_plain(r.decode_breakdown),
                             "communication_share": r.decode_breakdown.communication_share},
        "prefill_bubble_fraction": r.prefill_bubble_fraction,
        "decode_bubble_fraction": r.decode_bubble_fraction,
        "single_device": timing_to_dict(r.single_device),
        "single_device_fits": r.single_device_fits,
        "tpot_speedup": r.tpot_speedup,
        "throughput_speedup": r.throughput_speedup,
        "parallel_efficiency": r.parallel_efficiency,
        "throughput_per_device": r.throughput_per_device,
        "collectives": [_plain(c) for c in r.collectives],
        "notes": list(r.notes),
    }
    if include_operators:
        out["operators"] = [{**row_to_dict(row), "stage": i}
                            for phases in (r.prefill, r.decode)
                            for i, ph in enumerate(phases) for row in ph.rows]
    return out
