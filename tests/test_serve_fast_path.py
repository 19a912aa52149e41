"""The tuned serving engine equals the straightforward one bit for bit.

``llmpara_core.serving.engine`` was made faster (issue 31's speed bar: 10,000 requests with
drawn lengths in <= 2 s on one core) by restructuring its hot loop: decoders' arrays gathered
once per step, the arrival queue kept as a pointer, feature sums formed in integers, a short
cut for single-chunk passes. ``serve_reference_engine`` is the engine as it was before, kept
unchanged. Every output of a simulation -- per-request times, the iteration log, the integrals,
the feature sums -- must be *identical* (not close) over random scenarios: sliding-window, MoE,
tensor- and pipeline-parallel costs, both KV policies, chunked or whole prompts, mixed or
prefill-first scheduling, prefix hits, preemption under a small KV cache, every arrival process
and length distribution.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import serve_reference_engine as reference
from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware
from llmpara_core.serving import EngineConfig, IterationCost, RequestSpec, simulate
from llmpara_core.serving.lengths import LengthTable

from helpers import GEMMA2_9B, H100, LLAMA3_8B, MIXTRAL

_COSTS = {}


def _cost(key: str) -> IterationCost:
    """Iteration costs covering every branch of the engine's features and of ``time_s``."""
    if key not in _COSTS:
        node = load_hardware("8x-nvidia-h100-sxm-nvlink")
        _COSTS[key] = {
            "llama": lambda: IterationCost(LLAMA3_8B, H100, precision_preset("FP16"),
                                           ParallelPlan()),
            "gemma-window": lambda: IterationCost(GEMMA2_9B, H100, precision_preset("FP16"),
                                                  ParallelPlan()),
            "mixtral-tp2-fp8": lambda: IterationCost(MIXTRAL, node, precision_preset("FP8"),
                                                     ParallelPlan(tp=2)),
            "llama-pp2-scaled": lambda: IterationCost(LLAMA3_8B, node, precision_preset("FP16"),
                                                      ParallelPlan(pp=2), time_scale=1.3),
        }[key]()
    return _COSTS[key]


_TABLE = LengthTable("skewed (test)", "test", np.array([5, 40, 300, 1200, 90]),
                     np.array([700, 3, 64, 20, 1]))

_FIELDS = ("arrival_s", "first_token_s", "finish_s", "isl", "osl", "feature_sum")
_SCALARS = ("in_system_integral_s", "preemptions", "kv_capacity_tokens", "kv_blocks", "busy_s",
            "iterations", "notes")


def _run(sim, cost, cfg, spec):
    try:
        return sim(cost, cfg, spec)
    except ConfigError as e:
        return f"ConfigError: {e}"


def assert_identical(new, ref) -> None:
    if isinstance(ref, str) or isinstance(new, str):
        assert new == ref
        return
    for f in _FIELDS:
        a, b = getattr(new, f), getattr(ref, f)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), f
    for f in _SCALARS:
        assert getattr(new, f) == getattr(ref, f), f
    assert list(new.log) == list(ref.log)
    for k in ref.log:
        assert new.log[k].dtype == ref.log[k].dtype, k
        assert np.array_equal(new.log[k], ref.log[k]), k


@hs.composite
def scenarios(draw):
    key = draw(hs.sampled_from(["llama", "gemma-window", "mixtral-tp2-fp8", "llama-pp2-scaled"]))
    chunked = draw(hs.booleans())
    cfg = EngineConfig(
        max_batch=draw(hs.integers(1, 48)),
        max_num_tokens=draw(hs.sampled_from([256, 1300, 8192])),
        chunked_prefill=chunked,
        block_size=draw(hs.sampled_from([1, 16, 64])),
        policy=draw(hs.sampled_from(["on-demand", "reserve"])),
        prefix_hit_rate=draw(hs.sampled_from([0.0, 0.0, 0.4])),
        # a small cache makes on-demand runs preempt (and some runs refused: same message)
        kv_capacity_tokens=draw(hs.sampled_from([None, 3000, 12000])),
        mixed_batches=draw(hs.booleans()))
    arrival = draw(hs.sampled_from(["max-load", "poisson", "gamma"]))
    lengths = draw(hs.sampled_from(["fixed", "uniform", "lognormal", "table"]))
    spec = RequestSpec(
        isl=draw(hs.integers(1, 1500)), osl=draw(hs.integers(1, 400)),
        arrival=arrival,
        rate=None if arrival == "max-load" else draw(hs.sampled_from([0.5, 4.0, 40.0, 400.0])),
        burstiness=draw(hs.sampled_from([0.3, 1.0, 3.0])),
        requests=draw(hs.integers(1, 60)),
        lengths="fixed" if lengths == "table" else lengths,
        spread=draw(hs.sampled_from([0.0, 0.5, 1.0])),
        seed=draw(hs.integers(0, 2**31)),
        table=_TABLE if lengths == "table" else None)
    return key, cfg, spec


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_tuned_engine_equals_the_reference_engine(case):
    key, cfg, spec = case
    cost = _cost(key)
    assert_identical(_run(simulate, cost, cfg, spec), _run(reference.simulate, cost, cfg, spec))


