"""``from_hf_config`` and the model presets: architecture facts, presets, malformed input."""

from __future__ import annotations

import copy
import json
import pathlib
import re
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmpara_core.errors import ConfigError
from llmpara_core.hf_import import from_hf_config
from llmpara_core.model_presets import PRESET_KEYS, model_from_preset_dict, model_preset_info
from llmpara_core.model import Activation, FFNKind, NormKind, PositionKind, count_params

PRESETS = pathlib.Path(__file__).resolve().parents[1] / "presets" / "models"
PRESET_FILES = sorted(PRESETS.glob("*.toml"))


def load(path: pathlib.Path) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def preset(slug: str):
    path = PRESETS / f"{slug}.toml"
    return model_from_preset_dict(load(path), str(path))


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False}


def llama(**changes):
    cfg = dict(LLAMA)
    for key, value in changes.items():
        if value is ...:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg


# ---- presets ----------------------------------------------------------------------------------

def test_preset_directory_is_populated():
    assert len(PRESET_FILES) >= 40


@pytest.mark.parametrize("path", PRESET_FILES, ids=[p.stem for p in PRESET_FILES])
def test_every_preset_loads_cleanly(path):
    assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", path.stem), "slug file names"
    data = load(path)
    model = model_from_preset_dict(data, str(path))
    assert model.name == data["name"]
    assert model.source == data["source"] and "config" in model.source
    assert model.warnings == ()
    assert count_params(model).total > 0


def _lookup_key(label: str) -> str:
    # as llmpara_core.presets.normalize: lookups ignore case and punctuation
    return re.sub(r"[^0-9a-z]", "", label.lower().replace("×", "x"))


def test_preset_names_and_aliases_are_unique():
    seen: dict[str, str] = {}
    for path in PRESET_FILES:
        info = model_preset_info(load(path), str(path))
        for label in (path.stem, info.name, *info.aliases):
            key = _lookup_key(label)   # repeats within one file are harmless
            assert seen.setdefault(key, path.name) == path.name, (
                f"{label!r} in {path.name} and {seen[key]}")


REFERENCE_NAMES = [  # data/reference_models.csv, MODEL_CONFIGS and DRAFT_MODEL_PRESETS
    "GPT-2 Small (117M)", "GPT-2 XL (1.5B)", "LLaMA-2 7B", "LLaMA-2 13B", "LLaMA-2 70B",
    "LLaMA-3 8B", "LLaMA-3 70B", "LLaMA-3 405B", "Mixtral 8x7B", "Mixtral 8x22B", "Qwen2 7B",
    "Qwen2 72B", "Qwen2-MoE 57B-A14B", "DeepSeek-V2 (MLA+MoE)", "DeepSeek-R1 671B",
    "Gemma-2 9B", "Gemma-2 27B", "Phi-3 Mini (3.8B)", "BitNet b1.58 3B", "Qwen2.5-1.5B",
    "Llama-3.2-1B", "LLaMA-3 8B (Draft)"]


def test_every_reference_preset_is_covered_by_name_or_alias():
    labels = set()
    for path in PRESET_FILES:
        info = model_preset_info(load(path), str(path))
        labels.update((info.name, *info.aliases))
    assert not [n for n in REFERENCE_NAMES if n not in labels]


def test_reference_draft_models_are_flagged_as_drafts():
    for slug in ("gpt2-small", "gpt2-xl", "phi-3-mini", "llama-2-7b", "llama-3-8b"):
        assert model_preset_info(load(PRESETS / f"{slug}.toml"), slug).draft


def test_reference_value_errors_are_corrected_in_presets():
    bitnet = preset("bitnet-b1.58-3b")
    assert (bitnet.num_attention_heads, bitnet.num_key_value_heads) == (32, 32)   # ref: 25 / 5
    assert preset("qwen2-7b").vocab_size == 152064                                 # ref: 151936
    assert preset("gemma-2-9b").head_size == 256                                   # ref: 224
    assert preset("gemma-2-27b").head_size == 128                                  # ref: 144
    qmoe = preset("qwen2-57b-a14b").moe
    assert (qmoe.experts_per_token, qmoe.shared_intermediate_size) == (8, 20480)  # ref: 4, 0


