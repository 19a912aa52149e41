"""The llama.cpp build behind a prompt row (issue 27): CUDA builds before June 2024 dequantised a
prompt's quantised weights to F16 for FP16 cuBLAS (``measurements.cublas_prompts``,
``Efficiency.quant_dequant_bytes``, ``roofline.dequant_factor``); later builds run MMQ."""

import dataclasses

import pytest

from llmpara_core.analysis import analyze
from llmpara_core.calibration import default_table
from llmpara_core.calibration import measurements as validation
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency
from llmpara_core.roofline import DEQUANT_MIN_TOKENS, Rates, dequant_factor, op_time_s


@pytest.fixture(scope="module")
def rows():
    measured, skipped = validation.read_shipped()
    return {r.measurement.row_id: r for r in validation.map_all(measured, skipped)[0]}


@pytest.fixture
def builds(monkeypatch):
    """The what-if switched on (the shipped fit prices every prompt row as MMQ)."""
    monkeypatch.setattr(validation, "CUBLAS_PROMPT_SOURCES", validation.CUBLAS_PROMPT_BUILDS)


def test_the_shipped_fit_prices_every_row_as_mmq(rows, monkeypatch):
    assert validation.CUBLAS_PROMPT_SOURCES == ()
    assert not any(validation.cublas_prompts(r) for r in rows.values())
    eff = default_table().efficiency_for(rows["D0461"].hardware, "llama.cpp")
    # the notebook row's prompt GEMMs run in waves (measurements.PROMPT_GEMM_WAVES, on), its
    # quantised matmuls stay MMQ's: no dequantising pass, the int8 unit, the fitted share
    out = validation.build_efficiency(rows["D0461"], eff)
    assert out.prompt_gemm_waves and not eff.prompt_gemm_waves
    for f in ("quant_dequant_bytes", "quant_gemm_int8", "quant_compute"):
        assert getattr(out, f) == getattr(eff, f), f
    # (the notebook's host, an EPYC 9554, scales its per-kernel cost: measurements.
    # host_launch_factor -- off here, so nothing else changes the row's efficiency)
    monkeypatch.setattr(validation, "HOST_CLOCK_EXPONENT", 0.0)
    with validation.prompt_gemm_waves(False):
        assert validation.build_efficiency(rows["D0461"], eff) is eff


def test_dequant_factor_per_micro_batch_above_the_mmq_limit():
    eff = Efficiency(quant_dequant_bytes=4.0, prompt_ubatch_tokens=512.0)
    assert dequant_factor(eff, None) == 0.0
    assert dequant_factor(eff, 1) == 0.0                       # decode: MMVQ reads blocks
    assert dequant_factor(eff, DEQUANT_MIN_TOKENS) == 0.0
    assert dequant_factor(eff, DEQUANT_MIN_TOKENS + 1) == 4.0
    assert dequant_factor(eff, 512) == 4.0
    assert dequant_factor(eff, 4096) == 8 * 4.0                # eight micro-batches
    assert dequant_factor(Efficiency(), 4096) == 0.0           # MMQ builds: no such pass
    assert dequant_factor(dataclasses.replace(eff, prompt_ubatch_tokens=0.0), 4096) == 4.0


def test_dequant_pass_is_serial_memory_time_of_quantised_weights_only():
    base = Rates(1e12, 1e11, 0.0, None)
    deq = dataclasses.replace(base, dequant_bytes=3.0)
    flops, mem, w = 1e9, 1e6, 5e5
    t0 = op_time_s(flops, mem, 0, base, weight_bytes=w, quantized=1.0)
    assert op_time_s(flops, mem, 0, deq, weight_bytes=w, quantized=1.0) == pytest.approx(
        t0 + 3.0 * w / 1e11)
    assert op_time_s(flops, mem, 0, deq, weight_bytes=w, quantized=0.0) == pytest.approx(t0)


def test_hostile_dequant_bytes_refused():
    for bad in (-1.0, float("nan"), 1e9, "4"):
        with pytest.raises(ConfigError):
            Efficiency(quant_dequant_bytes=bad)


def test_which_rows_ran_the_cublas_path(rows, builds):
    assert validation.cublas_prompts(rows["D0461"])        # notebook, A100 PCIe, Q4_K_M
    assert not validation.cublas_prompts(rows["D0467"])    # same notebook, F16 weights
    assert not validation.cublas_prompts(rows["D0174"])    # 2025 CUDA scoreboard: MMQ
    metal = [r for r in rows.values() if r.measurement.source.startswith(
        validation.CUBLAS_PROMPT_SOURCES) and "metal" in r.measurement.framework.lower()
             and r.precision.weight_ffn_bits < 16]
    assert metal and not any(validation.cublas_prompts(r) for r in metal)


def test_build_efficiency_and_the_estimate_agree(rows, builds):
    row = rows["D0461"]
    eff = default_table().efficiency_for(row.hardware, "llama.cpp")
    assert eff.quant_gemm_int8 and eff.quant_dequant_bytes == 0.0
    built = validation.build_efficiency(row, eff)
    assert not built.quant_gemm_int8 and built.quant_compute == 1.0
    assert built.quant_dequant_bytes == pytest.approx(1.0 + 16.0 / row.precision.weight_ffn_bits)
    assert eff.quant_gemm_int8           # the table's efficiency is not changed
    rep = analyze(row.model, row.hardware.with_efficiency(built), row.precision, row.workload)
    assert validation.predict(row).estimated == pytest.approx(
        rep.estimated.prefill_tokens_per_s, rel=1e-9)
    # the pass costs time: slower than the same efficiency without it
    plain = dataclasses.replace(built, quant_dequant_bytes=0.0)
    rep0 = analyze(row.model, row.hardware.with_efficiency(plain), row.precision, row.workload)
    assert rep.estimated.ttft_s > rep0.estimated.ttft_s
    # MMQ rows keep the table's GEMM path (a 2025 scoreboard row: only its kernel plan,
    # measurements.fused_build, may differ)
    mmq = validation.build_efficiency(rows["D0174"], eff)
    assert mmq.quant_gemm_int8 and mmq.quant_dequant_bytes == 0.0
    assert mmq.quant_compute == eff.quant_compute and not mmq.prompt_gemm_waves
    assert dataclasses.replace(mmq, kernel_plan=eff.kernel_plan) == eff

