"""Hardware description: peak compute per data type, memory tiers, power, price, interconnect
and efficiency factors. Units are SI; the preset loader converts from the file's units."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from enum import Enum

from .errors import ConfigError, require_float, short
from .limits import bound, check_float, check_idle_le_tdp, check_int, check_name
from .precision import DType


class HardwareClass(Enum):
    DATACENTER_GPU = "datacenter-gpu"
    CONSUMER_GPU = "consumer-gpu"
    UNIFIED_SOC = "unified-soc"
    CPU = "cpu"
    MOBILE_NPU = "mobile-npu"
    PIM = "pim"
    CHIPLET = "chiplet"
    ASIC = "asic"


class MemoryType(Enum):
    """Main-memory technology (JEDEC family names as vendors print them)."""
    HBM2 = "HBM2"
    HBM2E = "HBM2e"
    HBM3 = "HBM3"
    HBM3E = "HBM3e"
    GDDR6 = "GDDR6"
    GDDR6X = "GDDR6X"
    GDDR7 = "GDDR7"
    LPDDR4X = "LPDDR4X"
    LPDDR5 = "LPDDR5"
    LPDDR5X = "LPDDR5X"
    DDR4 = "DDR4"
    DDR5 = "DDR5"
    SRAM = "SRAM"
    MRAM = "MRAM"
    NAND = "NAND"


class Architecture(Enum):
    """Chip generation (micro-architecture family) of a device."""
    VOLTA = "volta"
    TURING = "turing"
    AMPERE = "ampere"
    ADA = "ada"
    HOPPER = "hopper"
    BLACKWELL = "blackwell"
    RDNA3 = "rdna3"
    RDNA3_5 = "rdna3.5"
    RDNA4 = "rdna4"
    CDNA2 = "cdna2"
    CDNA3 = "cdna3"
    XE_HPG = "xe-hpg"
    APPLE_M1 = "apple-m1"
    APPLE_M2 = "apple-m2"
    APPLE_M3 = "apple-m3"
    APPLE_M4 = "apple-m4"
    TPU_V5 = "tpu-v5"
    GAUDI2 = "gaudi2"
    GAUDI3 = "gaudi3"
    X86 = "x86"
    ARM = "arm"
    HEXAGON = "hexagon"            # Qualcomm NPU
    MEDIATEK_APU = "mediatek-apu"  # MediaTek NPU


class Topology(Enum):
    RING = "ring"
    FULLY_CONNECTED = "fully-connected"   # NVSwitch / all-to-all
    MESH_2D = "mesh-2d"
    TORUS_2D = "torus-2d"


class LinkKind(Enum):
    """What a device's intra-node links are, where it changes how NCCL runs over them
    (``parallel.collectives``): NVLink (or an unstated link: NCCL's NVLink model) or PCIe, whose
    rings NCCL times with its PCI latencies, without LL128, at its PCI link bandwidth."""
    NVLINK = "nvlink"
    PCIE = "pcie"


class HostCpu(Enum):
    """The vendor of a PCIe board's host CPUs, where it changes whether NCCL lets its GPUs talk
    peer-to-peer through the CPU (``parallel.collectives.nccl_ring_uses_shm``)."""
    AMD = "amd"
    INTEL = "intel"


# Extra kernels per quantised matmul a hardware file may state (efficiency.act_quant_kernels).
MAX_ACT_QUANT_KERNELS = 8.0
# A compute unit streaming more than 1 kB per cycle is not a GPU (an SM's L1 moves ~128 B).
MAX_STREAM_BYTES_PER_CU_CYCLE = 1024.0
# The two weight-streaming bounds of an Efficiency (16-bit, quantised weights).
STREAM_FIELDS = ("stream_bytes_per_cu_cycle", "quant_stream_bytes_per_cu_cycle")
# Launches per execution of one operator a stack's kernel plan may state.
MAX_PLAN_LAUNCHES = 8.0
# Which units a stack's GEMMs run on (Efficiency; roofline.gemm_peaks).
GEMM_UNIT_FIELDS = ("gemm_fp16_acc16", "quant_gemm_int8")
# GPU architectures whose matrix units run the int8 MMA that llama.cpp's quantised matmuls
# (MMQ, q8_1 activations) use: NVIDIA Turing and newer (int8 mma.sync; ggml-cuda's MMQ takes
# its mma path from compute capability 7.5, below it dp4a) and AMD RDNA4 (WMMA int8:
# github ggml-org/llama.cpp PR #17156 "HIP: WMMA-MMQ kernels for RDNA 4", merged Nov 2025).
# Left out: RDNA3 / RDNA3.5 (PR #17576 added WMMA-MMQ there too, but their WMMA runs int8 at
# the fp16 rate, and a preset's int8 may be its NPU's), CDNA (not checked), Apple GPUs (no int8
# matrix unit: Metal dequantises to half), Intel (SYCL path not checked) and CPUs: their
# quantised matmuls run at the 16-bit rate.
INT8_MMA_ARCHITECTURES = ("turing", "ampere", "ada", "hopper", "blackwell", "rdna4")
# FP16 accumulation is never slower than FP32 accumulation and on no part more than twice as
# fast (GeForce Ampere, Ada and Blackwell: exactly 2x, NVIDIA's GA102, Ada and RTX Blackwell
# whitepapers; datacenter and professional parts: equal).
MAX_ACC16_RATIO = 2.0


def plan_launches(plan: tuple, name: str | None) -> float:
    """Kernel launches of one execution of operator ``name`` under a stack's kernel plan
    (``Efficiency.kernel_plan``; 1 where the plan does not name it)."""
    for n, k in plan:
        if n == name:
            return k
    return 1.0


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of peak compute and peak bandwidth, and fixed costs.

    ``memory`` is the fraction of peak DRAM bandwidth reached streaming weights; ``kv_read`` the
    fraction of that bandwidth attention reaches reading the KV cache (1.0 = as fast as
    weights). ``compute`` is the fraction of the dense peak a GEMM reaches with many tokens in
    flight; with ``gemm_half_tokens`` = M_half > 0 a pass with M tokens in flight reaches
    ``compute x M / (M + M_half)`` (tile/wave quantisation: a GEMM of M rows costs about as
    much as one of M + M_half rows; 0 = no such curve). ``kernel_overhead_s`` is a fixed cost
    per kernel launch; ``step_overhead_s`` per forward pass (scheduler, sampling, host sync)
    and ``seq_overhead_s`` per sequence per pass (per-request CPU work of a serving engine).
    ``attention_compute`` is the fraction of that GEMM rate prefill attention kernels reach
    (softmax, masking and the score matrix's tiles: attention FLOPs count 1 / it times).
    ``kv_reread`` is the share of a GQA group's K/V each further query head of the group
    reads again (``roofline.kv_read_factor``; 0 = once per group, 1 = once per query head).
    ``stage_hop_s`` is a fixed cost per pipeline-stage boundary per pass (the host hands the
    activations to the next device and waits for it: llama.cpp's layer split), on top of the
    link's own time. ``act_quant_kernels`` is the number of extra kernels launched per
    execution of a matmul whose weights are quantised (``Operator.quantized``): llama.cpp's
    CUDA/HIP back end quantises the activations to q8_1 in a kernel of their own before each
    quantised matrix-vector product (1 there; 0 where the kernels read the activations as
    they are: Metal, CPU, and the fused weight-only kernels of the other stacks).
    ``spec_host_seq_s`` is host work per sequence per pass that the stack hides behind the GPU
    in plain decoding (an overlap scheduler prepares pass i + 1 while pass i runs) but pays
    serially when it speculates, because its speculative modes switch that overlap off: it is
    added to every draft + verify iteration of speculative decoding, not to plain decoding.
    ``tp_row_copy_s`` > 0 marks a stack whose tensor parallelism splits each matmul's weights
    by rows across the devices and gathers on one device (llama.cpp's row split): every split
    matmul's input is copied to, and its output back from, each other device of the group --
    2 (TP - 1) copies per matmul, each costing this much beyond the link's own time (the host
    drives them) -- in place of the per-block all-reduces of Megatron-style TP.
    ``stream_bytes_per_cu_cycle`` > 0 caps the rate at which the stack's kernels stream an
    operator's 16-bit (or wider) weights at that many bytes per compute unit (SM, CU, Xe core)
    per clock cycle of the device (``Hardware.compute_units`` x ``boost_clock_mhz``);
    ``quant_stream_bytes_per_cu_cycle`` the same for quantised weights (``Operator.quantized``).
    A matrix-vector kernel keeps a bounded number of loads in flight per compute unit, so it
    draws at most that many bytes per unit per DRAM latency (Little's law), whatever the
    memory could deliver: the limit binds on wide memories fed by few units (llama.cpp's
    matrix-vector kernels on an A100's HBM). 0 = no such limit (and none on a device whose
    file gives no compute units or clock: ``roofline.weight_stream_limits``). Both are fitted
    on GPU kernel-class devices (SMs / CUs) and apply to those only.
    ``kquant_stream_bytes_per_cu_cycle`` > 0: the same bound for weights in llama.cpp's
    k-quant formats (Q2_K ... Q6_K and their _S/_M/_L mixes, ``precision.is_kquant``) on a
    class whose own value it is (Apple SoCs: bytes per GPU core per cycle of the Metal
    k-quant matrix-vector kernels; ``calibration.fitting.KQUANT_CLASSES``).
    ``kernel_plan`` = ((operator name, launches per execution), ...) for the operators a stack
    launches differently from one kernel each (``roofline.launches``): 0 where it fuses the
    operator into a neighbour's kernel, 2 where it splits it in two; unnamed operators launch
    one. Set by the stack's profile from its source, not by hardware files.
    ``quant_memory`` is the fraction of the weight-streaming rate (``memory`` x bandwidth) a
    stack's matmuls with quantised weights reach in decode (``Operator.quantized``): weight-only
    kernels that dequantise inside a matrix-vector product (gpt-fast's int8 / int4 paths)
    stream their fewer bytes more slowly than the 16-bit path streams its own; 1 = no
    difference. A share of the bandwidth, not a bound per compute unit (``roofline.
    weight_stream_limits`` combines the two). A stack profile's key (``quant_memory``); the
    shipped fit sets it for no stack (``calibration.stack_fit.QUANT_FORM`` and
    ``QUANT_FORM_BY_STACK``).
    ``quant_compute`` is the fraction of the GEMM rate (``compute``) of the unit that runs
    them a stack's matmuls with quantised weights reach at many tokens in flight
    (``Operator.quantized``): kernels that unpack blocks of quantised weights inside their
    inner loop (llama.cpp's MMQ kernels on q8_1 activations, its Metal kernels dequantising to
    half in threadgroup memory) run below the stack's 16-bit GEMM (cuBLAS / its F16 path);
    1 = no difference.
    ``gemm_fp16_acc16``: the stack's 16-bit GEMMs accumulate in FP16, so they run at the
    device's ``peak_fp16_acc16_flops_per_s`` where its file gives one (GeForce cards: twice
    the FP32-accumulate rate of the spec sheet) -- llama.cpp's CUDA back end calls cuBLAS with
    CUBLAS_COMPUTE_16F for F16 matmuls. ``quant_gemm_int8``: its matmuls with quantised
    weights run on the int8 tensor cores with 8-bit activations (llama.cpp's MMQ: q8_1
    activations, int8 mma.sync), at the device's int8 peak where its file gives one and its
    architecture has int8 MMA (``INT8_MMA_ARCHITECTURES``); else at the 16-bit rate.
    ``roofline.gemm_peaks`` applies both. ``prompt_ubatch_tokens`` > 0: the stack runs a
    pass in micro-batches of at most that many tokens (llama.cpp's n_ubatch), so its GEMMs
    have at most that many rows (``gemm_rows``). ``expert_half_tokens`` > 0: a stack whose
    dense GEMMs sit flat on the curve (``gemm_half_tokens`` 0) still times a MoE layer's
    routed-expert GEMMs, each over its share of the rows, on a curve with that half-point
    (``roofline.expert_flops_factor``). ``node_step_s``: a fixed cost per forward pass of a
    model instance that spans more than one node (``parallel``: one "node_step_sync" row on
    its first stage), on top of its collectives. ``quant_dequant_bytes`` > 0: the stack's
    prompt matmuls with quantised weights first dequantise the weights to 16 bits in a kernel
    of their own, then run the 16-bit GEMM (llama.cpp's CUDA back end before June 2024:
    ``DEQUANT_MIN_TOKENS``); the bytes that pass moves per quantised weight byte (read the
    block, write the 16-bit copy), paid once per micro-batch of a pass with more than
    ``DEQUANT_MIN_TOKENS`` rows, at the peak bandwidth and serially to the GEMM
    (``roofline.dequant_factor``). ``prompt_gemm_waves``: the stack's prompt GEMMs (more
    than ``roofline.WAVE_MIN_TOKENS`` rows) run as tiled GEMMs whose output tiles fill the SMs
    in whole waves, the last one partly idle (cuBLAS, as llama.cpp's CUDA builds before June
    2024 ran every prompt matmul: ``roofline.wave_flops_factor``); set per measurement row by
    its build (``calibration.measurements.build_efficiency``). ``nccl_all_reduce``: the
    stack's tensor-parallel all-reduces are plain NCCL calls, so an estimated all-reduce within
    a node is timed by NCCL's own tuning model (``parallel.collectives.Net.time``,
    ``nccl_ring_all_reduce_s``: its base and per-step latencies on the link's path, PCI or
    NVLink) instead of the one-shot estimate. Set by the stack (the reference stack's class
    values and its profile), not by hardware files. ``eager_launch_s``: the host time a build
    of the stack that dispatches every kernel from Python (PyTorch eager, no CUDA graph) pays
    per kernel launch on top of ``kernel_overhead_s``, fixed in time whatever the GPU; added
    only to the measurement rows whose build ran so (``calibration.measurements.eager_decode``
    and ``build_efficiency``: vLLM before its CUDA graphs), never to an estimate."""
    compute: float = 1.0
    memory: float = 1.0
    kernel_overhead_s: float = 0.0
    kv_read: float = 1.0
    gemm_half_tokens: float = 0.0
    step_overhead_s: float = 0.0
    seq_overhead_s: float = 0.0
    attention_compute: float = 1.0
    kv_reread: float = 0.0
    stage_hop_s: float = 0.0
    act_quant_kernels: float = 0.0
    spec_host_seq_s: float = 0.0
    tp_row_copy_s: float = 0.0
    stream_bytes_per_cu_cycle: float = 0.0
    quant_stream_bytes_per_cu_cycle: float = 0.0
    kquant_stream_bytes_per_cu_cycle: float = 0.0
    kv_stream_bytes_per_cu_cycle: float = 0.0
    kernel_plan: tuple = ()
    quant_compute: float = 1.0
    quant_memory: float = 1.0
    gemm_fp16_acc16: bool = False
    quant_gemm_int8: bool = False
    prompt_ubatch_tokens: float = 0.0
    expert_half_tokens: float = 0.0
    node_step_s: float = 0.0
    quant_dequant_bytes: float = 0.0
    prompt_gemm_waves: bool = False
    nccl_all_reduce: bool = False
    eager_launch_s: float = 0.0

    def __post_init__(self):
        check_float("efficiency_fraction", self.compute, "efficiency.compute")
        check_float("efficiency_fraction", self.memory, "efficiency.memory")
        require_float("efficiency.kernel_overhead_s", self.kernel_overhead_s, lo=0, hi=1)
        check_float("efficiency_fraction", self.kv_read, "efficiency.kv_read")
        require_float("efficiency.gemm_half_tokens", self.gemm_half_tokens, lo=0, hi=1e6)
        require_float("efficiency.step_overhead_s", self.step_overhead_s, lo=0, hi=1)
        require_float("efficiency.seq_overhead_s", self.seq_overhead_s, lo=0, hi=1)
        require_float("efficiency.stage_hop_s", self.stage_hop_s, lo=0, hi=1)
        check_float("efficiency_fraction", self.attention_compute, "efficiency.attention_compute")
        require_float("efficiency.kv_reread", self.kv_reread, lo=0, hi=1)
        require_float("efficiency.act_quant_kernels", self.act_quant_kernels, lo=0,
                      hi=MAX_ACT_QUANT_KERNELS)
        require_float("efficiency.spec_host_seq_s", self.spec_host_seq_s, lo=0, hi=1)
        require_float("efficiency.tp_row_copy_s", self.tp_row_copy_s, lo=0, hi=1)
        require_float("efficiency.prompt_ubatch_tokens", self.prompt_ubatch_tokens, lo=0,
                      hi=1e7)
        require_float("efficiency.expert_half_tokens", self.expert_half_tokens, lo=0, hi=1e6)
        require_float("efficiency.node_step_s", self.node_step_s, lo=0, hi=1)
        require_float("efficiency.eager_launch_s", self.eager_launch_s, lo=0, hi=1)
        require_float("efficiency.quant_dequant_bytes", self.quant_dequant_bytes, lo=0, hi=64)
        check_float("efficiency_fraction", self.quant_compute, "efficiency.quant_compute")
        check_float("efficiency_fraction", self.quant_memory, "efficiency.quant_memory")
        for f in STREAM_FIELDS + ("kquant_stream_bytes_per_cu_cycle",
                                  "kv_stream_bytes_per_cu_cycle"):
            require_float(f"efficiency.{f}", getattr(self, f), lo=0,
                          hi=MAX_STREAM_BYTES_PER_CU_CYCLE)
        if not isinstance(self.kernel_plan, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                for p in self.kernel_plan):
            raise ConfigError("efficiency.kernel_plan must be ((operator name, launches), ...)")
        for name, n in self.kernel_plan:
            require_float(f"efficiency.kernel_plan[{name}]", n, lo=0, hi=MAX_PLAN_LAUNCHES)
        for f in GEMM_UNIT_FIELDS + ("prompt_gemm_waves",):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"efficiency.{f} must be true or false, got "
                                  f"{short(getattr(self, f))}")

    def compute_at(self, tokens_in_flight: float | None) -> float:
        """Achieved fraction of the dense peak with ``tokens_in_flight`` rows per GEMM (None =
        the large-M value ``compute``)."""
        tokens_in_flight = self.gemm_rows(tokens_in_flight)
        if tokens_in_flight is None or self.gemm_half_tokens <= 0:
            return self.compute
        m = max(float(tokens_in_flight), 1.0)
        return self.compute * m / (m + self.gemm_half_tokens)

    @property
    def expert_curve_tokens(self) -> float:
        """Half-point of the curve routed-expert GEMMs are timed on: the stack's GEMM curve's,
        else ``expert_half_tokens``."""
        return self.gemm_half_tokens if self.gemm_half_tokens > 0 else self.expert_half_tokens

    def gemm_rows(self, tokens_in_flight: float | None) -> float | None:
        """Rows per GEMM of a pass with ``tokens_in_flight`` tokens: at most
        ``prompt_ubatch_tokens`` where the stack splits a pass into micro-batches of that many
        tokens (llama.cpp's n_ubatch), else all of them."""
        if tokens_in_flight is None or self.prompt_ubatch_tokens <= 0:
            return tokens_in_flight
        return min(float(tokens_in_flight), self.prompt_ubatch_tokens)

    def pass_overhead_s(self, batch: int | None) -> float:
        """Fixed cost of one forward pass over ``batch`` sequences [s]."""
        return self.step_overhead_s + self.seq_overhead_s * (batch or 0)