# ---- architecture facts -----------------------------------------------------------------------

def test_llama_basics_and_head_dim_from_config():
    m = from_hf_config(llama(head_dim=64, num_attention_heads=32, hidden_size=2048))
    assert (m.head_size, m.q_dim, m.kv_dim) == (64, 2048, 512)
    assert m.ffn_kind is FFNKind.GATED and m.hidden_act is Activation.SILU
    assert m.norm_kind is NormKind.RMS and m.position is PositionKind.ROPE
    assert not (m.attention_bias or m.attention_out_bias or m.tie_word_embeddings)
    assert m.sliding_window is None and m.moe is None and m.mla is None


def test_llama_attention_bias_field_covers_o_proj_and_mlp_bias_is_read():
    m = from_hf_config(llama(attention_bias=True, mlp_bias=True))
    assert m.attention_bias and m.attention_out_bias and m.mlp_bias


def test_rope_theta_and_scaling():
    m = preset("llama-3.1-8b")
    assert (m.rope_theta, m.rope_scaling_factor) == (500000.0, 8.0)
    assert preset("llama-2-7b").rope_scaling_factor == 1.0
    # transformers v5 nests both in rope_parameters (per layer type for Gemma-3)
    v5 = llama(rope_parameters={"full_attention": {"rope_theta": 1e6, "factor": 8.0,
                                                   "rope_type": "linear"}})
    assert (from_hf_config(v5).rope_theta, from_hf_config(v5).rope_scaling_factor) == (1e6, 8.0)


@pytest.mark.parametrize("cfg,tied", [
    (llama(tie_word_embeddings=...), False),
    ({**llama(tie_word_embeddings=...), "architectures": ["GemmaForCausalLM"],
      "head_dim": 128}, True),
    ({"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4,
      "vocab_size": 100}, True),
    ({**llama(tie_word_embeddings=...), "architectures": ["Qwen2ForCausalLM"]}, False),
])
def test_tie_default_follows_architecture(cfg, tied):
    assert from_hf_config(cfg).tie_word_embeddings is tied


def test_qwen2_has_implicit_qkv_bias_and_no_window_when_disabled():
    m = preset("qwen2.5-7b")
    assert m.attention_bias and not m.attention_out_bias
    assert m.sliding_window is None        # use_sliding_window: false
    cfg = {**load(PRESETS / "qwen2.5-7b.toml")["config"], "use_sliding_window": True,
           "sliding_window": 4096, "max_window_layers": 20}
    on = from_hf_config(cfg)
    assert on.sliding_window == 4096
    assert on.sliding_layers == tuple(i >= 20 for i in range(28))


def test_qwen3_has_qk_norm_and_no_bias():
    m = preset("qwen3-8b")
    assert m.qk_norm and not m.attention_bias and m.head_size == 128


def test_gemma_family():
    g1 = from_hf_config({"architectures": ["GemmaForCausalLM"], "hidden_size": 2048,
                         "intermediate_size": 16384, "num_hidden_layers": 18,
                         "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
                         "vocab_size": 256000, "hidden_act": "gelu"})
    assert g1.hidden_act is Activation.GELU_TANH and g1.norms_per_layer == 2
    g2 = preset("gemma-2-9b")
    assert g2.tie_word_embeddings and g2.norms_per_layer == 4 and not g2.qk_norm
    assert g2.sliding_window == 4096 and g2.layer_is_sliding(0) and not g2.layer_is_sliding(1)
    g3 = preset("gemma-3-1b")
    assert g3.qk_norm and g3.norms_per_layer == 4 and g3.sliding_window == 512
    assert [i for i in range(26) if not g3.layer_is_sliding(i)] == [5, 11, 17, 23]


