"""Pareto fronts, non-dominated ranks and hypervolume: the fast algorithms against the naive
definitions (hypothesis), permutation invariance, no dominated point on a front, and the
hypervolume on hand-computed cases."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llmpara_core.errors import ConfigError
from llmpara_core.dse.pareto import (hypervolume, non_dominated_ranks, non_dominated_ranks_naive,
                                 pareto_mask, pareto_mask_naive, to_minimisation)

# Small integer grids make ties and exact duplicates common (the hard cases).
tied = st.integers(1, 3).flatmap(lambda k: arrays(
    np.float64, st.tuples(st.integers(1, 40), st.just(k)), elements=st.integers(0, 4)))
wide = st.integers(2, 4).flatmap(lambda k: arrays(
    np.float64, st.tuples(st.integers(1, 60), st.just(k)),
    elements=st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.inf, -np.inf]))))
senses_for = lambda k: st.lists(st.sampled_from(["min", "max"]), min_size=k, max_size=k)  # noqa: E731


@settings(max_examples=300, deadline=None)
@given(tied)
def test_fast_front_equals_naive_with_ties(f):
    assert np.array_equal(pareto_mask(f), pareto_mask_naive(f))


@settings(max_examples=200, deadline=None)
@given(wide, st.data())
def test_fast_front_equals_naive_any_senses(f, data):
    senses = data.draw(senses_for(f.shape[1]))
    assert np.array_equal(pareto_mask(f, senses), pareto_mask_naive(f, senses))


@settings(max_examples=150, deadline=None)
@given(tied, st.randoms(use_true_random=False))
def test_front_is_invariant_under_row_permutation(f, rnd):
    perm = np.array(rnd.sample(range(len(f)), len(f)))
    assert np.array_equal(pareto_mask(f[perm]), pareto_mask(f)[perm])


def _dominated_by_any(f, targets):
    le = (f[:, None, :] <= targets[None, :, :]).all(axis=2)
    lt = (f[:, None, :] < targets[None, :, :]).any(axis=2)
    return (le & lt).any(axis=0)


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("shape", ["uniform", "anticorrelated", "clustered"])
def test_no_dominated_point_on_a_large_front_and_every_other_point_dominated(k, shape):
    rng = np.random.default_rng(k)
    n = 4_000 if shape == "anticorrelated" else 20_000
    f = rng.random((n, k))
    if shape == "anticorrelated":          # many points near the front
        f[:, -1] = 1 - f[:, :-1].mean(axis=1) + 0.01 * rng.random(n)
    elif shape == "clustered":             # heavy duplication
        f = np.round(f * 6) / 6
    mask = pareto_mask(f)
    front, rest = f[mask], f[~mask]
    assert mask.any()
    for chunk in np.array_split(front, 10):
        assert not _dominated_by_any(front, chunk).any()
    for chunk in np.array_split(rest, 20):
        assert _dominated_by_any(front, chunk).all()


def test_two_objectives_with_every_point_on_the_front():
    x = np.linspace(0, 1, 50_001)
    f = np.column_stack([x, 1 - x])
    assert pareto_mask(f).all()
    assert pareto_mask(np.vstack([f, f[:10]])).all()        # copies of front points stay


def test_duplicates_of_a_front_point_are_all_kept():
    f = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [0.0, 3.0, 1.0]])
    assert pareto_mask(f).tolist() == [True, True, False, True]


@settings(max_examples=100, deadline=None)
@given(tied)
def test_non_dominated_ranks_equal_naive(f):
    assert np.array_equal(non_dominated_ranks(f), non_dominated_ranks_naive(f))


def test_bad_input_is_a_config_error():
    with pytest.raises(ConfigError, match="NaN"):
        pareto_mask([[1.0, np.nan]])
    with pytest.raises(ConfigError, match="sense"):
        pareto_mask([[1.0, 2.0]], ["min", "up"])
    with pytest.raises(ConfigError, match="senses"):
        to_minimisation([[1.0, 2.0]], ["min"])


def test_hypervolume_two_objectives_by_hand():
    # points (0, 1) and (1, 0) in a [0, 1] box, reference 1.1: area = 1.1*1.1 - 1*1 + ...
    # by hand: union of [0, 1.1]x[1, 1.1] and [1, 1.1]x[0, 1.1] = 1.1*0.1 + 0.1*1.1 - 0.1*0.1
    hv = hypervolume([[0.0, 1.0], [1.0, 0.0]])
    assert hv.value == pytest.approx(0.11 + 0.11 - 0.01)
    assert hv.exact
    assert hv.reference_point == pytest.approx((1.1, 1.1))


def test_hypervolume_single_point_and_max_sense_reference_point():
    # maximised objective: ideal 10, nadir 0 -> reference = 0 - 0.1 * 10 = -1 in its own units
    hv = hypervolume([[10.0, 0.0], [0.0, 5.0]], ["max", "min"])
    assert hv.reference_point == pytest.approx((-1.0, 5.5))
    one = hypervolume([[0.0, 0.0, 0.0]], ideal=[0, 0, 0], nadir=[1, 1, 1])
    assert one.value == pytest.approx(1.1 ** 3)


def test_hypervolume_grows_when_a_non_dominated_point_is_added():
    rng = np.random.default_rng(3)
    f = rng.random((200, 3))
    lo, hi = f.min(axis=0), f.max(axis=0)
    base = hypervolume(f[:100], ideal=lo, nadir=hi).value
    more = hypervolume(f, ideal=lo, nadir=hi).value
    assert more >= base
    # the 3-D slicing value agrees with a seeded Monte-Carlo estimate
    z = (f - lo) / (hi - lo)
    u = np.random.default_rng(0).random((200_000, 3)) * 1.1
    covered = np.zeros(len(u), dtype=bool)
    for p in z[pareto_mask(z)]:
        covered |= (p <= u).all(axis=1)
    assert more == pytest.approx(covered.mean() * 1.1 ** 3, rel=0.02)


# ---- the grid pre-filter (exact: it only drops dominated points) ------------------------------

@settings(max_examples=200, deadline=None)
@given(st.one_of(tied, wide))
def test_grid_prefilter_keeps_the_whole_front_and_drops_only_dominated_points(f):
    from llmpara_core.dse.pareto import _exact_front
    from llmpara_core.dse.prefilter import grid_prefilter as _grid_prefilter
    if f.shape[1] < 2:
        return
    naive = pareto_mask_naive(f)
    keep = _grid_prefilter(f, min_points=1)
    kept = np.zeros(len(f), dtype=bool)
    kept[keep] = True
    assert kept[naive].all()                          # no front point is dropped
    exact = np.zeros(len(f), dtype=bool)
    exact[keep[_exact_front(f[keep])]] = True
    assert np.array_equal(exact, naive)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_large_skewed_cloud_front_equals_the_front_without_the_prefilter(k):
    from llmpara_core.dse.pareto import _exact_front
    rng = np.random.default_rng(10 + k)
    f = np.exp(rng.normal(0, 3, (30_000, k)))        # log-normal: heavily skewed columns
    f[:50, 0] = np.inf                                # infinities and ties in the cloud
    f[50:100] = f[100:150]
    want = np.zeros(len(f), dtype=bool)
    want[_exact_front(f)] = True
    assert np.array_equal(pareto_mask(f), want)


def _hv3_by_slices(z, ref):
    """3-D hypervolume the slow obvious way: slabs between third-objective values, each
    with the 2-D hypervolume of the points at or below it."""
    from llmpara_core.dse.pareto import _hv2
    levels = np.unique(z[:, 2])
    total = 0.0
    for i, level in enumerate(levels):
        top = levels[i + 1] if i + 1 < len(levels) else ref
        total += _hv2(z[z[:, 2] <= level][:, :2], ref, ref) * (top - level)
    return total


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 50), st.just(3)),
              elements=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(0, 1)))
def test_3d_hypervolume_sweep_equals_slices(z):
    from llmpara_core.dse.pareto import _hv3
    z = np.unique(z[pareto_mask(z)], axis=0)
    assert _hv3(z, 1.1) == pytest.approx(_hv3_by_slices(z, 1.1), rel=1e-12, abs=1e-15)