IDEAL = Efficiency(1.0, 1.0, 0.0)


@dataclass(frozen=True)
class MemoryTier:
    """One level of the memory hierarchy (fastest first in ``Hardware.memory_tiers``)."""
    name: str
    capacity_bytes: float
    bandwidth_bytes_per_s: float
    energy_j_per_byte: float | None = None
    latency_s: float | None = None

    def __post_init__(self):
        check_name("memory tier name", self.name)
        check_float("capacity_bytes", self.capacity_bytes, f"tier {self.name}: capacity [B]")
        check_float("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s,
                    f"tier {self.name}: bandwidth [B/s]")
        check_float("energy_j_per_byte", self.energy_j_per_byte,
                    f"tier {self.name}: energy per byte [J]", allow_none=True)
        check_float("latency_s", self.latency_s, f"tier {self.name}: latency [s]",
                    allow_none=True)


def _check_devices(devices) -> int:
    """A cluster's device count: an integer from 1 to the limit, with a message that names
    the limit as the tool's, not the file's, when it is exceeded."""
    most = int(bound("devices").hi)
    if isinstance(devices, int) and not isinstance(devices, bool) and devices > most:
        raise ConfigError(f"interconnect.devices: {short(devices)} is more than the {most:,} "
                          "devices this tool models")
    return check_int("devices", devices, "interconnect.devices")


