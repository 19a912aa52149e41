"""Collectives in an alpha-beta model of the links: latency steps, bytes each device sends and
mean hops per topology (ring, fully connected, 2D mesh/torus), one level of links or
hierarchical across nodes. Formulas: see :mod:`llmpara_core.parallel`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

from ..hardware import Hardware, HostCpu, Interconnect, LinkKind, Topology
from .plan import divisors
from ..precision import Precision
from ..roofline import Rates, op_time_s, rates
from ..units import BYTES_PER_GB

# Estimated mode only: a synchronisation cost per collective (flag handshake between the
# participants and memory fences), on top of its kernel launch (the device's kernel overhead)
# and the link latency. Small-message all-reduce on one 8-GPU node takes about 6-7 us with a
# one-shot implementation: 5.9 us at 2-8 KiB on 8x H200, CUDA graphs (github sgl-project/sglang
# PR #22734, MSCCL++ kernel benchmark) and 7.2 us at 24 kB on 8x A100 (github microsoft/mscclpp
# PR #169); this model gives 4.5-4.6 us for those cases without it (4 us launch + 2 alpha +
# bytes), so 2 us is charged. NCCL's own tuning model charges more (6.6 us base per ring/LL
# collective + 0.6 us per NVLink step, NVIDIA/nccl@b6475625 src/graph/tuning.cc): engines
# that use plain NCCL for decode all-reduces are slower than this estimate.
COLLECTIVE_SYNC_S = 2e-6

# NCCL's own cost model of a ring all-reduce on one NVLink node (NVIDIA/nccl@b6475625,
# src/graph/tuning.cc): latency = baseLat + nsteps x hwLat with nsteps = 2 (n - 1), time =
# latency + bytes / algorithm bandwidth, algorithm bandwidth = bus bandwidth x n / nsteps,
# and NCCL runs whichever protocol its model says is fastest. Per protocol (LL, LL128, Simple):
# baseLat 6.6 / 14.0 / 8.4 us, NVLink hwLat 0.6 / 1.9 / 3.4 us per step; LL moves a quarter of
# the bus bandwidth, at most llMaxBw = 87.7 GB/s (Ampere/Hopper, one node); LL128 0.92 of it.
NCCL_RING_BASE_LAT_S = (6.6e-6, 14.0e-6, 8.4e-6)
NCCL_RING_NVLINK_STEP_S = (0.6e-6, 1.9e-6, 3.4e-6)
NCCL_LL_MAX_BUS_BYTES_PER_S = 87.7e9
NCCL_BUS_SHARE = (0.25, 0.92, 1.0)
# NCCL's bus bandwidth per NVLink (NVIDIA/nccl src/graph/topo.h: SM80_NVLINK_BW 20.0,
# SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1 GB/s) against the link's unidirectional peak
# (NVLink 3 and 4: 25 GB/s per link, NVLink 5: 50 GB/s): the share of a device's NVLink peak
# NCCL's rings run at. Other links: the Ampere share.
NCCL_NVLINK_SHARE = {"ampere": 20.0 / 25.0, "hopper": 20.6 / 25.0, "blackwell": 40.1 / 50.0}
NCCL_NVLINK_SHARE_DEFAULT = 20.0 / 25.0


# NCCL on PCIe (NVIDIA/nccl@b6475625 src/graph/tuning.cc, ncclTopoTuneModel): a ring whose
# intra-node path is not NVLink (graph typeIntra != LINK_NVL) takes hwLat's PCI row, 1.0 / 2.5 /
# 5.7 us per step for LL / LL128 / Simple (NVLink 0.6 / 1.9 / 3.4), with the same baseLat; and
# LL128 is enabled by default only where typeIntra <= PATH_NVB ("Enable LL128 by default only on
# Volta/Ampere/Hopper+NVLink"), so a PCIe ring runs LL or Simple. LL's cap llMaxBw is indexed by
# the GPU's compute capability on one node (87.7 GB/s from Ampere on), as on NVLink.
NCCL_RING_PCI_STEP_S = (1.0e-6, 2.5e-6, 5.7e-6)
# NCCL's bandwidth of a PCIe link (NVIDIA/nccl@b6475625 src/graph/topo.cc, ncclTopoAddPci:
# link_width x kvDictPciGen(link_speed) / 80 GB/s, "16 GT/s" -> 120: a Gen4 x16 link is 24 GB/s,
# Gen3 x16 12 (topo.h PCI_BW 12.0 "PCI Gen3 x16"), Gen5 x16 48) over the link's unidirectional
# peak after 128b/130b encoding (Gen4 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s): the
# share of a PCIe link's peak NCCL's rings are modelled at (all three generations: 0.76).
NCCL_PCIE_SHARE = 24.0 / 31.5
# A PCIe ring over more devices than one CPU socket holds (``Interconnect.devices_per_socket``)
# crosses the link between the sockets once per direction, so every channel's bandwidth adds up
# on it: NCCL's search (NVIDIA/nccl@b6475625 src/graph/search.cc, ncclTopoCompute) tries ring
# bandwidths from speedArrayIntra (sm90SpeedArrayIntra from Hopper on) downwards and keeps the
# channels that fit, so such a ring runs one channel at the largest speed at most the socket
# link's NCCL bandwidth (``Interconnect.socket_bandwidth_bytes_per_s``; 16 GB/s -> 15).
NCCL_SPEED_ARRAY_INTRA_GBPS = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
                               3.0)
NCCL_SM90_SPEED_ARRAY_INTRA_GBPS = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0)
# What-if switches (scripts/pcie_allreduce_whatif.py; the shipped values leave them on / at 1):
# NCCL_SOCKET_BOUND: False = no bound from the socket link.
NCCL_SOCKET_BOUND = True
# NCCL_PCIE_PATH: False = time PCIe rings as NVLink ones (the model before the PCI path).
NCCL_PCIE_PATH = True
# PCIE_BUS_SCALE: a sensitivity scale on a PCIe ring's bus bandwidth (what-if only, not a fit).
PCIE_BUS_SCALE = 1.0
# NCCL's P2P level (NVIDIA/nccl@04cdb808 src/graph/paths.cc, ncclTopoCheckP2p): "By default
# don't use P2P across CPU Host Bridges and further apart" (PATH_PXB), except on AMD x86 hosts
# when the communicator holds at most two GPUs (PATH_SYS; NCCL's topology holds the GPUs of the
# communicator's ranks on the host: ncclTopoGetSystem, NVIDIA/nccl@b6475625 src/graph/topo.cc,
# so a TP group of n GPUs counts n); the rule came with NCCL 2.23 ("Set P2P
# level to PXB on AMD CPUs when using more than 2 GPUs per node ... P2P would cause a significant
# performance degradation when using many GPUs, and therefore many interleaved data flows", the
# 2.23 release commit message, quoted in github pytorch/pytorch PR #142179, "Update NCCL to
# 2.23.4"); Intel hosts had PATH_PXB before too (NVIDIA/nccl@b6475625 paths.cc). A GPU pair
# without P2P talks through host memory (ncclTopoComputePaths: "Divert all traffic through the
# CPU"; the SHM transport). NCCL's search gives that path the same PCIe bandwidth, but SHM runs
# slower than P2P: "24-42% bandwidth loss" for all_reduce_perf rings on four GPUs of one AMD
# socket (github NVIDIA/nccl PR #2080, SHM against P2P, same build): NCCL_SHM_SHARE is the
# middle of that range, 1 - 0.33. Before 2.23, NCCL used P2P there, which NCCL's maintainers
# describe as degrading "significantly when we have traffic going from/to all GPUs and
# interleaving in the CPU" (github NVIDIA/nccl issue #1285, AMD EPYC): the rule is applied to
# every release (the reason 2.23 switched, not a measured rate). Measured on the max-load rows
# (scripts/pcie_allreduce_whatif.py, held out at a 4 GiB reserve): rule off 9.9 %; share 0.58 /
# 0.67 / 0.76 -> 10.4 / 8.4 / 9.3 %; `llmpara validate --regime serving-maxload --loo` 9.9 -> 8.3 %.
# Not modelled: the 6/5 P2P overhead NCCL's search charges through an Intel CPU (search.cc,
# INTEL_P2P_OVERHEAD), no preset states an Intel host.
NCCL_AMD_P2P_MAX_GPUS = 2
NCCL_SHM_SHARE = 0.67
# NCCL_HOST_P2P_RULE: False = P2P on every PCIe pair (the model before; what-if switch).
NCCL_HOST_P2P_RULE = True


def link_is_pcie(hardware) -> bool:
    """True if the device's intra-node links are PCIe (``Interconnect.link``)."""
    ic = hardware.interconnect
    return NCCL_PCIE_PATH and ic is not None and ic.link is LinkKind.PCIE


