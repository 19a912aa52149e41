"""The fleet search: candidates (hardware x TP x PP x precision x stack per workload), closed-form
bounds that prune them, and the serving simulator's SLO rate search on the survivors.

Stage 1, closed forms (``bounds``), per candidate, each a bound of what the simulation would
give, so pruning only drops candidates the simulation would also reject or rank lower:

* **support**: the device has a tensor rate in the precision's data type (NVFP4 needs FP4
  tensor cores), TensorRT-LLM runs on NVIDIA GPUs only, TP x PP fits the cluster and the
  ``max_gpus_per_replica`` constraint;
* **memory fit**: the weights alone over the replica's devices exceed one device's memory, or
  the KV cache left (``serving.kv_capacity_tokens``) cannot hold the longest request of the
  max-load stream -- exactly the condition on which ``serving.simulate`` refuses the plan;
* **latency floor at zero load**: each request alone -- its prompt prefilled in chunks of the
  token budget, then one decode step at its prompt's context -- timed by the same
  ``IterationCost`` the simulator uses; an iteration with other work in it only takes longer,
  so the SLO percentile of these floors is a lower bound of the simulated one (with PP > 1,
  where requests sharing a pass split it into even microbatches, 1 / PP of the lone prefill
  and a decode step at the shortest context). Above the SLO, no request rate can meet it;
* **max-load throughput bound**: every decode token passes through a decode iteration; in
  the iteration of its g-th output token request i holds KV blocks for at least isl_i + g
  tokens, and one iteration's decoders hold at most the replica's KV cache, so there are at
  least K = max(sum of those holdings / KV tokens, the longest output, decode tokens / B)
  decode iterations (B = min(max batch, KV blocks / blocks of the shortest prompt + 1)); one
  with b decoders takes at least t(b), the decode of b sequences at the shortest context,
  so for any line alpha + beta b <= t(b) (alpha >= 0) the decode busy time is at least
  alpha K + beta D (D decode tokens; ``_decode_busy_floor_s``). Where the KV cache is small
  next to the requests (long outputs, big models on few GPUs) this is several times tighter
  than the batch cap alone. And every token (prompt or output) passes through an iteration
  of at most the token budget M, each costing at least t_min(M) / M, so at most
  N M / (all tokens x t_min(M)) requests/s. The lower of the two gives the fewest replicas,
  hence the lowest cost [USD/h], a candidate can reach.

Stage 2, simulation (``evaluate_candidate``, one task per candidate, run by an executor): the
max-load rate, the SLO rate search (the probes of ``serving.max_rate_meeting_slo``, stopped as
soon as the replica count for the workload's rate is fixed: ``_replica_search``), the replicas
for the workload's rate, and one simulation at the per-replica operating point for the
latency headroom, J/token and the SLO check. Candidates are simulated in rounds, per workload
in increasing order of their cost bound; a candidate whose bound exceeds the (1 + runners-up)-th
cheapest plan found is skipped (it could not enter the result), and a simulated one stops as
soon as its search shows it needs more replicas than that plan's cost allows
(``Task.max_replicas``). Rounds have a fixed size, so the plans do not depend on the executor
or the number of workers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..errors import ConfigError, LLMParaError
from ..limits import TimeBudgetExceeded, check_time_budget
from .traffic import Demand, TrafficMix

BOUND_PER_WORKLOAD = 12       # candidates of one workload bounded per round
SIMULATE_PER_WORKLOAD = 4     # candidates of one workload simulated per round
FLOOR_MARGIN = 0.98           # floors are compared at 98 % (numerical slack)
BOUND_MARGIN = 1.02           # the throughput bound is widened by 2 %
MAX_CONFIGURATIONS = 200_000  # a traffic file asking for more is refused
NVIDIA_ARCHS = {"volta", "turing", "ampere", "ada", "hopper", "blackwell"}


@dataclass(frozen=True)
class Candidate:
    """One configuration of one workload, by names only (what a worker receives)."""
    workload: int
    hardware: str
    tp: int
    pp: int
    precision: str
    framework: str

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def key(self) -> tuple:
        return (self.workload, self.hardware, self.tp, self.pp, self.precision, self.framework)


@dataclass(frozen=True)
class Task:
    """A candidate with everything needed to simulate it (small, picklable).
    ``max_replicas``: the search stops as soon as the candidate is known to need more (it
    could not enter the result); None = no limit."""
    candidate: Candidate
    demand: Demand
    requests: int
    seed: int
    max_replicas: int | None = None


# ---- presets, loaded once per process (workers load them themselves) ---------------------------

@functools.lru_cache(maxsize=64)
def _hardware(name: str):
    from ..presets import load_hardware
    return load_hardware(name)


@functools.lru_cache(maxsize=64)
def _model(name: str):
    from ..presets import load_model
    return load_model(name)


@functools.lru_cache(maxsize=64)
def _stack_hw(hw_name: str, framework: str):
    from ..calibration.stacks import with_stack
    return with_stack(_hardware(hw_name), framework)


@functools.lru_cache(maxsize=256)
def _cost(model: str, hw_name: str, tp: int, pp: int, precision: str, framework: str):
    from ..parallel import ParallelPlan
    from ..precision import precision_preset
    from ..serving import IterationCost
    shw, _ = _stack_hw(hw_name, framework)
    return IterationCost(_model(model), _hardware(hw_name), precision_preset(precision),
                         ParallelPlan(tp=tp, pp=pp), shw.efficiency)


def _config(framework: str):
    from ..serving import engine_config
    return engine_config(framework)[0]


def _spec(d: Demand, requests: int, seed: int):
    from ..serving import RequestSpec
    return RequestSpec(isl=d.isl, osl=d.osl, requests=requests, lengths=d.lengths,
                       spread=d.spread, seed=seed)


def _slo(d: Demand):
    from ..serving import Slo
    return Slo(d.ttft_slo_s, d.tpot_slo_s, d.slo_percentile)


# ---- prices ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _price_table() -> dict:
    from ..presets import load_table
    return {k: (float(v["usd_per_gpu_hour"]), str(v.get("source", "")))
            for k, v in load_table("gpu_rental_prices")["price"].items()}


def price_per_gpu_hour(hw_name: str, overrides: tuple[tuple[str, float], ...] = ()) -> float:
    """USD per GPU-hour of ``hw_name``: the traffic file's [prices] (by the name given or the
    preset's name), else ``presets/tables/gpu_rental_prices.toml``; ConfigError if neither."""
    from ..presets import find_preset, normalize
    hw = _hardware(hw_name)
    keys = {normalize(hw_name), normalize(hw.name)}
    for k, v in overrides:
        if normalize(k) in keys:
            return v
    try:
        slug = find_preset("hardware", hw_name).slug
    except LLMParaError:
        slug = None
    table = _price_table()
    if slug in table:
        return table[slug][0]
    raise ConfigError(f"no rental price for {hw.name}: add it to the traffic file's [prices] "
                      f"table (USD per GPU-hour)")


