"""The shipped hardware presets' memory_type, architecture and fp4 peaks; cluster presets
carry the per-device figures of their single-device preset; ``llmpara hardware`` shows them."""

import json
import tomllib
from pathlib import Path

import pytest

from llmpara_core.cli.base import main
from llmpara_core.hardware import Architecture, MemoryType
from llmpara_core.hardware_io import read_hardware_file
from llmpara_core.precision import DType

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "hardware"
PRESET_FILES = sorted(PRESET_DIR.glob("*.toml"))

# Presets without an architecture: the reference tool's research design points and templates,
# not a product of one chip generation.
NO_ARCHITECTURE = {
    "cambricon-llm-chiplet", "custom-hardware", "custom-heterogeneous", "dram-pim-hbm-pim",
    "flash-llm-nand-storage", "nand-pim-hilos", "nand-pim-near-storage", "sram-pim-mram",
}
# Presets without a memory type: a template with no memory at all (custom-hardware), design
# points whose headline bandwidth and capacity come from different tiers (cambricon-llm-chiplet,
# custom-heterogeneous), and unsourced design points whose name does not settle the technology
# (dram-pim-hbm-pim: which HBM generation; sram-pim-mram: SRAM or MRAM).
NO_MEMORY_TYPE = {
    "cambricon-llm-chiplet", "custom-hardware", "custom-heterogeneous", "dram-pim-hbm-pim",
    "sram-pim-mram",
}


# ------------------------------------------------------------------------------ presets

@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_every_preset_has_memory_type_and_architecture(path):
    hw = read_hardware_file(path)
    if path.stem in NO_MEMORY_TYPE:
        assert hw.memory_type is None, f"{path.stem} is listed as having no memory_type"
    else:
        assert isinstance(hw.memory_type, MemoryType), f"{path.stem}: no memory_type"
        # the source says where the value comes from
        assert "memory_type" in hw.source, f"{path.stem}: memory_type not sourced"
    if path.stem in NO_ARCHITECTURE:
        assert hw.architecture is None, f"{path.stem} is listed as having no architecture"
    else:
        assert isinstance(hw.architecture, Architecture), f"{path.stem}: no architecture"
        assert "architecture" in hw.source, f"{path.stem}: architecture not sourced"


@pytest.mark.parametrize("slug, memory, arch", [
    ("nvidia-h100-sxm", "HBM3", "hopper"), ("nvidia-a100-sxm-40gb", "HBM2", "ampere"),
    ("nvidia-a100-sxm-80gb", "HBM2e", "ampere"), ("nvidia-rtx-4090", "GDDR6X", "ada"),
    ("nvidia-rtx-5090", "GDDR7", "blackwell"), ("amd-mi300x", "HBM3", "cdna3"),
    ("apple-m1-8c", "LPDDR4X", "apple-m1"), ("apple-m4-max-40c", "LPDDR5X", "apple-m4"),
    ("google-tpu-v5e", "HBM2", "tpu-v5"), ("intel-xeon-platinum-8480-plus", "DDR5", "x86"),
])
def test_spot_checks(slug, memory, arch):
    hw = read_hardware_file(PRESET_DIR / f"{slug}.toml")
    assert (hw.memory_type.value, hw.architecture.value) == (memory, arch)


def _cluster_pairs():
    """(cluster preset, single-device preset) by the name the cluster's notes point to."""
    pairs = []
    for path in PRESET_FILES:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if "interconnect" in data and data["interconnect"]["devices"] > 1:
            pairs.append(path.stem)
    return pairs