def nccl_bus_bytes_per_s(hardware, devices: int | None = None) -> float:
    """The bus bandwidth [B/s] NCCL's model gives a device's rings: on NVLink (or an unstated
    link) its unidirectional link peak x ``NCCL_NVLINK_SHARE`` of its architecture; on PCIe
    (``Interconnect.link``) the link peak x ``NCCL_PCIE_SHARE``. ``devices``: the group's size,
    on a board of direct links (``Interconnect.peer_bandwidth_bytes_per_s``) only the links to
    its peers in the group carry its rings."""
    ic = hardware.interconnect
    if ic is None:
        return 0.0
    bw = ic.bandwidth_bytes_per_s if devices is None else ic.group_bandwidth_bytes_per_s(devices)
    arch = getattr(hardware.architecture, "value", hardware.architecture)
    if link_is_pcie(hardware):
        bus = bw * NCCL_PCIE_SHARE
        if nccl_ring_uses_shm(ic, devices):
            bus *= NCCL_SHM_SHARE
        per_socket = ic.devices_per_socket
        if (NCCL_SOCKET_BOUND and per_socket is not None and devices is not None
                and devices > per_socket):
            bus = min(bus, nccl_socket_ring_bytes_per_s(ic.socket_bandwidth_bytes_per_s, arch))
        return bus * PCIE_BUS_SCALE
    return bw * NCCL_NVLINK_SHARE.get(arch, NCCL_NVLINK_SHARE_DEFAULT)


