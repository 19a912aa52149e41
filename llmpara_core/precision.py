"""Numeric precision of a scenario: bits per component (fractional allowed) and the compute
data type that selects the hardware's peak."""

from __future__ import annotations

import re

from dataclasses import dataclass
from enum import Enum

from .errors import ConfigError
from .limits import check_float


class DType(Enum):
    """Compute data types with their own peak on real hardware (bf16 shares fp16's peak)."""
    FP32 = "fp32"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    FP4 = "fp4"      # 4-bit float (E2M1) tensor-core path: NVIDIA Blackwell, AMD CDNA4


@dataclass(frozen=True)
class Precision:
    """Bits per element of each tensor family, and the data type the matmuls run in.

    Weight-only quantisation (W4A16, Q4_0) dequantises to ``compute_dtype`` = fp16.
    Norm weights and biases are kept at ``norm_bits`` (frameworks never quantise them).
    """
    weight_attn_bits: float = 16.0
    weight_ffn_bits: float = 16.0
    weight_embed_bits: float = 16.0
    activation_bits: float = 16.0
    kv_bits: float = 16.0
    compute_dtype: DType = DType.FP16
    norm_bits: float = 16.0
    name: str = "custom"

    def __post_init__(self):
        for f in ("weight_attn_bits", "weight_ffn_bits", "weight_embed_bits",
                  "activation_bits", "kv_bits", "norm_bits"):
            object.__setattr__(self, f, check_float("bits", getattr(self, f), f))
        if isinstance(self.compute_dtype, str):
            try:
                object.__setattr__(self, "compute_dtype", DType(self.compute_dtype.lower()))
            except ValueError:
                raise ConfigError(
                    f"compute_dtype must be one of {[d.value for d in DType]}, "
                    f"got {self.compute_dtype!r}") from None
        if not isinstance(self.compute_dtype, DType):
            raise ConfigError(f"compute_dtype must be a DType, got {self.compute_dtype!r}")


def _p(name, w, a, kv, dtype, embed=None, attn=None, norm=16.0):
    return Precision(weight_attn_bits=attn if attn is not None else w, weight_ffn_bits=w,
                     weight_embed_bits=embed if embed is not None else w, activation_bits=a,
                     kv_bits=kv, compute_dtype=dtype, norm_bits=norm, name=name)


# Named presets. Q4_0 = 18 bytes per 32 weights = 4.5 bits; Q8_0 = 34/32 = 8.5 bits;
# Q4_K_M ~ 4.85 bits averaged over a Llama checkpoint (llama.cpp file sizes).
PRECISION_PRESETS: dict[str, Precision] = {
    p.name: p for p in (
        _p("FP32", 32, 32, 32, DType.FP32, norm=32.0),
        _p("FP16", 16, 16, 16, DType.FP16),
        _p("BF16", 16, 16, 16, DType.FP16),
        _p("FP8", 8, 8, 8, DType.FP8),
        _p("W8A8", 8, 8, 8, DType.INT8, embed=16),
        _p("W8A16", 8, 16, 16, DType.FP16, embed=16),
        _p("W4A16", 4, 16, 16, DType.FP16, embed=16),
        _p("W4A8", 4, 8, 8, DType.INT8, embed=16),
        _p("Q8_0", 8.5, 16, 16, DType.FP16),
        _p("Q4_0", 4.5, 16, 16, DType.FP16),
        _p("Q4_K_M", 4.85, 16, 16, DType.FP16),
        _p("BitNet 1.58", 1.58, 8, 16, DType.INT8, embed=16),
        # NVFP4 (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
        # Inference", developer blog 2025): E2M1 values in blocks of 16 with one FP8 E4M3
        # scale: (16 x 4 + 8) / 16 = 4.5 bits (the one FP32 scale per tensor is negligible).
        # Activations are quantised the same way for the FP4 GEMMs; KV cache FP8 (as in
        # NVIDIA's NVFP4 checkpoints); embeddings and lm_head stay 16-bit.
        _p("NVFP4", 4.5, 4.5, 8, DType.FP4, embed=16),
        # MXFP4 (OCP Microscaling Formats (MX) Specification v1.0, 2023): E2M1 values in
        # blocks of 32 with one E8M0 (8-bit power-of-two) scale: (32 x 4 + 8) / 32 = 4.25 bits.
        # Same choices as NVFP4 for activations, KV cache (FP8) and embeddings.
        _p("MXFP4", 4.25, 4.25, 8, DType.FP4, embed=16),
    )
}


# llama.cpp's k-quant weight types (ggml Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K; the _S / _M / _L
# file mixes, e.g. Q4_K_M = Q4_K with some tensors in Q6_K): 256-weight super-blocks whose
# sub-block scales and minimums are themselves quantised (6-bit for Q4_K), unpacked inside the
# matrix-vector kernels (github ggml-org/llama.cpp ggml-common.h block_q4_K; ggml-metal.metal
# kernel_mul_mv_q4_K_f32_impl: kmask1/kmask2/kmask3 unpack the 12 scale bytes per block).
_KQUANT = re.compile(r"(?<![A-Za-z0-9])Q[2-8]_K(?:_[SML])?(?![A-Za-z0-9])", re.IGNORECASE)


def is_kquant(precision: Precision) -> bool:
    """Whether ``precision`` names a llama.cpp k-quant weight format (its ``name``: "Q4_K_M",
    "Q5_K_S (GGUF ...)", "Q6_K"), whose weights the Metal k-quant kernels stream
    (``Efficiency.kquant_stream_bytes_per_cu_cycle``)."""
    return bool(precision.name) and bool(_KQUANT.search(precision.name)) \
        and precision.weight_ffn_bits < 16


def precision_preset(name: str) -> Precision:
    """Look up a named precision preset, case-insensitively."""
    for key, p in PRECISION_PRESETS.items():
        if key.lower() == str(name).strip().lower():
            return p
    raise ConfigError(f"unknown precision preset {name!r}; choose from "
                      f"{', '.join(PRECISION_PRESETS)}")