def test_gemma3_multimodal_config_uses_text_config_and_its_defaults():
    m = preset("gemma-3-4b")
    assert m.architecture == "Gemma3ForConditionalGeneration"
    assert (m.hidden_size, m.num_hidden_layers) == (2560, 34)
    assert (m.num_attention_heads, m.num_key_value_heads, m.head_size) == (8, 4, 256)
    assert (m.vocab_size, m.rope_theta, m.rope_scaling_factor) == (262208, 1e6, 8.0)
    assert m.tie_word_embeddings and m.sliding_window == 1024
    with_vision = copy.deepcopy(load(PRESETS / "gemma-3-4b.toml")["config"])
    with_vision["vision_config"] = {"hidden_size": 1152}
    assert any("vision" in w for w in from_hf_config(with_vision).warnings)


def test_gemma3_layer_types_take_precedence():
    cfg = copy.deepcopy(load(PRESETS / "gemma-3-1b.toml")["config"])
    cfg["layer_types"] = ["full_attention"] * 25 + ["sliding_attention"]
    m = from_hf_config(cfg)
    assert [m.layer_is_sliding(i) for i in range(26)] == [False] * 25 + [True]


def test_mistral_and_phi3_window_on_every_layer():
    m = preset("mistral-7b-v0.1")
    assert m.sliding_window == 4096 and m.sliding_layers is None and m.layer_is_sliding(31)
    phi = preset("phi-3-mini")
    assert phi.sliding_window == 2047 and phi.layer_is_sliding(0)
    assert preset("mixtral-8x7b").sliding_window is None   # sliding_window: null


def test_phi3_fused_projections_count_like_separate_ones():
    phi = preset("phi-3-mini")
    as_llama = from_hf_config({**load(PRESETS / "phi-3-mini.toml")["config"],
                               "architectures": ["LlamaForCausalLM"], "sliding_window": None})
    assert count_params(phi).total == count_params(as_llama).total


def test_mixtral_moe():
    moe = preset("mixtral-8x7b").moe
    assert (moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size) == (8, 2, 14336)
    assert moe.shared_intermediate_size == 0 and moe.first_dense_layers == 0


def test_qwen2_moe_shared_expert_and_gate():
    moe = preset("qwen2-57b-a14b").moe
    assert moe.shared_intermediate_size == 20480 and moe.shared_expert_gate
    assert moe.num_experts == 64 and moe.expert_intermediate_size == 2560


def test_qwen2_moe_dense_layers_are_counted_exactly_with_a_warning():
    base = load(PRESETS / "qwen2-57b-a14b.toml")["config"]
    all_moe = from_hf_config(base)
    first = from_hf_config({**base, "mlp_only_layers": [0, 1]})
    assert first.moe.first_dense_layers == 2 and first.warnings == ()
    scattered = from_hf_config({**base, "mlp_only_layers": [3, 17]})
    assert scattered.moe.first_dense_layers == 2
    assert any("[3, 17]" in w and "dense" in w for w in scattered.warnings)
    assert count_params(scattered).total == count_params(first).total
    c_all, c_two = count_params(all_moe), count_params(first)
    assert c_two.ffn_dense == 2 * 3 * 3584 * 18944
    assert c_all.total - c_two.total == 2 * (c_all.moe_experts + c_all.moe_shared
                                             + c_all.moe_router) // 28 - c_two.ffn_dense
    step = from_hf_config({**base, "decoder_sparse_step": 2})
    assert step.moe.first_dense_layers == 14 and step.warnings


def test_llama4_scout_moe_shared_expert_and_chunked_attention():
    m = preset("llama-4-scout-17b-16e")
    assert m.moe.num_experts == 16 and m.moe.experts_per_token == 1
    assert m.moe.expert_intermediate_size == m.moe.shared_intermediate_size == 8192
    assert m.moe.first_dense_layers == 0 and m.intermediate_size == 16384
    # RoPE layers are chunked (8192), every fourth layer is global NoPE
    assert m.sliding_window == 8192
    assert m.sliding_layers == tuple((i + 1) % 4 != 0 for i in range(48))
    assert m.warnings == () and not m.qk_norm


