"""Host work a stack pays serially when it speculates (``Efficiency.spec_host_seq_s``, issue
13): TensorRT-LLM switches its overlap scheduler off for speculative decoding, so the
per-sequence host work that plain decoding hides behind the GPU is added to every draft +
verify iteration. Cited, not fitted (``calibration.efficiency.SPEC_HOST_SEQ_S``)."""

from dataclasses import replace

import pytest

from helpers import H100, LLAMA3_8B
from llmpara_core.calibration.efficiency import (SPEC_HOST_SEQ_S, default_table, efficiency_for,
                                                 table_from_dict, table_to_toml)
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency
from llmpara_core.precision import Precision
from llmpara_core.speculative import Setup, Speculation, analyze_speculative, ngram_draft
from llmpara_core.workload import Workload

BASE = Efficiency(compute=0.6, memory=0.8, kernel_overhead_s=3e-6, step_overhead_s=1e-3,
                  seq_overhead_s=1e-5)


def _report(batch: int, host_s: float, gamma: int = 4):
    su = Setup(LLAMA3_8B, H100, Precision(), Workload(batch, 512, 128), ngram_draft(),
               efficiency=replace(BASE, spec_host_seq_s=host_s))
    return analyze_speculative(su, Speculation(gamma, alpha=0.6))


@pytest.mark.parametrize("bad", [-1e-6, 2.0, float("nan")])
def test_the_field_is_validated(bad):
    with pytest.raises(ConfigError, match="spec_host_seq_s"):
        Efficiency(spec_host_seq_s=bad)


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_each_iteration_pays_host_work_per_sequence_and_plain_decoding_does_not(batch):
    host = 30e-6
    off, on = _report(batch, 0.0), _report(batch, host)
    # plain decoding keeps the overlap scheduler: unchanged
    assert on.estimated.vanilla_tpot_s == off.estimated.vanilla_tpot_s
    # every draft + verify iteration pays batch x host more, nothing else moves
    assert on.estimated.step_s - off.estimated.step_s == pytest.approx(batch * host, rel=1e-9)
    assert on.estimated.speedup < off.estimated.speedup
    # peak-rate (ideal) figures carry no fixed costs at all
    assert on.ideal.step_s == off.ideal.step_s
    assert any("overlap scheduler off" in n and f"batch {batch}" in n for n in on.notes)
    assert not any("overlap scheduler" in n for n in off.notes)


def test_the_cost_grows_with_batch_so_the_speedup_falls_faster():
    host = 30e-6
    loss = [_report(b, 0.0).estimated.speedup / _report(b, host).estimated.speedup
            for b in (1, 8, 64)]
    assert loss[0] < loss[1] < loss[2]


def test_tensorrt_llm_carries_the_cited_value_and_other_stacks_none():
    assert SPEC_HOST_SEQ_S == {"tensorrt-llm": pytest.approx(45.11e-3 / 1536, rel=2e-3)}
    assert efficiency_for(H100, "tensorrt-llm").spec_host_seq_s == pytest.approx(29.4e-6)
    for name in ("llama.cpp", "vllm", "sglang", "gpt-fast"):
        assert efficiency_for(H100, name).spec_host_seq_s == 0.0
    assert efficiency_for(H100).spec_host_seq_s == 0.0


def test_the_value_round_trips_through_the_table_file():
    t = default_table()
    text = table_to_toml(t)
    assert "spec_host_seq_us = 29.4" in text
    import tomllib
    back = table_from_dict(tomllib.loads(text), "round trip")
    assert back.profile("tensorrt-llm").absolute["spec_host_seq_s"] == pytest.approx(29.4e-6)
    bad = tomllib.loads(text)
    bad["framework"]["tensorrt-llm"]["spec_host_seq_us"] = -3.0
    with pytest.raises(ConfigError, match="tensorrt-llm"):
        table_from_dict(bad, "bad")
