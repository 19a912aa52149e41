"""Per-device memory and time of a sharded scenario (``shard_analyze``): one device's operators
per pipeline stage from the one forward builder, its collectives, pipeline fill and bubbles,
the time breakdown, the largest batch that fits, and a JSON-ready view. Conventions: see
:mod:`llmpara_core.parallel`."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from ..budget import check_time_budget
from ..analysis import OpRow, Phase, Timing, _row, _timing, analyze, integrate_decode
from ..forward import forward_ops
from ..hardware import Efficiency, Hardware, Topology
from ..memory import MemoryFootprint, activation_peak_bytes, kv_cache_bytes
from ..model import Model, NormKind, count_params
from ..operators import OpKind, Operator
from .collectives import Collective, CommCost, Net, collective_terms
from .plan import (Layout, ParallelPlan, busiest_rank_experts, ranks_hit_per_token,
                            resolve_plan, shard_model)
from ..precision import Precision
from ..roofline import Rates, launches, rates
from ..units import BITS_PER_BYTE, MAX_SIZE, bits_to_bytes
from ..workload import Workload

TOKEN_ID_BYTES = 4.0          # int32 token ids sent back from the last stage in decode
# Operators whose weights a row split divides across the TP group (``Efficiency.tp_row_copy_s``)
ROW_SPLIT_KINDS = frozenset({OpKind.QKV, OpKind.OUT_PROJ, OpKind.FFN, OpKind.MOE_EXPERT,
                             OpKind.SHARED_EXPERT, OpKind.LM_HEAD})


# ---- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageMemory(MemoryFootprint):
    """Memory of one device of pipeline stage ``stage`` [bytes] (totals and fit as for a
    single device)."""
    stage: int = 0
    first_layer: int = 0
    layers: int = 0


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
    net: Net | None
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
    plan, model, net = ctx.layout.plan, ctx.model, ctx.net
    a = ctx.precision.activation_bits / BITS_PER_BYTE
    hidden = batch * new * model.hidden_size * a
    specs = []        # (name, kind, participants, message bytes, count, layer group)
    tp, grp = plan.tp, plan.tp * plan.dp
    base = s * grp
    last = s == plan.pp - 1
    copy_s = ctx.hardware.effective_efficiency.tp_row_copy_s
    if tp > 1 and copy_s:
        # row split (llama.cpp): each split matmul's input to and output from every other
        # device of the group, host-driven, instead of per-block all-reduces
        per_group: dict[str, int] = {}
        for o in _device_ops(ctx, s, batch, new, new, logits):
            if o.kind in ROW_SPLIT_KINDS:
                per_group[o.group] = per_group.get(o.group, 0) + o.count
        for group, n in per_group.items():
            specs.append(("tp_row_split_copy", Collective.SEND_RECV, 2, hidden,
                          2 * (tp - 1) * n, group))
    elif tp > 1:
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
        if kind is Collective.ALL_TO_ALL:             # the whole TP x DP group of the stage
            nodes = _nodes_spanned(net, base, grp)
        else:                                         # the slowest of the stage's TP groups
            nodes = max(_nodes_spanned(net, base + d * tp, tp) for d in range(plan.dp))
        c = _cost(net, phase, s, name, kind, n, m, count, group, nodes)
        out.append(replace(c, estimated_s=c.estimated_s + copy_s)
                   if name == "tp_row_split_copy" else c)
    node_s = _node_step_s(ctx)
    if s == 0 and node_s:  # the stack's fixed cost per pass of an instance across nodes
        out.append(CommCost(phase, s, NODE_STEP, Collective.SEND_RECV, plan.pp * grp, 0.0,
                            0.0, 1, "model", _nodes_spanned(net, 0, plan.pp * grp), 0.0, node_s))
    if plan.pp > 1:
        if not last:
            nodes = 1 + any(net.node(r) != net.node(r + grp) for r in range(base, base + grp))
            c = _cost(net, phase, s, "pp_send_hidden", Collective.SEND_RECV, 2, hidden, 1,
                      "model", nodes)
            hop_s = ctx.hardware.effective_efficiency.stage_hop_s
            out.append(replace(c, estimated_s=c.estimated_s + hop_s) if hop_s else c)
        elif phase == "decode":
            nodes = 1 + any(net.node(r) != net.node(r - base) for r in range(base, base + grp))
            out.append(_cost(net, phase, s, "pp_return_tokens", Collective.SEND_RECV, 2,
                             batch * TOKEN_ID_BYTES, 1, "model", nodes))
    return out


NODE_STEP = "node_step_sync"


def _node_step_s(ctx: _Ctx) -> float:
    """The stack's fixed cost per pass (``Efficiency.node_step_s``) where the instance spans
    more than one node, else 0. Once per pass, whatever the micro-batches: it is kept out of
    the stage times the pipeline combines and added to the phase's Timing
    (``_shard_timings``); the breakdown counts it as communication, never as pipeline wait."""
    node_s, net, plan = ctx.hardware.effective_efficiency.node_step_s, ctx.net, ctx.layout.plan
    if not node_s or net is None:
        return 0.0
    return node_s if _nodes_spanned(net, 0, plan.pp * plan.tp * plan.dp) > 1 else 0.0


def _nodes_spanned(net: Net, first_rank: int, size: int) -> int:
    """Nodes that ranks first_rank .. first_rank + size - 1 occupy."""
    return net.node(first_rank + size - 1) - net.node(first_rank) + 1


def _cost(net: Net, phase, s, name, kind, n, m, count, group, nodes) -> CommCost:
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
               ctx: _Ctx, node_s: float = 0.0, chunks: int = 1) -> TimeBreakdown:
    """Estimated split of the latency path (every stage once; a prompt pipelined in
    ``chunks`` micro-batches: every stage once for one of them) plus pipeline wait. Overhead
    holds the kernel launches and the stack's per-pass cost (step and per-sequence overhead:
    the stage's time beyond its operator rows)."""
    ov = ctx.layout.plan.overlap
    comp = mem = overhead = comm = 0.0
    ir, er = ctx.ideal_r, ctx.est_r
    for ph, t in zip(phases, times):
        rows_s = 0.0
        for r in ph.rows:
            if r.kind is OpKind.COMM:
                continue
            rows_s += r.estimated_s
            o = launches(r.count, r.quantized, er, r.name) * er.kernel_overhead_s
            rest = r.estimated_s - o
            c_est = r.compute_s * ir.flops_per_s / er.flops_per_s
            m_est = r.memory_s * ir.bytes_per_s / er.bytes_per_s
            overhead += o
            if c_est > m_est:
                comp += rest
            else:
                mem += rest
        overhead += t.comp_est - rows_s
        comm += t.comm_est - min(ov * t.comm_est, t.comp_est)
    path = sum(_stage_time(t, ov, True) for t in times) / chunks
    return TimeBreakdown(comp / chunks, mem / chunks, overhead / chunks, comm / chunks + node_s,
                         max(0.0, phase_s - path))