def test_llama4_interleaved_moe_and_derived_patterns():
    text = load(PRESETS / "llama-4-scout-17b-16e.toml")["config"]["text_config"]
    base = {k: v for k, v in text.items() if k not in ("moe_layers", "no_rope_layers")}
    base["architectures"] = ["Llama4ForCausalLM"]
    every = from_hf_config(base)                      # step 1, interval 4 derived
    assert every.moe.first_dense_layers == 0 and every.sliding_layers[3] is False
    half = from_hf_config({**base, "interleave_moe_layer_step": 2})   # Maverick-style
    assert half.moe.first_dense_layers == 24 and any("dense" in w for w in half.warnings)
    c_every, c_half = count_params(every), count_params(half)
    assert c_half.ffn_dense == 24 * 3 * 5120 * 16384      # dense layers use intermediate_size_mlp
    assert c_every.total - c_half.total == 24 * (
        (16 + 1) * 3 * 5120 * 8192 + 5120 * 16 - 3 * 5120 * 16384)
    typed = from_hf_config({**base, "layer_types": ["full_attention"] * 48})
    assert typed.sliding_window is None


@pytest.mark.parametrize("change,needle", [
    ({"no_rope_layers": [1, 0]}, "no_rope_layers has 2 entries"),
    ({"no_rope_layers": [2] * 48}, "0 or 1"),
    ({"moe_layers": [0, 99]}, "moe_layers entry"),
    ({"attention_chunk_size": -1}, "attention_chunk_size"),
    ({"layer_types": "chunked"}, "layer_types"),
])
def test_llama4_bad_fields_are_config_errors(change, needle):
    text = load(PRESETS / "llama-4-scout-17b-16e.toml")["config"]["text_config"]
    with pytest.raises(ConfigError, match=needle):
        from_hf_config({**text, "architectures": ["Llama4ForCausalLM"], **change})


def test_qwen3_moe_has_no_shared_expert():
    moe = preset("qwen3-30b-a3b").moe
    assert moe.shared_intermediate_size == 0 and moe.num_experts == 128


def test_deepseek_v3():
    m = preset("deepseek-v3")
    assert m.mla.q_lora_rank == 1536 and m.mla.kv_lora_rank == 512
    assert m.mla.cache_elements_per_token == 576 and m.head_size == 192
    assert m.moe.first_dense_layers == 3 and m.moe.shared_intermediate_size == 2048
    assert m.moe.router_bias                      # e_score_correction_bias (noaux_tc)
    assert m.kv_cache_elements_per_token_per_layer() == 576


def test_deepseek_v2_lite_has_direct_q_proj():
    m = preset("deepseek-v2-lite")
    assert m.mla.q_lora_rank is None and m.moe.shared_intermediate_size == 2 * 1408
    assert m.moe.first_dense_layers == 1 and not m.moe.router_bias


def test_deepseek_missing_q_lora_rank_assumes_hf_default_with_warning():
    cfg = dict(load(PRESETS / "deepseek-v2.toml")["config"])
    del cfg["q_lora_rank"]
    m = from_hf_config(cfg)
    assert m.mla.q_lora_rank == 1536 and any("q_lora_rank" in w for w in m.warnings)


def test_gpt_oss():
    m = preset("gpt-oss-20b")
    assert m.attention_bias and m.attention_out_bias and m.attention_sinks
    assert m.moe.router_bias and m.moe.expert_bias and m.moe.experts_per_token == 4
    assert m.sliding_window == 128 and m.layer_is_sliding(0) and not m.layer_is_sliding(1)
    assert (m.rope_theta, m.rope_scaling_factor, m.head_size) == (150000, 32.0, 64)


