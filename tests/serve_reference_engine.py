"""Reference for the serving engine's equivalence test (``test_serve_fast_path.py``): the
iteration-level simulator as it was before its hot loop was tuned for speed (main at 3bef8f5),
plus the stack's sliding-window switch (``EngineConfig.sliding_window``), kept so the tuned
``llmpara_core.serving.engine`` can be checked against it bit for bit. Straightforward numpy on whole request arrays every step: gathers, searchsorted
queues, a feature row built from per-sequence arrays. Not used by the product.

Original module docstring:
Iteration-level simulator of an in-flight-batching engine (vLLM / SGLang / TensorRT-LLM).

Each iteration the scheduler (1) gives every running request that has finished its prompt one
decode token, (2) continues prompts already being prefilled, then (3) admits queued requests in
arrival order (preempted ones first) while the running count stays below ``max_batch``, the
token budget ``max_num_tokens`` lasts and the paged KV cache has blocks. With chunked prefill a
prompt is split to fit the budget; without it a prompt runs whole (it must fit the budget).
KV policy ``on-demand`` (vLLM) allocates blocks as tokens are written and, when a decode token
finds no block, preempts the most recently admitted request by *recompute*: its blocks are
freed and its prompt plus generated tokens are prefilled again later. ``reserve``
(TensorRT-LLM's default GUARANTEED_NO_EVICT) reserves ISL + OSL tokens of blocks at admission,
so nothing is ever preempted. A prefix-cache hit rate h skips the compute of the first h x ISL
prompt tokens (their blocks are still counted: no sharing is modelled).

The time of an iteration is ``IterationCost.time_s`` of its mix. Stretches of pure decode
(no prompt to run, nobody admissible) are advanced in one vectorised block up to the next
event (a completion, an arrival that can be admitted, the KV cache filling up), which gives
exactly the per-iteration result at a fraction of the cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from llmpara_core.errors import ConfigError
from llmpara_core.limits import check_time_budget
from llmpara_core.operators import causal_pairs
from llmpara_core.serving.config import EngineConfig
from llmpara_core.serving.cost import IterationCost
from llmpara_core.serving.requests import RequestSpec, draw

@dataclass(frozen=True)
class SimResult:
    """Per-request times [s] and the iteration log of one simulation."""
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    log: dict       # arrays per scheduling step: t_s, dt_s, iterations, running, waiting,
                    # kv_used (share of blocks), preemptions (cumulative), tokens (new
                    # tokens of each of the step's iterations)
    in_system_integral_s: float     # integral of (running + queued) requests over time
    preemptions: int
    kv_capacity_tokens: int
    kv_blocks: int
    busy_s: float
    iterations: int
    feature_sum: np.ndarray         # summed iteration features (for energy)
    notes: tuple[str, ...] = field(default=())

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max() - self.arrival_s.min())


def kv_capacity_tokens(cost: IterationCost, cfg: EngineConfig) -> int:
    """KV-cache tokens of a replica: fraction of the memory left after weights, activations and
    the stack's runtime reserve (or, ``kv_fraction_of_total``, that fraction of the device's
    total less weights, activations and reserve), divided by the KV bytes per token, rounded
    down to whole blocks. 0 if nothing is left."""
    if cfg.kv_capacity_tokens is not None:
        return cfg.kv_capacity_tokens // cfg.block_size * cfg.block_size
    left = cost.free_bytes_per_device(cfg.max_num_tokens) - cfg.runtime_reserve_bytes
    if cfg.kv_fraction_of_total:
        free = left - (1.0 - cfg.kv_memory_fraction) * cost.hardware.memory_capacity_bytes
    else:
        free = left * cfg.kv_memory_fraction
    per = cost.kv_bytes_per_token()
    if free <= 0 or per <= 0:
        return 0
    return int(free // per) // cfg.block_size * cfg.block_size


class _State:
    """Mutable simulation state (arrays indexed by request)."""

    def __init__(self, cost: IterationCost, cfg: EngineConfig, spec: RequestSpec):
        self.cost, self.cfg = cost, cfg
        # the window the stack applies (``EngineConfig.sliding_window``); without it the
        # cost's windowed columns take the full pairs and keys (its coefficients are linear in
        # them, so that is the cost of the model as if it had no window)
        self.window = cost.window if cfg.sliding_window else None
        self.arr, self.isl, self.osl = draw(spec)
        n = len(self.arr)
        hit = np.floor(self.isl * cfg.prefix_hit_rate).astype(np.int64)
        self.hit = np.minimum(hit, self.isl - 1)
        self.tgt = self.isl.copy()
        self.done = np.zeros(n, dtype=np.int64)      # tokens in the KV cache
        self.gen = np.zeros(n, dtype=np.int64)
        self.held = np.zeros(n, dtype=np.int64)      # blocks held
        self.first = np.full(n, np.nan)
        self.fin = np.full(n, np.nan)
        self.run: list[int] = []                   # admission order
        self.prefilling: list[int] = []            # running requests with prompt left
        self.arr_list = self.arr.tolist()
        self.preempted: list[int] = []
        self.next_new = 0
        self.now = 0.0
        self.cap_tokens = kv_capacity_tokens(cost, cfg)
        self.blocks = self.cap_tokens // cfg.block_size
        self.free = self.blocks
        self.preemptions = 0
        self.busy = 0.0
        self.integral = 0.0
        self.iterations = 0
        self.fsum = np.zeros(len(cost.features))
        self.log = {k: [] for k in ("t_s", "dt_s", "iterations", "running", "waiting",
                                    "kv_used", "preemptions", "tokens")}

    # ---- queue -------------------------------------------------------------------------------
    def arrived(self) -> int:
        return int(np.searchsorted(self.arr, self.now, side="right"))

    def queued(self) -> int:
        return len(self.preempted) + self.arrived() - self.next_new

    def head(self) -> int | None:
        if self.preempted:
            return self.preempted[0]
        if self.next_new < len(self.arr_list) and self.arr_list[self.next_new] <= self.now:
            return self.next_new
        return None

    def pop_head(self) -> None:
        if self.preempted:
            self.preempted.pop(0)
        else:
            self.next_new += 1

    def blocks_for(self, tokens) -> np.ndarray:
        return -(-np.asarray(tokens) // self.cfg.block_size)


def simulate(cost: IterationCost, cfg: EngineConfig, spec: RequestSpec,
             progress=None) -> SimResult:
    """Run ``spec``'s requests through one engine replica; ``progress(fraction)`` is called
    now and then. Deterministic for a given seed."""
    st = _State(cost, cfg, spec)
    n = len(st.arr)
    worst = int((st.isl + st.osl).max())
    if st.blocks == 0:
        raise ConfigError(f"no memory left for the KV cache on {cost.hardware.name} after the "
                          f"weights and activations (plan {cost.plan.label})")
    if not cfg.chunked_prefill and int(st.isl.max()) > cfg.max_num_tokens:
        raise ConfigError(f"a {int(st.isl.max())}-token prompt exceeds max-num-tokens "
                          f"{cfg.max_num_tokens} without chunked prefill")
    if int(st.blocks_for(worst)) > st.blocks:
        raise ConfigError(f"one request of {worst} tokens needs more KV cache than the "
                          f"{st.cap_tokens} tokens available")
    finished = 0
    last_report = 0
    while finished < n:
        check_time_budget(f"{finished:,} of {n:,} requests simulated")
        finished += _step(st)
        if progress is not None and finished - last_report >= max(1, n // 50):
            last_report = finished
            progress(finished / n)
    log = {k: np.asarray(v) for k, v in st.log.items()}
    notes = []
    if cost.model.mla is not None:
        notes.append("MLA: prefill chunks use the absorbed attention form (overstates their "
                     "attention FLOPs)")
    return SimResult(st.arr, st.first, st.fin, st.isl, st.osl, log, st.integral,
                     st.preemptions, st.cap_tokens, st.blocks, st.busy, st.iterations,
                     st.fsum, tuple(notes))


def _step(st: _State) -> int:
    """One scheduling step (one iteration, or a block of pure-decode iterations); returns the
    number of requests that finished."""
    cfg = st.cfg
    if not cfg.mixed_batches:
        # prefill first (vLLM V0): a pass with prompts to run carries no decode tokens
        chunks = _schedule_prefill(st, cfg.max_num_tokens)
        if chunks:
            return _mixed_iteration(st, np.zeros(0, dtype=np.int64), chunks)
    if st.prefilling:
        pre = set(st.prefilling)
        dec = np.array([i for i in st.run if i not in pre], dtype=np.int64)
    else:
        dec = np.array(st.run, dtype=np.int64)
    if len(dec) and cfg.policy == "on-demand":
        dec = _grow_decode_blocks(st, dec)
    budget = cfg.max_num_tokens - len(dec)
    chunks = _schedule_prefill(st, budget) if cfg.mixed_batches else []
    if not len(dec) and not chunks:
        if st.run:                       # prompts hold every block: recompute the newest
            _preempt(st, st.run.pop())
            return 0
        if st.head() is not None:
            raise ConfigError("the scheduler is stuck: a request cannot get KV-cache blocks")
        st.now = float(st.arr[st.next_new])          # idle until the next arrival
        return 0
    if not chunks and len(dec):
        return _decode_block(st, dec)
    return _mixed_iteration(st, dec, chunks)


def _grow_decode_blocks(st: _State, dec: np.ndarray) -> np.ndarray:
    """Give every decoding request the block its next token needs; preempt the most recently
    admitted requests (recompute) while blocks are short. Returns the decoders kept."""
    need = np.maximum(st.blocks_for(st.done[dec] + 1) - st.held[dec], 0)
    total = int(need.sum())
    while total > st.free and st.run:
        v = st.run.pop()
        _preempt(st, v)
        pos = np.nonzero(dec == v)[0]
        if len(pos):
            total -= int(need[pos[0]])
            dec = np.delete(dec, pos[0])
            need = np.delete(need, pos[0])
    st.held[dec] += need
    st.free -= int(need.sum())
    return dec


def _preempt(st: _State, i: int) -> None:
    if i in st.prefilling:
        st.prefilling.remove(i)
    st.free += int(st.held[i])
    st.held[i] = 0
    st.tgt[i] = st.isl[i] + st.gen[i]
    st.done[i] = 0
    st.preempted.insert(0, i)
    st.preemptions += 1


def _schedule_prefill(st: _State, budget: int) -> list[tuple[int, int]]:
    """(request, tokens) prompt chunks of this iteration: running prompts first, then admitted
    requests in arrival order (preempted first)."""
    cfg = st.cfg
    chunks = []
    for i in list(st.prefilling):
        if budget <= 0:
            break
        rest = int(st.tgt[i] - st.done[i])
        if rest > 0:
            c = _fit_chunk(st, i, min(rest, budget), rest)
            if c:
                chunks.append((i, c))
                budget -= c
            elif not cfg.chunked_prefill:
                break
    while budget > 0 and len(st.run) < cfg.max_batch:
        i = st.head()
        if i is None:
            break
        if st.gen[i] == 0 and st.done[i] == 0:
            st.done[i] = st.hit[i]
        if cfg.policy == "reserve":
            need = int(st.blocks_for(st.isl[i] + st.osl[i]))
            if need > st.free:
                break
            st.held[i], st.free = need, st.free - need
        rest = int(st.tgt[i] - st.done[i])
        c = _fit_chunk(st, i, min(rest, budget), rest)
        if c == 0:
            if cfg.policy == "reserve":
                st.free += int(st.held[i])
                st.held[i] = 0
            break
        st.pop_head()
        st.run.append(i)
        st.prefilling.append(i)
        chunks.append((i, c))
        budget -= c
    return chunks


def _fit_chunk(st: _State, i: int, want: int, rest: int) -> int:
    """Tokens of request ``i``'s prompt this iteration can take (KV blocks allocated)."""
    if not st.cfg.chunked_prefill and want < rest:
        return 0
    if st.cfg.policy == "reserve":
        return want
    have = int(st.held[i]) + st.free
    fits = have * st.cfg.block_size - int(st.done[i])
    c = min(want, fits)
    if c <= 0 or (not st.cfg.chunked_prefill and c < rest):
        return 0
    new = int(st.blocks_for(st.done[i] + c)) - int(st.held[i])
    if new > 0:
        st.held[i] += new
        st.free -= new
    return c