def nccl_ring_uses_shm(ic: Interconnect, devices: int | None) -> bool:
    """True if NCCL's default P2P level keeps a ring of ``devices`` GPUs on a PCIe board with a
    stated host CPU (``Interconnect.host_cpu``) off GPU P2P, so it runs through host memory: on
    an AMD host for more than two GPUs, on an Intel host for any pair across a host bridge (the
    presets model no PCIe switch, so every pair is)."""
    if not NCCL_HOST_P2P_RULE or ic.host_cpu is None or devices is None or devices <= 1:
        return False
    if ic.host_cpu is HostCpu.AMD:
        return devices > NCCL_AMD_P2P_MAX_GPUS
    return True


def nccl_socket_ring_bytes_per_s(socket_bytes_per_s: float, arch: str) -> float:
    """The bus bandwidth [B/s] of an NCCL ring that crosses a CPU socket link of
    ``socket_bytes_per_s`` (NCCL's bandwidth of it): one channel at the largest speed of NCCL's
    intra-node speed array (the sm90 one for Hopper and later) that fits on the link."""
    speeds = (NCCL_SM90_SPEED_ARRAY_INTRA_GBPS if arch in ("hopper", "blackwell")
              else NCCL_SPEED_ARRAY_INTRA_GBPS)
    gbps = socket_bytes_per_s / BYTES_PER_GB
    return BYTES_PER_GB * max((s for s in speeds if s <= gbps), default=min(speeds))