def test_gpt2():
    m = preset("gpt2-small")
    assert m.intermediate_size == 3072          # n_inner absent -> 4 * n_embd
    assert m.position is PositionKind.LEARNED and m.max_position_embeddings == 1024
    assert m.norm_kind is NormKind.LAYER and m.ffn_kind is FFNKind.PLAIN
    assert m.attention_bias and m.attention_out_bias and m.mlp_bias and m.tie_word_embeddings
    assert m.hidden_act is Activation.GELU_TANH and m.rope_theta is None
    assert from_hf_config({"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2,
                           "n_head": 4, "n_inner": 100, "vocab_size": 100}).intermediate_size == 100


def test_bitnet_sub_norms():
    m = preset("bitnet-b1.58-3b")
    assert m.attn_sub_norm and m.ffn_sub_norm and m.tie_word_embeddings
    plain = from_hf_config({**load(PRESETS / "bitnet-b1.58-3b.toml")["config"],
                            "architectures": ["LlamaForCausalLM"]})
    assert count_params(m).total - count_params(plain).total == 26 * (3200 + 8640)


def test_input_forms_and_names():
    as_json = json.dumps(LLAMA)
    assert from_hf_config(as_json) == from_hf_config(as_json.encode()) == from_hf_config(LLAMA)
    assert from_hf_config(LLAMA).name == "LlamaForCausalLM"
    assert from_hf_config(LLAMA, name="Mine").name == "Mine"
    assert from_hf_config({**LLAMA, "_name_or_path": "meta-llama/Meta-Llama-3-8B"}).name == \
        "meta-llama/Meta-Llama-3-8B"
    assert from_hf_config({**LLAMA, "_name_or_path": "/data/ckpt/run7/"}).name == "run7"


# ---- unknown architectures --------------------------------------------------------------------

def test_unknown_architecture_imports_as_llama_with_a_warning():
    m = from_hf_config({**LLAMA, "architectures": ["FooForCausalLM"], "model_type": "foo"})
    assert len(m.warnings) == 1
    assert "unknown architecture 'FooForCausalLM'" in m.warnings[0]
    assert "Llama-style" in m.warnings[0]
    assert count_params(m).total == count_params(from_hf_config(LLAMA)).total


def test_unknown_architecture_known_model_type_uses_model_type():
    m = from_hf_config({**LLAMA, "architectures": ["LlamaForTokenClassification"]})
    assert m.warnings and "model_type 'llama'" in m.warnings[0]


def test_config_without_architecture_warns():
    m = from_hf_config(llama(architectures=..., model_type=...))
    assert m.warnings and "no architecture" in m.warnings[0]


def test_unknown_architecture_with_moe_fields():
    m = from_hf_config({**LLAMA, "architectures": ["FooMoeForCausalLM"], "model_type": "foo",
                        "num_local_experts": 8, "num_experts_per_tok": 2})
    assert m.moe.num_experts == 8 and len(m.warnings) == 2


def test_unknown_activation_warns():
    m = from_hf_config(llama(hidden_act="mish"))
    assert m.hidden_act is Activation.SILU and "mish" in m.warnings[0]


# ---- malformed input --------------------------------------------------------------------------

