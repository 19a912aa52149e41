"""Which node each TensorRT-LLM max-load row runs on (``serving.validation.CLUSTERS``): every
TP > 1 row whose link a source states has a cluster preset big enough for its TP, and the rows
left out are exactly the ones whose link is not stated (A100 PCIe TP 2: NVLink bridge or
PCIe). No simulation of whole row sets here (fast)."""

import pytest

from llmpara_core.hardware import Topology
from llmpara_core.presets import load_hardware
from llmpara_core.serving import validation as sv

ROWS = sv.load_rows(sv.SHIPPED_MAX_LOAD)


def test_each_gpu_maps_to_its_node():
    want = {("NVIDIA A100 SXM4 80GB", tp): "8x-nvidia-a100-sxm-80gb-nvlink" for tp in (2, 4, 8)}
    want |= {("NVIDIA L40S", tp): "8x-nvidia-l40s-pcie" for tp in (2, 4, 8)}
    want |= {("NVIDIA A100 PCIe 80GB", tp): "8x-nvidia-a100-pcie-80gb" for tp in (4, 8)}
    want |= {("NVIDIA H100 SXM 80GB", tp): "8x-nvidia-h100-sxm-nvlink" for tp in (2, 4, 8)}
    want[("NVIDIA A100 PCIe 80GB", 2)] = None
    got = {(r.hardware, r.tp): sv.device_for(r) for r in ROWS if r.tp > 1}
    assert got == want


def test_cluster_sizes_cover_every_tp_in_the_data():
    for r in ROWS:
        dev = sv.device_for(r)
        if dev is None:
            assert (sv.DEVICES[r.hardware], r.tp) in sv.UNMAPPED_TP, r.row_id
            continue
        hw = load_hardware(dev)
        n = hw.interconnect.devices if hw.interconnect else 1
        assert r.tp <= n and n % r.tp == 0, (r.row_id, dev, r.tp)
        assert (hw.interconnect is None) == (r.tp == 1), (r.row_id, dev)


def test_only_the_unstated_link_is_left_out():
    left = [r for r in ROWS if sv.device_for(r) is None]
    assert {(r.hardware, r.tp) for r in left} == {("NVIDIA A100 PCIe 80GB", 2)}
    assert len(left) == 17
    assert len(ROWS) - len(left) == 1794


@pytest.mark.parametrize("slug", sorted(set(sv.CLUSTERS.values())))
def test_cluster_presets_load_and_validate(slug):
    hw = load_hardware(slug)
    assert hw.interconnect is not None and hw.interconnect.devices == 8
    assert hw.source


def test_nvswitch_gives_every_group_the_full_link():
    """HGX A100 8-GPU: six NVSwitches, every GPU at 300 GB/s per direction to any peer, so a
    TP 2 or 4 group sees what it saw on the 4-GPU preset (same device figures)."""
    a8 = load_hardware("8x-nvidia-a100-sxm-80gb-nvlink")
    a4 = load_hardware("4x-nvidia-a100-sxm-80gb-nvlink")
    assert a8.interconnect.topology is Topology.FULLY_CONNECTED
    assert a8.interconnect.peer_bandwidth_bytes_per_s is None
    for n in (2, 4, 8):
        assert a8.interconnect.group_bandwidth_bytes_per_s(n) == 300e9
    for n in (2, 4):
        assert a4.interconnect.group_bandwidth_bytes_per_s(n) == 300e9
    assert a8.memory_capacity_bytes == a4.memory_capacity_bytes


def test_pcie_nodes_are_pcie_gen4_rings():
    for slug in ("8x-nvidia-a100-pcie-80gb", "8x-nvidia-l40s-pcie"):
        ic = load_hardware(slug).interconnect
        assert ic.topology is Topology.RING
        assert ic.bandwidth_bytes_per_s == 31e9           # PCIe Gen4 x16, one direction
        assert ic.peer_bandwidth_bytes_per_s is None


def test_rows_that_were_skipped_now_run_and_the_unstated_one_says_why():
    tp8 = next(r for r in ROWS if r.hardware == "NVIDIA A100 SXM4 80GB" and r.tp == 8
               and r.model == "Llama-3.1-70B")
    l40s = next(r for r in ROWS if r.hardware == "NVIDIA L40S" and r.tp == 4)
    pcie2 = next(r for r in ROWS if r.hardware == "NVIDIA A100 PCIe 80GB" and r.tp == 2)
    sv.predict.cache_clear()
    try:
        out = sv.compare([tp8, l40s, pcie2], 40)
    finally:
        sv.predict.cache_clear()
    assert out[0].predicted > 0 and out[0].skipped is None
    assert out[1].predicted > 0 and out[1].skipped is None
    assert out[2].predicted is None and "NVLink bridge" in out[2].skipped