# ---- stage 0: candidates -----------------------------------------------------------------------

def enumerate_candidates(mix: TrafficMix) -> list[Candidate]:
    """Every (workload, hardware, TP, PP, precision, stack) of the mix whose TP x PP fits the
    hardware's devices, in a fixed order."""
    c = mix.candidates
    n = sum(len(d.precisions or c.precisions) for d in mix.workloads) * len(c.hardware) \
        * len(c.tp) * len(c.pp) * len(c.frameworks)
    if n > MAX_CONFIGURATIONS:
        raise ConfigError(f"{n:,} configurations to search (at most {MAX_CONFIGURATIONS:,}): "
                          f"name fewer hardware, precisions, stacks or TP / PP degrees")
    out = []
    for wi, d in enumerate(mix.workloads):
        precs = d.precisions or c.precisions
        for hw in c.hardware:
            h = _hardware(hw)
            devices = h.interconnect.devices if h.interconnect else 1
            for tp in c.tp:
                for pp in c.pp:
                    if tp * pp > devices:
                        continue
                    for p in precs:
                        for fw in c.frameworks:
                            out.append(Candidate(wi, hw, tp, pp, p, fw))
    return out


def support(mix: TrafficMix, cand: Candidate) -> str | None:
    """Why ``cand`` cannot run at all (None if it can)."""
    from ..precision import precision_preset
    hw = _hardware(cand.hardware)
    prec = precision_preset(cand.precision)
    if hw.peak_flops_per_s_raw(prec.compute_dtype) is None:
        return f"{hw.name} has no {prec.compute_dtype.value} tensor rate for {cand.precision}"
    if cand.framework == "tensorrt-llm" and hw.architecture.value not in NVIDIA_ARCHS:
        return "TensorRT-LLM runs on NVIDIA GPUs only"
    devices = hw.interconnect.devices if hw.interconnect else 1
    if cand.gpus > devices:
        return f"TP{cand.tp}xPP{cand.pp} needs {cand.gpus} GPUs; {hw.name} has {devices}"
    limit = mix.constraints.max_gpus_per_replica
    if limit is not None and cand.gpus > limit:
        return f"{cand.gpus} GPUs per replica exceed max_gpus_per_replica {limit}"
    return None