@dataclass(frozen=True)
class Interconnect:
    """Links between devices of a multi-device system (per-device, unidirectional)."""
    bandwidth_bytes_per_s: float
    latency_s: float
    topology: Topology = Topology.RING
    devices: int = 1
    inter_node_bandwidth_bytes_per_s: float | None = None
    inter_node_latency_s: float | None = None
    devices_per_node: int | None = None
    # Direct links without a switch (a board whose devices each split their links among their
    # peers, e.g. NVIDIA's HGX H100 4-GPU: 6 of each GPU's 18 NVLinks to each of the other
    # three): the unidirectional bandwidth between one pair [B/s]. None: a switched fabric,
    # where any group reaches ``bandwidth_bytes_per_s`` (``group_bandwidth_bytes_per_s``).
    peer_bandwidth_bytes_per_s: float | None = None
    # The kind of the intra-node links (``LinkKind``); None: not stated (NCCL's NVLink model).
    link: "LinkKind | None" = None
    # A PCIe board whose devices hang off several CPU sockets: devices per socket, and the
    # bandwidth [B/s] NCCL gives the link between two sockets (NVIDIA/nccl src/graph/topo.h,
    # e.g. AMD_BW 16 GB/s, SKL_QPI_BW 10). A ring over more devices than one socket holds
    # crosses that link once per direction (``parallel.collectives.nccl_bus_bytes_per_s``).
    devices_per_socket: int | None = None
    socket_bandwidth_bytes_per_s: float | None = None
    # A PCIe board's host CPU vendor (``HostCpu``): NCCL's default P2P level depends on it, and
    # where P2P is off its rings go through host memory (``parallel.collectives``). None: not
    # stated (P2P, NCCL's PCIe link bandwidth).
    host_cpu: "HostCpu | None" = None

    def __post_init__(self):
        check_float("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s,
                    "interconnect.bandwidth [B/s]")
        check_float("bandwidth_bytes_per_s", self.peer_bandwidth_bytes_per_s,
                    "interconnect.peer_bandwidth [B/s]", allow_none=True)
        if self.peer_bandwidth_bytes_per_s is not None:
            if self.peer_bandwidth_bytes_per_s > self.bandwidth_bytes_per_s:
                raise ConfigError("interconnect.peer_bandwidth must not exceed the device's "
                                  "bandwidth (its links to one peer are a part of its links)")
            if self.topology is not Topology.FULLY_CONNECTED:
                raise ConfigError("interconnect.peer_bandwidth describes direct links between "
                                  "every pair: it needs topology fully-connected")
        check_float("latency_s", self.latency_s, "interconnect.latency [s]")
        _check_devices(self.devices)
        check_float("bandwidth_bytes_per_s", self.inter_node_bandwidth_bytes_per_s,
                    "interconnect.inter_node_bandwidth [B/s]", allow_none=True)
        check_float("latency_s", self.inter_node_latency_s, "interconnect.inter_node_latency [s]",
                    allow_none=True)
        if not isinstance(self.topology, Topology):
            raise ConfigError(f"interconnect.topology must be a Topology, got {self.topology!r}")
        if self.link is not None and not isinstance(self.link, LinkKind):
            raise ConfigError(f"interconnect.link must be a LinkKind, got {self.link!r}")
        check_float("bandwidth_bytes_per_s", self.socket_bandwidth_bytes_per_s,
                    "interconnect.socket_bandwidth [B/s]", allow_none=True)
        if (self.devices_per_socket is None) != (self.socket_bandwidth_bytes_per_s is None):
            raise ConfigError("interconnect.devices_per_socket and interconnect."
                              "socket_bandwidth go together (a board over several sockets)")
        if self.devices_per_socket is not None:
            _check_devices(self.devices_per_socket)
        if self.host_cpu is not None:
            if not isinstance(self.host_cpu, HostCpu):
                raise ConfigError(f"interconnect.host_cpu must be a HostCpu, got "
                                  f"{self.host_cpu!r}")
            if self.link is not LinkKind.PCIE:
                raise ConfigError("interconnect.host_cpu describes a PCIe board's host: it "
                                  "needs link pcie")

    def group_bandwidth_bytes_per_s(self, n: int) -> float:
        """Unidirectional link bandwidth [B/s] a device can use in a collective among ``n``
        devices of one node: all of it behind a switch; with direct links only
        (``peer_bandwidth_bytes_per_s``) the links to its n - 1 peers in the group (NCCL
        counts a GPU pair's NVLink bandwidth as links x per-link bandwidth:
        github NVIDIA/nccl src/graph/topo.cc, ``ncclTopoAddNvLinks``,
        ``ncclTopoConnectNodes(gpu, remote, LINK_NVL, count*nvlBw)``)."""
        if self.peer_bandwidth_bytes_per_s is None or n <= 1:
            return self.bandwidth_bytes_per_s
        return min(self.bandwidth_bytes_per_s, self.peer_bandwidth_bytes_per_s * (n - 1))