MALFORMED = [
    ("{not json", "JSON"),
    (b"\xff\xfe\x00", "UTF-8"),
    ("[1, 2, 3]", "JSON object"),
    ("null", "JSON object"),
    (42, "JSON object"),
    (llama(hidden_size=...), "hidden_size"),
    (llama(num_hidden_layers=...), "num_hidden_layers"),
    (llama(vocab_size=...), "vocab_size"),
    (llama(intermediate_size=...), "intermediate_size"),
    (llama(hidden_size="4096"), "hidden_size"),
    (llama(hidden_size=-4096), "hidden_size"),
    (llama(num_hidden_layers=0), "num_hidden_layers"),
    (llama(vocab_size=10**10), "vocab_size"),
    (llama(intermediate_size=2.5), "intermediate_size"),
    (llama(num_attention_heads=True), "num_attention_heads"),
    (llama(num_key_value_heads=5), "num_key_value_heads"),
    (llama(num_attention_heads=30, head_dim=...), "num_attention_heads"),
    (llama(tie_word_embeddings="yes"), "tie_word_embeddings"),
    (llama(attention_bias=1), "attention_bias"),
    (llama(architectures="LlamaForCausalLM"), "architectures"),
    (llama(architectures=[1]), "architectures"),
    (llama(model_type=3), "model_type"),
    (llama(rope_theta="big"), "rope_theta"),
    (llama(rope_theta=-1.0), "rope_theta"),
    (llama(rope_scaling=[8]), "rope_scaling"),
    (llama(rope_scaling={"factor": "x", "rope_type": "llama3"}), "rope_scaling.factor"),
    (llama(hidden_act=7), "hidden_act"),
    (llama(head_dim=0), "head_dim"),
    (llama(max_position_embeddings=-1), "max_position_embeddings"),
    ({**LLAMA, "architectures": ["MistralForCausalLM"], "sliding_window": "4k"}, "sliding_window"),
    ({**LLAMA, "architectures": ["GptOssForCausalLM"], "num_local_experts": 4,
      "num_experts_per_tok": 2, "sliding_window": 128, "layer_types": ["full_attention"]},
     "layer_types"),
    ({**LLAMA, "architectures": ["MixtralForCausalLM"], "num_experts_per_tok": 2},
     "num_local_experts"),
    ({**LLAMA, "architectures": ["MixtralForCausalLM"], "num_local_experts": 2,
      "num_experts_per_tok": 4}, "experts_per_token"),
    ({**LLAMA, "architectures": ["Qwen2MoeForCausalLM"], "num_experts": 4,
      "num_experts_per_tok": 2, "moe_intermediate_size": 64, "mlp_only_layers": "all"},
     "mlp_only_layers"),
    ({**LLAMA, "architectures": ["DeepseekV3ForCausalLM"], "kv_lora_rank": 512},
     "qk_nope_head_dim"),
    ({"architectures": ["Gemma3ForConditionalGeneration"], "text_config": [1]}, "text_config"),
    ({"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_layer": 12, "n_head": 12,
      "vocab_size": 50257, "n_positions": "1024"}, "n_positions"),
]


@pytest.mark.parametrize("bad,field", MALFORMED, ids=[f[1] + str(i) for i, f in
                                                        enumerate(MALFORMED)])
def test_malformed_input_raises_config_error_naming_the_field(bad, field):
    with pytest.raises(ConfigError) as info:
        from_hf_config(bad)
    assert field in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_name_argument():
    with pytest.raises(ConfigError, match="name"):
        from_hf_config(LLAMA, name="  ")


# ---- preset format ----------------------------------------------------------------------------

MINIMAL = {"name": "Tiny", "source": "config: test", "config": dict(LLAMA)}


def test_unknown_preset_key_names_origin_key_and_closest_valid_key():
    with pytest.raises(ConfigError) as info:
        model_from_preset_dict({**MINIMAL, "alias": ["x"]}, "presets/models/tiny.toml")
    msg = str(info.value)
    assert "presets/models/tiny.toml" in msg and "'alias'" in msg and "'aliases'" in msg


@pytest.mark.parametrize("data,field", [
    ({k: v for k, v in MINIMAL.items() if k != "name"}, "name"),
    ({k: v for k, v in MINIMAL.items() if k != "source"}, "source"),
    ({k: v for k, v in MINIMAL.items() if k != "config"}, "config"),
    ({**MINIMAL, "draft": "yes"}, "draft"),
    ({**MINIMAL, "aliases": "x"}, "aliases"),
    ({**MINIMAL, "name": ""}, "name"),
    ({**MINIMAL, "config_nulls": [3]}, "config_nulls"),
    ({**MINIMAL, "config": {**LLAMA, "hidden_size": "big"}}, "hidden_size"),
])
def test_bad_preset_raises_with_origin(data, field):
    with pytest.raises(ConfigError) as info:
        model_from_preset_dict(data, "tiny.toml")
    assert "tiny.toml" in str(info.value) and field in str(info.value)


