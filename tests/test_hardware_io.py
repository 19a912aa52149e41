"""Hardware TOML loading/saving and the shipped hardware presets."""

import copy
import functools
import math
import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from llmpara_core.errors import ConfigError
from llmpara_core.hardware import CLASS_DEFAULTS, HardwareClass, Topology
from llmpara_core.hardware_io import (dumps_toml, hardware_from_dict, hardware_to_dict,
                                      read_hardware_file)
from llmpara_core.precision import DType

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "hardware"
PRESET_FILES = sorted(PRESET_DIR.glob("*.toml"))

# Every `name` and `preset_key` of the reference tool's hardware presets (31 rows of
# shared/data/reference_hardware.csv; copied here because shared/ is not available in CI).
REFERENCE_NAMES = [
    "NVIDIA H100 SXM", "NVIDIA H100 PCIe", "NVIDIA A100 SXM (80GB)", "NVIDIA A100 SXM (40GB)",
    "NVIDIA A10", "NVIDIA RTX 4090", "NVIDIA RTX 4080", "AMD MI300X", "AMD MI250X",
    "Apple M3 Ultra", "Apple M2 Ultra", "Apple M2 Max", "Intel Gaudi 3",
    "Intel Xeon Platinum 8480+", "Snapdragon 8 Gen 3 NPU", "Snapdragon 8 Gen 2 NPU",
    "MediaTek Dimensity 9300 NPU", "DRAM-PIM (HBM-PIM)", "NAND-PIM (HILOS)", "SRAM-PIM (MRAM)",
    "Cambricon-LLM (Chiplet)", "Flash-LLM (NAND Storage)", "NAND-PIM (Near-Storage)",
    "Custom Hardware", "Custom Heterogeneous", "8×H100 NVLink Cluster", "4×A100 NVLink Cluster",
    "2×MI300X PCIe Cluster", "Apple M1 Pro (RooflineBench)", "RTX 3070Ti Laptop (RooflineBench)",
    "Jetson Orin Nano (RooflineBench)",
]
REFERENCE_KEYS = [   # preset_key column where it differs from name
    "8xH100 NVLink Cluster", "4xA100 NVLink Cluster", "2xMI300X PCIe Cluster",
]


@functools.lru_cache(maxsize=None)
def _load(path: Path):
    return read_hardware_file(path)


@pytest.fixture(scope="module")
def presets():
    return {p.stem: _load(p) for p in PRESET_FILES}


def _minimal() -> dict:
    return {
        "name": "Test Chip", "class": "datacenter-gpu", "source": "test",
        "memory_bandwidth_GBps": 1000, "memory_capacity_GB": 16,
        "peak_TFLOPS": {"fp16": 100},
    }


def _full() -> dict:
    d = _minimal()
    d["memory_tiers"] = [{"name": "SRAM", "capacity_GB": 0.5, "bandwidth_GBps": 8000,
                          "energy_pJ_per_byte": 1.0, "latency_ns": 1}]
    d["interconnect"] = {"bandwidth_GBps": 450, "latency_us": 0.2,
                         "topology": "fully-connected", "devices": 8}
    d["efficiency"] = {"compute": 0.7, "memory": 0.6, "kernel_overhead_us": 4,
                       "stage_hop_us": 250}
    return d


# ------------------------------------------------------------------------------ presets

def test_presets_exist():
    assert len(PRESET_FILES) >= 31 + 20


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_every_preset_parses_and_is_canonical(path):
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    hw = hardware_from_dict(data, origin=str(path), slug=path.stem)
    assert hw.slug == path.stem
    assert hw.source.strip() and hw.notes.strip()
    # nothing in the file is dropped or altered by loading (the file gains only its slug)
    assert hardware_to_dict(hw) == {**data, "slug": path.stem}


def test_every_reference_name_resolves(presets):
    known = {n for hw in presets.values() for n in (hw.name, *hw.aliases)}
    missing = [n for n in REFERENCE_NAMES + REFERENCE_KEYS if n not in known]
    assert not missing, f"reference presets without a file: {missing}"
    assert len(REFERENCE_NAMES) == 31