# ---- stage 1: closed-form bounds ---------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    """Closed forms of one candidate: why it is pruned (None = survivor), the zero-load
    floors at the SLO percentile [s], the max-load rate bound [requests/s], the fewest
    replicas and the lowest cost [USD/h] it can reach."""
    candidate: Candidate
    pruned: str | None
    stage: str                       # "support", "memory", "latency", "constraint", ""
    ttft_floor_s: float | None = None
    tpot_floor_s: float | None = None
    rate_bound_rps: float | None = None
    min_replicas: int | None = None
    cost_bound_usd_per_hour: float | None = None


def _draw(d: Demand, requests: int, seed: int, max_load: bool):
    from ..serving import draw
    spec = _spec(d, requests, seed)
    if not max_load:
        spec = spec.with_rate(1.0)
    return draw(spec)


def _rows(cost, new: np.ndarray, ctx: np.ndarray, logits: np.ndarray, b: int = 1) -> np.ndarray:
    """Feature rows (as the engine's ``_features``) of iterations of ``b`` identical sequences
    each adding ``new`` tokens to reach context ``ctx`` (arrays, one row per entry)."""
    from ..operators import causal_pairs
    new = np.asarray(new, dtype=float)
    ctx = np.asarray(ctx, dtype=float)
    cols = [np.ones_like(new), b * new, np.asarray(logits, dtype=float),
            b * (new * (ctx - new) + new * (new + 1) / 2.0), b * ctx]
    if cost.window:
        w = cost.window
        cols += [b * np.array([causal_pairs(int(n), int(c), w) for n, c in zip(new, ctx)]),
                 b * np.minimum(ctx, w + new - 1)]
    if cost.moe:
        e, k = cost.moe.num_experts, cost.moe.experts_per_token
        cols.append(e * (1.0 - (1.0 - k / e) ** (b * new)))
    return np.stack(cols, axis=1)


def _lone_prefill_s(cost, cfg, isl: np.ndarray) -> np.ndarray:
    """Time [s] to prefill each prompt alone (chunks of the token budget)."""
    lengths = np.unique(isl)
    step = cfg.max_num_tokens if cfg.chunked_prefill else None
    owner, new, ctx, last = [], [], [], []
    for j, n in enumerate(lengths.tolist()):
        done = 0
        while done < n:
            c = min(step or n, n - done)
            done += c
            owner.append(j)
            new.append(c)
            ctx.append(done)
            last.append(1.0 if done >= n else 0.0)
    t = cost.time_s(_rows(cost, new, ctx, last), 1)
    per = np.bincount(np.array(owner), weights=t, minlength=len(lengths))
    return per[np.searchsorted(lengths, isl)]


def _decode_s(cost, ctx: np.ndarray, b: int = 1) -> np.ndarray:
    """Time [s] of a decode iteration of ``b`` sequences each at context ``ctx`` (array)."""
    u, inv = np.unique(np.asarray(ctx), return_inverse=True)
    t = cost.time_s(_rows(cost, np.ones(len(u)), u, np.full(len(u), float(b)), b), b)
    return t[inv]


def _decode_busy_floor_s(cost, isl: np.ndarray, osl: np.ndarray, b_max: int,
                         kv_tokens: int) -> float:
    """A lower bound [s] of the busy time of the iterations that decode the max-load stream
    (prompts ``isl``, outputs ``osl``) on one replica.

    Request i decodes osl_i - 1 tokens, one per iteration; in the iteration of its g-th one it
    holds KV blocks for at least isl_i + g tokens, and the decoders of one iteration hold at
    most ``kv_tokens``. So there are at least K = max(sum_i sum_g (isl_i + g) / kv_tokens,
    max_i(osl_i) - 1, D / b_max) decode iterations for the D decode tokens. An iteration with b
    decoders takes at least t(b), a decode of b sequences at the shortest context (prompt
    chunks only add work). For any line alpha + beta b <= t(b) on [1, b_max] with alpha >= 0,
    the busy time sum_k t(b_k) >= alpha K + beta D; the best of a grid of slopes is returned.
    With PP > 1, t(b) is the least over the pipeline's microbatch counts b..PP (more sequences
    in an iteration may split it into more microbatches)."""
    bs = np.arange(1, b_max + 1, dtype=float)
    ctx = np.full(b_max, float(int(isl.min()) + 1))
    F = _rows(cost, np.ones(b_max), ctx, bs, bs)
    pp = len(cost.stages)
    t = cost.time_s(F, bs)
    for n in range(2, pp + 1):
        t = np.minimum(t, cost.time_s(F, np.maximum(bs, n)))
    g = osl.astype(float) - 1.0
    dec = float(g.sum())
    held = float((g * isl + g * (g + 1.0) / 2.0).sum())
    k_min = max(held / kv_tokens, float(g.max()), dec / b_max)
    per_token = t / bs
    slopes = np.concatenate([[0.0, float(per_token.min())],
                             np.linspace(0.0, float(per_token.max()), 65)])
    alpha = (t[None, :] - slopes[:, None] * bs[None, :]).min(axis=1)
    ok = alpha >= 0.0
    return float((alpha[ok] * k_min + slopes[ok] * dec).max())


def _least_pass_s(cost, tokens: int) -> float:
    """The least time [s] of an iteration over ``tokens`` new tokens: each token attends at
    least to itself and reads at least its own position, no logits, over the number of
    sequences (1 to PP: pipeline microbatches) that makes it fastest. Per token this falls
    with the tokens of the pass, so ``tokens`` x (this / budget) bounds any pass below."""
    pp = len(cost.stages)
    row = _rows(cost, [tokens], [tokens], [0.0])[0]
    row[3] = row[4] = tokens                       # P = K = T
    if cost.window:
        row[5] = row[6] = tokens
    return min(float(cost.time_s(row[None, :], n)[0]) for n in range(1, pp + 1))


def bounds(mix: TrafficMix, cand: Candidate) -> Bound:
    """The closed-form stage for one candidate (see the module docstring)."""
    why = support(mix, cand)
    if why:
        return Bound(cand, why, "support")
    from ..memory import weight_bytes
    from ..precision import precision_preset
    from ..serving import kv_capacity_tokens
    d = mix.workloads[cand.workload]
    hw = _hardware(cand.hardware)
    model = _model(d.model)
    if weight_bytes(model, precision_preset(cand.precision)) / cand.gpus \
            >= hw.memory_capacity_bytes:
        return Bound(cand, "the weights do not fit the replica's memory", "memory")
    try:
        cost = _cost(d.model, cand.hardware, cand.tp, cand.pp, cand.precision, cand.framework)
    except TimeBudgetExceeded:
        raise
    except ConfigError as e:
        return Bound(cand, str(e).splitlines()[0], "support")
    cfg = _config(cand.framework)
    _, isl_m, osl_m = _draw(d, mix.requests, mix.seed, True)
    block = cfg.block_size
    kv = kv_capacity_tokens(cost, cfg)
    blocks = kv // block
    worst = int((isl_m + osl_m).max())
    if blocks == 0 or -(-worst // block) > blocks:
        return Bound(cand, "the KV cache cannot hold the longest request", "memory")
    # zero-load floors over the Poisson stream (what the SLO search simulates)
    _, isl, osl = _draw(d, mix.requests, mix.seed, False)
    q = d.slo_percentile
    multi = osl > 1
    if cand.pp == 1:
        ttft = float(np.percentile(_lone_prefill_s(cost, cfg, isl), q))
        tpot = (float(np.percentile(_decode_s(cost, isl[multi] + 1), q)) if multi.any()
                else 0.0)
    else:
        # pipeline microbatches split an iteration's work evenly: a request sharing one with
        # others may finish its pass sooner than alone, but never in less than 1 / PP of its
        # lone time, nor a decode step in less than one at the shortest context
        ttft = float(np.percentile(_lone_prefill_s(cost, cfg, isl), q)) / cand.pp
        tpot = (float(_decode_s(cost, np.array([int(isl.min()) + 1]))[0]) if multi.any()
                else 0.0)
    if ttft * FLOOR_MARGIN > d.ttft_slo_s or tpot * FLOOR_MARGIN > d.tpot_slo_s:
        return Bound(cand, "the zero-load latency floor misses the SLO", "latency",
                     ttft, tpot)
    # max-load throughput bound (the max-load stream bounds the search's upper rate): the
    # decode bound and the token-budget bound, whichever is lower
    b = max(1, min(cfg.max_batch, blocks // int(-(-(int(isl_m.min()) + 1) // block))))
    decode_tokens = float((osl_m - 1).sum())
    rate_ub = math.inf
    if decode_tokens > 0:
        rate_ub = len(osl_m) / _decode_busy_floor_s(cost, isl_m, osl_m, b, blocks * block)
    m_tok = cfg.max_num_tokens
    t_m = _least_pass_s(cost, m_tok)
    rate_ub = min(rate_ub, len(osl_m) * m_tok / ((float(isl_m.sum()) + decode_tokens) * t_m))
    rate_ub *= BOUND_MARGIN
    reps = max(1, math.ceil(d.rate_rps / rate_ub - 1e-9))
    price = price_per_gpu_hour(cand.hardware, mix.prices)
    gpus = reps * cand.gpus
    lb = gpus * price
    cons = mix.constraints
    if cons.gpu_budget is not None and gpus > cons.gpu_budget:
        return Bound(cand, f"needs at least {gpus} GPUs, over the GPU budget", "constraint",
                     ttft, tpot, rate_ub, reps, lb)
    if cons.power_cap_w is not None and gpus * hw.tdp_w > cons.power_cap_w:
        return Bound(cand, "at least its GPUs' TDP exceeds the power cap", "constraint",
                     ttft, tpot, rate_ub, reps, lb)
    return Bound(cand, None, "", ttft, tpot, rate_ub, reps, lb)


def bounds_many(args: tuple[TrafficMix, list[Candidate]]) -> list[Bound]:
    """``bounds`` of several candidates: one executor task (stage 1 runs in chunks of
    candidates); ``args`` = (mix, candidates)."""
    mix, cands = args
    return [bounds(mix, c) for c in cands]


# ---- stage 2: simulation -------------------------------------------------------------------------

def _replica_search(cost, cfg, spec, slo, sat: float, rate: float,
                    max_replicas: int | None) -> tuple[float, int | None, int]:
    """The serving simulator's SLO rate search (``serving.max_rate_meeting_slo``: the same
    probes in the same order -- the max-load rate, 1 % of it, then ``SEARCH_STEPS``
    log-scale bisection steps), stopped as soon as the replica count for ``rate`` is fixed:
    the search's answer always lies in [lo, hi], and ceil(rate / x) is the same at both ends.
    The replicas are then exactly those of the full search; the rate returned is ``lo``, a rate
    simulated to meet the SLO (the full search would refine it within the bracket). Also
    stops once even ``hi`` needs more than ``max_replicas`` (None: no limit). Returns
    (SLO rate [requests/s], replicas or None if no rate meets the SLO, probes simulated)."""
    from ..serving import replicas_for_rate, simulate
    from ..serving.report import SEARCH_STEPS, judge_slo
    probes = [0]

    def ok(r: float) -> bool:
        probes[0] += 1
        return judge_slo(slo, simulate(cost, cfg, spec.with_rate(r)))[2]

    def settled(lo: float, hi: float) -> bool:
        top = replicas_for_rate(rate, hi)
        return (replicas_for_rate(rate, lo) == top
                or (max_replicas is not None and top > max_replicas))

    lo, hi = sat * 0.01, sat
    if ok(hi):
        return hi, replicas_for_rate(rate, hi), probes[0]
    if max_replicas is not None and replicas_for_rate(rate, hi) > max_replicas:
        return hi, replicas_for_rate(rate, hi), probes[0]
    if not ok(lo):
        return 0.0, None, probes[0]
    for _ in range(SEARCH_STEPS):
        if settled(lo, hi):
            break
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    if max_replicas is not None and replicas_for_rate(rate, hi) > max_replicas:
        return lo, replicas_for_rate(rate, hi), probes[0]
    return lo, replicas_for_rate(rate, lo), probes[0]


def evaluate_candidate(task: Task) -> dict:
    """Simulate one candidate: its SLO rate, replicas for the workload's rate and the operating
    point. A plain dict (JSON-ready); ``feasible`` False with ``error`` when it cannot serve."""
    from ..serving import simulate, summarize
    from ..serving.report import judge_slo
    c, d = task.candidate, task.demand
    out = {"key": list(c.key), "feasible": False, "error": None,
           "max_replicas": task.max_replicas}
    try:
        cost = _cost(d.model, c.hardware, c.tp, c.pp, c.precision, c.framework)
        cfg = _config(c.framework)
        spec = _spec(d, task.requests, task.seed)
        slo = _slo(d)
        sat_res = simulate(cost, cfg, spec)
        sat = len(sat_res.osl) / sat_res.makespan_s
        slo_rate, reps, probes = _replica_search(cost, cfg, spec, slo, sat, d.rate_rps,
                                                 task.max_replicas)
        out.update(saturation_rps=sat, slo_rate_rps=slo_rate, probes=probes)
        if reps is None:
            out["error"] = "no request rate meets the SLO"
            return out
        if task.max_replicas is not None and reps > task.max_replicas:
            out.update(error="costs more than the plans already found", stopped=True,
                       min_replicas=reps)
            return out
        op_rate = d.rate_rps / reps
        res = simulate(cost, cfg, spec.with_rate(op_rate))
        summ = summarize(res, cost, slo)
        ttft_q, tpot_q, ok = judge_slo(slo, res)
        tpot_room = 1.0 - tpot_q / d.tpot_slo_s if math.isfinite(tpot_q) else 1.0
        out.update(
            replicas=reps, rate_per_replica_rps=op_rate, ttft_s=ttft_q,
            tpot_s=tpot_q if math.isfinite(tpot_q) else None,
            e2e_p90_s=summ.e2e_s.p90, slo_met=ok,
            headroom=min(1.0 - ttft_q / d.ttft_slo_s, tpot_room),
            j_per_token=summ.energy_j_per_token,
            avg_power_w_per_gpu=summ.avg_power_w_per_gpu,
            output_tokens_per_s_per_replica=summ.output_tokens_per_s,
            preemptions=summ.preemptions)
        if not ok:
            out["error"] = "misses the SLO at its operating point"
            return out
        out["feasible"] = True
    except TimeBudgetExceeded:
        raise
    except ConfigError as e:
        out["error"] = str(e).splitlines()[0]
    return out


# ---- the plan --------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlanRow:
    """One simulated, feasible plan of one workload (SI units; money in USD)."""
    workload: str
    model: str
    hardware: str
    tp: int
    pp: int
    precision: str
    framework: str
    replicas: int
    gpus: int
    usd_per_hour: float
    usd_per_million_tokens: float
    j_per_token: float | None
    headroom: float
    ttft_s: float
    tpot_s: float | None
    e2e_p90_s: float
    slo_rate_per_replica_rps: float
    power_w_tdp: float
    rank: int = 0
    on_front: bool = False


@dataclass(frozen=True)
class FleetPlan:
    """The result: per workload the chosen plan and runners-up (``rows``, rank 0 = chosen),
    workloads with no feasible plan (``unserved``: name -> reason), fleet totals, the
    cost-latency front (``on_front`` rows), and the search's counts."""
    rows: tuple[PlanRow, ...]
    unserved: tuple[tuple[str, str], ...]
    totals: dict
    counts: dict
    pruned_by: dict
    cancelled: bool
    notes: tuple[str, ...]
    simulated: tuple[dict, ...] = ()

    @property
    def chosen(self) -> tuple[PlanRow, ...]:
        return tuple(r for r in self.rows if r.rank == 0)


