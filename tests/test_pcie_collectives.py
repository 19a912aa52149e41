"""Tensor-parallel all-reduce over PCIe (issue 31): NCCL's PCI latencies and no LL128
(``Interconnect.link`` = pcie), its PCI link bandwidth, the bound of a ring that spans the
host's CPU sockets (``Interconnect.devices_per_socket`` / ``socket_bandwidth_bytes_per_s``), and
NCCL's P2P level by host CPU (``Interconnect.host_cpu``: rings without P2P go through host
memory). NVLink systems keep NCCL's NVLink model."""

from dataclasses import replace

import numpy as np
import pytest

from llmpara_core.errors import ConfigError
from llmpara_core.hardware import HostCpu, Interconnect, LinkKind, Topology
from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
from llmpara_core.parallel import ParallelPlan
from llmpara_core.parallel import collectives as col
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving.cost import IterationCost

GB = 1e9


def test_pcie_presets_say_pcie_and_nvlink_presets_do_not():
    for name in ("8x-nvidia-a100-pcie-80gb", "8x-nvidia-l40s-pcie", "2x-nvidia-rtx-4090-pcie"):
        assert load_hardware(name).interconnect.link is LinkKind.PCIE
    for name in ("8x-nvidia-h100-sxm-nvlink", "8x-nvidia-a100-sxm-80gb-nvlink"):
        hw = load_hardware(name)
        assert not col.link_is_pcie(hw)
        assert hw.interconnect.devices_per_socket is None


def test_pcie_bus_is_nccls_pci_link_bandwidth_and_the_socket_link_bounds_wide_rings():
    hw = load_hardware("8x-nvidia-l40s-pcie")
    # Gen4 x16: NCCL's 24 GB/s of the 31.5 GB/s peak, on the preset's 31 GB/s (a pair keeps
    # P2P on the preset's AMD host)
    assert col.nccl_bus_bytes_per_s(hw, 2) == pytest.approx(31 * GB * 24 / 31.5)
    # eight devices over two sockets of four: one channel at NCCL's 15 GB/s (AMD_BW 16)
    assert col.nccl_bus_bytes_per_s(hw, 8) == pytest.approx(15 * GB)
    assert col.nccl_socket_ring_bytes_per_s(16 * GB, "ampere") == 15 * GB
    assert col.nccl_socket_ring_bytes_per_s(10 * GB, "ampere") == 10 * GB
    assert col.nccl_socket_ring_bytes_per_s(22 * GB, "hopper") == 20 * GB
    # a two-card board has no socket link to cross
    assert col.nccl_bus_bytes_per_s(load_hardware("2x-nvidia-rtx-4090-pcie"), 2) == \
        pytest.approx(31 * GB * 24 / 31.5)


def test_pcie_ring_takes_pci_latencies_and_never_ll128():
    n, bus = 8, 24 * GB
    small = col.nccl_ring_all_reduce_s(n, 1e3, bus, pcie=True)
    # LL at the PCI step latency: 6.6 us + 14 x 1.0 us (+ bytes)
    assert small == pytest.approx(6.6e-6 + 14 * 1.0e-6 + 1e3 * 14 / (8 * bus / 4), rel=1e-9)
    assert small > col.nccl_ring_all_reduce_s(n, 1e3, bus)
    m = np.geomspace(1e3, 1e9, 61)
    t = col.nccl_ring_all_reduce_s(n, m, bus, pcie=True)
    steps = 2 * (n - 1)
    ll = 6.6e-6 + steps * 1.0e-6 + m * steps / (n * min(bus / 4, 87.7e9))
    simple = 8.4e-6 + steps * 5.7e-6 + m * steps / (n * bus)
    assert np.allclose(t, np.minimum(ll, simple), rtol=1e-12)
    # NVLink's model picks LL128 somewhere in the middle: never slower than the PCIe one
    assert np.all(col.nccl_ring_all_reduce_s(n, m, bus) <= t + 1e-15)


def test_trtllm_auto_all_reduce_is_nccl_on_pcie():
    m = np.array([1e3, 1e5, 1e6, 2e7])
    auto = col.trtllm_all_reduce_s(8, m, 24 * GB, 31 * GB, 2e-6, pcie=True)
    assert np.allclose(auto, col.nccl_ring_all_reduce_s(8, m, 24 * GB, pcie=True))