def _match_key(name: str) -> str:
    """How preset lookup compares names: case, punctuation and spaces ignored, '×' = 'x'."""
    return re.sub(r"[^0-9a-z]", "", name.lower().replace("×", "x"))


def test_names_and_aliases_are_unique(presets):
    owner: dict[str, str] = {}
    for slug, hw in presets.items():
        for n in {_match_key(k) for k in (slug, hw.name, *hw.aliases)}:
            assert n not in owner, f"{n!r} is used by both {owner[n]} and {slug}"
            owner[n] = slug


def test_h100_units(presets):
    hw = presets["nvidia-h100-sxm"]
    assert hw.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12, rel=1e-15)
    # the driver's total (nvidia-smi 81,559 MiB), not the spec sheet's "80GB" read as 80e9 B
    assert hw.memory_capacity_bytes == 81559 * 2**20
    assert hw.peak_flops_per_s_raw(DType.FP16) == pytest.approx(989.4e12, rel=1e-15)
    assert hw.peak_flops_per_s_raw(DType.FP8) == pytest.approx(1978.9e12, rel=1e-15)
    assert hw.tdp_w == 700 and hw.hw_class is HardwareClass.DATACENTER_GPU
    assert hw.interconnect is None and hw.memory_tiers == ()


def test_cluster_and_tier_units(presets):
    ic = presets["8x-nvidia-h100-sxm-nvlink"].interconnect
    assert ic.bandwidth_bytes_per_s == pytest.approx(450e9)     # unidirectional, per GPU
    assert ic.latency_s == pytest.approx(0.2e-6)
    assert ic.topology is Topology.FULLY_CONNECTED and ic.devices == 8
    ib = presets["16x-nvidia-h100-sxm-infiniband"].interconnect
    assert ib.devices == 16 and ib.devices_per_node == 8
    assert ib.inter_node_bandwidth_bytes_per_s == pytest.approx(50e9)
    assert ib.inter_node_latency_s == pytest.approx(2e-6)
    sram, dram, flash = presets["cambricon-llm-chiplet"].memory_tiers
    assert (sram.name, dram.name, flash.name) == ("SRAM", "DRAM", "Flash")
    assert sram.capacity_bytes == pytest.approx(0.5e9)
    assert sram.bandwidth_bytes_per_s == pytest.approx(8e12)
    assert dram.energy_j_per_byte == pytest.approx(3.7e-12)
    assert flash.latency_s == pytest.approx(100e-6)


def test_mobile_npu_reference_fp32_moved_to_int8(presets):
    hw = presets["qualcomm-snapdragon-8-gen-3"]
    assert hw.peak_flops_per_s_raw(DType.INT8) == pytest.approx(45e12)
    assert hw.peak_flops_per_s_raw(DType.FP32) is None


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_round_trips(path):
    hw = _load(path)
    d = hardware_to_dict(hw)
    back = hardware_from_dict(d, origin="round trip")
    assert back == hw
    assert back.aliases == hw.aliases       # aliases are excluded from ==
    assert tomllib.loads(dumps_toml(d)) == d


# ------------------------------------------------------------------------------ round trips

def test_round_trip_of_awkward_values():
    d = _full()
    d["name"] = 'Quote " back\\slash\ttab\nnewline \x01 ctrl \x7f del × µ'
    d["aliases"] = ["a", 'b "c"', "8×H100"]
    d["notes"] = "multi\nline"
    d["peak_TFLOPS"] = {"fp32": 0.1, "fp16": 1 / 3, "int4": 3e-5}   # awkward, within limits.HARDWARE
    d["memory_bandwidth_GBps"] = 0.1 + 0.2
    d["interconnect"].update(devices=16, devices_per_node=8, inter_node_bandwidth_GBps=50,
                             inter_node_latency_us=2.5)
    hw = hardware_from_dict(d, origin="awkward")
    out = hardware_to_dict(hw)
    assert tomllib.loads(dumps_toml(out)) == out
    back = hardware_from_dict(tomllib.loads(dumps_toml(out)), origin="awkward again")
    assert back == hw and back.aliases == hw.aliases