def _row(mix: TrafficMix, res: dict, cand: Candidate) -> PlanRow:
    d = mix.workloads[cand.workload]
    hw = _hardware(cand.hardware)
    price = price_per_gpu_hour(cand.hardware, mix.prices)
    gpus = res["replicas"] * cand.gpus
    usd_h = gpus * price
    tokens_per_h = d.rate_rps * d.osl * 3600.0
    return PlanRow(d.name, d.model, hw.name, cand.tp, cand.pp, cand.precision,
                   _stack_hw(cand.hardware, cand.framework)[1].name, res["replicas"], gpus,
                   usd_h, usd_h / tokens_per_h * 1e6, _float(res.get("j_per_token")),
                   float(res["headroom"]), float(res["ttft_s"]), _float(res.get("tpot_s")),
                   float(res["e2e_p90_s"]), float(res["slo_rate_rps"]), gpus * hw.tdp_w)


def _float(v):
    return None if v is None or not math.isfinite(v) else float(v)


def _order(r: PlanRow) -> tuple:
    return (r.usd_per_hour, r.gpus, -r.headroom, r.hardware, r.tp, r.pp, r.precision,
            r.framework)


def _cheap(mix: TrafficMix, cand: Candidate) -> Bound | None:
    """The checks that need no cost model: support and the weights' memory fit (None =
    passes)."""
    why = support(mix, cand)
    if why:
        return Bound(cand, why, "support")
    from ..memory import weight_bytes
    from ..precision import precision_preset
    d = mix.workloads[cand.workload]
    if weight_bytes(_model(d.model), precision_preset(cand.precision)) / cand.gpus \
            >= _hardware(cand.hardware).memory_capacity_bytes:
        return Bound(cand, "the weights do not fit the replica's memory", "memory")
    return None