@dataclass(frozen=True)
class ClassDefaults:
    """Fallbacks for optional values a hardware file may omit, by hardware class."""
    efficiency: Efficiency
    idle_fraction_of_tdp: float          # idle power / TDP when idle_W is not given
    memory_energy_j_per_byte: float      # main-memory access energy when tiers do not say
    compute_energy_j_per_flop: float     # fp16 dynamic energy per FLOP


# Efficiencies: provisional first-order values (median implied bandwidth utilisation of batch-1
# decode per class in shared validation data: GDDR 0.70, HBM 0.48-0.6, unified SoC 0.69). The
# classes fitted on published measurements are replaced below by the values in
# presets/tables/efficiency.toml (written by scripts/fit_efficiency.py; see calibration.py).
# Energies: HBM ~3.9 pJ/bit (~31 pJ/B), GDDR6 ~7.5 pJ/bit, LPDDR5 ~4 pJ/bit; fp16 tensor-core FLOP ~0.3-1 pJ (see presets/tables/energy sources).
CLASS_DEFAULTS: dict[HardwareClass, ClassDefaults] = {
    HardwareClass.DATACENTER_GPU: ClassDefaults(Efficiency(0.70, 0.60, 4e-6), 0.15, 31e-12, 0.5e-12),
    HardwareClass.CONSUMER_GPU: ClassDefaults(Efficiency(0.70, 0.72, 4e-6), 0.06, 60e-12, 0.8e-12),
    HardwareClass.UNIFIED_SOC: ClassDefaults(Efficiency(0.60, 0.70, 6e-6), 0.05, 32e-12, 1.0e-12),
    HardwareClass.CPU: ClassDefaults(Efficiency(0.50, 0.60, 2e-6), 0.30, 60e-12, 5e-12),
    HardwareClass.MOBILE_NPU: ClassDefaults(Efficiency(0.40, 0.55, 10e-6), 0.05, 32e-12, 1.0e-12),
    HardwareClass.PIM: ClassDefaults(Efficiency(0.70, 0.80, 1e-6), 0.10, 10e-12, 1.0e-12),
    HardwareClass.CHIPLET: ClassDefaults(Efficiency(0.70, 0.80, 1e-6), 0.10, 20e-12, 1.0e-12),
    HardwareClass.ASIC: ClassDefaults(Efficiency(0.70, 0.70, 2e-6), 0.10, 20e-12, 0.5e-12),
}


