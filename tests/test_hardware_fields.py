"""Hardware fields memory_type, architecture and the fp4 peak (loader, writer, validation,
peak selection) and the NVFP4/MXFP4 precision presets. The shipped presets' values of these
fields are checked in test_hardware_preset_fields.py."""

import tomllib

import pytest

from llmpara_core.errors import ConfigError, did_you_mean
from llmpara_core.hardware import Architecture, Hardware, HardwareClass, MemoryType
from llmpara_core.hardware_io import dumps_toml, hardware_from_dict, hardware_to_dict
from llmpara_core.memory import weight_bytes
from llmpara_core.model import count_params
from llmpara_core.precision import DType, precision_preset
from llmpara_core.presets import load_model


def _minimal(**extra) -> dict:
    d = {"name": "Test Chip", "class": "datacenter-gpu", "source": "test",
         "memory_bandwidth_GBps": 1000, "memory_capacity_GB": 16, "peak_TFLOPS": {"fp16": 100}}
    d.update(extra)
    return d


# ------------------------------------------------------------------------------ loader

@pytest.mark.parametrize("key, value, expected", [
    ("memory_type", "hbm3", ["bad.toml", "'memory_type' = 'hbm3' is not one of",
                             "did you mean 'HBM3'?"]),
    ("memory_type", "GDDR6x", ["did you mean 'GDDR6X'?"]),
    ("memory_type", "LPDDR5-X", ["'memory_type'", "did you mean 'LPDDR5X'?"]),
    ("memory_type", 3, ["'memory_type' must be a string"]),
    ("memory_type", "", ["'memory_type' must not be empty"]),
    ("architecture", "Hopper", ["'architecture' = 'Hopper' is not one of",
                                "did you mean 'hopper'?"]),
    ("architecture", "blackwel", ["did you mean 'blackwell'?"]),
    ("architecture", "apple m3", ["did you mean 'apple-m3'?"]),
    ("peak_TFLOPS.fp4", 0, ["'peak_TFLOPS.fp4' must be > 0"]),
    ("peak_TFLOPS.fp4", "9000", ["'peak_TFLOPS.fp4' must be a number"]),
    ("peak_TFLOPS.nvfp4", 1, ["'peak_TFLOPS.nvfp4'", "did you mean 'peak_TFLOPS.fp4'?"]),
])
def test_bad_values_are_rejected(key, value, expected):
    d = _minimal()
    if key.startswith("peak_TFLOPS."):
        d["peak_TFLOPS"][key.split(".")[1]] = value
    else:
        d[key] = value
    with pytest.raises(ConfigError) as info:
        hardware_from_dict(d, origin="bad.toml")
    msg = str(info.value)
    assert "\n" not in msg
    for fragment in expected:
        assert fragment in msg


def test_dataclass_rejects_a_string_enum():
    with pytest.raises(ConfigError, match="memory_type must be one of"):
        Hardware("x", HardwareClass.CPU, 1e9, 1e9, peak_fp32_flops_per_s=1e12,
                 memory_type="DDR5")
    with pytest.raises(ConfigError, match="architecture must be one of"):
        Hardware("x", HardwareClass.CPU, 1e9, 1e9, peak_fp32_flops_per_s=1e12,
                 architecture="x86")


def test_new_keys_are_optional_and_round_trip():
    plain = hardware_from_dict(_minimal(), origin="t")
    assert plain.memory_type is None and plain.architecture is None
    assert "memory_type" not in hardware_to_dict(plain)
    assert "architecture" not in hardware_to_dict(plain)
    d = _minimal(memory_type="HBM3e", architecture="blackwell",
                 peak_TFLOPS={"fp16": 2250, "fp8": 4500, "fp4": 9000})
    hw = hardware_from_dict(d, origin="t")
    assert hw.memory_type is MemoryType.HBM3E and hw.architecture is Architecture.BLACKWELL
    assert hw.peak_fp4_flops_per_s == 9000e12
    out = hardware_to_dict(hw)
    assert out == {**d, "slug": "test-chip"}
    assert hardware_from_dict(tomllib.loads(dumps_toml(out)), origin="t") == hw


def test_did_you_mean_ignore_case():
    assert did_you_mean("hbm3E", ["HBM3", "HBM3e"], n=1, ignore_case=True) == \
        "; did you mean 'HBM3e'?"
    assert did_you_mean("hbm3E", ["HBM3", "HBM3e"], n=1) == ""   # case-sensitive: no match


# ------------------------------------------------------------------------------ fp4 peaks

def _hw(**peaks) -> Hardware:
    return Hardware("t", HardwareClass.DATACENTER_GPU, 1e12, 1e9,
                    **{f"peak_{k}_flops_per_s": v for k, v in peaks.items()})


def test_fp4_peak_is_selected_when_present():
    assert _hw(fp16=1e15, fp8=2e15, fp4=4e15).peak_flops_per_s(DType.FP4) == (4e15, DType.FP4)


@pytest.mark.parametrize("peaks, expected", [
    ({"fp16": 1e15, "fp8": 2e15, "int8": 2e15, "int4": 4e15}, (2e15, DType.FP8)),  # Hopper/Ada
    ({"fp16": 1e15, "int8": 2e15, "int4": 4e15}, (1e15, DType.FP16)),   # Ampere: no int path
    ({"fp32": 1e13}, (1e13, DType.FP32)),
    ({"int8": 4e13}, (4e13, DType.INT8)),       # int8-only NPU: the only peak there is
])
def test_fp4_falls_back_to_the_next_float_type(peaks, expected):
    assert _hw(**peaks).peak_flops_per_s(DType.FP4) == expected


def test_fp4_is_never_used_for_other_types():
    hw = _hw(fp16=1e15, fp4=4e15)
    assert hw.peak_flops_per_s(DType.FP8) == (1e15, DType.FP16)
    assert hw.peak_flops_per_s(DType.INT4) == (1e15, DType.FP16)


# ------------------------------------------------------------------------------ precisions

def test_nvfp4_and_mxfp4_bits():
    nv, mx = precision_preset("NVFP4"), precision_preset("mxfp4")
    # NVFP4: 16 E2M1 values (16 x 4 = 64 bits) + one E4M3 scale (8 bits) = 72 bits / 16
    # = 4.5 bits = 0.5625 bytes per weight.
    assert nv.weight_ffn_bits == nv.weight_attn_bits == 4.5
    # MXFP4: 32 E2M1 values (128 bits) + one E8M0 scale (8 bits) = 136 bits / 32
    # = 4.25 bits = 0.53125 bytes per weight.
    assert mx.weight_ffn_bits == mx.weight_attn_bits == 4.25
    for p in (nv, mx):
        assert p.compute_dtype is DType.FP4
        assert p.kv_bits == 8 and p.weight_embed_bits == 16 and p.norm_bits == 16


def test_nvfp4_weight_bytes_of_a_model():
    model = load_model("llama-3.1-8b")
    pc = count_params(model)
    body = pc.attention + pc.ffn_dense + pc.moe_router + pc.moe_experts + pc.moe_shared
    embed = pc.embedding + pc.lm_head
    # bytes = body x 0.5625 + (embed + norms) x 2
    assert weight_bytes(model, precision_preset("NVFP4")) == pytest.approx(
        body * 0.5625 + (embed + pc.norms) * 2)
    assert weight_bytes(model, precision_preset("MXFP4")) == pytest.approx(
        body * 0.53125 + (embed + pc.norms) * 2)