def _bubble(times: list[float], m: int, phase_s: float) -> float:
    """Idle share of a device: 1 - (m x mean stage time) / phase time."""
    if phase_s <= 0:
        return 0.0
    return max(0.0, 1.0 - m * sum(times) / len(times) / phase_s)


def shard_analyze(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                  plan: ParallelPlan, efficiency: Efficiency | None = None) -> ShardReport:
    """Per-device memory and time of ``model`` run as ``plan`` on devices like ``hardware``
    (whose ``interconnect`` describes the links). TP = PP = DP = 1 reproduces
    ``analysis.analyze`` exactly. ``efficiency`` overrides the hardware's derating (operators,
    links and the single-device baseline alike), as in ``analyze``."""
    check_time_budget()
    if efficiency is not None:
        hardware = hardware.with_efficiency(efficiency)
    check_time_budget()         # a cached report still answers inside its caller's budget
    return _shard_cached(model, hardware, precision, workload, plan)


def shard_timings(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                  plan: ParallelPlan, efficiency: Efficiency | None = None
                  ) -> tuple[Timing, Timing]:
    """(ideal, estimated) Timing of ``shard_analyze`` for the same arguments -- the same
    arithmetic, without the single-device baseline, memory, breakdowns and largest batch: for
    fits that re-time one scenario with many efficiencies."""
    check_time_budget()
    if efficiency is not None:
        hardware = hardware.with_efficiency(efficiency)
    ctx = _shard_ctx(model, hardware, precision, workload, plan)
    timings = _shard_timings(ctx, _stage_passes(ctx, memory=False))[0]
    return timings[False], timings[True]


def _shard_ctx(model, hardware, precision, workload, plan) -> _Ctx:
    lay = resolve_plan(model, hardware, plan, workload)
    stage_models = tuple(shard_model(model, plan.tp, lay.expert_tp, f, n, plan.vocab_parallel)
                         for f, n in lay.stages)
    return _Ctx(model, hardware, precision, workload, lay, stage_models,
                Net.of(hardware, precision),
                rates(hardware, precision.compute_dtype, estimated=False),
                rates(hardware, precision.compute_dtype, estimated=True))


def _decode_range(wl: Workload) -> tuple[int, int, int]:
    """(decode steps, first and last context integrated)."""
    first, last = wl.decode_contexts
    steps = max(0, last - first + 1)
    return (steps, first, last) if steps else (steps, wl.prompt_len + 1, wl.prompt_len + 1)


