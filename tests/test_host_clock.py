"""Issue 27: the notebooks' host CPUs in llama.cpp's per-kernel cost
(``measurements.NOTEBOOK_HOSTS``, ``host_launch_factor``): which rows it reaches, the
direction it moves them, the switch, and that the fits' fast path prices it as the full model."""

from __future__ import annotations

import pytest

from llmpara_core.calibration import default_table, fastpath
from llmpara_core.calibration import measurements as validation


@pytest.fixture(scope="module")
def rows():
    measured, skipped = validation.read_shipped()
    return {r.measurement.row_id: r for r in validation.map_all(measured, skipped)[0]}


@pytest.fixture
def exponent():
    saved = validation.HOST_CLOCK_EXPONENT

    def set_to(x):
        validation.HOST_CLOCK_EXPONENT = x
    yield set_to
    validation.HOST_CLOCK_EXPONENT = saved


def _estimate(row):
    return validation.predict_all([row], default_table())[0][0].estimated


def test_every_listed_notebook_has_rows(rows):
    seen = {validation.notebook_host(r) for r in rows.values()} - {None}
    assert len(seen) == len(validation.NOTEBOOK_HOSTS)


def test_only_the_single_gpu_notebooks_with_a_stated_host(rows):
    assert validation.notebook_host(rows["D0241"]) == ("AMD Ryzen 5 3600X", 4.4)   # RTX 3080
    assert validation.notebook_host(rows["D0235"])[0] == "AMD EPYC 7551P"          # RTX 3080 Ti
    assert validation.notebook_host(rows["D0163"]) is None     # #15013 scoreboard, RTX 4090
    assert validation.notebook_host(rows["D0252"]) is None     # 3090_4_v3: host not listed
    assert validation.notebook_host(rows["D0683"]) is None     # exllamav2 README


def test_factor_follows_the_host_clock(rows, exponent):
    exponent(1.0)
    fast = validation.host_launch_factor(rows["D0241"])        # 4.4 GHz host
    slow = validation.host_launch_factor(rows["D0235"])        # 3.0 GHz host
    assert fast == pytest.approx(validation.HOST_REFERENCE_GHZ / 4.4)
    assert fast < 1.0 < slow
    assert validation.host_launch_factor(rows["D0163"]) == 1.0
    exponent(0.0)
    assert validation.host_launch_factor(rows["D0235"]) == 1.0
    eff = default_table().efficiency_for(rows["D0235"].hardware, "llama.cpp")
    assert validation.build_efficiency(rows["D0235"], eff).kernel_overhead_s \
        == eff.kernel_overhead_s


def test_a_slow_host_slows_decode_and_a_fast_one_speeds_it(rows, exponent):
    exponent(0.0)
    slow_off, fast_off = _estimate(rows["D0235"]), _estimate(rows["D0241"])
    exponent(1.0)
    slow_on, fast_on = _estimate(rows["D0235"]), _estimate(rows["D0241"])
    assert slow_on < slow_off * 0.99      # tokens/s down on the 3.0 GHz EPYC 7551P
    assert fast_on > fast_off * 1.01      # up on the 4.4 GHz Ryzen 5 3600X
    # only the launches' share of the step moves: well under the 1.47x clock ratio
    assert slow_on > slow_off * 0.85 and fast_on < fast_off * 1.15


def test_fast_path_matches_the_full_model(rows, exponent):
    exponent(1.0)
    row = rows["D0235"]
    eff = default_table().efficiency_for(row.hardware, "llama.cpp")
    assert fastpath.features(row).predict(eff) == pytest.approx(_estimate(row), rel=1e-9)
