"""The power wall of FP8 serving iterations (``serving.cost.TENSOR_DUTY``): a compute-dense FP8
pass is at least its full-rate tensor-core work / the duty long, a memory-bound decode pass is
not touched, 16-bit passes are not touched, and a higher power limit moves the wall."""

import numpy as np
import pytest

from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import cost as C
from llmpara_core.calibration.efficiency import efficiency_for


def _cost(prec="FP8", **kw):
    hw = load_hardware("nvidia-h200-sxm")
    return C.IterationCost(load_model("llama-2-70b"), hw, precision_preset(prec),
                           ParallelPlan(), efficiency_for(hw, "tensorrt-llm"), **kw)


@pytest.fixture(scope="module")
def fp8():
    return _cost()


def _times(cost, duty, monkeypatch):
    monkeypatch.setattr(C, "TENSOR_DUTY", duty)
    prompt = np.array(cost.feature_row(4, 2048, 2048))      # 8,192 prompt tokens
    decode = np.array(cost.feature_row(8, 1, 300))           # 8 sequences decoding
    return cost.time_one_s(prompt, 4), cost.time_one_s(decode, 8)


def test_wall_stretches_compute_dense_fp8_passes_only(fp8, monkeypatch):
    (p0, d0), (p1, d1) = _times(fp8, None, monkeypatch), _times(fp8, 0.47, monkeypatch)
    F = np.atleast_2d(fp8.feature_row(4, 2048, 2048))
    work = float((F @ fp8._tc[0])[0])
    assert p1 > p0 * 1.05                            # binding for a prompt-heavy pass
    assert p1 == pytest.approx(work / 0.47, rel=1e-9)
    assert d1 == pytest.approx(d0, rel=1e-12)         # decode at batch 8 is memory-bound
    assert work < p0                                  # work at full rate < roofline time


def test_wall_leaves_16_bit_passes(monkeypatch):
    c16 = _cost("FP16")
    assert _times(c16, 0.3, monkeypatch) == _times(c16, None, monkeypatch)


def test_power_limit_moves_the_wall(monkeypatch):
    hot = _cost(power_limit_w=1000.0)
    assert hot.tdp_scale == pytest.approx(1000.0 / 700.0)
    base = _cost()
    (p, _), (p_hot, _) = _times(base, 0.47, monkeypatch), _times(hot, 0.47, monkeypatch)
    assert p_hot < p
    with pytest.raises(ConfigError):
        _cost(power_limit_w=-5.0)
    with pytest.raises(ConfigError):
        _cost(power_limit_w=float("nan"))


def test_max_load_replay_equals_a_simulation_with_the_wall(monkeypatch):
    """What scripts/fit_tensor_duty.py relies on: at max load under the reserve (no-eviction)
    policy the schedule does not depend on time, so re-timing the iterations of a run without
    the wall as max(compute, work / duty) + collectives gives the run with the wall exactly."""
    from llmpara_core.serving.config import FRAMEWORK_DEFAULTS
    from llmpara_core.serving.engine import simulate
    from llmpara_core.serving.requests import RequestSpec
    hw = load_hardware("nvidia-h100-sxm")
    cost = C.IterationCost(load_model("llama-3.1-8b"), hw, precision_preset("FP8"),
                           ParallelPlan(), efficiency_for(hw, "tensorrt-llm"))
    cfg = FRAMEWORK_DEFAULTS["tensorrt-llm"].config
    spec = RequestSpec(isl=2048, osl=64, requests=120)
    rec = []
    orig = C.IterationCost._stage_parts

    def spy(self, i, F, n):
        parts = orig(self, i, F, n)
        rec.append(parts)
        return parts
    monkeypatch.setattr(C, "TENSOR_DUTY", None)
    monkeypatch.setattr(C.IterationCost, "_stage_parts", spy)
    free = simulate(cost, cfg, spec)
    monkeypatch.setattr(C.IterationCost, "_stage_parts", orig)
    comp, work, comm = (np.concatenate([np.broadcast_to(p[k], p[0].shape) for p in rec])
                        for k in range(3))
    assert (comp + comm).sum() == pytest.approx(free.busy_s, rel=1e-9)
    monkeypatch.setattr(C, "TENSOR_DUTY", 0.47)
    walled = simulate(cost, cfg, spec)
    replay = float((np.maximum(comp, work / 0.47) + comm).sum())
    assert walled.makespan_s > free.makespan_s * 1.02          # the wall binds here
    assert walled.makespan_s == pytest.approx(replay, rel=1e-9)


def test_duty_fit_scores_a_duty_as_the_simulator_predicts_it(monkeypatch):
    """``serving.duty_fit`` (the fit and ``validate --loo``) scores a duty from one recorded
    run per configuration; that equals predicting the rows with the wall at that duty."""
    from llmpara_core.serving import duty_fit, validation as sv
    rows = [r for r in sv.load_rows(sv.SHIPPED_MAX_LOAD)
            if r.model == "Llama-3.1-8B" and r.precision == "FP8" and r.tp == 1
            and r.hardware.startswith("NVIDIA H100") and r.isl == 2048 and r.osl == 128][:2]
    assert rows
    recs = duty_fit.record(rows, 60)
    monkeypatch.setattr(C, "TENSOR_DUTY", 0.44)
    sv.predict.cache_clear()
    try:
        direct = [c.error for c in sv.compare(rows, 60)]
    finally:
        sv.predict.cache_clear()
    assert [e for _, e in duty_fit.errors(recs, 0.44)] == pytest.approx(direct, rel=1e-9)
    assert duty_fit.fit(recs, (0.44, 0.9)) in (0.44, 0.9)
