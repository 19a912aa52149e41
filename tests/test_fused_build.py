"""Issue 27: the kernel fusion of 2025 llama.cpp CUDA builds (``measurements.fused_build``,
``FUSED_PLAN``): which rows it reaches, that it removes launches from their decode step, and
that the fits' fast path prices it as the full model does."""

from __future__ import annotations

import pytest

from llmpara_core.calibration import default_table, fastpath
from llmpara_core.calibration import measurements as validation


@pytest.fixture(scope="module")
def rows():
    measured, skipped = validation.read_shipped()
    return {r.measurement.row_id: r for r in validation.map_all(measured, skipped)[0]}


@pytest.fixture
def fused_on():
    saved = validation.FUSED_BUILD_PLAN
    validation.FUSED_BUILD_PLAN = True
    yield
    validation.FUSED_BUILD_PLAN = saved


def _estimate(row):
    return validation.predict_all([row], default_table())[0][0].estimated


def test_only_the_2025_cuda_scoreboard_and_guide_rows(rows, fused_on):
    assert validation.fused_build(rows["D0163"])         # #15013, RTX 4090, CUDA
    assert validation.fused_build(rows["D0211"])         # #15396 gpt-oss guide, CUDA
    assert not validation.fused_build(rows["D0181"])     # #10879 Vulkan scoreboard
    assert not validation.fused_build(rows["D0218"])     # #15396 on Metal
    assert not validation.fused_build(rows["D0318"])     # May 2024 notebook build


def test_switch_off_leaves_every_row_as_it_was(rows):
    saved = validation.FUSED_BUILD_PLAN
    try:
        validation.FUSED_BUILD_PLAN = False
        assert not validation.fused_build(rows["D0163"])
        eff = default_table().efficiency_for(rows["D0163"].hardware, "llama.cpp")
        assert validation.build_efficiency(rows["D0163"], eff).kernel_plan == eff.kernel_plan
    finally:
        validation.FUSED_BUILD_PLAN = saved


def test_fusion_removes_launches_and_speeds_up_decode(rows):
    row = rows["D0163"]
    saved = validation.FUSED_BUILD_PLAN
    try:
        validation.FUSED_BUILD_PLAN = False
        before = _estimate(row)
        validation.FUSED_BUILD_PLAN = True
        after = _estimate(row)
        eff = validation.build_efficiency(
            row, default_table().efficiency_for(row.hardware, "llama.cpp"))
        plan = dict(eff.kernel_plan)
        assert all(plan[k] == v for k, v in validation.FUSED_PLAN.items())
    finally:
        validation.FUSED_BUILD_PLAN = saved
    # 32 layers x (launches the plan removes) x the per-kernel cost: a few % of a ~5 ms step
    assert after > before * 1.01
    # the weights still stream: the step cannot shrink by more than the launches' share
    assert after < before * 1.10


def test_fast_path_matches_the_full_model(rows, fused_on):
    row = rows["D0163"]
    eff = default_table().efficiency_for(row.hardware, "llama.cpp")
    assert fastpath.features(row).predict(eff) == pytest.approx(_estimate(row), rel=1e-9)
