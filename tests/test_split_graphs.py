"""Issue 27: llama.cpp's layer split ran without CUDA graphs before PR #13814 (2025-05-27), so
each decode kernel of such a row pays ``measurements.GRAPHLESS_LAUNCH_S`` more per launch
(``measurements.graphless_decode``), and the stage hop is fitted on step times without it."""

from dataclasses import replace

import pytest

from llmpara_core.calibration import default_table, fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.units import S_PER_US

DATED = "github XiongjieDai/GPU-Benchmarks-on-LLM-Inference@aa72e0ec:LLaMA 3/x.ipynb"
HW_NAMES = {"nvidia-rtx-3090": "NVIDIA GeForce RTX 3090",
            "nvidia-rtx-4090": "NVIDIA GeForce RTX 4090", "nvidia-rtx-a6000": "NVIDIA RTX A6000"}


def _row(slug, pp, tok_s, source=DATED, framework="llama.cpp (CUDA)", metric="decode_tok_s"):
    m = validation.Measurement(
        f"G{slug[-4:]}{pp}", HW_NAMES[slug], "Meta-Llama-3-8B", metric, tok_s,
        framework=framework, num_devices=pp,
        parallelism="layer-split (pipeline)" if pp > 1 else "single",
        quant="Q4_K_M (GGUF 4.58 GiB)", weight_bits=4.9,
        context_or_prompt_len=0 if metric == "decode_tok_s" else 512,
        gen_len=1024 if metric == "decode_tok_s" else 0, source=source)
    out = validation.map_measurement(m)
    assert isinstance(out, validation.Mapped), out
    return out


def test_which_rows_launch_without_graphs():
    """A CUDA layer split of a build dated before PR #13814: yes. One GPU, another back end, a
    prefill row or a source without a build date: no."""
    assert validation.PIPELINE_GRAPHS_FROM == "2025-05-27"
    assert validation.graphless_decode(_row("nvidia-rtx-3090", 4, 100.0))
    assert not validation.graphless_decode(_row("nvidia-rtx-3090", 1, 100.0))
    assert not validation.graphless_decode(_row("nvidia-rtx-3090", 4, 100.0, source="a blog"))
    assert not validation.graphless_decode(_row("nvidia-rtx-3090", 4, 100.0,
                                                framework="llama.cpp (Vulkan)"))
    assert not validation.graphless_decode(_row("nvidia-rtx-3090", 4, 100.0,
                                                metric="prefill_tok_s"))


def test_graphless_row_pays_the_cited_cost_per_launch(monkeypatch):
    """Its step time grows by launches x GRAPHLESS_LAUNCH_S (the launches: the slope of the
    step time in the per-kernel cost); with the switch off the row is timed as before."""
    assert 0.5 * S_PER_US < validation.GRAPHLESS_LAUNCH_S < 1.0 * S_PER_US
    row = _row("nvidia-rtx-3090", 4, 100.0)
    eff = default_table().efficiency_for(row.hardware, "llama.cpp")
    bumped = replace(eff, kernel_overhead_s=eff.kernel_overhead_s + 1e-6)
    on = 1.0 / validation.timings(row, eff)[1].decode_tokens_per_s
    launches = (1.0 / validation.timings(row, bumped)[1].decode_tokens_per_s - on) / 1e-6
    monkeypatch.setattr(validation, "GRAPHLESS_SPLIT_DECODE", False)
    off = 1.0 / validation.timings(row, eff)[1].decode_tokens_per_s
    assert launches > 500                                # Llama-3 8B: ~650 launches per step
    assert on - off == pytest.approx(launches * validation.GRAPHLESS_LAUNCH_S, rel=1e-6)


def test_hop_fit_takes_the_graphless_step_off():
    """Rows whose step time is base + (PP - 1) x slope + the graphless cost give the slope back
    when the fit knows the table; without it the hop absorbs the cost."""
    table = default_table()
    rows = []
    for slug, base_s, slope in (("nvidia-rtx-3090", 0.009, 2e-4),
                                ("nvidia-rtx-4090", 0.008, 3e-4),
                                ("nvidia-rtx-a6000", 0.010, 2.5e-4)):
        for pp in (1, 2, 4):
            probe = _row(slug, pp, 1.0)
            extra = fitting._graphless_s(probe, table)
            assert (extra > 0) == (pp > 1)
            rows.append(_row(slug, pp, 1.0 / (base_s + (pp - 1) * slope + extra)))
    assert fitting.fit_stage_hop(rows, table) == pytest.approx(2.5e-4, rel=1e-6)
    assert fitting.fit_stage_hop(rows) > 2.6e-4