def _features(st: _State, ctx: np.ndarray, new: np.ndarray, logits: int) -> np.ndarray:
    """Feature row of an iteration whose sequences add ``new`` tokens reaching ``ctx``."""
    cost = st.cost
    T = float(new.sum())
    pairs = new * (ctx - new) + new * (new + 1) / 2.0
    row = [1.0, T, float(logits), float(pairs.sum()), float(ctx.sum())]
    if cost.window:
        w = st.window
        row += [float(sum(causal_pairs(int(s), int(c), w) for s, c in zip(new, ctx))),
                float(np.minimum(ctx, w + new - 1).sum())] if w else row[3:5]
    if cost.moe:
        row.append(cost.moe.expected_active_experts(T))
    return np.array(row)


def _record(st: _State, t0: float, dt: float, k: int, running: int, waiting: int,
            tokens: float) -> None:
    log = st.log
    log["tokens"].append(tokens)
    log["t_s"].append(t0)
    log["dt_s"].append(dt)
    log["iterations"].append(k)
    log["running"].append(running)
    log["waiting"].append(waiting)
    log["kv_used"].append((st.blocks - st.free) / st.blocks)
    log["preemptions"].append(st.preemptions)


def _arrivals_integral(st: _State, t0: float, t1: float) -> float:
    """Queue time inside (t0, t1] of requests arriving then (they join the queue)."""
    lo, hi = np.searchsorted(st.arr, (t0, t1), side="right")
    return float((hi - lo) * t1 - st.arr[lo:hi].sum()) if hi > lo else 0.0