def test_dumps_toml_generic_shapes():
    d = {"a": 1, "b": -2.5, "c": True, "d": "x", "e": [], "f": [1, 2], "key with space": "v",
         "t": {"x": 1, "sub": {"y": "z"}, "arr": [{"k": 1}, {"k": 2}]},
         "aot": [{"n": "one", "inner": {"v": 1}}, {"n": "two"}]}
    assert tomllib.loads(dumps_toml(d)) == d


def test_dumps_toml_rejects_none():
    with pytest.raises(TypeError):
        dumps_toml({"a": None})


def test_optional_fields_and_defaults():
    d = _minimal()
    d["peak_TFLOPS"] = {"bf16": 123}
    hw = hardware_from_dict(d, origin="bf16.toml", slug="My Chip")
    assert hw.peak_flops_per_s_raw(DType.FP16) == pytest.approx(123e12)
    assert hw.slug == "my-chip"
    assert hardware_from_dict(_minimal(), origin="x").slug == "test-chip"
    d = _minimal() | {"slug": "from-file"}
    assert hardware_from_dict(d, origin="x", slug="from-arg").slug == "from-file"
    d = _minimal() | {"class": "consumer-gpu", "efficiency": {"compute": 0.5}}
    eff = hardware_from_dict(d, origin="x").efficiency
    default = CLASS_DEFAULTS[HardwareClass.CONSUMER_GPU].efficiency   # keys left out (fitted)
    assert eff.compute == 0.5 and eff.memory == default.memory
    assert eff.kernel_overhead_s == default.kernel_overhead_s and eff.kv_read == default.kv_read


# ------------------------------------------------------------------------------ hostile input

def _set(path: str, value):
    """A mutation: set (or with value=DELETE, remove) a dotted key; [0] indexes a list."""
    def apply(d):
        keys = path.split(".")
        target = d
        for k in keys[:-1]:
            target = target[int(k)] if isinstance(target, list) else target[k]
        if value is DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return apply


DELETE = object()

