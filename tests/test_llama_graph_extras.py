"""Issue 27 (oss32): the kernels llama.cpp's CUDA graph launches beyond the operator list
(``measurements.llama_graph_extra_kernels``): bias adds, MoE routing, expert bias adds and the
weighted sum over the experts -- which rows they reach, how many, and what they cost."""

from __future__ import annotations

import pytest

from llmpara_core.calibration import default_table, fastpath
from llmpara_core.calibration import measurements as validation
from llmpara_core.units import S_PER_US


@pytest.fixture(scope="module")
def rows():
    measured, skipped = validation.read_shipped()
    return {r.measurement.row_id: r for r in validation.map_all(measured, skipped)[0]}


@pytest.fixture
def extras_on():
    saved = (validation.LLAMA_GRAPH_EXTRA_KERNELS, validation.LLAMA_GRAPH_EXTRA_KERNEL_S)
    validation.LLAMA_GRAPH_EXTRA_KERNELS = True
    validation.LLAMA_GRAPH_EXTRA_KERNEL_S = 0.90 * S_PER_US
    yield
    validation.LLAMA_GRAPH_EXTRA_KERNELS, validation.LLAMA_GRAPH_EXTRA_KERNEL_S = saved


def _estimate(row):
    return validation.predict_all([row], default_table())[0][0].estimated


def test_count_follows_the_graph(rows, extras_on):
    # gpt-oss: q/k/v/o bias adds 4, router bias + softmax + argsort + get_rows - the router's
    # absent q8_1 launch 3, three expert bias adds (add_id), k - 1 = 3 more adds: 13 a layer
    oss20 = rows["D0211"].model
    assert oss20.moe.experts_per_token == 4 and oss20.attention_bias
    assert validation.llama_graph_extra_kernels(rows["D0211"]) == 13 * oss20.num_hidden_layers
    oss120 = rows["D0221"].model
    assert validation.llama_graph_extra_kernels(rows["D0221"]) == 13 * oss120.num_hidden_layers


def test_only_llama_cpp_cuda_rows_of_graphs_with_such_ops(rows, extras_on):
    assert validation.llama_graph_extra_kernels(rows["D0209"]) > 0     # RTX 5070 Ti gpt-oss
    assert validation.llama_graph_extra_kernels(rows["D0218"]) == 0    # gpt-oss on Metal
    assert validation.llama_graph_extra_kernels(rows["D0163"]) == 0    # dense Llama, CUDA


def test_switch_off_leaves_the_efficiency_as_it_was(rows):
    row = rows["D0211"]
    eff = default_table().efficiency_for(row.hardware, "llama.cpp")
    saved = validation.LLAMA_GRAPH_EXTRA_KERNELS
    try:
        validation.LLAMA_GRAPH_EXTRA_KERNELS = False
        assert validation.llama_graph_extra_kernels(row) == 0
        off = validation.build_efficiency(row, eff)
        validation.LLAMA_GRAPH_EXTRA_KERNELS = True
        on = validation.build_efficiency(row, eff)
    finally:
        validation.LLAMA_GRAPH_EXTRA_KERNELS = saved
    assert on.step_overhead_s - off.step_overhead_s == pytest.approx(
        validation.llama_graph_extra_kernels(row) * validation.LLAMA_GRAPH_EXTRA_KERNEL_S
        if validation.LLAMA_GRAPH_EXTRA_KERNEL_S is not None else
        validation.llama_graph_extra_kernels(row) * off.kernel_overhead_s)


def test_extra_kernels_lengthen_the_decode_step_by_their_cost(rows, extras_on):
    row = rows["D0211"]
    saved = validation.LLAMA_GRAPH_EXTRA_KERNELS
    try:
        validation.LLAMA_GRAPH_EXTRA_KERNELS = False
        before = _estimate(row)
        validation.LLAMA_GRAPH_EXTRA_KERNELS = True
        after = _estimate(row)
    finally:
        validation.LLAMA_GRAPH_EXTRA_KERNELS = saved
    added_s = 1.0 / after - 1.0 / before          # tok/s of a batch-1 decode row
    assert added_s == pytest.approx(312 * 0.90 * S_PER_US, rel=1e-6)


def test_fast_path_matches_the_full_model(rows, extras_on):
    row = rows["D0211"]
    eff = default_table().efficiency_for(row.hardware, "llama.cpp")
    assert fastpath.features(row).predict(eff) == pytest.approx(_estimate(row), rel=1e-9)
