"""KV reads per query head (issue 13): stacks whose decode attention multiplies K and V with
each query head of a GQA group stream the group's K/V 1 + kv_reread x (group - 1) times."""

from dataclasses import replace

import pytest

from llmpara_core import calibration
from llmpara_core.analysis import analyze
from llmpara_core.calibration.fitting import REFERENCE_KV_REREAD
from llmpara_core.errors import ConfigError
from llmpara_core.forward import forward_ops
from llmpara_core.hardware import Efficiency
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import Rates, effective_memory_bytes, kv_read_factor, op_time_s
from llmpara_core.workload import Workload

FP16 = precision_preset("FP16")


def _rates(kv_read: float, kv_reread: float) -> Rates:
    return Rates(1e15, 1e12, 0.0, None, kv_read_efficiency=kv_read, kv_reread=kv_reread)


def test_group_factor_by_hand():
    r = _rates(0.5, 0.3)
    assert kv_read_factor(8, r) == pytest.approx(1 + 0.3 * 7)
    assert kv_read_factor(1, r) == 1.0                     # MHA / MLA: nothing to re-read
    assert kv_read_factor(8, _rates(0.5, 0.0)) == 1.0      # paged attention: once per group
    # 200 B of activations + 800 B of KV reads shared by 8 query heads:
    # 200 + 800 x 3.1 / 0.5 = 5160 B at 1 TB/s
    mem = effective_memory_bytes(1000.0, 800.0, r, 800.0 * 7)
    assert mem == pytest.approx(200 + 800 * 3.1 / 0.5)
    assert op_time_s(0.0, 1000.0, 0, r, kv_read_bytes=800.0,
                     kv_reread_bytes=800.0 * 7) == pytest.approx(5160 / 1e12)
    # kv_reread = 0 and kv_read = 1: bytes unchanged (the ideal roofline)
    assert effective_memory_bytes(1000.0, 800.0, _rates(1.0, 0.0), 5600.0) == 1000.0


def test_efficiency_rejects_a_share_outside_0_1():
    with pytest.raises(ConfigError, match="kv_reread"):
        Efficiency(compute=0.5, memory=0.5, kv_reread=1.5)


@pytest.mark.parametrize("name, group", [("llama-3-70b", 8), ("llama-3-8b", 4),
                                         ("llama-2-7b", 1), ("deepseek-v2-lite", 1)])
def test_decode_attention_carries_its_query_group(name, group):
    ops = forward_ops(load_model(name), FP16, 1, 1, 1024, False)
    kv = [o for o in ops if o.kv_read_bytes > 0]
    assert kv and all(o.kv_group == group for o in kv)
    assert all(o.kv_reread_bytes == pytest.approx(o.kv_read_bytes * (group - 1)) for o in kv)


def test_flag_per_stack():
    hw = load_hardware("nvidia-rtx-4090")
    assert REFERENCE_KV_REREAD > 0
    for stack in (None, "llama.cpp", "gpt-fast"):       # None = generic = the reference stack
        assert calibration.efficiency_for(hw, stack).kv_reread == pytest.approx(
            REFERENCE_KV_REREAD), stack
    for stack in ("vllm", "sglang", "tensorrt-llm", "exllamav2", "mlc"):
        assert calibration.efficiency_for(hw, stack).kv_reread == 0.0, stack


def _attention_slope_s(model: str, eff: Efficiency) -> float:
    """Estimated decode-step time added by 4096 more tokens of context [s]."""
    hw = replace(load_hardware("nvidia-rtx-4090"), efficiency=eff)
    m = load_model(model)
    t = [analyze(m, hw, FP16, Workload(1, c, 16)).decode.estimated_s for c in (256, 4352)]
    return t[1] - t[0]


def test_context_slope_grows_with_query_heads_per_kv_head():
    """Per KV byte, the context slope of a 64-query-head / 8-KV-head model (group 8) exceeds
    that of a 32 / 8 one (group 4) by (1 + 7 f) / (1 + 3 f) under llama.cpp, and not at all
    without re-reads (vLLM-style attention)."""
    hw = load_hardware("nvidia-rtx-4090")
    eff = calibration.efficiency_for(hw, "llama.cpp")
    flat = replace(eff, kv_reread=0.0)
    f = eff.kv_reread
    ratio = {}
    for e, key in ((eff, "per_head"), (flat, "per_group")):
        big, small = _attention_slope_s("llama-3-70b", e), _attention_slope_s("llama-3-8b", e)
        ratio[key] = big / small
    # KV bytes per token: 70B 80 layers x 8 KV heads, 8B 32 layers x 8 KV heads (same head size)
    kv_ratio = 80 / 32
    assert ratio["per_group"] == pytest.approx(kv_ratio, rel=0.05)
    assert ratio["per_head"] == pytest.approx(kv_ratio * (1 + 7 * f) / (1 + 3 * f), rel=0.05)


def test_table_round_trip_keeps_flag_and_share():
    import tomllib
    table = calibration.default_table()
    again = calibration.table_from_dict(tomllib.loads(calibration.table_to_toml(table)))
    assert again.profile("llama.cpp").kv_per_query_head
    assert again.profile("gpt-fast").kv_per_query_head
    assert not again.profile("tensorrt-llm").kv_per_query_head
    for cls, n in table.class_rows.items():
        if n:
            assert again.classes[cls].kv_reread == pytest.approx(table.classes[cls].kv_reread)
