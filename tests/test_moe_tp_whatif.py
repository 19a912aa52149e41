"""The what-if switches of scripts/moe_tp_whatif.py (serving.cost.EXPERT_GEMM_SHARE,
HOST_SEQ_PER_TP): off as shipped, and when on they change exactly what they say."""

import numpy as np
import pytest

from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import cost as C

H100X8 = "8x-nvidia-h100-sxm-nvlink"


def _cost(model: str, tp: int) -> C.IterationCost:
    hw = load_hardware(H100X8)
    return C.IterationCost(load_model(model), hw, precision_preset("FP16"), ParallelPlan(tp=tp),
                           efficiency_for(hw, "tensorrt-llm"))


def test_switches_off_as_shipped():
    assert C.EXPERT_GEMM_SHARE == 1.0
    assert C.HOST_SEQ_PER_TP is False


def test_expert_share_slows_only_moe_passes(monkeypatch):
    moe, dense = _cost("mixtral-8x7b", 2), _cost("llama-3.1-8b", 2)
    F_moe = np.array([moe.feature_row(4, 2048, 2048)])      # a prompt pass: expert GEMMs bound
    F_dense = np.array([dense.feature_row(4, 2048, 2048)])
    base_moe, base_dense = moe.time_s(F_moe, 4)[0], dense.time_s(F_dense, 4)[0]
    monkeypatch.setattr(C, "EXPERT_GEMM_SHARE", 0.8)
    assert moe.time_s(F_moe, 4)[0] > base_moe * 1.05
    assert dense.time_s(F_dense, 4)[0] == pytest.approx(base_dense, rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_host_seq_per_tp_removes_the_replicated_share(monkeypatch, tp):
    c = _cost("mixtral-8x7b", tp)
    n = 512
    F = np.array([c.feature_row(n, 1, 1000)])               # a decode pass of n sequences
    comp0, _, _ = c._stage_parts(0, F, n)
    monkeypatch.setattr(C, "HOST_SEQ_PER_TP", True)
    comp1, _, _ = c._stage_parts(0, F, n)
    drop = c._eff.seq_overhead_s * n * (1 - 1 / tp)
    assert comp0[0] - comp1[0] == pytest.approx(drop, rel=1e-9, abs=1e-15)
