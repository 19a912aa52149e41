"""Issue 27, batch-1 decode on the A10G / A100 llm-perf-bench rows: inline ECC of datacenter
GDDR memory in the core's estimated memory rate (``roofline.INLINE_ECC_CORE``), and MLC's
tensor-parallel all-reduces timed by NCCL's own tuning model (``Efficiency.nccl_all_reduce``,
``calibration.efficiency.NCCL_ALLREDUCE_STACKS``)."""

from dataclasses import replace

import numpy as np
import pytest

from llmpara_core import roofline
from llmpara_core.calibration import efficiency as E
from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.hardware import Interconnect, LinkKind, Topology
from llmpara_core.parallel import collectives as col
from llmpara_core.precision import DType
from llmpara_core.presets import load_hardware


@pytest.mark.parametrize("device, ecc", [
    ("nvidia-a10g", True), ("nvidia-l40s", True),                    # datacenter GDDR
    ("nvidia-a100-sxm-80gb", False), ("nvidia-rtx-4090", False)])   # HBM; consumer GDDR
def test_estimated_memory_rate_carries_inline_ecc_on_datacenter_gddr(monkeypatch, device, ecc):
    hw = load_hardware(device)
    on = roofline.rates(hw, DType.FP16, estimated=True).bytes_per_s
    ideal_on = roofline.rates(hw, DType.FP16, estimated=False).bytes_per_s
    monkeypatch.setattr(roofline, "INLINE_ECC_CORE", False)
    off = roofline.rates(hw, DType.FP16, estimated=True).bytes_per_s
    assert on == pytest.approx(off * (15 / 16 if ecc else 1.0), rel=1e-12)
    # the ideal (peak) rate never changes
    assert roofline.rates(hw, DType.FP16, estimated=False).bytes_per_s == ideal_on


def test_serving_iteration_rate_is_the_same_with_ecc_in_the_core(monkeypatch):
    """Serving iterations applied ECC before the core did: their memory rate is unchanged."""
    from llmpara_core.parallel import ParallelPlan
    from llmpara_core.precision import precision_preset
    from llmpara_core.presets import load_model
    from llmpara_core.serving.cost import IterationCost

    def rate():
        hw = load_hardware("nvidia-l40s")
        return IterationCost(load_model("llama-3.1-8b"), hw, precision_preset("FP8"),
                             ParallelPlan(), efficiency_for(hw, "tensorrt-llm")
                             ).memory_bytes_per_s
    on = rate()
    monkeypatch.setattr(roofline, "INLINE_ECC_CORE", False)
    assert rate() == pytest.approx(on, rel=1e-12)


def test_only_mlc_calls_nccl():
    hw = load_hardware("nvidia-a10g")
    assert efficiency_for(hw, "mlc").nccl_all_reduce
    for stack in ("llama.cpp", "gpt-fast", "tensorrt-llm", "vllm", None):
        assert not efficiency_for(hw, stack).nccl_all_reduce


def _net(stack, n=8):
    base = load_hardware("nvidia-a10g")
    ic = Interconnect(31e9, 1e-6, Topology.RING, n, link=LinkKind.PCIE)
    hw = replace(base, interconnect=ic).with_efficiency(efficiency_for(base, stack))
    from llmpara_core.precision import precision_preset
    return hw, col.Net.of(hw, precision_preset("FP16"))


def test_mlc_all_reduce_is_nccls_ring_model_on_the_pci_path(monkeypatch):
    m = 16384.0                     # one token's hidden state, Llama-2-70B in FP16
    hw, net = _net("mlc")
    launch = roofline.op_time_s(0.0, 0.0, 1, net.intra[1])
    want = launch + float(col.nccl_ring_all_reduce_s(8, m, col.nccl_bus_bytes_per_s(hw, 8),
                                                     pcie=True))
    t = net.time(col.Collective.ALL_REDUCE, 8, m, 1, True)
    assert t == pytest.approx(want, rel=1e-12)
    # NCCL's LL ring on PCI: 6.6 us base + 14 steps x 1.0 us, more than the one-shot estimate
    assert t - launch > 20.6e-6
    _, plain = _net("llama.cpp")
    assert t > plain.time(col.Collective.ALL_REDUCE, 8, m, 1, True)
    # ideal times and other collectives keep the alpha-beta model
    assert net.time(col.Collective.ALL_REDUCE, 8, m, 1, False) == pytest.approx(
        plain.time(col.Collective.ALL_REDUCE, 8, m, 1, False))
    monkeypatch.setattr(E, "NCCL_ALLREDUCE_ON", False)
    hw_off, net_off = _net("mlc")
    assert not hw_off.effective_efficiency.nccl_all_reduce
    assert net_off.time(col.Collective.ALL_REDUCE, 8, m, 1, True) < t


def test_mapped_pcie_rows_say_pcie():
    from llmpara_core.calibration import measurements as M
    rows = [r for r in M.read_shipped()[0] if r.row_id in ("D0668", "D0660")]
    assert rows
    for r in rows:
        mapped = M.map_measurement(r)
        assert mapped.hardware.interconnect.link is LinkKind.PCIE
        assert np.isfinite(mapped.hardware.interconnect.bandwidth_bytes_per_s)


def test_a10g_rows_run_on_an_amd_host_and_their_wide_rings_go_through_host_memory():
    from llmpara_core.calibration import measurements as M
    from llmpara_core.hardware import HostCpu
    by_id = {r.row_id: r for r in M.read_shipped()[0]}
    tp8 = M.map_measurement(by_id["D0668"]).hardware        # A10G, 8 GPUs
    tp2 = M.map_measurement(by_id["D0666"]).hardware        # A10G, 2 GPUs
    assert tp8.interconnect.host_cpu is HostCpu.AMD
    assert col.nccl_ring_uses_shm(tp8.interconnect, 8)
    assert not col.nccl_ring_uses_shm(tp2.interconnect, 2)
    # the A100 rows' host is not stated
    assert M.map_measurement(by_id["D0660"]).hardware.interconnect.host_cpu is None