def _apply_fitted_efficiency() -> tuple[dict, dict]:
    """Replace the provisional class efficiencies by the fitted ones (presets/tables/
    efficiency.toml); return its memory-technology and architecture tables."""
    from .efficiency_table import architecture_values, class_values, memory_type_values

    for cls_name, values in class_values().items():
        try:
            cls = HardwareClass(cls_name)
        except ValueError:
            raise ConfigError(f"efficiency.toml: unknown hardware class {cls_name!r}") from None
        CLASS_DEFAULTS[cls] = replace(CLASS_DEFAULTS[cls], efficiency=Efficiency(**values))
    return memory_type_values(), architecture_values()


# The built-in values above, before the fitted table replaces them (the fit starts from these).
PROVISIONAL_EFFICIENCY: dict[HardwareClass, Efficiency] = {
    c: d.efficiency for c, d in CLASS_DEFAULTS.items()}

# Fitted per memory technology ({memory, kv_read}) and per architecture ({compute,
# legacy_kernel_factor}); keys lower case.
MEMORY_TYPE_EFFICIENCY, ARCHITECTURE_EFFICIENCY = _apply_fitted_efficiency()


def _stack_class_efficiency() -> dict:
    """Per class, the fitted efficiency with the GEMM fractions every stack but the reference
    stack applies to (``[stack_class.*]`` of efficiency.toml; classes without one: none)."""
    from .efficiency_table import stack_class_values

    out = {}
    for cls_name, values in stack_class_values().items():
        try:
            cls = HardwareClass(cls_name)
        except ValueError:
            raise ConfigError(f"efficiency.toml: unknown hardware class {cls_name!r}") from None
        out[cls] = replace(CLASS_DEFAULTS[cls].efficiency, **values)
    return out


STACK_CLASS_EFFICIENCY: dict[HardwareClass, Efficiency] = _stack_class_efficiency()


def memory_family(memory_type: str) -> str:
    """The technology family of a memory type: "HBM3e" -> "hbm", "GDDR6X" -> "gddr",
    "LPDDR5X" -> "lpddr", "DDR5" -> "ddr"."""
    t = memory_type.strip().lower()
    for fam in ("lpddr", "gddr", "hbm", "ddr"):
        if t.startswith(fam):
            return fam
    return t


def enum_key(v) -> str | None:
    """Lower-case table key of a ``MemoryType``/``Architecture`` (or string); None if unset."""
    v = getattr(v, "value", v)
    return v.strip().lower() if isinstance(v, str) and v.strip() else None


MEMORY_FAMILIES = ("lpddr", "gddr", "hbm", "ddr")


def memory_factor_key(memory_type) -> str | None:
    """Key of an architecture's memory-controller factor for this memory technology's family
    ("GDDR6X" -> "memory_factor_gddr"): one generation's GDDR and HBM controllers are
    different designs (GA102 vs GA100), so each family has its own factor."""
    t = enum_key(memory_type)
    return f"memory_factor_{memory_family(t)}" if t else None


def lookup_memory_type(memory_type, table: dict) -> dict:
    """The entry of ``memory_type`` (exact, else its family) in ``table`` ({} if neither)."""
    t = enum_key(memory_type)
    if t is None:
        return {}
    return table.get(t) or table.get(memory_family(t)) or {}


