"""Hardware description: peak compute per data type, memory tiers, power, price, interconnect
and efficiency factors. Units are SI; the preset loader converts from the file's units."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from .errors import ConfigError, require_float
from .limits import check_float, check_int, check_name
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


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of peak compute and peak bandwidth, and a fixed cost per kernel.

    ``kv_read`` is the fraction of the achieved (``memory``-derated) bandwidth that attention
    reaches while reading the KV cache: batch-1 decode attention is a skinny, strided read
    that streams slower than weights (1.0 = as fast as weights)."""
    compute: float = 1.0
    memory: float = 1.0
    kernel_overhead_s: float = 0.0
    kv_read: float = 1.0

    def __post_init__(self):
        require_float("efficiency.compute", self.compute, lo=0, hi=1, lo_open=True)
        require_float("efficiency.memory", self.memory, lo=0, hi=1, lo_open=True)
        require_float("efficiency.kernel_overhead_s", self.kernel_overhead_s, lo=0, hi=1)
        require_float("efficiency.kv_read", self.kv_read, lo=0, hi=1, lo_open=True)


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

    def __post_init__(self):
        check_float("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s,
                    "interconnect.bandwidth [B/s]")
        check_float("latency_s", self.latency_s, "interconnect.latency [s]")
        check_int("devices", self.devices, "interconnect.devices")
        check_float("bandwidth_bytes_per_s", self.inter_node_bandwidth_bytes_per_s,
                    "interconnect.inter_node_bandwidth [B/s]", allow_none=True)
        check_float("latency_s", self.inter_node_latency_s, "interconnect.inter_node_latency [s]",
                    allow_none=True)
        if not isinstance(self.topology, Topology):
            raise ConfigError(f"interconnect.topology must be a Topology, got {self.topology!r}")


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


def _apply_fitted_efficiency() -> dict[str, HardwareClass]:
    """Replace the provisional class efficiencies by the fitted ones (presets/tables/
    efficiency.toml); return the devices whose memory behaves like another class's."""
    from .efficiency_table import class_values, device_classes   # stdlib-only reader

    def cls_of(name: str) -> HardwareClass:
        try:
            return HardwareClass(name)
        except ValueError:
            raise ConfigError(f"efficiency.toml: unknown hardware class {name!r}") from None
    for cls_name, values in class_values().items():
        cls = cls_of(cls_name)
        CLASS_DEFAULTS[cls] = replace(CLASS_DEFAULTS[cls], efficiency=Efficiency(**values))
    return {slug: cls_of(c) for slug, c in device_classes().items()}


# The built-in values above, before the fitted table replaces them (the fit starts from these).
PROVISIONAL_EFFICIENCY: dict[HardwareClass, Efficiency] = {
    c: d.efficiency for c, d in CLASS_DEFAULTS.items()}

# Preset slug -> class whose efficiency the device uses (memory technology differs from its
# class, e.g. GDDR6 "datacenter" cards stream like consumer GDDR cards).
DEVICE_EFFICIENCY_CLASS: dict[str, HardwareClass] = _apply_fitted_efficiency()

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
        for f, b in (("tdp_w", "power_w"), ("idle_w", "power_w"), ("price_usd", "price_usd"),
                     ("embodied_kgco2e", "embodied_kgco2e"), ("process_nm", "process_nm")):
            check_float(b, getattr(self, f), f, allow_none=True)
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
        """The preset's own efficiency, else the (fitted) default of its class, or of the class
        its memory behaves like (``DEVICE_EFFICIENCY_CLASS``)."""
        if self.efficiency is not None:
            return self.efficiency
        return CLASS_DEFAULTS[DEVICE_EFFICIENCY_CLASS.get(self.slug, self.hw_class)].efficiency

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