def plan(mix: TrafficMix, executor=None, progress=None, prune: bool = True,
         cancel=None) -> FleetPlan:
    """Search ``mix``: closed-form prune, then the SLO rate search on the survivors through
    ``executor`` (an object with ``map_unordered(fn, items)``, see :mod:`.executors`;
    None = in this process). ``progress(done, total, stage)`` is called as results arrive;
    ``cancel()`` returning True (or KeyboardInterrupt) stops the run, keeping what finished.
    ``prune=False`` simulates every supported candidate (the reference the pruning is checked
    against).

    Per workload, candidates wait in order of their cost floor (one replica: GPUs x price);
    each round bounds the next ones whose floor is within the (1 + runners-up)-th cheapest
    plan found (the closed forms of :func:`bounds`), then simulates the bounded survivors
    whose cost bound is within it, cheapest bound first. Rounds have fixed sizes, so the
    result does not depend on the executor."""
    from .executors import InProcess
    ex = executor or InProcess()
    cands = enumerate_candidates(mix)
    total = len(cands)
    pruned_by: dict[str, int] = {}

    def count(stage: str, n: int = 1) -> None:
        pruned_by[stage] = pruned_by.get(stage, 0) + n

    waiting: dict[int, list[Candidate]] = {i: [] for i in range(len(mix.workloads))}
    for i, c in enumerate(cands):
        if i % 256 == 0:
            check_time_budget(f"{i} of {total} configurations screened")
        b = _cheap(mix, c)
        if b is not None and (prune or b.stage == "support"):
            count(b.stage)
        else:
            waiting[c.workload].append(c)
    floor = {c.key: c.gpus * price_per_gpu_hour(c.hardware, mix.prices)
             for q in waiting.values() for c in q}
    for q in waiting.values():
        q.sort(key=lambda c: (floor[c.key], c.key))
    ready: dict[int, list[Bound]] = {i: [] for i in waiting}
    rows: dict[int, list[PlanRow]] = {i: [] for i in waiting}
    results: dict[tuple, dict] = {}
    keep_n = 1 + mix.runners_up
    n_bounded = 0
    cancelled = False
    steps = [0]

    def kth(wi: int) -> float:
        r = sorted(x.usd_per_hour for x in rows[wi])
        return r[keep_n - 1] * (1 + 1e-9) if len(r) >= keep_n else math.inf

    def tick(stage: str) -> None:
        steps[0] += 1
        if progress:
            left = sum(len(q) for q in waiting.values()) + sum(len(q) for q in ready.values())
            progress(steps[0], steps[0] + left, stage)

    def stop() -> bool:
        check_time_budget(f"{steps[0]} search steps")   # the caller's budget (CLI, page)
        return bool(cancel and cancel())

    try:
        while not cancelled:
            # bound the next candidates of each workload (lazily: most are never needed)
            to_bound = []
            for wi, q in waiting.items():
                if not prune:
                    to_bound += [Bound(c, None, "") for c in q]
                    q.clear()
                    continue
                take = []
                while q and len(take) < BOUND_PER_WORKLOAD:
                    if floor[q[0].key] > kth(wi):
                        count("cost", len(q))
                        q.clear()
                        break
                    take.append(q.pop(0))
                if take:
                    to_bound.append(take)
            if prune and to_bound:
                groups = [(mix, g) for g in to_bound]
                for res in ex.map_unordered(bounds_many, groups):
                    for b in res:
                        n_bounded += 1
                        if b.pruned is not None:
                            count(b.stage)
                        else:
                            ready[b.candidate.workload].append(b)
                    tick("bounds")
                    if stop():
                        cancelled = True
                        break
            elif to_bound:
                for b in to_bound:
                    ready[b.candidate.workload].append(b)
            if cancelled:
                break
            # simulate the bounded survivors, cheapest bound first
            batch = []
            for wi, q in ready.items():
                q.sort(key=lambda b: (b.cost_bound_usd_per_hour or 0.0, b.candidate.key))
                take = []
                while q and len(take) < SIMULATE_PER_WORKLOAD:
                    if prune and q[0].cost_bound_usd_per_hour > kth(wi):
                        count("cost", len(q))
                        q.clear()
                        break
                    take.append(q.pop(0))
                batch += take
                if not prune:
                    batch += q
                    q.clear()
            if not batch and not any(waiting.values()):
                break
            tasks = [Task(b.candidate, mix.workloads[b.candidate.workload], mix.requests,
                          mix.seed, _max_replicas(kth(b.candidate.workload),
                                                  floor[b.candidate.key]) if prune else None)
                     for b in batch]
            by_key = {t.candidate.key: t.candidate for t in tasks}
            for res in ex.map_unordered(evaluate_candidate, tasks):
                key = tuple(res["key"])
                results[key] = res
                _accept(mix, res, by_key[key], rows)
                tick("simulation")
                if stop():
                    cancelled = True
                    break
    except KeyboardInterrupt:
        cancelled = True
    except TimeBudgetExceeded as e:
        cancelled = str(e).splitlines()[0]
    if progress:
        progress(steps[0], steps[0], "done")
    return _assemble(mix, rows, results, total, n_bounded, pruned_by, cancelled)