# Architectures of GPUs programmed through CUDA / ROCm / Vulkan like a discrete card: a
# unified-memory device built on one (DGX Spark, Jetson, Ryzen AI Max) launches kernels and
# runs attention like a discrete GPU, not like Apple's Metal GPUs the unified-soc class is
# fitted on.
DISCRETE_GPU_ARCHITECTURES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell",
                              "rdna3", "rdna3.5", "rdna4", "cdna2", "cdna3", "xe-hpg")


# Classes whose weight streaming is set by the DRAM technology (GPU memory controllers with
# enough requests in flight). CPUs (limited by the cores' outstanding misses) and NPUs (DMA
# engines) keep their class values.
MEMORY_TYPE_CLASSES = (HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU,
                       HardwareClass.UNIFIED_SOC)


def kernel_class(cls: HardwareClass, architecture) -> HardwareClass:
    """The class whose kernel-side values (launch overhead, attention KV reads, GEMM
    fraction) a device uses: a unified-memory SoC with a discrete-GPU architecture uses the
    consumer GPUs'; every other device its own class."""
    if cls is HardwareClass.UNIFIED_SOC and enum_key(architecture) in DISCRETE_GPU_ARCHITECTURES:
        return HardwareClass.CONSUMER_GPU
    return cls


# The per-kernel fixed cost of GPUs scales with their clock: the class's ``kernel_overhead_s``
# holds at REFERENCE_CLOCK_MHZ and a device with boost clock f pays
# (REFERENCE_CLOCK_MHZ / f) ** CLOCK_OVERHEAD_EXPONENT times it (``clock_overhead_factor``).
# A launch's cost is partly the GPU's (command processing, block scheduling, the ramp and tail
# of a short kernel: cycles) and partly the host's and driver's (not the GPU's clock); the
# exponent says how much is the GPU's. 0.5, chosen on a grid 0, 0.25, 0.5, 0.75, 1 by the
# in-sample fit of the reference stack's batch-1 rows (median error 4.6, 4.3, 4.1, 4.4, 4.3 %;
# the issue-13 note lists the held-out figures of each). The A100's 1,410 MHz against the
# 1.7-2.6 GHz of the consumer GPUs the value is fitted on is what the datacenter rows needed
# a higher per-kernel cost for. Devices without ``boost_clock_mhz`` take the reference value.
REFERENCE_CLOCK_MHZ = 2000.0
CLOCK_OVERHEAD_EXPONENT = 0.5
CLOCKED_CLASSES = (HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU)


# Apple's Metal GPUs (kernel class unified-soc) get a per-kernel cost of their own clock too
# (issue 27): the unified class's ``kernel_overhead_s`` holds at UNIFIED_REFERENCE_CLOCK_MHZ
# and an Apple SoC with GPU clock f pays (UNIFIED_REFERENCE_CLOCK_MHZ / f) **
# UNIFIED_CLOCK_OVERHEAD_EXPONENT times it. What the rows say: fitting step time = a fixed cost
# + weight bytes / a rate per device on discussion #4167's Llama-2 7B tg128 rows (F16 / Q8_0 /
# Q4_0) gives a fixed cost of ~7 ms per token on the M1 family (GPU 1,270-1,296 MHz), ~5.5 ms
# on the M2 family (1,398 MHz), ~4.6 ms on the M3 Max (1,398) and 3.4-4.2 ms on the M4 Max
# (1,678), where the class's single per-kernel cost priced every generation alike (held out:
# M4 Max Q4_0 -11 %, Q8_0 -8 %, F16 -3 %, M1 rows +5 ... +16 %). Part of that fixed cost is
# the GPU's (a dispatch's ramp and tail, in GPU cycles) and part the host's: llama.cpp encodes
# every kernel of the graph into Metal command buffers on CPU threads for each token
# (ggml-org/llama.cpp issue #9507, "it is much slower to construct it [one command buffer] in
# a single thread"; PR #9698 moved part of that encoding off the critical path, tg128 +4-6 %
# on a 1B model), and the SoC's CPU gets faster with the same generations. The GPU clock of
# the preset (``boost_clock_MHz``) is thus a proxy for the SoC generation's speed of both,
# which is why the chosen exponent exceeds 1 (a cost purely in GPU cycles would be 1). Chosen
# on a grid by the held-out figure of the unified rows (`validate --regime batch-1 --loo`, the
# folds of the 23 Apple devices with batch-1 rows; 90 rows): exponent 0 (the model before,
# every Apple GPU alike) median |error| 4.89 %, mean 6.77 %, 36 rows within 4 %, 51 within
# 6 %; 1: 4.68 / 6.05 %, 35, 57; 2: 4.35 / 5.39 %, 43, 65; 3: 3.93 / 5.13 %, 46, 66; 4: 3.73 /
# 5.26 %, 47, 61. 3 is kept: the lowest mean and the most rows within 6 %; 4 buys one more
# row within 4 % with five fewer within 6 % (the clock standing in for the generation, a
# steeper exponent fits the generations' steps rather than a clock law). The in-sample fit
# (`validate --regime batch-1 --refit` per exponent, one refit each) orders them alike, so
# the choice does not rest on the held-out rows alone: unified median / mean |error| in
# sample 0: 3.79 / 5.41 %, 2: 3.29 / 4.57 %, 3: 3.11 / 4.42 %, 4: 3.07 / 4.51 %, 3 the lowest
# mean there too. Worse with it: the gpt-oss MXFP4 rows of the M1 Max / M1 Pro (-11 / -13 ->
# -19 / -17 %: the M1's higher per-kernel cost on a model of many small kernels). The
# reference is the M3 presets' GPU clock (1,398 MHz: hmc-tech, as quoted in their files; the
# M2 presets carry the same), so an Apple SoC file without ``boost_clock_MHz`` pays the class
# value of a mid-range generation.
# 0 switches it off (the model before).
UNIFIED_REFERENCE_CLOCK_MHZ = 1398.0
UNIFIED_CLOCK_OVERHEAD_EXPONENT = 3.0