def _stage_passes(ctx: _Ctx, memory: bool = True) -> list[_StagePass]:
    _, lo, hi = _decode_range(ctx.workload)
    return [_stage_pass(ctx, s, lo, hi, memory) for s in range(len(ctx.stage_models))]


# Off: a layer split's prompt runs its micro-batches one after another through the stages (the
# model before issue 27's pipeline rule).
PROMPT_PIPELINE = True


def prompt_chunks(ctx: _Ctx) -> int:
    """Micro-batches a pipeline stage's prompt pass is split into and pipelined over the
    stages: a stack that runs a pass in micro-batches of ``Efficiency.prompt_ubatch_tokens``
    tokens (llama.cpp's n_ubatch) sends each to the next stage when it is done, so the stages
    work on different micro-batches at once (github ggml-org/llama.cpp PR #6017, 2024-03,
    "llama : add pipeline parallelism support": n micro-batches over PP even stages take
    1 + (n - 1) / PP micro-batch passes, not n). 1 without a layer split or micro-batches."""
    ub = ctx.hardware.effective_efficiency.prompt_ubatch_tokens
    if not PROMPT_PIPELINE or len(ctx.stage_models) <= 1 or ub <= 0:
        return 1
    return max(1, math.ceil(ctx.layout.microbatch * max(1, ctx.workload.prompt_len) / ub))


def _shard_timings(ctx: _Ctx, passes: list[_StagePass]) -> tuple[dict, dict]:
    """{estimated?: Timing} (the per-pass node step included) and {estimated?: (prefill,
    decode step) [s]} of the pipeline alone. A stage's prompt pass of ``prompt_chunks``
    micro-batches is pipelined as that many passes of 1 / chunks its time each."""
    wl, m, ov = ctx.workload, ctx.layout.microbatches, ctx.layout.plan.overlap
    steps = _decode_range(wl)[0]
    pre_t, dec_t = [p.prefill_times for p in passes], [p.decode_times for p in passes]
    timings, phase_s = {}, {}
    node_s = _node_step_s(ctx)
    n = prompt_chunks(ctx)
    for est in (False, True):
        extra = node_s if est else 0.0
        pre = _pipeline([_stage_time(t, ov, est) / n for t in pre_t], m * n, decode=False)
        dec = _pipeline([_stage_time(t, ov, est) for t in dec_t], m, decode=True)
        timings[est] = _timing(wl, pre + (extra if wl.prompt_len else 0.0), dec + extra, steps)
        phase_s[est] = (pre, dec)
    return timings, phase_s


@functools.lru_cache(maxsize=256)
def _shard_cached(model, hardware, precision, workload, plan) -> ShardReport:
    ctx = _shard_ctx(model, hardware, precision, workload, plan)
    lay, m, ov = ctx.layout, ctx.layout.microbatches, plan.overlap
    passes = _stage_passes(ctx)
    pre_ph, dec_ph = tuple(p.prefill for p in passes), tuple(p.decode for p in passes)
    pre_t, dec_t = [p.prefill_times for p in passes], [p.decode_times for p in passes]
    mem = [p.memory for p in passes]
    timings, phase_s = _shard_timings(ctx, passes)
    pre_e, dec_e = phase_s[True]
    node_s = _node_step_s(ctx)          # in the Timing, beside the pipeline's phase times
    node_pre = node_s if workload.prompt_len else 0.0
    single = analyze(model, hardware, precision, workload)
    notes = list(lay.notes)
    if not single.memory.fits:
        notes.append("the single-device baseline does not fit in one device's memory "
                     "(speedups compare with a hypothetical device)")
    return ShardReport(
        model, hardware, precision, workload, lay, tuple(mem), pre_ph, dec_ph,
        tuple(c for p in passes for c in p.collectives), timings[True], timings[False],
        _breakdown(pre_ph, pre_t, pre_e, ctx, node_pre, prompt_chunks(ctx)),
        _breakdown(dec_ph, dec_t, dec_e, ctx, node_s),
        _bubble([_stage_time(t, ov, True) for t in pre_t], m, pre_e),
        _bubble([_stage_time(t, ov, True) for t in dec_t], m, dec_e),
        single.estimated, single.memory.fits, _max_batch(mem, lay, ctx), tuple(notes))


@dataclass(frozen=True)
class _StagePass:
    """One device of one pipeline stage: its phases (one microbatch), times and memory."""
    prefill: Phase
    decode: Phase                    # mean per decode step
    prefill_times: _StageTimes
    decode_times: _StageTimes
    collectives: tuple[CommCost, ...]
    memory: StageMemory | None          # None: timed only (``shard_timings``)


