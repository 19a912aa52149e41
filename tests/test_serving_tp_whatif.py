"""The per-pass what-if mechanisms of issue 31's TP8 study (``serving.cost`` switches, off in the
shipped cost; ``scripts/tp8_whatif.py`` measures them): GEMM tile and wave quantisation,
TensorRT-LLM's AUTO all-reduce choice, the token count of routed-expert GEMMs. Exact
arithmetic, and the shipped cost unchanged with the switches at their defaults."""

from __future__ import annotations

import numpy as np
import pytest

from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.parallel import ParallelPlan
from llmpara_core.parallel.collectives import (COLLECTIVE_SYNC_S, nccl_ring_all_reduce_s,
                                               trtllm_all_reduce_s)
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import cost as C

H100X8 = "8x-nvidia-h100-sxm-nvlink"


def _cost(model, prec="FP16", tp=8):
    hw = load_hardware(H100X8)
    return C.IterationCost(load_model(model), hw, precision_preset(prec), ParallelPlan(tp=tp),
                           efficiency_for(hw, "tensorrt-llm"))


@pytest.fixture
def switches():
    saved = (C.GEMM_TILE, C.GEMM_M_WASTE, C.EXPERT_GEMM_TOKENS, C.TRTLLM_ALLREDUCE)
    yield
    C.GEMM_TILE, C.GEMM_M_WASTE, C.EXPERT_GEMM_TOKENS, C.TRTLLM_ALLREDUCE = saved


def test_shipped_switches_are_off():
    assert C.GEMM_TILE is None and C.GEMM_M_WASTE
    assert C.EXPERT_GEMM_TOKENS == "per-expert" and C.TRTLLM_ALLREDUCE is None


def test_gemm_quantisation_exact(switches):
    # 70B QKV at TP8 (N = 1280) over 500 tokens, 128 x 128 tiles on 132 SMs: 4 x 10 = 40 tiles
    # in one wave
    got = C.gemm_quantisation(np.array([500.0]), np.array([1280.0]), 132, (128, 128))
    assert got[0] == pytest.approx(500 * 1280 / (132 * 128 * 128), rel=1e-12)
    # 300 tiles -> 3 waves of 132
    got = C.gemm_quantisation(np.array([1280.0]), np.array([3840.0]), 132, (128, 128))
    assert got[0] == pytest.approx(1280 * 3840 / (3 * 132 * 128 * 128), rel=1e-12)
    # not a GEMM (N = 0): 1
    assert C.gemm_quantisation(np.array([7.0]), np.array([0.0]), 132, (128, 128))[0] == 1.0
    # without the row tiles' waste: M counted as ceil(M / tm) tm
    C.GEMM_M_WASTE = False
    got = C.gemm_quantisation(np.array([500.0]), np.array([1280.0]), 132, (128, 128))
    assert got[0] == pytest.approx(512 * 1280 / (132 * 128 * 128), rel=1e-12)


def test_gemm_quantisation_tile_set_takes_the_best():
    m, n = np.array([500.0]), np.array([1280.0])
    tiles = ((128, 128), (64, 128))
    best = C.gemm_quantisation(m, n, 132, tiles)[0]
    # 64 x 128: 8 x 10 = 80 tiles, one wave: 500 x 1280 / (132 x 8192)
    assert best == pytest.approx(500 * 1280 / (132 * 64 * 128), rel=1e-12)
    assert best == max(C.gemm_quantisation(m, n, 132, t)[0] for t in tiles)


def test_gemm_columns_of_a_tp8_shard():
    c = _cost("llama-3.1-70b")
    st = c.stages[0]
    names = [o.name for o in C._device_ops(c._ctx, 0, 1, 1, 2, 1)]
    col = dict(zip(names, st.gemm_n))
    assert col["q_proj"] == col["k_proj"] == col["v_proj"] == (64 + 2 * 8) // 8 * 128   # 1280
    assert col["ffn_gate_up"] == 2 * 28672 // 8
    assert col["o_proj"] == col["ffn_down"] == 8192
    assert col["lm_head"] == -(-128256 // 8)
    assert col["attn_norm"] == 0


def test_trtllm_all_reduce_choice_exact():
    bus, link, sync = 370e9, 450e9, COLLECTIVE_SYNC_S
    m = np.array([400e3, 600e3, 7.9e6, 9e6])
    got = trtllm_all_reduce_s(8, m, bus, link, sync)
    nccl = nccl_ring_all_reduce_s(8, m, bus)
    assert got[0] == pytest.approx(sync + 7 * 400e3 / link, rel=1e-12)       # ONESHOT < 500 kB
    assert got[1:] == pytest.approx(nccl[1:], rel=1e-12)                    # then NCCL
    two = trtllm_all_reduce_s(8, m, bus, link, sync, twoshot=True)
    assert two[1] == pytest.approx(2 * sync + 2 * 7 / 8 * 600e3 / link, rel=1e-12)
    assert two[2] == pytest.approx(2 * sync + 2 * 7 / 8 * 7.9e6 / link, rel=1e-12)
    assert two[3] == pytest.approx(nccl[3], rel=1e-12)                       # > 8 MB: NCCL
    # TP2: ONESHOT up to the 16 MB workspace; TP4: ONESHOT below 1 MB
    assert trtllm_all_reduce_s(2, np.array([10e6]), bus, link, sync)[0] == pytest.approx(
        sync + 10e6 / link, rel=1e-12)
    assert trtllm_all_reduce_s(4, np.array([0.9e6]), bus, link, sync)[0] == pytest.approx(
        sync + 3 * 0.9e6 / link, rel=1e-12)
    assert float(trtllm_all_reduce_s(1, np.array([1e6]), bus, link, sync)[0]) == 0.0


def test_expert_gemm_token_count_modes(switches):
    c = _cost("mixtral-8x7b", "FP16")
    f = np.array([c.feature_row(4, 512, 600)])     # 2,048 prompt tokens: compute-bound GEMMs
    t = {}
    for mode in ("per-expert", "grouped", "pass"):
        C.EXPERT_GEMM_TOKENS = mode
        t[mode] = c.time_one_s(f[0], 4)
    # the GEMM curve rises with tokens: T x top-k >= T >= T x top-k / experts touched
    assert t["grouped"] <= t["pass"] <= t["per-expert"]
    assert t["grouped"] < t["per-expert"]


def test_switches_change_only_what_they_name(switches):
    c = _cost("llama-3.1-70b")
    f = np.array([c.feature_row(256, 1, 2000)])
    base = c.time_one_s(f[0], 256)
    C.EXPERT_GEMM_TOKENS = "grouped"        # a dense model has no routed experts
    assert c.time_one_s(f[0], 256) == base
    C.TRTLLM_ALLREDUCE = "auto"             # 256 x 8192 x 2 B = 4.2 MB > 500 kB: NCCL
    assert c.time_one_s(f[0], 256) == pytest.approx(base, rel=1e-12)
    C.TRTLLM_ALLREDUCE = None
    C.GEMM_TILE = (128, 128)                # narrow shards: slower
    assert c.time_one_s(f[0], 256) > base