def test_preset_keys_and_config_nulls():
    assert set(PRESET_KEYS) >= {"name", "aliases", "hf_repo_id", "family", "source", "draft",
                                "config"}
    cfg = {**LLAMA, "architectures": ["MistralForCausalLM"], "sliding_window": 4096}
    windowed = model_from_preset_dict({**MINIMAL, "config": cfg}, "x")
    nulled = model_from_preset_dict({**MINIMAL, "config": cfg,
                                     "config_nulls": ["sliding_window"]}, "x")
    assert windowed.sliding_window == 4096 and nulled.sliding_window is None
    assert nulled.source == "config: test" and nulled.name == "Tiny"


# ---- properties -------------------------------------------------------------------------------

@st.composite
def llama_configs(draw):
    kv = draw(st.integers(1, 16))
    heads = kv * draw(st.integers(1, 8))
    head_dim = draw(st.sampled_from([16, 32, 64, 128]))
    explicit = draw(st.booleans())
    cfg = {"architectures": ["LlamaForCausalLM"], "num_attention_heads": heads,
           "num_key_value_heads": kv, "hidden_size": heads * head_dim if not explicit
           else draw(st.integers(8, 8192)),
           "num_hidden_layers": draw(st.integers(1, 128)),
           "intermediate_size": draw(st.integers(1, 65536)),
           "vocab_size": draw(st.integers(1, 300_000)),
           "tie_word_embeddings": draw(st.booleans()),
           "attention_bias": draw(st.booleans()), "mlp_bias": draw(st.booleans())}
    if explicit:
        cfg["head_dim"] = head_dim
    return cfg, head_dim


@settings(max_examples=60, deadline=None)
@given(llama_configs())
def test_random_llama_configs_match_hand_formula(case):
    cfg, d = case
    h, n, kv, layers = (cfg["hidden_size"], cfg["num_attention_heads"],
                        cfg["num_key_value_heads"], cfg["num_hidden_layers"])
    inter, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    q, k = n * d, kv * d
    per_layer = h * (q + 2 * k) + q * h + 3 * h * inter + 2 * h
    if cfg["attention_bias"]:
        per_layer += q + 2 * k + h
    if cfg["mlp_bias"]:
        per_layer += 2 * inter + h
    expected = vocab * h * (1 if cfg["tie_word_embeddings"] else 2) + layers * per_layer + h
    assert count_params(from_hf_config(cfg)).total == expected
    assert count_params(from_hf_config(json.dumps(cfg))).total == expected


_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**12), st.floats(),
                  st.text(max_size=8), st.lists(st.integers(-2, 5), max_size=4),
                  st.dictionaries(st.sampled_from(["factor", "rope_type", "full_attention"]),
                                  st.one_of(st.floats(), st.text(max_size=4)), max_size=2))
_BASES = [load(p)["config"] for p in PRESET_FILES]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(_BASES),
       edits=st.lists(st.tuples(st.sampled_from(
           ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "vocab_size", "head_dim", "tie_word_embeddings",
            "attention_bias", "rope_theta", "rope_scaling", "rope_parameters",
            "sliding_window", "layer_types", "use_sliding_window", "max_window_layers",
            "num_local_experts", "num_experts", "num_experts_per_tok", "mlp_only_layers",
            "decoder_sparse_step", "moe_intermediate_size", "n_routed_experts",
            "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "architectures",
            "model_type", "text_config", "n_embd", "hidden_act", "hidden_activation"]),
           _JUNK), min_size=1, max_size=3))
def test_junk_in_any_field_raises_only_config_error(base, edits):
    cfg = copy.deepcopy(base)
    target = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    for key, value in edits:
        target[key] = value
    try:
        model = from_hf_config(cfg)
    except ConfigError as exc:
        assert str(exc)
    else:
        assert count_params(model).total > 0