def clock_overhead_factor(cls: HardwareClass, boost_clock_mhz: float | None) -> float:
    """How many times its kernel class's per-kernel cost a GPU of kernel class ``cls`` with
    boost clock ``boost_clock_mhz`` pays: discrete GPUs (``CLOCKED_CLASSES``) with
    ``CLOCK_OVERHEAD_EXPONENT``, Apple's Metal GPUs (kernel class unified-soc) with
    ``UNIFIED_CLOCK_OVERHEAD_EXPONENT``; 1 for other classes and unknown clocks."""
    if not boost_clock_mhz:
        return 1.0
    if cls is HardwareClass.UNIFIED_SOC:
        return (UNIFIED_REFERENCE_CLOCK_MHZ / boost_clock_mhz) ** UNIFIED_CLOCK_OVERHEAD_EXPONENT
    if cls not in CLOCKED_CLASSES:
        return 1.0
    return (REFERENCE_CLOCK_MHZ / boost_clock_mhz) ** CLOCK_OVERHEAD_EXPONENT


def fallback_notes(hardware: "Hardware", efficiency: Efficiency | None = None) -> list[str]:
    """What the estimate of ``hardware`` takes from its class because its file leaves an
    optional key out (nothing when the file sets its own ``[efficiency]``), and what it leaves
    out of ``efficiency`` (default: the hardware's) for want of a key."""
    eff = efficiency or hardware.effective_efficiency
    notes = []
    if eff.stream_bytes_per_cu_cycle and not (hardware.compute_units
                                              and hardware.boost_clock_mhz):
        notes.append(f"{hardware.name} has no compute_units (or boost_clock_MHz): the bound on "
                     f"how fast the stack's kernels stream weights per compute unit is not "
                     f"applied")
    if hardware.efficiency is not None:
        return notes
    if hardware.hw_class in MEMORY_TYPE_CLASSES and hardware.memory_type is None:
        notes.append(f"{hardware.name} has no memory_type: its weight-streaming bandwidth "
                     f"fraction is its class's ({hardware.hw_class.value})")
    kcls = kernel_class(hardware.hw_class, hardware.architecture)
    if kcls in CLOCKED_CLASSES and not hardware.boost_clock_mhz:
        notes.append(f"{hardware.name} has no boost_clock_MHz: its per-kernel launch cost is "
                     f"taken at {REFERENCE_CLOCK_MHZ:,.0f} MHz")
    elif (kcls is HardwareClass.UNIFIED_SOC and UNIFIED_CLOCK_OVERHEAD_EXPONENT
          and not hardware.boost_clock_mhz):
        notes.append(f"{hardware.name} has no boost_clock_MHz: its per-kernel launch cost is "
                     f"taken at {UNIFIED_REFERENCE_CLOCK_MHZ:,.0f} MHz")
    return notes


def generic_efficiency(cls: HardwareClass, memory_type, architecture, classes: dict | None = None,
                       memory_types: dict | None = None,
                       architectures: dict | None = None,
                       boost_clock_mhz: float | None = None) -> Efficiency:
    """The reference stack's (llama.cpp's) efficiency on a device: its kernel class's values
    (``kernel_class``), with the weight-streaming bandwidth fraction of its memory technology
    and the compute fraction of its architecture where the table has them (tables default to
    the shipped ones), and the per-kernel cost at its clock (``clock_overhead_factor``)."""
    cls = kernel_class(cls, architecture)
    eff = (classes or {}).get(cls) or CLASS_DEFAULTS[cls].efficiency
    mem = lookup_memory_type(memory_type,
                             MEMORY_TYPE_EFFICIENCY if memory_types is None else memory_types
                             ) if cls in MEMORY_TYPE_CLASSES else {}
    arch = ((ARCHITECTURE_EFFICIENCY if architectures is None else architectures)
            .get(enum_key(architecture) or "", {}))
    changes = {k: v for k, v in mem.items() if k == "memory"}
    factor = arch.get(memory_factor_key(memory_type) or "")
    if factor is not None and cls in MEMORY_TYPE_CLASSES:
        changes["memory"] = min(1.0, changes.get("memory", eff.memory) * factor)
    if "compute" in arch:
        changes["compute"] = arch["compute"]
    if "legacy_kernel_factor" in arch:
        changes["compute"] = changes.get("compute", eff.compute) * arch["legacy_kernel_factor"]
    clock = clock_overhead_factor(cls, boost_clock_mhz)
    if clock != 1.0:
        changes["kernel_overhead_s"] = eff.kernel_overhead_s * clock
    return replace(eff, **changes) if changes else eff


# When a device lacks a data type, use the next one that it has (never a faster one).
PEAK_FALLBACK: dict[DType, tuple[DType, ...]] = {
    DType.FP32: (DType.FP32, DType.FP16),
    DType.FP16: (DType.FP16, DType.FP32),
    DType.FP8: (DType.FP8, DType.FP16, DType.FP32),
    DType.INT8: (DType.INT8, DType.FP8, DType.FP16, DType.FP32),
    DType.INT4: (DType.INT4, DType.INT8, DType.FP8, DType.FP16, DType.FP32),
    # fp4 data cannot run on integer units: next is the fp8 path (e.g. Hopper runs FP4 GEMMs
    # as FP8 after dequantising), then fp16.
    DType.FP4: (DType.FP4, DType.FP8, DType.FP16, DType.FP32),
}