def _mixed_iteration(st: _State, dec: np.ndarray, chunks: list[tuple[int, int]]) -> int:
    idx = np.array([i for i, _ in chunks], dtype=np.int64)
    c_new = np.array([c for _, c in chunks], dtype=np.int64)
    completes = st.done[idx] + c_new >= st.tgt[idx]
    ctx = np.concatenate([st.done[dec] + 1, st.done[idx] + c_new])
    new = np.concatenate([np.ones(len(dec), dtype=np.int64), c_new])
    F = _features(st, ctx, new, len(dec) + int(completes.sum()))
    n_seq = len(dec) + len(idx)
    dt = st.cost.time_one_s(F, n_seq)
    t0 = st.now
    waiting = st.queued()
    st.now += dt
    st.integral += (len(st.run) + waiting) * dt + _arrivals_integral(st, t0, st.now)
    st.busy += dt
    st.iterations += 1
    st.fsum += F
    _record(st, t0, dt, 1, len(st.run), waiting, float(F[1]))
    st.done[dec] += 1
    st.gen[dec] += 1
    st.done[idx] += c_new
    fresh = idx[completes]
    if len(fresh):
        gone = set(fresh.tolist())
        st.prefilling = [i for i in st.prefilling if i not in gone]
    st.gen[fresh] += 1
    newly = fresh[np.isnan(st.first[fresh])]
    st.first[newly] = st.now
    return _finish(st, np.concatenate([dec, fresh]))