HOSTILE = [
    ("unknown top-level key", _set("memory_bandwith_GBps", 3350),
     ["bad.toml", "unknown key 'memory_bandwith_GBps'",
      "did you mean 'memory_bandwidth_GBps'?"]),
    ("unknown peak key", _set("peak_TFLOPS.fp61", 1),
     ["bad.toml", "'peak_TFLOPS.fp61'", "did you mean 'peak_TFLOPS.fp16'?"]),
    ("unknown interconnect key", _set("interconnect.latency_ms", 1),
     ["'interconnect.latency_ms'", "did you mean 'interconnect.latency_us'?"]),
    ("unknown tier key", _set("memory_tiers.0.bandwidth_GBs", 1),
     ["'memory_tiers[0].bandwidth_GBs'", "did you mean 'memory_tiers[0].bandwidth_GBps'?"]),
    ("unknown efficiency key", _set("efficiency.computer", 0.5),
     ["'efficiency.computer'", "did you mean 'efficiency.compute'?"]),
    ("nonsense key lists valid keys", _set("zzz", 1), ["unknown key 'zzz'", "valid keys:"]),
    ("string bandwidth", _set("memory_bandwidth_GBps", "3350"),
     ["bad.toml", "'memory_bandwidth_GBps' must be a number", "'3350'"]),
    ("bool is not a number", _set("tdp_W", True), ["'tdp_W' must be a number"]),
    ("negative capacity", _set("memory_capacity_GB", -80),
     ["bad.toml", "'memory_capacity_GB' must be > 0", "-80"]),
    ("capacity in two units", _set("memory_capacity_GiB", 16),
     ["bad.toml", "give the memory capacity once", "'memory_capacity_GB' and "
      "'memory_capacity_GiB' are set together", "GB = 1e9 B, GiB = 2^30 B"]),
    ("capacity missing", _set("memory_capacity_GB", DELETE),
     ["bad.toml", "missing required key 'memory_capacity_GB'", "'memory_capacity_GiB'",
      "'memory_capacity_MiB'"]),
    ("zero peak", _set("peak_TFLOPS.fp16", 0), ["'peak_TFLOPS.fp16' must be > 0"]),
    ("NaN bandwidth", _set("memory_bandwidth_GBps", math.nan),
     ["'memory_bandwidth_GBps' must be a finite number", "nan"]),
    ("infinite price", _set("price_USD", math.inf), ["'price_USD' must be a finite number"]),
    ("missing peak table", _set("peak_TFLOPS", DELETE),
     ["bad.toml", "missing required table [peak_TFLOPS]"]),
    ("empty peak table", _set("peak_TFLOPS", {}), ["[peak_TFLOPS] needs at least one of"]),
    ("peak not a table", _set("peak_TFLOPS", 989), ["'peak_TFLOPS' must be a table"]),
    ("bf16 disagrees with fp16", _set("peak_TFLOPS.bf16", 99),
     ["'peak_TFLOPS.bf16'", "must equal 'peak_TFLOPS.fp16'"]),
    ("missing name", _set("name", DELETE), ["missing required key 'name'"]),
    ("empty name", _set("name", "  "), ["'name' must not be empty"]),
    ("missing source", _set("source", DELETE), ["missing required key 'source'"]),
    ("missing bandwidth", _set("memory_bandwidth_GBps", DELETE),
     ["missing required key 'memory_bandwidth_GBps'"]),
    ("bad class", _set("class", "datacenter_gpu"),
     ["'class' = 'datacenter_gpu' is not one of", "did you mean 'datacenter-gpu'?"]),
    ("bad topology", _set("interconnect.topology", "star"),
     ["bad.toml", "'interconnect.topology' = 'star' is not one of", "fully-connected"]),
    ("tier with zero bandwidth", _set("memory_tiers.0.bandwidth_GBps", 0),
     ["bad.toml", "'memory_tiers[0].bandwidth_GBps' must be > 0"]),
    ("tier without name", _set("memory_tiers.0.name", DELETE),
     ["missing required key 'memory_tiers[0].name'"]),
    ("tiers not an array of tables", _set("memory_tiers", {"name": "x"}),
     ["'memory_tiers' must be an array of tables"]),
    ("zero devices", _set("interconnect.devices", 0), ["'interconnect.devices' must be >= 1"]),
    ("fractional devices", _set("interconnect.devices", 8.0),
     ["'interconnect.devices' must be an integer"]),
    ("devices not a multiple of per-node", _set("interconnect.devices_per_node", 3),
     ["must be a multiple of 'interconnect.devices_per_node'"]),
    ("multi-node without inter-node link", _set("interconnect.devices_per_node", 4),
     ["need 'interconnect.inter_node_bandwidth_GBps'"]),
    ("inter-node link on one node", _set("interconnect.inter_node_latency_us", 2),
     ["'interconnect.inter_node_*' keys need"]),
    ("efficiency above 1", _set("efficiency.memory", 1.5), ["'efficiency.memory' must be <= 1"]),
    ("kernel overhead caught by the dataclass", _set("efficiency.kernel_overhead_us", 2e6),
     ["bad.toml: ", "kernel_overhead_s"]),
    ("stage hop too large", _set("efficiency.stage_hop_us", 1e9),
     ["'efficiency.stage_hop_us' must be <= 100000"]),
    ("stage hop negative", _set("efficiency.stage_hop_us", -3), ["must be >= 0"]),
    ("stage hop not a number", _set("efficiency.stage_hop_us", "fast"),
     ["'efficiency.stage_hop_us' must be a number"]),
    ("aliases not a list", _set("aliases", "H100"), ["'aliases' must be a list"]),
    ("bad slug", _set("slug", "Not A Slug"), ["'slug' = 'Not A Slug'", "'not-a-slug'"]),
]


