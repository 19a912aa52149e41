"""Design-space exploration core: every grid value is evaluated, a design's objectives equal
``analyze`` + ``scenario_metrics`` of the same hardware, the coupled models reproduce their
calibration devices, infeasible designs are kept and marked, fronts hold no dominated design,
sampling is seeded and stratified, sensitivity and NSGA-II behave, and bad spaces are clear
errors."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmpara_core import dse
from llmpara_core.dse import evaluation as dse_evaluation, profile as dse_profile, run as dse_run
from llmpara_core.dse import nsga as dse_nsga, physics as dse_physics, space as dse_space
from llmpara_core.analysis import _sum_max_affine, analyze
from llmpara_core.metrics.cost import MetricsSettings, scenario_metrics
from llmpara_core.metrics.energy_params import energy_params, energy_table
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import HardwareClass
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.workload import Workload

WIDE = dse_space.SearchSpace("wide", (
    dse_space.axis_range("peak", 0.05, 3000, 4), dse_space.axis_range("bw", 1, 20000, 4),
    dse_space.axis_range("cap", 1, 3000, 4), dse_space.axis_range("sram", 0.1, 500, 3)))
SWEPT = WIDE.with_axis(dse_space.axis_range("tdp", 1, 3000, 3)).with_axis(
    dse_space.axis_range("price", 10, 1e5, 3))


def _ctx(model="llama-3-8b", hw="nvidia-h100-sxm", prec="FP16", settings=None, **wl):
    return dse.DesignContext(load_model(model), precision_preset(prec), Workload(**wl),
                             load_hardware(hw), settings or MetricsSettings())


@pytest.fixture(scope="module")
def llama():
    return _ctx()


# ---- every grid value ----------------------------------------------------------------------

@pytest.mark.parametrize("space", dse_space.presets(), ids=lambda s: s.slug)
def test_every_value_of_every_axis_is_evaluated_on_the_grid(space, llama):
    design = dse_space.sample(space, "grid")
    n = math.prod(len(a.values) for a in space.axes)
    assert all(len(v) == n for v in design.values())
    combos = set(zip(*(design[a.key].tolist() for a in space.axes)))
    assert len(combos) == n                       # the whole Cartesian product, once each
    for a in space.axes:
        assert set(design[a.key].tolist()) == set(a.values)
    ev = llama.evaluate(design)
    assert ev.n == n                              # infeasible designs are kept, not dropped
    for a in space.axes:
        col = dse.AXIS_COLUMN[dse_space.base_key(a.key)]
        assert set(ev[col].tolist()) == set(a.values)


def test_reference_preset_sizes_are_the_full_grids():
    sizes = {s.slug: s.grid_size for s in dse_space.presets()}
    assert sizes == {"quick-scan": 3 ** 5, "edge-mobile": 6 * 5 * 4 * 5 * 5,
                     "datacenter-gpu": 6 * 5 * 5 * 4 * 4, "pim-near-memory": 5 * 6 * 4 * 4 * 4,
                     "custom": 5 * 5 * 4 * 4 * 4}


# ---- objectives equal the scenario analysis --------------------------------------------------

CASES = [
    dict(),
    dict(hw="mediatek-dimensity-9300", prec="W4A16", batch=4, prompt_len=512, gen_len=64),
    dict(model="mistral-7b-v0.1", hw="custom-hardware", prompt_len=3000, gen_len=2000,
         flash_attention=False),
    dict(model="gemma-2-9b", hw="nvidia-rtx-4090", prec="FP8", prompt_len=0, gen_len=300),
    dict(model="deepseek-v2-lite", hw="dram-pim-hbm-pim", batch=2, prompt_len=700, gen_len=1),
    dict(model="mixtral-8x7b", hw="nvidia-h100-sxm", batch=16, prompt_len=128, gen_len=32,
         settings=MetricsSettings(region="France", pue=1.1, utilisation=0.3,
                                  include_idle=False)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.get("model", "llama") + "-" + c.get("hw", ""))
@pytest.mark.parametrize("space", [WIDE, SWEPT], ids=["derived", "swept"])
def test_design_objectives_equal_analyze_and_scenario_metrics(case, space):
    ctx = _ctx(**case)
    ev = ctx.evaluate(dse_space.sample(space, "random", 25, seed=7))
    for i in range(ev.n):
        p = ev.point(i)
        hw = ctx.hardware(p)
        rep = analyze(ctx.model, hw, ctx.precision, ctx.workload)
        m = scenario_metrics(rep, ctx.settings)
        assert p["tokens_per_s"] == pytest.approx(rep.estimated.throughput_tokens_per_s, rel=1e-9)
        assert p["ttft_s"] == pytest.approx(rep.estimated.ttft_s, rel=1e-9)
        assert p["tpot_s"] == pytest.approx(rep.estimated.tpot_s, rel=1e-9)
        assert p["e2e_s"] == pytest.approx(rep.estimated.e2e_latency_s, rel=1e-9)
        assert p["j_per_token"] == pytest.approx(m.energy.j_per_output_token, rel=1e-9)
        assert p["usd_per_mtok"] == pytest.approx(m.tco.usd_per_million_tokens, rel=1e-9)
        assert p["gco2e_per_mtok"] == pytest.approx(m.carbon.total_g_per_million_tokens, rel=1e-9)
        assert p["avg_power_w"] == pytest.approx(m.energy.avg_power_w, rel=1e-9)
        assert (p["memory_headroom"] >= 0) == rep.memory.fits
        assert ("memory" in p["infeasible_reasons"]) == (not rep.memory.fits)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 1e3), min_size=4, max_size=4), st.integers(1, 5000))
def test_vectorised_affine_max_sum_equals_the_scalar_one(v, n):
    u0, u1, v0, v1 = v
    got = dse_profile._sum_max_affine(np.array([u0]), np.array([u1]), np.array([v0]), np.array([v1]), n)
    assert got[0] == pytest.approx(_sum_max_affine(u0, u1, v0, v1, n), rel=1e-12, abs=1e-300)


# ---- coupled models ----------------------------------------------------------------------------

def test_class_calibration_reproduces_its_representative_device():
    table = dse_physics._table()["class"]
    for cls in HardwareClass:
        rep = table[cls.value].get("representative")
        cp = dse_physics.class_physics(cls)
        if rep is None:
            assert cp.markup == table[cls.value]["markup"] and cp.package_kgco2e == 0
            continue
        mem = next(m for m in dse_physics._table()["memory"] if m == rep["memory"])
        m = dse_physics._memory(mem, cls)
        area = np.array([rep["die_mm2"]])
        bom = dse_physics.die_cost_usd(area)[0] + rep["memory_GB"] * m.usd_per_gb
        assert cp.markup * bom == pytest.approx(rep["price_USD"])
        made = dse_physics.die_kgco2e(area)[0] + rep["memory_GB"] * m.kgco2e_per_gb
        assert made + cp.package_kgco2e == pytest.approx(rep["embodied_kgCO2e"])


def test_derived_tdp_makes_the_energy_calibration_return_the_class_energy_per_flop(llama):
    ev = llama.evaluate(dse_space.sample(WIDE, "random", 20, seed=3))
    cls_flop = energy_table()["class"]["datacenter-gpu"]["pJ_per_flop"]["fp16"] * 1e-12
    for i in range(ev.n):
        hw = llama.hardware(ev.point(i))
        p = energy_params(hw, llama.dtype)
        assert p.flop_j == pytest.approx(cls_flop, rel=1e-9)


def test_costs_grow_with_area_and_bandwidth_needs_dearer_memory():
    a = np.array([50.0, 200.0, 400.0, 800.0])
    assert np.all(np.diff(dse_physics.die_cost_usd(a)) > 0)
    assert np.all(np.diff(dse_physics.die_kgco2e(a)) > 0)
    cp = dse_physics.class_physics(HardwareClass.ASIC)
    idx, ok = dse_physics.choose_memory(np.array([50.0, 1000.0, 3000.0, 1e6]),
                                        np.array([16.0, 16.0, 64.0, 16.0]), cp)
    names = [cp.memories[i].name for i in idx]
    assert names[:3] == ["LPDDR5X", "GDDR6", "HBM3"] and ok.tolist() == [True] * 3 + [False]
    prices = [cp.memories[i].usd_per_gb for i in idx[:3]]
    assert prices == sorted(prices)
    viol = dse_physics.memory_violation(np.array([50.0, 1e6]), np.array([16.0, 16.0]), cp)
    assert viol[0] <= 0 < viol[1]


def test_infeasible_designs_are_kept_marked_and_never_on_the_front(llama):
    res = dse.explore(llama, SWEPT, "random", 4000, seed=1,
                      objectives=("tokens_per_s", "usd_per_mtok"))
    ev = res.evaluation
    assert ev.n == 4000
    counts = res.infeasible_counts()
    assert all(counts[r] > 0 for r in ("memory", "area", "bandwidth", "power", "price"))
    assert ev.feasible[res.front].all()
    i = int(np.flatnonzero(ev.reasons & dse_physics.REASON_POWER)[0])
    assert ev["tdp_w"][i] < ev["tdp_required_w"][i]
    assert "power" in ev.point(i)["infeasible_reasons"]


@pytest.mark.parametrize("objs", [("tokens_per_s", "usd_per_mtok"),
                                  ("tokens_per_s", "j_per_token", "gco2e_per_mtok"),
                                  ("ttft_s", "usd_per_mtok", "memory_headroom", "price_usd")])
def test_front_holds_no_dominated_feasible_design(llama, objs):
    res = dse.explore(llama, WIDE, "lhs", 6000, seed=2, objectives=objs)
    ev = res.evaluation
    flip = np.array([-1.0 if dse.OBJECTIVES[o].sense == "max" else 1.0 for o in objs])
    feas = dse.objective_matrix(ev, objs, np.flatnonzero(ev.feasible)) * flip
    front = dse.objective_matrix(ev, objs, res.front) * flip
    assert len(front)
    le = (feas[:, None, :] <= front[None, :, :]).all(axis=2)
    lt = (feas[:, None, :] < front[None, :, :]).any(axis=2)
    assert not (le & lt).any()
    first = ev[objs[0]][res.front]           # sorted best-first by the first objective
    assert np.all(np.diff(first * flip[0]) >= 0)


def test_faster_memory_never_slows_decode(llama):
    bw = np.geomspace(10, 20000, 200)
    ev = llama.evaluate({"peak": 500.0, "bw": bw, "cap": 200.0})
    assert np.all(np.diff(ev["tokens_per_s"]) >= 0)
    assert np.all(np.diff(ev["ttft_s"]) <= 0)


# ---- sampling and spaces --------------------------------------------------------------------

def test_sampling_is_seeded_bounded_and_latin_hypercube_is_stratified():
    space = dse_space.find_space("datacenter-gpu")
    a = dse_space.sample(space, "lhs", 500, seed=5)
    b = dse_space.sample(space, "lhs", 500, seed=5)
    c = dse_space.sample(space, "lhs", 500, seed=6)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["bw"], c["bw"])
    for ax in space.axes:
        x = a[ax.key]
        assert x.min() >= ax.lo and x.max() <= ax.hi
        u = dse_space.axis_to_unit(ax, x)
        assert sorted(np.floor(u * 500).astype(int).tolist()) == list(range(500))
    r = dse_space.sample(space, "random", 20_000, seed=1)
    u = dse_space.axis_to_unit(space.axis("peak"), r["peak"])
    assert abs(u.mean() - 0.5) < 0.02           # log-uniform: uniform in log space


def test_space_files_are_strict(tmp_path):
    good = tmp_path / "s.toml"
    good.write_text('name = "mine"\nbase_hardware = "nvidia-l4"\n[axes]\npeak = [1, 2]\n'
                    'bw = { lo = 10, hi = 1000, count = 3, scale = "log" }\n[fixed]\nsram = 40\n')
    s = dse_space.load_space_file(str(good))
    assert s.grid_size == 6 and s.axis("bw").values == pytest.approx((10, 100, 1000))
    assert dict(s.fixed) == {"sram": 40.0}
    bad = {"unknown key": 'axes = { peak = [1] }\nbase_hardwre = "x"\n',
           "axis": '[axes]\npeek = [1, 2]\n',
           "out of range": '[axes]\nbw = [0, 5]\n',
           "hi": '[axes]\ncap = { lo = 10, hi = 1 }\n',
           "both": '[axes]\npeak = { values = [1], lo = 1, hi = 2 }\n',
           "not valid TOML": '[axes\n'}
    for msg, text in bad.items():
        f = tmp_path / "bad.toml"
        f.write_text(text)
        with pytest.raises(ConfigError, match=msg):
            dse_space.load_space_file(str(f))
    with pytest.raises(ConfigError, match="did you mean"):
        dse_space.find_space("quick scna")


def test_a_peak_of_another_data_type_is_refused(llama):
    space = dse_space.SearchSpace("x", (dse_space.Axis("peak_fp8", (1.0, 2.0)),))
    with pytest.raises(ConfigError, match="computes in fp16"):
        dse.explore(llama, space)
    ok = replace(space, axes=(dse_space.Axis("peak_fp16", (1.0, 2.0)),))
    assert dse.explore(llama, ok, objectives=("tokens_per_s", "ttft_s")).points_evaluated == 2


def test_bad_objectives_and_sample_counts_are_config_errors(llama):
    with pytest.raises(ConfigError, match="unknown objective"):
        dse.explore(llama, WIDE, objectives=("speed", "usd_per_mtok"))
    with pytest.raises(ConfigError, match="2 to 4"):
        dse.explore(llama, WIDE, objectives=("tokens_per_s",))
    with pytest.raises(ConfigError, match="samples"):
        dse.explore(llama, WIDE, "random", 0)
    with pytest.raises(ConfigError, match="gen_len"):
        _ctx(gen_len=0)


# ---- sensitivity and NSGA-II ------------------------------------------------------------------

def test_sensitivity_multiplies_one_axis_at_a_time(llama):
    s = dse.sensitivity(llama, {"peak": 100.0, "bw": 1000.0, "cap": 40.0, "sram": 0.0})
    ev = s.evaluation
    assert s.pairs[0] == ("base", 1.0) and ev["bw_gbps"][0] == 1000.0
    rel = s.relative("tokens_per_s")
    assert set(rel) == {"peak", "bw", "cap"}          # sram 0 has nothing to multiply
    bw = dict(rel["bw"])
    assert bw[1.0] == pytest.approx(1.0) and bw[2.0] > 1.5   # memory-bound decode
    for i, (key, m) in enumerate(s.pairs[1:], start=1):
        for k, col in (("peak", "peak_tflops"), ("bw", "bw_gbps"), ("cap", "cap_gb")):
            expect = s.base[k] * (m if key == k else 1.0)
            assert ev[col][i] == pytest.approx(expect)
    assert dict(rel["cap"])[0.25] is None              # 10 GB cannot hold the scenario


def test_nsga_finds_a_feasible_front_with_a_fixed_reference_point(llama):
    space = dse_space.find_space("datacenter-gpu").without_axis("tdp").without_axis("price")
    a = dse_nsga.run_nsga(llama, space, population=24, generations=6, seed=3,
                          reference_samples=512)
    b = dse_nsga.run_nsga(llama, space, population=24, generations=6, seed=3,
                          reference_samples=512)
    assert len(a.history) == 6 and a.history[-1].evaluations == 24 * 6
    assert np.array_equal(a.front, b.front) and a.hv.value == b.hv.value
    assert len(a.front) and a.evaluation.feasible[a.front].all()
    ideal, nadir = np.array(a.ideal), np.array(a.nadir)
    expected_ref = nadir + 0.1 * (nadir - ideal)       # in each objective's own direction
    assert np.allclose(a.hv.reference_point, expected_ref)
    assert a.history[-1].hypervolume > 0


# ---- the fast paths of the evaluation equal their plain forms ---------------------------------

def test_count_at_or_below_equals_searchsorted():
    rng = np.random.default_rng(4)
    vals = np.sort(np.exp(rng.normal(3, 3, 31)))
    for spread in (0.5, 4.0, 40.0):
        x = np.exp(rng.normal(3, spread, 20_000))
        x[:31], x[31:62], x[62:93] = vals, np.nextafter(vals, 0), np.nextafter(vals, np.inf)
        want = np.searchsorted(vals, x, side="right")
        assert np.array_equal(dse_profile.count_at_or_below(vals, x), want)
    for odd in ([0.0, 1.0], [-1.0, 5.0], [1.0, np.inf], [np.nan, 1.0]):
        x = np.array(odd)
        assert np.array_equal(dse_profile.count_at_or_below(vals, x),
                              np.searchsorted(vals, x, side="right"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-3, 1e6), min_size=4, max_size=4), st.integers(1, 5000),
       st.lists(st.floats(1e-2, 1e4), min_size=2, max_size=40))
def test_affine_max_sum_over_designs_equals_the_plain_vectorised_form(v, n, peaks):
    fa, fz, ma, mz = v
    pe = np.array(peaks)
    be = pe[::-1].copy()
    got = dse_profile._sum_max_affine_designs(fa, fz, ma, mz, n, 1 / pe, 1 / be, pe / be)
    want = dse_profile._sum_max_affine(fa / pe, fz / pe, ma / be, mz / be, n)
    assert np.allclose(got, want, rtol=1e-9, atol=0)


# ---- a run keeps only the front, the counts and a sample: the same as all designs at once ------

@pytest.mark.parametrize("objs", [("tokens_per_s", "usd_per_mtok"),
                                  ("tokens_per_s", "usd_per_mtok", "j_per_token"),
                                  ("ttft_s", "gco2e_per_mtok", "memory_headroom", "price_usd")])
@pytest.mark.parametrize("chunk", [997, 4096, 1 << 15])
def test_front_of_chunk_candidates_equals_the_front_of_all_designs(llama, objs, chunk,
                                                                   monkeypatch):
    design = dse_space.sample(SWEPT, "lhs", 30_000, seed=9)
    whole = llama.evaluate(design)                       # every design in memory
    want = dse.pareto_front(whole, objs)
    monkeypatch.setattr(dse_evaluation, "CHUNK_POINTS", chunk)
    res = dse.explore(llama, SWEPT, "lhs", 30_000, seed=9, objectives=objs, keep_sample=500)
    assert res.points_evaluated == 30_000 and res.evaluation.n < 30_000
    assert np.array_equal(res.design_index[res.front], want)          # same designs, order
    for k, col in whole.columns.items():                               # and the same numbers
        assert np.array_equal(res.evaluation[k][res.front], col[want])
    feas = whole.feasible
    assert res.feasible_count == int(feas.sum())
    assert res.infeasible_counts() == {name: int(np.count_nonzero(whole.reasons & bit))
                                       for bit, name in dse_physics.REASONS.items()}
    for o in objs:                                        # best = first argbest of all designs
        col = np.where(feas, whole[o], -np.inf if dse.OBJECTIVES[o].sense == "max" else np.inf)
        best = col.argmax() if dse.OBJECTIVES[o].sense == "max" else col.argmin()
        assert res.design_index[res.best[o]] == best
    assert np.array_equal(res.bounds[0], dse_evaluation._bounds(whole, objs)[0])
    assert np.array_equal(res.bounds[1], dse_evaluation._bounds(whole, objs)[1])
    cloud = dse_run.sample_rows(30_000, 500)
    assert np.array_equal(res.design_index[res.sample], cloud)
    assert np.array_equal(res.evaluation["bw_gbps"][res.sample], whole["bw_gbps"][cloud])


def test_a_run_that_keeps_every_design_is_the_evaluation(llama):
    res = dse.explore(llama, WIDE, "random", 5000, seed=3)
    ev = llama.evaluate(dse_space.sample(WIDE, "random", 5000, seed=3))
    assert res.evaluation.n == 5000 and np.array_equal(res.design_index, np.arange(5000))
    assert all(np.array_equal(ev[k], res.evaluation[k]) for k in ev.columns)
    assert np.array_equal(res.front, dse.pareto_front(ev, dse.DEFAULT_OBJECTIVES))


def test_points_equal_point_by_point(llama):
    ev = llama.evaluate(dse_space.sample(SWEPT, "random", 300, seed=5))
    rows = [0, 7, 299, 7]
    assert ev.points(rows) == [ev.point(i) for i in rows]
