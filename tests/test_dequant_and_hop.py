"""Issue 13: the weight format's dequantisation cost (``Efficiency.dequant_*``) and the layer
split's cost per stage boundary (``Efficiency.stage_hop_s``)."""

from dataclasses import replace

import pytest

from llmpara_core import calibration
from llmpara_core.analysis import analyze
from llmpara_core.calibration import fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency, Interconnect, Topology
from llmpara_core.parallel import ParallelPlan, shard_analyze
from llmpara_core.precision import DType, Precision, infer_weight_format, precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import rates
from llmpara_core.units import BYTES_PER_GB, S_PER_US
from llmpara_core.workload import Workload

FP16 = precision_preset("FP16")
W8 = precision_preset("W8A16")


@pytest.mark.parametrize("name, bits, dtype, fmt", [
    ("FP16", 16, DType.FP16, "native"), ("BF16", 16, DType.FP16, "native"),
    ("FP8", 8, DType.FP8, "native"), ("W8A8", 8, DType.INT8, "native"),
    ("NVFP4", 4.5, DType.FP4, "native"),
    ("Q8_0", 8.5, DType.FP16, "block"), ("int8 weight-only", 8, DType.FP16, "block"),
    ("GPTQ 4-bit g128", 4.25, DType.FP16, "block"), ("W4A8", 4, DType.INT8, "block"),
    ("Q4_K_M (GGUF 4.58 GiB)", 4.85, DType.FP16, "k-quant"), ("IQ3_XS", 3.3, DType.FP16,
                                                                "k-quant"),
])
def test_weight_format_inferred(name, bits, dtype, fmt):
    assert infer_weight_format(name, bits, dtype) == fmt
    assert Precision(bits, bits, bits, 16, 16, dtype, name=name).weight_format == fmt


def test_weight_format_given_wins_and_is_checked():
    assert Precision(name="FP16", weight_format="Block").weight_format == "block"
    with pytest.raises(ConfigError, match="weight_format must be one of"):
        Precision(weight_format="zip")


def test_for_weights_by_hand():
    e = Efficiency(compute=0.5, memory=0.8, kv_read=0.6, dequant_block=0.4, dequant_k=0.2)
    assert e.for_weights(FP16) == replace(e, dequant_block=0.0, dequant_k=0.0)  # native
    w = e.for_weights(W8)                      # 0.4 B/weight on 8-bit weights: e = 0.4
    assert w.weight_extra == pytest.approx(0.4)
    assert w.memory == pytest.approx(0.8 / 1.4)
    assert w.memory * w.kv_read == pytest.approx(0.8 * 0.6)      # KV reads keep their rate
    assert w.stream_memory == pytest.approx(0.8)                 # so does the link
    assert w.for_weights(W8) == w                                # applying twice: no change
    k = e.for_weights(precision_preset("Q4_K_M"))
    assert k.weight_extra == pytest.approx(0.2 * 8 / 4.85)


def test_efficiency_bounds():
    with pytest.raises(ConfigError, match="dequant_block"):
        Efficiency(dequant_block=-0.1)
    with pytest.raises(ConfigError, match="kv_read"):
        Efficiency(kv_read=1.5)                   # above 1 only with a matching weight_extra
    assert Efficiency(kv_read=1.5, weight_extra=0.5).kv_read == 1.5
    with pytest.raises(ConfigError, match="stage_hop_s"):
        Efficiency(stage_hop_s=2.0)