def nccl_ring_all_reduce_s(n: int, message_bytes, bus_bytes_per_s: float, pcie: bool = False):
    """Time [s] of an all-reduce of ``message_bytes`` (float or array) among ``n`` devices of
    one node by NCCL's tuning model (the fastest of its enabled ring protocols: LL, LL128 and
    Simple on NVLink; LL and Simple at the PCI step latencies where ``pcie``) at bus bandwidth
    ``bus_bytes_per_s`` per device. 0 for one device."""
    import numpy as np
    if n <= 1:
        return 0.0 * np.asarray(message_bytes, dtype=float)
    steps = 2 * (n - 1)
    m = np.asarray(message_bytes, dtype=float)
    best = None
    hops = NCCL_RING_PCI_STEP_S if pcie else NCCL_RING_NVLINK_STEP_S
    for p, (base, hop, share) in enumerate(zip(NCCL_RING_BASE_LAT_S, hops, NCCL_BUS_SHARE)):
        if pcie and p == 1:                 # LL128: NVLink only
            continue
        bus = bus_bytes_per_s * share
        if share == 0.25:
            bus = min(bus, NCCL_LL_MAX_BUS_BYTES_PER_S)
        t = base + steps * hop + m * steps / (n * bus)
        best = t if best is None else np.minimum(best, t)
    return best


# TensorRT-LLM's own all-reduce kernels inside one NVLink node (AllreducePlugin::
# selectImplementation, strategy AUTO, with customAllReduceUtils::getMaxRequiredWorkspaceSize):
# a message of at most 16 MB (TP <= 2) / 8 MB (TP > 2) runs a custom kernel, larger ones NCCL.
# Inside the workspace: TP <= 2 always ONESHOT; TP <= 4 ONESHOT below 1 MB; TP > 4 ONESHOT below
# 500 kB (decimal: 1 * 1000 * 1000, 500 * 1000 in the source). Above those the 0.10/0.11 plugin
# runs TWOSHOT; later releases run NCCL there ("the two-shot strategy has exhibited significant
# performance issues ... temporarily disabled", nvbugs 4718747; github NVIDIA/TensorRT-LLM
# cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp and cpp/tensorrt_llm/common/
# customAllReduceUtils.h). ONESHOT: every rank reads the other ranks' whole messages over its
# links and reduces them; TWOSHOT: reduce-scatter then all-gather over the same buffers.
TRTLLM_AR_WORKSPACE_BYTES = {2: 16e6, 4: 8e6, 8: 8e6}
TRTLLM_AR_ONESHOT_BELOW_BYTES = {2: 16e6, 4: 1e6, 8: 500e3}


def trtllm_all_reduce_s(n: int, message_bytes, bus_bytes_per_s: float, link_bytes_per_s: float,
                        sync_s: float, twoshot: bool = False, pcie: bool = False):
    """Time [s] of TensorRT-LLM's AUTO all-reduce of ``message_bytes`` (array) among ``n``
    devices of one NVLink node: ONESHOT (sync + (n - 1) M / link) below its threshold, TWOSHOT
    (2 syncs + 2 (n - 1) / n M / link) up to the workspace where ``twoshot`` (releases 0.10 /
    0.11), else NCCL's ring model (``nccl_ring_all_reduce_s``). ``pcie``: NCCL for every message
    (AUTO runs the custom kernels only on NVLink: ``selectImplementation`` returns NCCL when
    ``!mIsNVLINKSupported``, github NVIDIA/TensorRT-LLM@005b299b cpp/tensorrt_llm/plugins/
    ncclPlugin/allreducePlugin.cpp)."""
    import numpy as np
    m = np.asarray(message_bytes, dtype=float)
    if n <= 1:
        return 0.0 * m
    if pcie:
        return nccl_ring_all_reduce_s(n, m, bus_bytes_per_s, pcie=True)
    key = 2 if n <= 2 else (4 if n <= 4 else 8)
    ws, one = TRTLLM_AR_WORKSPACE_BYTES[key], TRTLLM_AR_ONESHOT_BELOW_BYTES[key]
    nccl = nccl_ring_all_reduce_s(n, m, bus_bytes_per_s)
    oneshot = sync_s + (n - 1) * m / link_bytes_per_s
    two = 2 * sync_s + 2 * (n - 1) / n * m / link_bytes_per_s
    mid = two if twoshot else nccl
    return np.where(m < one, oneshot, np.where(m <= ws, mid, nccl))