# cluster preset -> the single-device preset its per-device figures must equal
CLUSTER_DEVICE = {
    "16x-nvidia-h100-sxm-infiniband": "nvidia-h100-sxm",
    "2x-amd-mi300x-pcie": "amd-mi300x",
    "2x-nvidia-rtx-4090-pcie": "nvidia-rtx-4090",
    "4x-nvidia-a100-sxm-80gb-nvlink": "nvidia-a100-sxm-80gb",
    "4x-nvidia-h100-sxm-hgx4": "nvidia-h100-sxm",
    "8x-nvidia-a100-pcie-80gb": "nvidia-a100-pcie-80gb",
    "8x-nvidia-a100-sxm-80gb-nvlink": "nvidia-a100-sxm-80gb",
    "8x-amd-mi300x-infinity-fabric": "amd-mi300x",
    "8x-nvidia-h100-sxm-nvlink": "nvidia-h100-sxm",
    "8x-nvidia-h200-sxm-nvlink": "nvidia-h200-sxm",
    "8x-nvidia-b200-nvlink": "nvidia-b200",
    "8x-nvidia-l40s-pcie": "nvidia-l40s",
}


def test_every_cluster_preset_is_mapped():
    assert sorted(_cluster_pairs()) == sorted(CLUSTER_DEVICE)


@pytest.mark.parametrize("cluster, device", sorted(CLUSTER_DEVICE.items()))
def test_cluster_carries_its_device_figures(cluster, device):
    c = read_hardware_file(PRESET_DIR / f"{cluster}.toml")
    d = read_hardware_file(PRESET_DIR / f"{device}.toml")
    for dtype in DType:
        assert c.peak_flops_per_s_raw(dtype) == d.peak_flops_per_s_raw(dtype), dtype
    for f in ("peak_fp16_acc16_flops_per_s", "memory_bandwidth_bytes_per_s",
              "memory_capacity_bytes", "tdp_w", "price_usd",
              "memory_type", "architecture", "hw_class"):
        assert getattr(c, f) == getattr(d, f), f


def test_rtx_4090_pair_fp16_is_the_spec_sheet_rate():
    """The 2x cluster's card carries the spec sheet's FP32-accumulate 165.15 dense TFLOPS as
    ``fp16`` and the FP16-accumulate 330.3 as ``fp16_acc16``, as the single card does."""
    c = read_hardware_file(PRESET_DIR / "2x-nvidia-rtx-4090-pcie.toml")
    assert c.peak_flops_per_s(DType.FP16) == (165.15e12, DType.FP16)
    assert c.peak_fp16_acc16_flops_per_s == 330.3e12



def test_fp4_presets_are_dense():
    """Dense fp4 = 2 x dense fp8 on every Blackwell tensor core (vendors' sparse figures are
    2 x dense again)."""
    have_fp4 = []
    for path in PRESET_FILES:
        hw = read_hardware_file(path)
        fp4 = hw.peak_flops_per_s_raw(DType.FP4)
        if fp4 is not None:
            have_fp4.append(path.stem)
            fp8 = hw.peak_flops_per_s_raw(DType.FP8)
            assert fp8 is None or fp4 == pytest.approx(2 * fp8, rel=0.02), path.stem
    for slug in ("nvidia-b200", "nvidia-gb200"):
        assert slug in have_fp4
    b200 = read_hardware_file(PRESET_DIR / "nvidia-b200.toml")
    assert b200.peak_flops_per_s(DType.FP4) == (9000e12, DType.FP4)
    gb200 = read_hardware_file(PRESET_DIR / "nvidia-gb200.toml")
    assert gb200.peak_flops_per_s(DType.FP4) == (10000e12, DType.FP4)


# ------------------------------------------------------------------------------ CLI

def test_cli_hardware_json_shows_the_new_fields(capsys):
    assert main(["hardware", "--format", "json"]) in (0, None)
    rows = {r["slug"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["nvidia-h100-sxm"]["memory_type"] == "HBM3"
    assert rows["nvidia-h100-sxm"]["architecture"] == "hopper"
    assert rows["nvidia-b200"]["peak_fp4_flops_per_s"] == 9000e12
    assert rows["nvidia-h100-sxm"]["peak_fp4_flops_per_s"] is None