def _max_replicas(cap_usd_per_hour: float, usd_per_replica_hour: float) -> int | None:
    """The most replicas whose cost stays within ``cap_usd_per_hour`` (None: no cap)."""
    if not math.isfinite(cap_usd_per_hour):
        return None
    n = int(cap_usd_per_hour // usd_per_replica_hour)
    while (n + 1) * usd_per_replica_hour <= cap_usd_per_hour:
        n += 1
    while n > 0 and n * usd_per_replica_hour > cap_usd_per_hour:
        n -= 1
    return n


def _accept(mix: TrafficMix, res: dict, cand: Candidate, rows: dict) -> None:
    """Add a simulated candidate to its workload's plans if it is feasible and within the
    constraints (else mark why not in ``res``)."""
    if not res["feasible"]:
        return
    r = _row(mix, res, cand)
    cons = mix.constraints
    if cons.power_cap_w is not None and r.power_w_tdp > cons.power_cap_w:
        res.update(feasible=False, error="its GPUs' TDP exceeds the power cap")
    elif cons.gpu_budget is not None and r.gpus > cons.gpu_budget:
        res.update(feasible=False, error="over the GPU budget")
    else:
        rows[cand.workload].append(r)


def _front(rows: list[PlanRow]) -> set[int]:
    """Indices of the rows on the cost-latency front (USD/h and p90 E2E both lowest)."""
    out = set()
    for i, r in enumerate(rows):
        if not any((q.usd_per_hour <= r.usd_per_hour and q.e2e_p90_s <= r.e2e_p90_s)
                   and (q.usd_per_hour < r.usd_per_hour or q.e2e_p90_s < r.e2e_p90_s)
                   for q in rows):
            out.add(i)
    return out


def _fit_budget(options: list[list[PlanRow]], budget: int | None) -> list[int] | None:
    """Index of the plan to use per workload: the cheapest ones, or with a GPU budget the
    cheapest combination within it (None if none fits)."""
    pick = [0] * len(options)
    if budget is None or sum(o[0].gpus for o in options) <= budget:
        return pick
    best: dict[int, tuple[float, list[int]]] = {0: (0.0, [])}     # GPUs -> (cost, picks)
    for opts in options:
        nxt: dict[int, tuple[float, list[int]]] = {}
        for g, (cost, picks) in best.items():
            for j, r in enumerate(opts):
                g2, c2 = g + r.gpus, cost + r.usd_per_hour
                if g2 <= budget and (g2 not in nxt or c2 < nxt[g2][0]):
                    nxt[g2] = (c2, picks + [j])
        best = nxt
    if not best:
        return None
    return min(best.values(), key=lambda v: (v[0], v[1]))[1]


def _assemble(mix, rows, results, total, bounded, pruned_by, cancelled) -> FleetPlan:
    out: list[PlanRow] = []
    unserved = []
    options = []
    served = []
    for wi, d in enumerate(mix.workloads):
        rs = sorted(rows[wi], key=_order)
        if not rs:
            errs = [r.get("error") for k, r in sorted(results.items()) if k[0] == wi]
            unserved.append((d.name, "no candidate meets the SLO" if not errs
                             else f"no feasible plan ({errs[0]})"))
            continue
        options.append(rs[:1 + mix.runners_up])
        served.append(wi)
    notes = []
    picks = _fit_budget(options, mix.constraints.gpu_budget) if options else []
    if picks is None:
        notes.append("no combination of the plans found fits the GPU budget; the cheapest "
                     "plans are shown")
        picks = [0] * len(options)
    elif any(picks):
        notes.append("the GPU budget moved some workloads off their cheapest plan")
    for opts, pick in zip(options, picks):
        order = [opts[pick]] + [r for j, r in enumerate(opts) if j != pick]
        front = _front(order)
        out += [replace(r, rank=i, on_front=i in front) for i, r in enumerate(order)]
    chosen = [r for r in out if r.rank == 0]
    tok_h = {d.name: d.rate_rps * d.osl * 3600.0 for d in mix.workloads}
    usd = sum(r.usd_per_hour for r in chosen)
    toks = sum(tok_h[r.workload] for r in chosen)
    jt = [(r.j_per_token, tok_h[r.workload]) for r in chosen if r.j_per_token is not None]
    totals = {"gpus": sum(r.gpus for r in chosen), "usd_per_hour": usd,
              "usd_per_million_tokens": usd / toks * 1e6 if toks else None,
              "j_per_token": (sum(j * t for j, t in jt) / sum(t for _, t in jt)) if jt else None,
              "power_w_tdp": sum(r.power_w_tdp for r in chosen),
              "workloads_served": len(chosen), "workloads": len(mix.workloads)}
    closed = sum(v for k, v in pruned_by.items() if k != "cost")
    counts = {"configurations": total, "bounded": bounded,
              "pruned_closed_form": closed, "skipped_by_cost_bound": pruned_by.get("cost", 0),
              "simulated": len(results),
              "stopped_by_cost": sum(1 for r in results.values() if r.get("stopped")),
              "feasible": sum(1 for r in results.values() if r["feasible"])}
    counts["pruning_ratio"] = (total / len(results)) if results else None
    if cancelled:
        why = cancelled if isinstance(cancelled, str) else "cancelled"
        notes.append(f"{why}: the plan uses only the candidates that finished, so a cheaper "
                     f"plan may have been missed")
        cancelled = True
    return FleetPlan(tuple(out), tuple(unserved), totals, counts, pruned_by, cancelled,
                     tuple(notes), tuple(results[k] for k in sorted(results)))


def plan_to_dict(p: FleetPlan, mix: TrafficMix | None = None) -> dict:
    """JSON-ready dict of a FleetPlan (with the traffic mix when given)."""
    from .traffic import mix_to_dict
    out = {"plans": [asdict(r) for r in p.rows],
           "unserved": [{"workload": n, "reason": why} for n, why in p.unserved],
           "totals": p.totals, "counts": p.counts, "pruned_by": p.pruned_by,
           "cancelled": p.cancelled, "notes": list(p.notes)}
    if mix is not None:
        out["traffic"] = mix_to_dict(mix)
    return out