class Collective(Enum):
    ALL_REDUCE = "all-reduce"
    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_TO_ALL = "all-to-all"
    SEND_RECV = "send-recv"


def grid_dims(n: int) -> tuple[int, int]:
    """a x b = n with a the largest divisor <= sqrt(n) (2D torus/mesh shape)."""
    a = max(d for d in divisors(n) if d * d <= n)
    return a, n // a


def mean_hops(topology: Topology, n: int) -> float:
    """Mean shortest-path hops from a device to the other n - 1 (bidirectional links)."""
    if n <= 1 or topology is Topology.FULLY_CONNECTED:
        return 1.0
    if topology is Topology.RING:
        return (n * n // 4) / (n - 1)
    a, b = grid_dims(n)
    if topology is Topology.TORUS_2D:
        return (b * (a * a // 4) + a * (b * b // 4)) / (n - 1)
    return (b * (a * a - 1) / 3 + a * (b * b - 1) / 3) / (n - 1)      # mesh: line distances


def collective_terms(kind: Collective, n: int, message_bytes: float,
                     topology: Topology) -> tuple[int, float, float]:
    """(latency steps, bytes each device sends, mean hops per byte) of one collective among
    ``n`` devices. ``message_bytes``: the full tensor for all-reduce/all-gather/reduce-scatter,
    the bytes each device sends to the others for all-to-all, the payload for send-recv."""
    if kind is Collective.SEND_RECV:
        return 1, message_bytes, 1.0
    if n <= 1:
        return 0, 0.0, 1.0
    if topology is Topology.FULLY_CONNECTED:
        one_pass = 1
        diameter = 1
    elif topology is Topology.RING:
        one_pass, diameter = n - 1, n // 2
    else:
        a, b = grid_dims(n)
        one_pass = (a - 1) + (b - 1)
        diameter = a // 2 + b // 2 if topology is Topology.TORUS_2D else one_pass
    share = (n - 1) / n * message_bytes
    if kind is Collective.ALL_REDUCE:
        return 2 * one_pass, 2.0 * share, 1.0
    if kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return one_pass, share, 1.0
    return diameter, message_bytes, mean_hops(topology, n)


def collective_time_s(kind: Collective, n: int, message_bytes: float, link: Rates,
                      latency_s: float, topology: Topology, kernels: int = 0,
                      sync_s: float = 0.0) -> float:
    """alpha-beta time [s] of one collective on one level of links: latency_s x steps + the
    bytes each device sends x mean hops through ``roofline.op_time_s`` at ``link``'s rate (plus
    ``kernels`` launches and a fixed ``sync_s``). Ring all-reduce: 2(N-1) alpha +
    2(N-1)/N M / beta. A group of one device costs nothing."""
    steps, sent, hops = collective_terms(kind, n, message_bytes, topology)
    if steps == 0 and sent == 0:
        return 0.0
    return latency_s * steps + sync_s + op_time_s(0.0, 0.0, kernels, link, sent * hops)


@dataclass(frozen=True)
class Net:
    """The links seen from one device: intra-node and (optionally) inter-node levels."""
    ic: Interconnect
    intra: tuple[Rates, Rates]          # (ideal, estimated) with the link rate
    inter: tuple[Rates, Rates] | None
    per_node: int
    # the device, where its stack's all-reduces are NCCL calls (``Efficiency.nccl_all_reduce``)
    nccl_hardware: Hardware | None = None

    @classmethod
    def of(cls, hardware: Hardware, precision: Precision) -> "Net | None":
        ic = hardware.interconnect
        if ic is None:
            return None
        ri = rates(hardware, precision.compute_dtype, estimated=False)
        re_ = rates(hardware, precision.compute_dtype, estimated=True)
        inter = None
        if ic.inter_node_bandwidth_bytes_per_s:
            derate = re_.link_bytes_per_s / ri.link_bytes_per_s
            bw = ic.inter_node_bandwidth_bytes_per_s
            inter = (replace(ri, link_bytes_per_s=bw), replace(re_, link_bytes_per_s=bw * derate))
        per_node = ic.devices_per_node or ic.devices
        eff = hardware.effective_efficiency
        nccl = hardware if eff is not None and eff.nccl_all_reduce else None
        return cls(ic, (ri, re_), inter, per_node, nccl)

    def node(self, rank: int) -> int:
        return rank // self.per_node

    def _group_rates(self, r: Rates, n: int) -> Rates:
        """``r`` with the link rate a group of ``n`` devices of one node reaches: unchanged
        behind a switch, the links to the n - 1 peers on a board of direct links
        (``Interconnect.group_bandwidth_bytes_per_s``), at ``r``'s share of the peak."""
        ic = self.ic
        if ic.peer_bandwidth_bytes_per_s is None:
            return r
        share = ic.group_bandwidth_bytes_per_s(n) / ic.bandwidth_bytes_per_s
        return replace(r, link_bytes_per_s=r.link_bytes_per_s * share) if share < 1 else r

    def time(self, kind: Collective, n: int, m_bytes: float, nodes: int, est: bool) -> float:
        """One collective among ``n`` devices spread over ``nodes`` nodes (aligned groups).
        Estimated: one kernel launch, and ``COLLECTIVE_SYNC_S`` per level of the algorithm."""
        i = 1 if est else 0
        ic, intra = self.ic, self.intra[i]
        k, sync = (1, COLLECTIVE_SYNC_S) if est else (0, 0.0)
        if (est and self.nccl_hardware is not None and kind is Collective.ALL_REDUCE and n > 1
                and (nodes <= 1 or self.inter is None)):
            # a stack that calls NCCL: its launch + NCCL's ring model on the group's bus
            hw = self.nccl_hardware
            return op_time_s(0.0, 0.0, k, intra) + float(nccl_ring_all_reduce_s(
                n, m_bytes, nccl_bus_bytes_per_s(hw, n), pcie=link_is_pcie(hw)))
        if nodes <= 1 or self.inter is None:
            intra = self._group_rates(intra, n)
            return collective_time_s(kind, n, m_bytes, intra, ic.latency_s, ic.topology, k, sync)
        inter, a_inter = self.inter[i], ic.inter_node_latency_s or 0.0
        g = math.ceil(n / nodes)
        intra = self._group_rates(intra, g)
        fc = Topology.FULLY_CONNECTED          # switched fabric between nodes

        def local(kd, m):
            return collective_time_s(kd, g, m, intra, ic.latency_s, ic.topology, 0, sync)

        def remote(kd, m):
            return collective_time_s(kd, nodes, m, inter, a_inter, fc, 0, sync)
        launch = op_time_s(0.0, 0.0, k, intra)
        if kind is Collective.SEND_RECV:
            return collective_time_s(kind, 2, m_bytes, inter, a_inter, fc, k, sync)
        if kind is Collective.ALL_REDUCE:
            t = (local(Collective.REDUCE_SCATTER, m_bytes)
                 + remote(Collective.ALL_REDUCE, m_bytes / g)
                 + local(Collective.ALL_GATHER, m_bytes))
        elif kind is Collective.ALL_GATHER:
            t = remote(Collective.ALL_GATHER, m_bytes / g) + local(Collective.ALL_GATHER, m_bytes)
        elif kind is Collective.REDUCE_SCATTER:
            t = local(Collective.REDUCE_SCATTER, m_bytes) + remote(Collective.REDUCE_SCATTER,
                                                                   m_bytes / g)
        else:                                  # all-to-all: both links at once
            t = max(local(kind, m_bytes * (g - 1) / (n - 1)),
                    remote(kind, m_bytes * (n - g) / (n - 1)))
        return t + launch


@dataclass(frozen=True)
class CommCost:
    """One collective of a device's pass: per execution, ``count`` executions per pass."""
    phase: str
    stage: int
    name: str
    collective: Collective
    participants: int
    message_bytes: float
    sent_bytes: float          # bytes this device puts on its links per execution
    count: int
    group: str
    nodes: int                 # nodes the group spans (> 1: inter-node links)
    ideal_s: float             # per execution
    estimated_s: float