@pytest.mark.parametrize("mutate, expected", [h[1:] for h in HOSTILE],
                         ids=[h[0] for h in HOSTILE])
def test_hostile_input_raises_config_error(mutate, expected):
    d = copy.deepcopy(_full())
    mutate(d)
    with pytest.raises(ConfigError) as info:
        hardware_from_dict(d, origin="bad.toml")
    message = str(info.value)
    assert "\n" not in message
    for fragment in expected:
        assert fragment in message


@pytest.mark.parametrize("key, value, expected", [
    ("memory_capacity_GiB", -80, "'memory_capacity_GiB' must be > 0"),
    ("memory_capacity_MiB", "81559", "'memory_capacity_MiB' must be a number"),
    ("memory_capacity_MiB", True, "'memory_capacity_MiB' must be a number"),
    ("memory_capacity_GiB", math.nan, "'memory_capacity_GiB' must be a finite number"),
    ("memory_capacity_GiB", 1e300, "memory capacity [B] must be finite"),
    ("memory_capacity_MiB", 0, "'memory_capacity_MiB' must be > 0"),
])
def test_binary_capacity_key_is_checked(key, value, expected):
    d = _minimal()
    del d["memory_capacity_GB"]
    d[key] = value
    with pytest.raises(ConfigError) as info:
        hardware_from_dict(d, origin="bad.toml")
    assert str(info.value).startswith("bad.toml: ") and expected in str(info.value)


@pytest.mark.parametrize("key, value, capacity_bytes", [
    ("memory_capacity_GB", 80, 80e9),                   # GB = 1e9 B
    ("memory_capacity_GiB", 80, 80 * 2**30),            # GiB = 2^30 B
    ("memory_capacity_MiB", 81559, 81559 * 2**20),      # MiB = 2^20 B (nvidia-smi)
    ("memory_capacity_MiB", 1536, 1.5 * 2**30),         # not whole GiB: stays MiB
])
def test_capacity_units_and_round_trip(key, value, capacity_bytes):
    d = _minimal()
    del d["memory_capacity_GB"]
    d[key] = value
    hw = hardware_from_dict(d, origin="unit.toml")
    assert hw.memory_capacity_bytes == capacity_bytes
    out = hardware_to_dict(hw)           # written back in the unit it was given in
    assert {k: v for k, v in out.items() if k.startswith("memory_capacity")} == {key: value}
    assert hardware_from_dict(tomllib.loads(dumps_toml(out)), origin="again") == hw


def test_capacity_of_any_size_round_trips():
    # values set in SI (a page override, a design point) come back exactly, whatever key
    for cap in (85.5e9, 85520809984.0, 5e3, 3 * 2**20 + 1, 123456789.123, 2048e9):
        d = _minimal()
        hw = replace(hardware_from_dict(d, origin="x"), memory_capacity_bytes=cap)
        again = hardware_from_dict(tomllib.loads(dumps_toml(hardware_to_dict(hw))), "y")
        assert again.memory_capacity_bytes == cap


def test_duplicate_tier_names():
    d = _full()
    d["memory_tiers"].append(dict(d["memory_tiers"][0]))
    with pytest.raises(ConfigError, match=r"memory_tiers\[1\]\.name.*repeats"):
        hardware_from_dict(d, origin="bad.toml")


def test_nan_from_toml_text():
    text = dumps_toml(_minimal()).replace("memory_bandwidth_GBps = 1000",
                                          "memory_bandwidth_GBps = nan")
    with pytest.raises(ConfigError, match="finite"):
        hardware_from_dict(tomllib.loads(text), origin="nan.toml")


def test_read_hardware_file_errors(tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text("name = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="broken.toml: not valid TOML"):
        read_hardware_file(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        read_hardware_file(tmp_path / "absent.toml")
    good = tmp_path / "my-chip.toml"
    good.write_text(dumps_toml(_full()), encoding="utf-8")
    assert read_hardware_file(good).slug == "my-chip"