def test_serving_cost_uses_the_pci_path_on_pcie_boards_only(monkeypatch):
    model, prec = load_model("llama-3.1-70b"), precision_preset("FP16")
    F = None
    out = {}
    for name in ("8x-nvidia-a100-pcie-80gb", "8x-nvidia-a100-sxm-80gb-nvlink"):
        hw = load_hardware(name)
        for path in (True, False):
            monkeypatch.setattr(col, "NCCL_PCIE_PATH", path)
            c = IterationCost(model, hw, prec, ParallelPlan(tp=8))
            if F is None:
                F = np.zeros((1, len(c.features)))
                F[0, :5] = [1, 256, 256, 256, 256 * 1000]
            out[(name, path)] = float(c._stage_parts(0, F, np.array([256.0]))[2][0])
    # NVLink: the switch changes nothing
    assert out[("8x-nvidia-a100-sxm-80gb-nvlink", True)] == \
        out[("8x-nvidia-a100-sxm-80gb-nvlink", False)]
    # PCIe TP 8 (over two sockets): slower than NCCL's NVLink model of the same 31 GB/s link
    assert out[("8x-nvidia-a100-pcie-80gb", True)] > 1.4 * out[("8x-nvidia-a100-pcie-80gb",
                                                                 False)]


def test_link_fields_round_trip_and_bad_values_are_refused():
    hw = load_hardware("8x-nvidia-a100-pcie-80gb")
    d = hardware_to_dict(hw)
    assert d["interconnect"]["link"] == "pcie"
    assert d["interconnect"]["devices_per_socket"] == 4
    assert d["interconnect"]["socket_bandwidth_GBps"] == 16
    assert hardware_from_dict(d, "test.toml") == hw
    bad = {**d, "interconnect": {**d["interconnect"], "link": "pcie5"}}
    with pytest.raises(ConfigError, match="link"):
        hardware_from_dict(bad, "test.toml")
    lone = {**d, "interconnect": {k: v for k, v in d["interconnect"].items()
                                  if k != "socket_bandwidth_GBps"}}
    with pytest.raises(ConfigError, match="go together"):
        hardware_from_dict(lone, "test.toml")
    with pytest.raises(ConfigError, match="go together"):
        Interconnect(31 * GB, 1e-6, Topology.RING, 8, devices_per_socket=4)
    with pytest.raises(ConfigError):
        replace(hw.interconnect, socket_bandwidth_bytes_per_s=-1.0)


def test_nccl_p2p_level_by_host_cpu_sends_wider_rings_through_host_memory(monkeypatch):
    hw = load_hardware("8x-nvidia-l40s-pcie")
    ic = hw.interconnect
    assert ic.host_cpu is HostCpu.AMD
    pci = 31 * GB * 24 / 31.5
    # AMD host: P2P for a pair, host memory (SHM) for four; eight also cross the socket link
    assert not col.nccl_ring_uses_shm(ic, 2) and col.nccl_ring_uses_shm(ic, 4)
    assert col.nccl_bus_bytes_per_s(hw, 4) == pytest.approx(pci * col.NCCL_SHM_SHARE)
    assert col.nccl_bus_bytes_per_s(hw, 8) == pytest.approx(
        min(15 * GB, pci * col.NCCL_SHM_SHARE))
    # the cited range's middle (24-42 % loss)
    assert col.NCCL_SHM_SHARE == pytest.approx(1 - (0.24 + 0.42) / 2)
    # Intel host: no P2P across a host bridge, even for a pair
    intel = replace(hw, interconnect=replace(ic, host_cpu=HostCpu.INTEL))
    assert col.nccl_bus_bytes_per_s(intel, 2) == pytest.approx(pci * col.NCCL_SHM_SHARE)
    # host not stated, or the rule switched off: P2P everywhere (the model before)
    unstated = replace(hw, interconnect=replace(ic, host_cpu=None))
    assert col.nccl_bus_bytes_per_s(unstated, 4) == pytest.approx(pci)
    monkeypatch.setattr(col, "NCCL_HOST_P2P_RULE", False)
    assert col.nccl_bus_bytes_per_s(hw, 4) == pytest.approx(pci)
    assert col.nccl_bus_bytes_per_s(hw, 8) == pytest.approx(15 * GB)


def test_host_cpu_round_trips_and_needs_a_pcie_link():
    hw = load_hardware("8x-nvidia-l40s-pcie")
    d = hardware_to_dict(hw)
    assert d["interconnect"]["host_cpu"] == "amd"
    assert hardware_from_dict(d, "test.toml") == hw
    with pytest.raises(ConfigError, match="host_cpu"):
        hardware_from_dict({**d, "interconnect": {**d["interconnect"], "host_cpu": "arm64"}},
                           "test.toml")
    with pytest.raises(ConfigError, match="needs link pcie"):
        hardware_from_dict({**d, "interconnect": {**d["interconnect"], "link": "nvlink"}},
                           "test.toml")
    with pytest.raises(ConfigError, match="HostCpu"):
        replace(hw.interconnect, host_cpu="amd")
    # the NVLink presets state no host
    assert load_hardware("8x-nvidia-h100-sxm-nvlink").interconnect.host_cpu is None
