"""Iteration-level simulator of an in-flight-batching engine (vLLM / SGLang / TensorRT-LLM).

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

The time of an iteration is ``IterationCost.time_s`` of its mix, plus, for an engine that
streams (``EngineConfig.stream_s_per_token``), its host time per token produced. Stretches of
pure decode (no prompt to run, nobody admissible) are advanced in one vectorised block up to
the next event (a completion, an arrival that can be admitted, the KV cache filling up), which
gives exactly the per-iteration result at a fraction of the cost.

The loop runs ~20,000 scheduling steps for 10,000 requests at a Poisson rate, so it is written
for per-step overhead (issue 31: <= 2 s on one core with drawn lengths): the decoders' arrays
are gathered once per step, the arrival queue is a pointer moved by bisection, one-chunk passes
and finishing requests use Python integers, the log is one tuple per step. Its numbers are the
straightforward loop's *bit for bit* -- ``tests/serve_reference_engine.py`` keeps that loop and
``tests/test_serve_fast_path.py`` compares every output over random scenarios: sums of whole
numbers (tokens, pairs, keys, blocks) are formed in integers, exact in float64 below 2^53 as a
float sum of them is in any order (larger ones take the float path), other float sums keep
their order, and every ``IterationCost.time_s`` call keeps its shape (BLAS may round a row
timed alone differently from the same row inside a matrix).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..limits import check_time_budget
from ..units import BYTES_PER_GIB
from ..operators import causal_pairs
from .config import EngineConfig
from .cost import IterationCost
from .requests import RequestSpec, draw

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


def kv_budget_bytes(cost: IterationCost, cfg: EngineConfig, free_bytes: float | None = None
                    ) -> float:
    """KV-cache bytes per device before rounding to blocks: the fraction of the memory left
    after weights, activations and the stack's runtime reserve (or, ``kv_fraction_of_total``,
    that fraction of the device's total less weights, activations and reserve); negative when
    nothing is left. ``free_bytes``: the memory left after weights and activations, if known."""
    if free_bytes is None:
        free_bytes = cost.free_bytes_per_device(cfg.max_num_tokens)
    left = free_bytes - cfg.runtime_reserve_bytes
    if cfg.kv_fraction_of_total:
        return left - (1.0 - cfg.kv_memory_fraction) * cost.hardware.memory_capacity_bytes
    return left * cfg.kv_memory_fraction


def kv_capacity_tokens(cost: IterationCost, cfg: EngineConfig) -> int:
    """KV-cache tokens of a replica: :func:`kv_budget_bytes` divided by the KV bytes per
    token, rounded down to whole blocks. 0 if nothing is left."""
    if cfg.kv_capacity_tokens is not None:
        return cfg.kv_capacity_tokens // cfg.block_size * cfg.block_size
    free = kv_budget_bytes(cost, cfg)
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
        self.n = n
        self.preempted: list[int] = []
        self.next_new = 0
        self.now = 0.0
        self.n_arrived = bisect_right(self.arr_list, 0.0)   # requests with arrival <= now
        self.cap_tokens = kv_capacity_tokens(cost, cfg)
        self.blocks = self.cap_tokens // cfg.block_size
        self.free = self.blocks
        self.preemptions = 0
        self.busy = 0.0
        self.integral = 0.0
        self.iterations = 0
        self.fsum = np.zeros(len(cost.features))
        self.log_rows: list[tuple] = []            # one tuple of _LOG_KEYS per step

    # ---- queue -------------------------------------------------------------------------------
    def arrived(self) -> int:
        return self.n_arrived

    def queued(self) -> int:
        return len(self.preempted) + self.n_arrived - self.next_new

    def head(self) -> int | None:
        if self.preempted:
            return self.preempted[0]
        if self.next_new < self.n and self.arr_list[self.next_new] <= self.now:
            return self.next_new
        return None

    def pop_head(self) -> None:
        if self.preempted:
            self.preempted.pop(0)
        else:
            self.next_new += 1

    def blocks_for(self, tokens) -> np.ndarray:
        return -(-np.asarray(tokens) // self.cfg.block_size)

    def advance(self, dt: float, in_system: int) -> None:
        """Move the clock on by ``dt`` with ``in_system`` requests running or queued; requests
        arriving meanwhile join the queue (their share of the in-system integral counted)."""
        t1 = self.now + dt
        self.now = t1
        lo = self.n_arrived
        hi = bisect_right(self.arr_list, t1, lo)
        self.n_arrived = hi
        # queue time inside (t0, t1] of the arrivals: the sum as numpy forms it (one or two
        # terms add the same in any order; three or more in numpy's order, bit for bit)
        if hi == lo:
            late = 0.0
        elif hi - lo == 1:
            late = t1 - self.arr_list[lo]
        elif hi - lo == 2:
            late = 2 * t1 - (self.arr_list[lo] + self.arr_list[lo + 1])
        else:
            late = float((hi - lo) * t1 - self.arr[lo:hi].sum())
        self.integral += in_system * dt + late

    def jump_to(self, t: float) -> None:
        """Idle until ``t`` (nobody running or queued)."""
        self.now = t
        self.n_arrived = bisect_right(self.arr_list, t, self.n_arrived)


_LOG_KEYS = ("t_s", "dt_s", "iterations", "running", "waiting", "kv_used", "preemptions",
             "tokens")
_NONE = np.zeros(0, dtype=np.int64)
_EXACT = 2 ** 53            # integer sums below this are exact in float64 in any order
_BUDGET_EVERY = 16          # steps between time-budget checks
_sum = np.add.reduce        # ndarray.sum without its Python wrapper (the same reduction)
_any = np.logical_or.reduce
_min = np.minimum.reduce


def simulate(cost: IterationCost, cfg: EngineConfig, spec: RequestSpec,
             progress=None) -> SimResult:
    """Run ``spec``'s requests through one engine replica; ``progress(fraction)`` is called
    now and then. Deterministic for a given seed."""
    st = _State(cost, cfg, spec)
    n = len(st.arr)
    worst = int((st.isl + st.osl).max())
    if st.blocks == 0:
        held = "the weights and activations"
        if cfg.runtime_reserve_bytes > 0:
            held = (f"the weights, activations and the runtime reserve of "
                    f"{cfg.runtime_reserve_bytes / BYTES_PER_GIB:g} GiB")
        if cfg.kv_fraction_of_total:
            held += f", within {cfg.kv_memory_fraction:g} of the device's total memory"
        raise ConfigError(f"no memory left for the KV cache on {cost.hardware.name} after "
                          f"{held} (plan {cost.plan.label})")
    if not cfg.chunked_prefill and int(st.isl.max()) > cfg.max_num_tokens:
        raise ConfigError(f"a {int(st.isl.max())}-token prompt exceeds max-num-tokens "
                          f"{cfg.max_num_tokens} without chunked prefill")
    if int(st.blocks_for(worst)) > st.blocks:
        raise ConfigError(f"one request of {worst} tokens needs more KV cache than the "
                          f"{st.cap_tokens} tokens available")
    finished = 0
    last_report = 0
    steps = 0
    every = max(1, n // 50)
    while finished < n:
        if steps % _BUDGET_EVERY == 0:
            check_time_budget(f"{finished:,} of {n:,} requests simulated")
        steps += 1
        got = _step(st)
        if got:
            finished += got
            if progress is not None and finished - last_report >= every:
                last_report = finished
                progress(finished / n)
    cols = list(zip(*st.log_rows)) if st.log_rows else [[] for _ in _LOG_KEYS]
    log = {k: np.asarray(v) for k, v in zip(_LOG_KEYS, cols)}
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
            return _mixed_iteration(st, _NONE, chunks, _NONE)
    if st.prefilling:
        pre = set(st.prefilling)
        dec = np.array([i for i in st.run if i not in pre], dtype=np.int64)
    else:
        dec = np.array(st.run, dtype=np.int64)
    held = None
    if len(dec) and cfg.policy == "on-demand":
        dec, base, held = _grow_decode_blocks(st, dec)
    else:
        base = st.done[dec]
    budget = cfg.max_num_tokens - len(dec)
    chunks = _schedule_prefill(st, budget) if cfg.mixed_batches else []
    if not len(dec) and not chunks:
        if st.run:                       # prompts hold every block: recompute the newest
            _preempt(st, st.run.pop())
            return 0
        if st.head() is not None:
            raise ConfigError("the scheduler is stuck: a request cannot get KV-cache blocks")
        st.jump_to(st.arr_list[st.next_new])          # idle until the next arrival
        return 0
    if not chunks and len(dec):
        return _decode_block(st, dec, base, held)
    return _mixed_iteration(st, dec, chunks, base)


def _grow_decode_blocks(st: _State, dec: np.ndarray):
    """Give every decoding request the block its next token needs; preempt the most recently
    admitted requests (recompute) while blocks are short. Returns the decoders kept, their
    cached tokens and the blocks they hold."""
    bs = st.cfg.block_size
    base = st.done[dec]
    held = st.held[dec]
    need = (base + bs) // bs - held                 # blocks for one more token, minus held
    np.maximum(need, 0, out=need)
    total = int(_sum(need))
    while total > st.free and st.run:
        v = st.run.pop()
        _preempt(st, v)
        pos = np.nonzero(dec == v)[0]
        if len(pos):
            p = pos[0]
            total -= int(need[p])
            dec, need = np.delete(dec, p), np.delete(need, p)
            base, held = np.delete(base, p), np.delete(held, p)
    if total:
        held = held + need
        st.held[dec] = held
        st.free -= total
    return dec, base, held


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
    if not st.prefilling and st.head() is None:
        return []
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
    bs = st.cfg.block_size
    held = int(st.held[i])
    done = int(st.done[i])
    c = min(want, (held + st.free) * bs - done)
    if c <= 0 or (not st.cfg.chunked_prefill and c < rest):
        return 0
    new = (done + c + bs - 1) // bs - held
    if new > 0:
        st.held[i] = held + new
        st.free -= new
    return c


def _features(st: _State, base: np.ndarray, end: np.ndarray, c_new: np.ndarray,
              logits: int) -> np.ndarray:
    """Feature row of an iteration in which decoders at ``base`` cached tokens add one token
    each and prompt chunks add ``c_new`` tokens reaching ``end``. Every feature but X is a sum
    of whole numbers, formed exactly in integers (what a float sum of them gives, in any
    order, while it stays below 2^53)."""
    cost = st.cost
    nd = len(base)
    dec_ctx = int(base.sum()) + nd                   # decoders: context base + 1, one pair each
    T = nd + int(c_new.sum())
    pairs = dec_ctx + int((c_new * (end - c_new) + c_new * (c_new + 1) // 2).sum())
    keys = dec_ctx + int(end.sum())
    if pairs >= _EXACT or keys >= _EXACT:
        ctx = np.concatenate([base + 1, end])
        new = np.concatenate([np.ones(nd, dtype=np.int64), c_new])
        p = new * (ctx - new) + new * (new + 1) / 2.0
        row = [1.0, float(T), float(logits), float(p.sum()), float(ctx.sum())]
    else:
        row = [1.0, float(T), float(logits), float(pairs), float(keys)]
    if cost.window:
        w = st.window
        ctx = np.concatenate([base + 1, end])
        new = np.concatenate([np.ones(nd, dtype=np.int64), c_new])
        row += [float(sum(causal_pairs(int(s), int(c), w) for s, c in zip(new, ctx))),
                float(np.minimum(ctx, w + new - 1).sum())] if w else row[3:5]
    if cost.moe:
        row.append(cost.moe.expected_active_experts(float(T)))
    return np.array(row)


def _record(st: _State, t0: float, dt: float, k: int, running: int, waiting: int,
            tokens: float) -> None:
    st.log_rows.append((t0, dt, k, running, waiting, (st.blocks - st.free) / st.blocks,
                        st.preemptions, tokens))


def _mixed_iteration(st: _State, dec: np.ndarray, chunks: list[tuple[int, int]],
                     base: np.ndarray) -> int:
    """One iteration of decode tokens for ``dec`` (cached tokens ``base``) and prompt chunks."""
    if len(chunks) == 1 and not st.cost.window:
        return _one_chunk_iteration(st, dec, chunks[0][0], chunks[0][1], base)
    return _mixed_general(st, dec, chunks, base)


def _mixed_general(st: _State, dec: np.ndarray, chunks: list[tuple[int, int]],
                   base: np.ndarray) -> int:
    idx = np.array([i for i, _ in chunks], dtype=np.int64)
    c_new = np.array([c for _, c in chunks], dtype=np.int64)
    nd = len(dec)
    end = st.done[idx] + c_new
    completes = end >= st.tgt[idx]
    n_complete = int(completes.sum())
    F = _features(st, base, end, c_new, nd + n_complete)
    dt = st.cost.time_one_s(F, nd + len(idx))
    if st.cfg.stream_s_per_token:       # one streamed response per token produced (F[2])
        dt += st.cfg.stream_s_per_token * float(F[2])
    t0 = st.now
    running, waiting = len(st.run), st.queued()
    st.advance(dt, running + waiting)
    st.busy += dt
    st.iterations += 1
    st.fsum += F
    _record(st, t0, dt, 1, running, waiting, float(F[1]))
    st.done[idx] = end
    gone = []
    if nd:
        st.done[dec] = base + 1
        g = st.gen[dec] + 1
        st.gen[dec] = g
        over = g >= st.osl[dec]
        if over.any():
            gone.append(dec[over])
    if n_complete:
        fresh = idx[completes] if n_complete < len(idx) else idx
        out = set(fresh.tolist())
        st.prefilling = [i for i in st.prefilling if i not in out]
        g = st.gen[fresh] + 1
        st.gen[fresh] = g
        newly = fresh[np.isnan(st.first[fresh])]
        st.first[newly] = st.now
        over = g >= st.osl[fresh]
        if over.any():
            gone.append(fresh[over])
    if not gone:
        return 0
    return _finish(st, gone[0] if len(gone) == 1 else np.concatenate(gone))


def _one_chunk_iteration(st: _State, dec: np.ndarray, i: int, c: int, base: np.ndarray) -> int:
    """``_mixed_iteration`` with one prompt chunk (``c`` tokens of request ``i``) and no
    sliding window, its features formed from Python integers: the same numbers."""
    cost = st.cost
    nd = len(dec)
    end = int(st.done[i]) + c
    completes = end >= int(st.tgt[i])
    dec_ctx = int(_sum(base)) + nd                  # decoders: context base + 1, one pair each
    pairs = dec_ctx + c * (end - c) + c * (c + 1) // 2
    keys = dec_ctx + end
    T = float(nd + c)
    if pairs >= _EXACT or keys >= _EXACT:
        return _mixed_general(st, dec, [(i, c)], base)
    row = [1.0, T, float(nd + completes), float(pairs), float(keys)]
    if cost.moe:
        row.append(cost.moe.expected_active_experts(T))
    F = np.array(row)
    dt = cost.time_one_s(F, nd + 1)
    if st.cfg.stream_s_per_token:       # one streamed response per token produced (row[2])
        dt += st.cfg.stream_s_per_token * row[2]
    t0 = st.now
    running, waiting = len(st.run), st.queued()
    st.advance(dt, running + waiting)
    st.busy += dt
    st.iterations += 1
    st.fsum += F
    _record(st, t0, dt, 1, running, waiting, T)
    st.done[i] = end
    gone = None
    if nd:
        st.done[dec] = base + 1
        g = st.gen[dec] + 1
        st.gen[dec] = g
        over = g >= st.osl[dec]
        if _any(over):
            gone = dec[over].tolist()
    if completes:
        st.prefilling.remove(i)
        g = int(st.gen[i]) + 1
        st.gen[i] = g
        if st.first[i] != st.first[i]:          # NaN: its first token
            st.first[i] = st.now
        if g >= int(st.osl[i]):
            gone = [i] if gone is None else gone + [i]
    if gone is None:
        return 0
    return _finish(st, gone)


def _finish(st: _State, done) -> int:
    """Requests ``done`` (a list or array) have produced their last token: free their
    blocks."""
    if not isinstance(done, list):
        done = done.tolist()
    fin, held, run, now = st.fin, st.held, st.run, st.now
    freed = 0
    for i in done:                  # a few at a time: element access beats fancy indexing
        fin[i] = now
        freed += int(held[i])
        held[i] = 0
        run.remove(i)
    st.free += freed
    return len(done)


def _decode_block(st: _State, dec: np.ndarray, base: np.ndarray, held) -> int:
    """k pure-decode iterations at once, k up to the next event. ``base``: the decoders' cached
    tokens; ``held``: their blocks (on-demand policy)."""
    cfg, cost = st.cfg, st.cost
    gen = st.gen[dec]
    osl = st.osl[dec]
    k = k_all = int(_min(osl - gen))          # k_all steps: the first completion
    bs = cfg.block_size
    # each decoder needs at most ceil(k / block) + 1 more blocks: check only when that may not fit
    if cfg.policy == "on-demand" and k > 1 and st.free < len(dec) * (-(-k // bs) + 1):
        k = _kv_limited_steps(st, base, k)
    nd = len(dec)
    S = float(_sum(base))
    F = np.empty((k, len(cost.features)))
    F[:, 0] = 1.0
    F[:, 1] = nd
    F[:, 2] = nd
    F[:, 3] = S + nd * np.arange(1, k + 1)
    F[:, 4] = F[:, 3]
    col = 5
    if cost.window:
        w = st.window
        F[:, 5:7] = (np.minimum(base[None, :] + np.arange(1, k + 1)[:, None], w).sum(1)[:, None]
                     if w else F[:, 3:4])
        col = 7
    if cost.moe:
        F[:, col] = cost.moe.expected_active_experts(nd)
    times = cost.time_s(F, nd)
    if cfg.stream_s_per_token:          # every decoder streams its token each step
        times = times + cfg.stream_s_per_token * nd
    cum = times.cumsum().tolist()
    nxt = st.next_new
    if len(st.run) < cfg.max_batch and not st.preempted and nxt < st.n \
            and st.arr_list[nxt] > st.now:
        stop = bisect_left(cum, st.arr_list[nxt] - st.now) + 1
        k = max(1, min(k, stop))
    dt = cum[k - 1]
    t0 = st.now
    running, waiting = len(st.run), st.queued()
    st.advance(dt, running + waiting)
    st.busy += dt
    st.iterations += k
    st.fsum += _sum(F[:k], 0)
    _record(st, t0, dt, k, running, waiting, float(nd))
    done = base + k
    gen += k
    st.done[dec] = done
    st.gen[dec] = gen
    if cfg.policy == "on-demand":
        new_held = (done + (bs - 1)) // bs
        st.free -= int(_sum(new_held - held))
        st.held[dec] = new_held
    if k < k_all:                 # stopped before the first completion
        return 0
    return _finish(st, dec[gen >= osl])


def _kv_limited_steps(st: _State, base: np.ndarray, k: int) -> int:
    """Largest k' <= k such that the decoders' blocks after k' steps fit (>= 1: the first step
    was allocated already)."""
    held_now = st.blocks_for(base + 1)
    extra = st.blocks_for(base[None, :] + 1 + np.arange(k)[:, None]) - held_now[None, :]
    over = np.nonzero(extra.sum(1) > st.free)[0]
    return int(over[0]) if len(over) else k
