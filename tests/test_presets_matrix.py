"""Every preset loads; every model x hardware preset pair analyses; batch-1 decode is
memory-bound on every GPU preset; reference preset names resolve."""

import math

import pytest

from llmpara_core.analysis import analyze
from llmpara_core.errors import PresetNotFoundError
from llmpara_core.hardware import HardwareClass
from llmpara_core.precision import PRECISION_PRESETS, Precision
from llmpara_core.presets import find_preset, list_presets, load_hardware, load_model
from llmpara_core.workload import Workload

MODELS = [i.slug for i in list_presets("models")]
HARDWARE = [i.slug for i in list_presets("hardware")]


def test_catalogues_are_populated():
    assert len(MODELS) >= 40 and len(HARDWARE) >= 56


@pytest.mark.parametrize("model_slug", MODELS)
def test_model_on_every_hardware(model_slug):
    model = load_model(model_slug)
    wl = Workload(1, 512, 16)
    for hw_slug in HARDWARE:
        rep = analyze(model, load_hardware(hw_slug), Precision(), wl)
        for t in (rep.estimated, rep.ideal):
            assert t.ttft_s > 0 and t.tpot_s > 0 and math.isfinite(t.e2e_latency_s), hw_slug
        assert rep.estimated.tpot_s >= rep.ideal.tpot_s


GPUS = [s for s in HARDWARE if load_hardware(s).hw_class in
        (HardwareClass.DATACENTER_GPU, HardwareClass.CONSUMER_GPU)]


@pytest.mark.parametrize("hw_slug", GPUS)
def test_batch1_decode_memory_bound_on_gpus(hw_slug):
    hw = load_hardware(hw_slug)
    for model in ("Llama-3 8B", "Mixtral 8x7B", "Qwen2.5 1.5B", "DeepSeek-V3"):
        rep = analyze(load_model(model), hw, Precision(), Workload(1, 1024, 64))
        assert rep.decode.memory_bound_share() > 0.95, (hw_slug, model)
        # and the whole step's bytes dominate its FLOPs at the ridge point
        assert sum(r.memory_s for r in rep.decode.rows) > sum(r.compute_s for r in rep.decode.rows)


@pytest.mark.parametrize("name", [p.name for p in PRECISION_PRESETS.values()])
def test_every_precision_preset_analyses(name):
    rep = analyze(load_model("Llama-3 8B"), load_hardware("NVIDIA H100 SXM"),
                  PRECISION_PRESETS[name], Workload(2, 256, 8))
    assert rep.weight_bytes > 0 and rep.estimated.tpot_s > 0


REFERENCE_MODEL_NAMES = [
    "GPT-2 Small (117M)", "GPT-2 XL (1.5B)", "LLaMA-2 7B", "LLaMA-2 13B", "LLaMA-2 70B",
    "LLaMA-3 8B", "LLaMA-3 70B", "LLaMA-3 405B", "Mixtral 8x7B", "Mixtral 8x22B", "Qwen2 7B",
    "Qwen2 72B", "Qwen2-MoE 57B-A14B", "DeepSeek-V2 (MLA+MoE)", "DeepSeek-R1 671B",
    "Gemma-2 9B", "Gemma-2 27B", "Phi-3 Mini (3.8B)", "BitNet b1.58 3B", "Qwen2.5-1.5B",
    "Llama-3.2-1B", "LLaMA-3 8B (Draft)"]


@pytest.mark.parametrize("name", REFERENCE_MODEL_NAMES)
def test_reference_model_names_resolve(name):
    assert load_model(name).num_hidden_layers > 0


def test_lookup_is_case_and_punctuation_insensitive():
    a = find_preset("models", "LLaMA-3 8B")
    assert find_preset("models", "llama 3 8b") == a == find_preset("models", a.slug)
    assert find_preset("hardware", "nvidia h100 sxm") == find_preset("hardware", "NVIDIA H100 SXM")
    assert find_preset("hardware", "8×H100 NVLink Cluster") == find_preset("hardware", "8xH100 NVLink Cluster")
    with pytest.raises(PresetNotFoundError, match="did you mean"):
        find_preset("models", "Llama-3 8")
    with pytest.raises(PresetNotFoundError):
        find_preset("hardware", "")