@dataclass(frozen=True)
class Hardware:
    """One device. ``memory_bandwidth_bytes_per_s``/``memory_capacity_bytes`` describe main
    memory; ``memory_tiers`` (fastest first) is the full hierarchy when the device has one."""
    name: str
    hw_class: HardwareClass
    memory_bandwidth_bytes_per_s: float
    memory_capacity_bytes: float
    peak_fp32_flops_per_s: float | None = None
    peak_fp16_flops_per_s: float | None = None
    peak_fp8_flops_per_s: float | None = None
    peak_int8_flops_per_s: float | None = None
    peak_int4_flops_per_s: float | None = None
    peak_fp4_flops_per_s: float | None = None
    tdp_w: float | None = None
    idle_w: float | None = None
    price_usd: float | None = None
    embodied_kgco2e: float | None = None
    process_nm: float | None = None
    memory_tiers: tuple[MemoryTier, ...] = ()
    interconnect: Interconnect | None = None
    efficiency: Efficiency | None = None      # None -> class default
    source: str = ""
    notes: str = ""
    slug: str = ""
    aliases: tuple[str, ...] = field(default=(), compare=False)
    memory_type: MemoryType | None = None      # main memory technology, None = unknown
    architecture: Architecture | None = None   # chip generation, None = unknown / research
    boost_clock_mhz: float | None = None       # GPU boost clock [MHz], None = unknown
    compute_units: float | None = None         # SMs / CUs / Xe cores, None = unknown
    # dense FP16 tensor rate with FP16 accumulation where it exceeds the FP32-accumulate
    # ``peak_fp16_flops_per_s`` (GeForce cards: 2x); None = the same rate
    peak_fp16_acc16_flops_per_s: float | None = None

    def __post_init__(self):
        check_name("hardware name", self.name)
        if not isinstance(self.hw_class, HardwareClass):
            raise ConfigError(f"class must be one of {[c.value for c in HardwareClass]}, "
                              f"got {self.hw_class!r}")
        check_float("bandwidth_bytes_per_s", self.memory_bandwidth_bytes_per_s,
                    "memory bandwidth [B/s]")
        check_float("capacity_bytes", self.memory_capacity_bytes, "memory capacity [B]")
        peaks = [self.peak_flops_per_s_raw(d) for d in DType]
        for d, v in zip(DType, peaks):
            check_float("peak_flops_per_s", v, f"peak {d.value} [FLOP/s]", allow_none=True)
        if all(v is None for v in peaks):
            raise ConfigError(f"{self.name}: at least one peak compute figure is required")
        for f, b in (("tdp_w", "tdp_w"), ("idle_w", "power_w"), ("price_usd", "price_usd"),
                     ("embodied_kgco2e", "embodied_kgco2e"), ("process_nm", "process_nm"),
                     ("boost_clock_mhz", "clock_mhz"), ("compute_units", "compute_units")):
            check_float(b, getattr(self, f), f, allow_none=True)
        check_idle_le_tdp(self.idle_w, self.tdp_w, f"{self.name}: ")
        acc16 = self.peak_fp16_acc16_flops_per_s
        if acc16 is not None:
            check_float("peak_flops_per_s", acc16, "peak fp16_acc16 [FLOP/s]")
            fp16 = self.peak_fp16_flops_per_s
            if fp16 is None:
                raise ConfigError(f"{self.name}: peak fp16_acc16 (FP16 accumulate) needs the "
                                  "fp16 peak (FP32 accumulate) it is a faster mode of")
            if not fp16 <= acc16 <= MAX_ACC16_RATIO * fp16 * (1 + 1e-9):
                raise ConfigError(
                    f"{self.name}: peak fp16_acc16 ({acc16 / 1e12:g} TFLOP/s) must be between "
                    f"the fp16 peak ({fp16 / 1e12:g}) and {MAX_ACC16_RATIO:g}x it: FP16 "
                    "accumulation is never slower than FP32 accumulation, and on no part more "
                    "than twice as fast")
        for f, kind in (("memory_type", MemoryType), ("architecture", Architecture)):
            value = getattr(self, f)
            if value is not None and not isinstance(value, kind):
                raise ConfigError(f"{self.name}: {f} must be one of "
                                  f"{[m.value for m in kind]} or None, got {value!r}")

    def peak_flops_per_s_raw(self, dtype: DType) -> float | None:
        return getattr(self, f"peak_{dtype.value}_flops_per_s")

    def peak_flops_per_s(self, dtype: DType) -> tuple[float, DType]:
        """Dense peak for ``dtype`` and the data type actually used (falls back to the next
        data type the device has, never to a faster one)."""
        for d in PEAK_FALLBACK[dtype]:
            v = self.peak_flops_per_s_raw(d)
            if v is not None:
                return v, d
        for d in DType:   # only lower-precision peaks exist (e.g. an int8-only NPU)
            v = self.peak_flops_per_s_raw(d)
            if v is not None:
                return v, d
        raise ConfigError(f"{self.name}: no peak compute figure")   # unreachable: validated

    @property
    def defaults(self) -> ClassDefaults:
        return CLASS_DEFAULTS[self.hw_class]

    @property
    def effective_efficiency(self) -> Efficiency:
        """The preset's own efficiency, else the fitted reference-stack efficiency of its
        class, memory technology and architecture (``generic_efficiency``)."""
        if self.efficiency is not None:
            return self.efficiency
        return generic_efficiency(self.hw_class, getattr(self, "memory_type", None),
                                  getattr(self, "architecture", None),
                                  boost_clock_mhz=getattr(self, "boost_clock_mhz", None))

    @property
    def silicon_efficiency(self) -> Efficiency:
        """``effective_efficiency`` with its class's GEMM fractions as every stack but the
        reference stack applies them (``STACK_CLASS_EFFICIENCY``: the class fit without the
        reference stack's build rules, which time only its pre-June-2024 builds' prompt GEMMs
        in whole waves): the rate a stream of GEMMs reaches averaged over their waves, on
        which the energy model calibrates the silicon's energy per FLOP
        (``metrics.energy_params``)."""
        if self.efficiency is not None:
            return self.efficiency
        return generic_efficiency(self.hw_class, getattr(self, "memory_type", None),
                                  getattr(self, "architecture", None), STACK_CLASS_EFFICIENCY,
                                  boost_clock_mhz=getattr(self, "boost_clock_mhz", None))

    @property
    def effective_idle_w(self) -> float | None:
        if self.idle_w is not None:
            return self.idle_w
        return None if self.tdp_w is None else self.tdp_w * self.defaults.idle_fraction_of_tdp

    @property
    def tiers(self) -> tuple[MemoryTier, ...]:
        """The memory hierarchy; a device without explicit tiers has one main-memory tier."""
        if self.memory_tiers:
            return self.memory_tiers
        return (MemoryTier("main", self.memory_capacity_bytes, self.memory_bandwidth_bytes_per_s,
                           self.defaults.memory_energy_j_per_byte, None),)

    def with_overrides(self, **changes) -> "Hardware":
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)

    def with_efficiency(self, efficiency: Efficiency | None) -> "Hardware":
        """A copy with another efficiency (None = the class's): ``replace`` without checking
        the other fields again -- ``__post_init__`` never reads ``efficiency``, and an
        Efficiency checks itself. Fits re-time one device with thousands of efficiencies."""
        out = copy.copy(self)
        object.__setattr__(out, "efficiency", efficiency)
        return out