def _comm_times(comms: list[CommCost]) -> tuple[float, float]:
    """(ideal, estimated) time of a stage's collectives per pass; the per-pass node step is
    added once per phase instead (``_node_step_s``)."""
    comms = [c for c in comms if c.name != NODE_STEP]
    return (sum(c.ideal_s * c.count for c in comms),
            sum(c.estimated_s * c.count for c in comms))


def _stage_pass(ctx: _Ctx, s: int, lo: int, hi: int, memory: bool = True) -> _StagePass:
    """Prefill of one microbatch and decode steps at contexts lo..hi (exactly integrated) on a
    device of stage ``s``, with its collectives and (``memory``; else None) memory."""
    wl, lay, sm = ctx.workload, ctx.layout, ctx.stage_models[s]
    mb = lay.microbatch
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    pre_ops = _device_ops(ctx, s, mb, wl.prompt_len, wl.prompt_len, logits)
    dt = ctx.precision.compute_dtype
    pre_r = rates(ctx.hardware, dt, True, tokens_in_flight=mb * max(1, wl.prompt_len), batch=mb)
    dec_r = rates(ctx.hardware, dt, True, tokens_in_flight=mb, batch=mb)
    # routed experts' rows per expert follow the whole model's routing (an expert-parallel
    # shard holds fewer experts, each with the same tokens)
    moe = ctx.model.moe
    pre_rows = [_row("prefill", o, ctx.ideal_r, pre_r, moe) for o in pre_ops]
    pre_c = _device_comms(ctx, s, mb, wl.prompt_len, logits, "prefill")
    dec_phase, d_ideal, d_est = integrate_decode(
        sm, ctx.precision, mb, lo, hi, wl.flash_attention, ctx.ideal_r, dec_r,
        ops_at=lambda c: _device_ops(ctx, s, mb, 1, c, 1), moe=moe)
    dec_c = _device_comms(ctx, s, mb, 1, 1, "decode")
    n_dec = hi - lo + 1
    stage_memory = None
    if memory:
        act = max(activation_peak_bytes(pre_ops),
                  activation_peak_bytes(_device_ops(ctx, s, mb, 1, hi, 1)))
        stage_memory = StageMemory(
            _stage_weight_bytes(ctx, s),
            kv_cache_bytes(sm, ctx.precision, lay.replica_batch, wl.max_context), act,
            ctx.hardware.memory_capacity_bytes, stage=s, first_layer=lay.stages[s][0],
            layers=lay.stages[s][1])
    return _StagePass(
        Phase("prefill", tuple(pre_rows) + tuple(_comm_row(c) for c in pre_c)),
        Phase("decode", dec_phase.rows + tuple(_comm_row(c) for c in dec_c)),
        _StageTimes(sum(r.ideal_s for r in pre_rows),
                    sum(r.estimated_s for r in pre_rows) + pre_r.pass_overhead_s,
                    *_comm_times(pre_c)),
        _StageTimes(d_ideal / n_dec, d_est / n_dec + dec_r.pass_overhead_s, *_comm_times(dec_c)),
        tuple(pre_c + dec_c), stage_memory)


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


def _microbatch_of(replica_batch: int, plan: ParallelPlan) -> int:
    """Sequences per microbatch at ``replica_batch`` (the rule of ``resolve_plan``)."""
    if plan.pp == 1:
        return replica_batch
    m = plan.microbatches or min(replica_batch, plan.pp)
    return math.ceil(replica_batch / min(m, replica_batch))


def _max_batch(mem: list[StageMemory], lay: Layout, ctx: _Ctx) -> int:
    """Largest global batch whose per-device weights + KV cache (every sequence of a replica)
    + activations (one microbatch; per sequence as in this run) fit on every stage; 0 if the
    weights alone do not fit. Bisection on the replica batch (memory grows with it)."""
    wl, plan = ctx.workload, lay.plan
    per_stage = [(st.capacity_bytes - st.weight_bytes,
                  kv_cache_bytes(sm, ctx.precision, 1, wl.max_context),
                  st.activation_bytes / lay.microbatch)
                 for sm, st in zip(ctx.stage_models, mem)]
    if any(free <= 0 for free, _, _ in per_stage):
        return 0

    def fits(br: int) -> bool:
        mb = _microbatch_of(br, plan)
        return all(kv * br + act * mb <= free for free, kv, act in per_stage)
    if not fits(1):
        return 0
    lo, hi = 1, MAX_SIZE // plan.dp
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo * plan.dp


# ---- plain-data view ------------------------------------------------------------------------

def shard_report_to_dict(r: ShardReport, include_operators: bool = False) -> dict:
    """JSON-ready dict (SI units) of a sharded scenario: estimated timing at the top level,
    ``ideal`` beside it, per-device memory of the fullest stage and per stage, the time
    breakdowns, collectives and efficiency."""
    from ..export import _plain, row_to_dict, timing_to_dict
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