@pytest.mark.parametrize("key", ["llama", "gemma-window", "mixtral-tp2-fp8"])
def test_tuned_engine_equals_the_reference_at_load(key):
    """Longer runs with queues, preemption and long decode blocks (the benchmark's shape)."""
    cost = _cost(key)
    spec = RequestSpec(table=_TABLE, requests=400).with_rate(60.0)
    for cfg in (EngineConfig(), EngineConfig(kv_capacity_tokens=6000, max_batch=64)):
        new, ref = simulate(cost, cfg, spec), reference.simulate(cost, cfg, spec)
        assert_identical(new, ref)
    assert ref.iterations > 400
    assert ref.preemptions > 0          # the small cache preempts: that path is compared too


@pytest.mark.parametrize("key", ["llama", "gemma-window", "mixtral-tp2-fp8"])
@pytest.mark.parametrize("scale", [1, 10**6, 10**9])
def test_feature_rows_equal_the_reference(key, scale):
    """A pass's feature row formed in integers equals the reference's float sums, up to
    contexts (10^9 tokens) whose pair counts pass 2^53, where both take the float sums."""
    from types import SimpleNamespace

    from llmpara_core.serving import engine
    cost = _cost(key)
    st = SimpleNamespace(cost=cost, window=cost.window)     # a stack that applies the window
    rng = np.random.default_rng(scale)
    past = 0
    for _ in range(20):
        nd, nc = int(rng.integers(0, 40)), int(rng.integers(1, 4))
        base = rng.integers(0, scale, nd) + rng.integers(0, 3000, nd)
        c_new = rng.integers(1, 9000 if scale < 10**9 else 3 * 10**7, nc)
        end = c_new + rng.integers(0, scale, nc)
        logits = nd + int(rng.integers(0, nc + 1))
        ctx = np.concatenate([base + 1, end])
        new = np.concatenate([np.ones(nd, dtype=np.int64), c_new])
        a = engine._features(st, base, end, c_new, logits)
        b = reference._features(st, ctx, new, logits)
        assert np.array_equal(a, b)
        past += int((c_new * (end - c_new) + c_new * (c_new + 1) // 2).sum()) >= 2**53
    assert past if scale == 10**9 else not past


@pytest.mark.parametrize("key", ["llama", "mixtral-tp2-fp8", "llama-pp2-scaled"])
def test_time_s_short_cuts_are_exact(key):
    """``time_s``'s short cuts give the general formula's numbers exactly: a scalar sequence
    count as an array of it, a list of rows as an array, and a stage without collectives as
    compute + 0 - min(overlap x 0, compute). (Not claimed: a row timed alone equals the same
    row timed inside a matrix -- BLAS may sum a vector product in another order; the engine
    keeps every call's shape as the reference made it.)"""
    cost = _cost(key)
    rng = np.random.default_rng(7)
    rows = [cost.feature_row(int(b), int(s), int(s + c))
            for b, s, c in zip(rng.integers(1, 200, 40), rng.integers(1, 3000, 40),
                               rng.integers(0, 30000, 40))]
    F = np.array(rows)
    for n in (1, 3, 57, 256):
        t = cost.time_s(F, n)
        assert np.array_equal(t, cost.time_s(F, np.full(len(F), n)))
        assert np.array_equal(t, cost.time_s(rows, n))
    comp, work, comm = cost._stage_parts(0, F, 57)
    comm = np.broadcast_to(np.asarray(comm, dtype=float), comp.shape)
    general = cost.power_walled(comp * cost.time_scale, work)
    general = general + comm - np.minimum(cost.plan.overlap * comm, general)
    if len(cost.stages) == 1:
        assert np.array_equal(cost.time_s(F, 57), general)
