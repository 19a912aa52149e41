"""Issue 13: the cost per stage boundary of llama.cpp's layer split
(``Efficiency.stage_hop_s``): its effect on a pipeline, its fit and the shipped value."""

import tomllib
from dataclasses import replace

import pytest

from llmpara_core import calibration
from llmpara_core.calibration import fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency, Interconnect, Topology
from llmpara_core.parallel import ParallelPlan, shard_analyze
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.units import BYTES_PER_GB, S_PER_US
from llmpara_core.workload import Workload

FP16 = precision_preset("FP16")


def test_stage_hop_bounds():
    assert Efficiency(stage_hop_s=2e-4).stage_hop_s == 2e-4
    with pytest.raises(ConfigError, match="stage_hop_s"):
        Efficiency(stage_hop_s=2.0)
    with pytest.raises(ConfigError, match="stage_hop_s"):
        Efficiency(stage_hop_s=-1e-6)


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


def test_shipped_table_carries_the_hop():
    t = calibration.default_table()
    hop = t.profile("llama.cpp").absolute.get("stage_hop_s")
    assert hop is not None and 5e-5 < hop < 1e-3
    assert "stage_hop_s" not in t.profile("vllm").absolute   # one stack's cost only
    again = calibration.table_from_dict(tomllib.loads(calibration.table_to_toml(t)))
    assert again.profile("llama.cpp").absolute["stage_hop_s"] == pytest.approx(hop, rel=1e-3)
    # a layer-split row of the data carries it: 4 x RTX 3090, Llama-3 8B Q4_K_M
    rows = [r for r in validation.map_all(*validation.read_shipped())[0]
            if r.measurement.row_id == "D0252"]
    assert rows and rows[0].pp == 4
    eff = t.efficiency_for(rows[0].hardware, "llama.cpp")
    with_hop = validation.timings(rows[0], eff)[1].tpot_s
    without = validation.timings(rows[0], replace(eff, stage_hop_s=0.0))[1].tpot_s
    assert with_hop - without == pytest.approx(3 * hop, rel=1e-6)


def test_a_hardware_file_can_set_its_own_hop():
    """`stage_hop_us` in a hardware file's [efficiency] (the user's own runtime) is read in µs,
    written back, and left out it keeps the class default (0: generic has none)."""
    from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
    hw = load_hardware("nvidia-rtx-3090")
    d = hardware_to_dict(hw)
    d["efficiency"] = {"memory": 0.7, "stage_hop_us": 250}
    own = hardware_from_dict(d, origin="own.toml")
    assert own.efficiency.stage_hop_s == pytest.approx(250e-6)
    assert hardware_to_dict(own)["efficiency"]["stage_hop_us"] == pytest.approx(250)
    d["efficiency"] = {"memory": 0.7}
    assert hardware_from_dict(d, origin="own.toml").efficiency.stage_hop_s == 0.0
