"""Issue 27's prefill rules in the core: tile and wave quantisation of the prompt GEMMs of the
llama.cpp builds that ran them through cuBLAS (``roofline.wave_flops_factor``, the build from
``measurements.tiled_prompt_gemms``), and the layer split's prompt pipeline
(``parallel.evaluation.prompt_chunks``, llama.cpp PR #6017)."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np
import pytest

from llmpara_core import roofline
from llmpara_core.analysis import analyze
from llmpara_core.calibration import default_table, fastpath
from llmpara_core.calibration import measurements as validation
from llmpara_core.hardware import Architecture
from llmpara_core.parallel import evaluation


@pytest.fixture(scope="module")
def rows():
    measured, skipped = validation.read_shipped()
    return {r.measurement.row_id: r for r in validation.map_all(measured, skipped)[0]}


@pytest.fixture(scope="module")
def table():
    return default_table()


def _eff(table, row, waves: bool):
    eff = copy.copy(table.efficiency_for(row.hardware, row.framework))
    object.__setattr__(eff, "prompt_gemm_waves", waves)
    return eff


def test_tile_counts_of_a_known_gemm_on_the_a100():
    # CUTLASS's Sm80 tensor-op tile, 128 x 256 of (output features, tokens) as llama.cpp calls
    # cuBLAS: 256 tokens by 128 output columns
    tile = roofline.GEMM_TILE_BY_ARCHITECTURE["ampere"]
    assert tile == (256, 128)
    # 512 x 4096 on 108 SMs: 2 x 32 = 64 tiles, one wave of 108 slots
    assert roofline.gemm_quantisation(512, 4096, 108, tile) == pytest.approx(64 / 108)
    # 512 x 14336: 2 x 112 = 224 tiles in 3 waves; 512 x 1024: 16 tiles in one
    assert roofline.gemm_quantisation(512, 14336, 108, tile) == pytest.approx(224 / 324)
    assert roofline.gemm_quantisation(512, 1024, 108, tile) == pytest.approx(16 / 108)
    # a partial tile wastes its unused rows; no columns = not a GEMM
    assert roofline.gemm_quantisation(300, 128, 108, tile) == pytest.approx(300 / (108 * 256))
    assert roofline.gemm_quantisation(512, 0, 108, tile) == 1.0
    assert roofline.gemm_quantisation(300, 128, 108, tile, m_waste=False) \
        == pytest.approx(512 / (108 * 256))


def test_the_core_times_each_prompt_gemm_by_its_quantisation(rows, table):
    row = rows["D0467"]                # A100 PCIe (108 SMs), Llama-3-8B F16, pp512, May 2024
    assert validation.tiled_prompt_gemms(row)
    hw = row.hardware
    on = analyze(row.model, hw, row.precision, row.workload, _eff(table, row, True))
    off = analyze(row.model, hw, row.precision, row.workload, _eff(table, row, False))
    cols = {r.name: r.gemm_cols for r in on.prefill.rows}
    assert cols["q_proj"] == 4096 and cols["k_proj"] == 1024 and cols["ffn_gate_up"] == 14336
    assert cols["ffn_down"] == 4096 and cols["lm_head"] == 0 and cols["flash_attention"] == 0
    t_on = {r.name: r.estimated_s for r in on.prefill.rows}
    t_off = {r.name: r.estimated_s for r in off.prefill.rows}
    assert t_on["flash_attention"] == pytest.approx(t_off["flash_attention"])
    assert t_on["lm_head"] == pytest.approx(t_off["lm_head"])
    for name in ("q_proj", "k_proj", "ffn_gate_up", "ffn_down"):
        assert t_on[name] > t_off[name]
    # a compute-bound GEMM takes 1 / quantisation its time, its launches aside
    q = roofline.gemm_quantisation(512, 14336, 108, (256, 128))
    ov = hw.with_efficiency(_eff(table, row, True))
    k_s = next(r for r in on.prefill.rows if r.name == "ffn_gate_up").count \
        * ov.effective_efficiency.kernel_overhead_s
    assert (t_on["ffn_gate_up"] - k_s) == pytest.approx((t_off["ffn_gate_up"] - k_s) / q,
                                                        rel=1e-6)
    # the fit's fast path agrees with the full core
    f = fastpath.features(row)
    eff = table.efficiency_for(hw, row.framework)
    full = validation.predict_all([row], table)[0][0].estimated
    assert f.predict(eff) == pytest.approx(full, rel=1e-9)


def test_it_applies_only_to_the_builds_it_should(rows):
    notebook = rows["D0467"]       # May 2024 notebook build (cuBLAS prompts)
    scoreboard = rows["D0172"]     # 2025 build: MMQ with stream-k
    assert validation.llama_cpp_build_date(notebook) == "2024-05-10"
    assert validation.tiled_prompt_gemms(notebook)
    assert validation.llama_cpp_build_date(scoreboard) is None
    assert not validation.tiled_prompt_gemms(scoreboard)
    metal = next(r for r in rows.values()
                 if r.measurement.source.startswith(validation.CUBLAS_PROMPT_BUILDS[0])
                 and "metal" in r.measurement.framework.lower())
    assert not validation.tiled_prompt_gemms(metal)         # the same notebooks on Apple SoCs
    assert validation.build_efficiency(metal, default_table().efficiency_for(
        metal.hardware, metal.framework)).prompt_gemm_waves is False
    # a build after the cut-off
    later = replace(notebook, measurement=replace(notebook.measurement, source="x"))
    assert not validation.tiled_prompt_gemms(later)
    saved = validation.LLAMA_CPP_BUILD_DATES
    try:
        validation.LLAMA_CPP_BUILD_DATES = {"x": "2024-07-01"}
        assert not validation.tiled_prompt_gemms(later)
        validation.LLAMA_CPP_BUILD_DATES = {"x": "2024-06-01"}
        assert validation.tiled_prompt_gemms(later)
    finally:
        validation.LLAMA_CPP_BUILD_DATES = saved


def test_no_waves_at_few_rows_without_sms_or_a_cited_tile(rows, table):
    row = rows["D0467"]
    eff = _eff(table, row, True)
    hw = row.hardware
    assert roofline.wave_setup(hw, eff, 512.0) == (512.0, 108.0, (256, 128))
    assert roofline.wave_setup(hw, eff, 4096.0)[0] == 512.0          # n_ubatch rows per GEMM
    assert roofline.wave_setup(hw, eff, 32.0) == (0.0, 0.0, ())       # matrix-vector kernels
    assert roofline.wave_setup(hw, eff, None) == (0.0, 0.0, ())
    assert roofline.wave_setup(replace(hw, compute_units=None), eff, 512.0) == (0.0, 0.0, ())
    hopper = replace(hw, architecture=Architecture.HOPPER)
    assert roofline.wave_setup(hopper, eff, 512.0) == (0.0, 0.0, ())
    assert roofline.wave_setup(hw, _eff(table, row, False), 512.0) == (0.0, 0.0, ())
    # a decode step of the same build is untouched
    dec = next(r for r in rows.values() if validation.tiled_prompt_gemms(r)
               and r.measurement.metric == "decode_tok_s" and r.devices == 1)
    base = copy.copy(table.efficiency_for(dec.hardware, dec.framework))
    on = fastpath.features(dec).predict(base)
    object.__setattr__(base, "prompt_gemm_waves", False)
    saved = validation.PROMPT_GEMM_WAVES
    try:
        validation.PROMPT_GEMM_WAVES = False
        assert fastpath.features(dec).predict(base) == pytest.approx(on, rel=1e-12)
    finally:
        validation.PROMPT_GEMM_WAVES = saved


def _prefill_s(row, table, pipeline: bool) -> float:
    saved = evaluation.PROMPT_PIPELINE
    try:
        evaluation.PROMPT_PIPELINE = pipeline
        evaluation._shard_cached.cache_clear()
        return row.workload.prompt_len / validation.predict_all([row], table)[0][0].estimated
    finally:
        evaluation.PROMPT_PIPELINE = saved
        evaluation._shard_cached.cache_clear()


def test_layer_split_prompt_pipeline(rows, table):
    split4 = rows["D0479"]                     # A100 SXM4 x4, layer split, pp1024
    assert split4.pp == 4 and split4.workload.prompt_len == 1024
    for prompt in (512, 1024, 4096):
        row = replace(split4, workload=replace(split4.workload, prompt_len=prompt))
        n = math.ceil(prompt / 512)
        ratio = _prefill_s(row, table, False) / _prefill_s(row, table, True)
        # n micro-batches on 4 stages: 1 + (n - 1) / 4 passes instead of n (PR #6017); the
        # stages are not exactly even (embedding first, LM head last), so a little less
        formula = n / (1 + (n - 1) / 4)
        assert ratio <= formula * (1 + 1e-9)
        assert ratio == pytest.approx(formula, rel=0.06)
    one = rows["D0467"]                        # one device: nothing to pipeline
    ctx = evaluation._shard_ctx(one.model, one.hardware.with_efficiency(
        table.efficiency_for(one.hardware, one.framework)), one.precision, one.workload,
        validation._plan(one))
    assert evaluation.prompt_chunks(ctx) == 1


def test_generic_stack_without_micro_batches_does_not_pipeline(rows, table):
    split4 = rows["D0479"]
    eff = copy.copy(table.efficiency_for(split4.hardware, split4.framework))
    object.__setattr__(eff, "prompt_ubatch_tokens", 0.0)
    ctx = evaluation._shard_ctx(split4.model, split4.hardware.with_efficiency(eff),
                                split4.precision, split4.workload, validation._plan(split4))
    assert evaluation.prompt_chunks(ctx) == 1
    object.__setattr__(eff, "prompt_ubatch_tokens", 512.0)
    ctx = evaluation._shard_ctx(split4.model, split4.hardware.with_efficiency(eff),
                                split4.precision, split4.workload, validation._plan(split4))
    assert evaluation.prompt_chunks(ctx) == 2
    assert np.isfinite(evaluation.prompt_chunks(ctx))
