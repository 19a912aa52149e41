"""Issue 27 (gf32): a row run through AMD's ROCm / HIP runtime pays
``measurements.HIP_GRAPH_NODE_EXTRA_S`` more per kernel launch (``measurements.hip_runtime``):
a replayed HIP graph's per-node dispatch (cited, ROCm/rocm-systems issue #10834), not fitted."""

from dataclasses import replace

import pytest

from llmpara_core.calibration import default_table
from llmpara_core.calibration import measurements as validation
from llmpara_core.units import S_PER_US

SRC = "github pytorch-labs/gpt-fast@32971d3129541c5bfb4f715abc33d1c5f408d204:README.md"


def _row(hw, framework, quant="BF16", bits=16.0, tok_s=76.33):
    m = validation.Measurement(
        "HIPT", hw, "Llama-2-7B", "decode_tok_s", tok_s, framework=framework,
        num_devices=1, parallelism="single", quant=quant, weight_bits=bits,
        context_or_prompt_len=5, gen_len=200, source=SRC)
    out = validation.map_measurement(m)
    assert isinstance(out, validation.Mapped), out
    return out


def _step_s(row, eff):
    return 1.0 / validation.timings(row, eff)[1].decode_tokens_per_s


def test_which_rows_ran_through_hip():
    """Stacks that name ROCm or HIP: yes; CUDA, or llama.cpp's Vulkan back end on an AMD card:
    no. Of the shipped rows only gpt-fast's two MI250X GCD rows."""
    assert validation.hip_runtime(_row("AMD Instinct MI250X (one GCD)",
                                       "gpt-fast (PyTorch compile, ROCm)"))
    assert validation.hip_runtime(_row("AMD Instinct MI250X (one GCD)", "llama.cpp (HIP)"))
    assert not validation.hip_runtime(_row("AMD Instinct MI250X (one GCD)", "llama.cpp (Vulkan)"))
    assert not validation.hip_runtime(_row("NVIDIA A100-SXM4-80GB (power-limited 330 W)",
                                           "gpt-fast (PyTorch compile)"))
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    assert sorted(r.measurement.row_id for r in mapped if validation.hip_runtime(r)) == \
        ["D0633", "D0634"]


def test_hip_row_pays_the_cited_cost_per_launch(monkeypatch):
    """The cited figure is HIP's graph replay per node less Vulkan's on the same GPU (3.865 -
    0.876 us); a HIP row's step time grows by launches x that, a CUDA row's not at all; with the
    switch at 0 both are timed as before."""
    assert validation.HIP_GRAPH_NODE_CITED_S == pytest.approx(2.989 * S_PER_US)
    assert validation.HIP_GRAPH_NODE_EXTRA_S == validation.HIP_GRAPH_NODE_CITED_S
    hip = _row("AMD Instinct MI250X (one GCD)", "gpt-fast (PyTorch compile, ROCm)")
    cuda = _row("NVIDIA A100-SXM4-80GB (power-limited 330 W)", "gpt-fast (PyTorch compile)")
    table = default_table()
    for row in (hip, cuda):
        eff = table.efficiency_for(row.hardware, "gpt-fast")
        bumped = replace(eff, kernel_overhead_s=eff.kernel_overhead_s + 1e-6)
        on = _step_s(row, eff)
        launches = (_step_s(row, bumped) - on) / 1e-6
        with monkeypatch.context() as mp:
            mp.setattr(validation, "HIP_GRAPH_NODE_EXTRA_S", 0.0)
            off = _step_s(row, eff)
        assert launches > 300                      # Llama-2 7B under gpt-fast: ~350 per step
        expected = launches * validation.HIP_GRAPH_NODE_EXTRA_S if row is hip else 0.0
        assert on - off == pytest.approx(expected, rel=1e-6, abs=1e-12)