def _finish(st: _State, cand: np.ndarray) -> int:
    done = cand[st.gen[cand] >= st.osl[cand]]
    if not len(done):
        return 0
    st.fin[done] = st.now
    st.free += int(st.held[done].sum())
    st.held[done] = 0
    gone = set(done.tolist())
    st.run = [i for i in st.run if i not in gone]
    return len(done)


def _decode_block(st: _State, dec: np.ndarray) -> int:
    """k pure-decode iterations at once, k up to the next event."""
    cfg, cost = st.cfg, st.cost
    k = int((st.osl[dec] - st.gen[dec]).min())
    base = st.done[dec]
    # each decoder needs at most ceil(k / block) + 1 more blocks: check only when that may not fit
    if cfg.policy == "on-demand" and k > 1 \
            and st.free < len(dec) * (-(-k // cfg.block_size) + 1):
        k = _kv_limited_steps(st, base, k)
    j = np.arange(k)
    nd = len(dec)
    S = float(base.sum())
    F = np.zeros((k, len(cost.features)))
    F[:, 0] = 1.0
    F[:, 1] = nd
    F[:, 2] = nd
    F[:, 3] = S + nd * (1 + j)
    F[:, 4] = F[:, 3]
    col = 5
    if cost.window:
        w = st.window
        F[:, 5] = np.minimum(base[None, :] + 1 + j[:, None], w).sum(1) if w else F[:, 3]
        F[:, 6] = F[:, 5]
        col = 7
    if cost.moe:
        F[:, col] = cost.moe.expected_active_experts(nd)
    dts = cost.time_s(F, nd)
    cum = np.cumsum(dts)
    if len(st.run) < cfg.max_batch and not st.preempted and st.next_new < len(st.arr_list) \
            and st.head() is None:
        t_next = st.arr_list[st.next_new]
        stop = int(np.searchsorted(cum, t_next - st.now, side="left")) + 1
        k = max(1, min(k, stop))
    dt = float(cum[k - 1])
    t0 = st.now
    waiting = st.queued()
    st.now += dt
    st.integral += (len(st.run) + waiting) * dt + _arrivals_integral(st, t0, st.now)
    st.busy += dt
    st.iterations += k
    st.fsum += F[:k].sum(0)
    _record(st, t0, dt, k, len(st.run), waiting, float(nd))
    st.done[dec] += k
    st.gen[dec] += k
    if cfg.policy == "on-demand":
        new_held = st.blocks_for(st.done[dec])
        st.free -= int((new_held - st.held[dec]).sum())
        st.held[dec] = new_held
    return _finish(st, dec)


def _kv_limited_steps(st: _State, base: np.ndarray, k: int) -> int:
    """Largest k' <= k such that the decoders' blocks after k' steps fit (>= 1: the first step
    was allocated already)."""
    held_now = st.blocks_for(base + 1)
    extra = st.blocks_for(base[None, :] + 1 + np.arange(k)[:, None]) - held_now[None, :]
    over = np.nonzero(extra.sum(1) > st.free)[0]
    return int(over[0]) if len(over) else k
