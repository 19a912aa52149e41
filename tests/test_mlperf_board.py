"""Boards of direct links without a switch (``Interconnect.peer_bandwidth_bytes_per_s``): a group
of n devices reaches only its links to its n - 1 peers -- NVIDIA's HGX H100 4-GPU board, on
which Dell's XE9640 ran its MLPerf v4.1 llama2-70b rows at TP 2."""

import numpy as np
import pytest

from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Interconnect, Topology
from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
from llmpara_core.parallel import ParallelPlan
from llmpara_core.parallel.collectives import (Collective, Net, nccl_bus_bytes_per_s,
                                                nccl_ring_all_reduce_s)
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import mlperf
from llmpara_core.serving.cost import IterationCost

GB = 1e9


def _ic(peer=150 * GB, bw=450 * GB, topology=Topology.FULLY_CONNECTED):
    return Interconnect(bw, 2e-7, topology, 4, peer_bandwidth_bytes_per_s=peer)


def test_group_bandwidth_is_the_links_to_its_peers():
    ic = _ic()
    assert [ic.group_bandwidth_bytes_per_s(n) / GB for n in (1, 2, 3, 4)] == [450, 150, 300,
                                                                             450]
    # behind a switch every group gets the device's links
    sw = _ic(peer=None)
    assert {sw.group_bandwidth_bytes_per_s(n) for n in (1, 2, 3, 4)} == {450 * GB}


@pytest.mark.parametrize("kw, msg", [
    ({"peer": 500 * GB}, "must not exceed"),
    ({"topology": Topology.RING}, "fully-connected"),
    ({"peer": -1.0}, "peer_bandwidth"),
    ({"peer": float("nan")}, "peer_bandwidth"),
])
def test_bad_peer_bandwidth_is_refused(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        _ic(**kw)


def test_preset_round_trips_and_file_errors_name_the_key():
    hw = load_hardware("4x-nvidia-h100-sxm-hgx4")
    d = hardware_to_dict(hw)
    assert d["interconnect"]["peer_bandwidth_GBps"] == 150
    assert hardware_from_dict(d, "test.toml") == hw
    d["interconnect"]["peer_bandwidth_GBps"] = "fast"
    with pytest.raises(ConfigError, match="peer_bandwidth_GBps"):
        hardware_from_dict(d, "test.toml")
    d["interconnect"]["peer_bandwidth_GBps"] = 900
    with pytest.raises(ConfigError, match="must not exceed"):
        hardware_from_dict(d, "test.toml")


def test_a_pairs_all_reduce_is_three_times_slower_on_the_4_gpu_board():
    """NCCL's bus bandwidth of a TP 2 pair: 6 links on the 4-GPU board, 18 through NVSwitch;
    a large all-reduce then takes ~3x as long (latency terms aside)."""
    board = load_hardware("4x-nvidia-h100-sxm-hgx4")
    dgx = load_hardware("8x-nvidia-h100-sxm-nvlink")
    assert nccl_bus_bytes_per_s(board, 2) == pytest.approx(nccl_bus_bytes_per_s(dgx, 2) / 3)
    assert nccl_bus_bytes_per_s(board, 4) == pytest.approx(nccl_bus_bytes_per_s(dgx, 4))
    m = 64e6
    t_board = nccl_ring_all_reduce_s(2, m, nccl_bus_bytes_per_s(board, 2))
    t_dgx = nccl_ring_all_reduce_s(2, m, nccl_bus_bytes_per_s(dgx, 2))
    assert 2.8 < t_board / t_dgx < 3.0
    # the alpha-beta model of the same links sees the same ratio for its bytes
    prec = precision_preset("FP8")
    nb, nd = Net.of(board, prec), Net.of(dgx, prec)
    big = 1e9
    r = (nb.time(Collective.ALL_REDUCE, 2, big, 1, False)
         / nd.time(Collective.ALL_REDUCE, 2, big, 1, False))
    assert r == pytest.approx(3.0, rel=1e-3)
    assert nb.time(Collective.ALL_REDUCE, 4, big, 1, False) == pytest.approx(
        nd.time(Collective.ALL_REDUCE, 4, big, 1, False))


def test_serving_pass_with_tp2_pays_the_slower_links_and_tp1_does_not():
    m = load_model("llama-2-70b")
    prec = precision_preset("FP8")
    board = load_hardware("4x-nvidia-h100-sxm-hgx4")
    dgx = load_hardware("8x-nvidia-h100-sxm-nvlink")
    from llmpara_core.calibration.efficiency import efficiency_for
    f = {}
    for name, hw in (("board", board), ("dgx", dgx)):
        c = IterationCost(m, hw, prec, ParallelPlan(tp=2), efficiency_for(hw, "tensorrt-llm"))
        f[name] = c.time_one_s(np.array(c.feature_row(512, 1, 300)), 512)
    assert f["board"] > f["dgx"] * 1.03          # the pass's all-reduces, ~3x slower
    one = load_model("mixtral-8x7b")
    t = [IterationCost(one, hw, prec, ParallelPlan(tp=1), efficiency_for(hw, "tensorrt-llm"))
         for hw in (board, dgx)]
    feats = np.array(t[0].feature_row(64, 1, 300))
    assert t[0].time_one_s(feats, 64) == t[1].time_one_s(feats, 64)


def test_dell_xe9640_runs_on_its_own_board():
    rows = {(r.system, r.scenario): r for r in mlperf.load_rows()
            if r.benchmark == "llama2-70b-99"}
    dell = rows[("XE9640_H100_SXM_80GBx4_TRT", "Offline")]
    nv = rows[("DGX-H100_H100-SXM-80GBx8_TRT", "Offline")]
    assert dell.tp == nv.tp == 2
    cost_dell, _ = mlperf._setup(dell)
    cost_nv, _ = mlperf._setup(nv)
    assert cost_dell.hardware.interconnect.peer_bandwidth_bytes_per_s == 150 * GB
    assert cost_nv.hardware.interconnect.peer_bandwidth_bytes_per_s is None
    feats = np.array(cost_nv.feature_row(600, 1, 400))
    assert cost_dell.time_one_s(feats, 600) > cost_nv.time_one_s(feats, 600)
    # without the board (the state before) both rows run the same cluster
    old = mlperf.SYSTEM_BOARDS
    try:
        mlperf.SYSTEM_BOARDS = False
        assert mlperf._setup(dell)[0].hardware.slug == cost_nv.hardware.slug
    finally:
        mlperf.SYSTEM_BOARDS = old
    assert np.isfinite(cost_dell.time_one_s(feats, 600))