def test_dequant_slows_weights_only():
    """Batch-1 decode of a W8A16 model with a 0.4 B/weight cost takes 1.4x the weight
    streaming time; the same model in FP16 is unchanged; the link rate is not touched."""
    hw = load_hardware("nvidia-a100-sxm-80gb")
    base = Efficiency(compute=0.5, memory=0.7, kv_read=1.0, kernel_overhead_s=0.0)
    model, wl = load_model("llama-2-7b"), Workload(1, 16, 16)
    plain = analyze(model, replace(hw, efficiency=base), W8, wl).estimated.tpot_s
    slow = analyze(model, replace(hw, efficiency=replace(base, dequant_block=0.4)), W8,
                   wl).estimated.tpot_s
    assert slow / plain == pytest.approx(1.4, rel=0.03)
    f16 = [analyze(model, replace(hw, efficiency=e), FP16, wl).estimated.tpot_s
           for e in (base, replace(base, dequant_block=0.4))]
    assert f16[0] == f16[1]
    ic = Interconnect(100 * BYTES_PER_GB, 1 * S_PER_US, Topology.RING, 4)
    hw_l = replace(hw, interconnect=ic, efficiency=replace(base, dequant_block=0.4))
    assert rates(hw_l, DType.FP16, True, weights=W8).link_bytes_per_s == pytest.approx(
        100 * BYTES_PER_GB * 0.7)


def test_stage_hop_adds_per_boundary():
    """A layer split over N devices pays N - 1 hops per decode step; one device none."""
    hw = load_hardware("nvidia-rtx-3090")
    ic = Interconnect(31 * BYTES_PER_GB, 1 * S_PER_US, Topology.RING, 4)
    base = Efficiency(compute=0.5, memory=0.7, kv_read=0.8, kernel_overhead_s=4e-6)
    model, wl = load_model("llama-3-8b"), Workload(1, 16, 64)

    def tpot(hop, pp):
        h = replace(hw, interconnect=ic, efficiency=replace(base, stage_hop_s=hop))
        return shard_analyze(model, h, FP16, wl, ParallelPlan(pp=pp)).estimated.tpot_s
    assert tpot(2e-4, 4) - tpot(0.0, 4) == pytest.approx(3 * 2e-4, rel=1e-6)
    assert tpot(2e-4, 1) == tpot(0.0, 1)


HW_NAMES = {"nvidia-rtx-3090": "NVIDIA GeForce RTX 3090",
            "nvidia-rtx-4090": "NVIDIA GeForce RTX 4090", "nvidia-rtx-a6000": "NVIDIA RTX A6000"}


def _row(slug, pp, tok_s):
    m = validation.Measurement(
        f"T{slug[-4:]}{pp}", HW_NAMES[slug], "Meta-Llama-3-8B", "decode_tok_s", tok_s,
        framework="llama.cpp (CUDA)", num_devices=pp,
        parallelism="layer-split (pipeline)" if pp > 1 else "single",
        quant="Q4_K_M (GGUF 4.58 GiB)", weight_bits=4.9, context_or_prompt_len=0,
        gen_len=1024)
    out = validation.map_measurement(m)
    assert isinstance(out, validation.Mapped), out
    assert out.hardware.slug == slug and out.pp == pp
    return out


def test_stage_hop_fit_is_the_median_within_group_slope():
    """Step times growing by 0.2, 0.3 and 0.25 ms per boundary on three groups give 0.25 ms,
    whatever each device's own speed; too few groups give no value."""
    rows = []
    for slug, base_s, slope in (("nvidia-rtx-3090", 0.009, 2e-4),
                                ("nvidia-rtx-4090", 0.008, 3e-4),
                                ("nvidia-rtx-a6000", 0.010, 2.5e-4)):
        rows += [_row(slug, pp, 1.0 / (base_s + (pp - 1) * slope)) for pp in (1, 2, 4)]
    assert fitting.fit_stage_hop(rows) == pytest.approx(2.5e-4, rel=1e-6)
    assert fitting.fit_stage_hop(rows[:6]) is None


def test_shipped_table_carries_both_terms():
    t = calibration.default_table()
    hop = t.profile("llama.cpp").absolute.get("stage_hop_s")
    assert hop is not None and 5e-5 < hop < 1e-3
    d = t.profile("gpt-fast").absolute.get("dequant_block")
    assert d is not None and 0.05 < d < 1.0
    # and the TOML round trip keeps them
    again = calibration.table_from_dict(
        __import__("tomllib").loads(calibration.table_to_toml(t)))
    assert again.profile("llama.cpp").absolute["stage_hop_s"] == pytest.approx(hop, rel=1e-3)
    assert again.profile("gpt-fast").absolute["dequant_block"] == pytest.approx(d, rel=1e-3)
