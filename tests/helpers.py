"""Small hand-built models and devices for formula tests (independent of preset files), and one
check of hostile hardware files (``refuses_file_value``, which edits a preset's dict)."""

from llmpara_core.hardware import Efficiency, Hardware, HardwareClass
from llmpara_core.model import MLA, Activation, FFNKind, Model, MoE, NormKind, PositionKind

# Llama-3-8B shapes (HF config meta-llama/Meta-Llama-3-8B).
LLAMA3_8B = Model("Llama-3 8B (test)", hidden_size=4096, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                  vocab_size=128256, rope_theta=500000.0)

# Mixtral-8x7B shapes (HF config mistralai/Mixtral-8x7B-v0.1).
MIXTRAL = Model("Mixtral 8x7B (test)", 4096, 32, 32, 8, 14336, 32000, rope_theta=1e6,
                moe=MoE(num_experts=8, experts_per_token=2, expert_intermediate_size=14336))

# DeepSeek-V3 shapes (HF config deepseek-ai/DeepSeek-V3, MTP layer excluded).
DEEPSEEK_V3 = Model("DeepSeek-V3 (test)", 7168, 61, 128, 128, 18432, 129280,
                    moe=MoE(256, 8, 2048, shared_intermediate_size=2048, first_dense_layers=3),
                    mla=MLA(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                            v_head_dim=128, q_lora_rank=1536))

# Gemma-2-9B-like: 42 layers alternating local (4096 window) / global, head_dim 256.
GEMMA2_9B = Model("Gemma-2 9B (test)", 3584, 42, 16, 8, 14336, 256000, head_dim=256,
                  tie_word_embeddings=True, hidden_act=Activation.GELU_TANH, norms_per_layer=4,
                  sliding_window=4096, sliding_layers=tuple(i % 2 == 0 for i in range(42)))

# GPT-2 small: learned positions, LayerNorm, biases everywhere, plain GELU MLP, tied.
GPT2 = Model("GPT-2 (test)", 768, 12, 12, 12, 3072, 50257, tie_word_embeddings=True,
             attention_bias=True, attention_out_bias=True, mlp_bias=True,
             ffn_kind=FFNKind.PLAIN, hidden_act=Activation.GELU, norm_kind=NormKind.LAYER,
             position=PositionKind.LEARNED, rope_theta=None, max_position_embeddings=1024)

TINY = Model("tiny", 64, 2, 4, 2, 128, 1000)

# H100 SXM dense figures (NVIDIA Hopper whitepaper): 989.4 TFLOPS fp16, 3.35 TB/s, 80 GB.
H100 = Hardware("H100 (test)", HardwareClass.DATACENTER_GPU, 3.35e12, 80e9,
                peak_fp32_flops_per_s=66.9e12, peak_fp16_flops_per_s=989.4e12,
                peak_fp8_flops_per_s=1978.9e12, peak_int8_flops_per_s=1978.9e12,
                tdp_w=700, price_usd=30000, efficiency=Efficiency(0.7, 0.6, 4e-6))


def guarded_page_app(tmp_path, run_body: str, run_page_args: str = "",
                     imports: str = ""):
    """An AppTest of a one-page app whose page ``P.run`` has ``run_body`` (lines indented by
    8 spaces) and is run through ``ui.guard.run_page(P(), <run_page_args>)`` with the
    test-only re-raise switched off by the caller (monkeypatch LLMPARA_RAISE_PAGE_ERRORS=0)."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest
    root = Path(__file__).resolve().parent.parent
    script = tmp_path / "app.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        f"{imports}"
        "from ui.guard import run_page\n"
        "class P:\n"
        "    url_path = 'x'\n"
        "    def run(self):\n"
        f"{run_body}"
        f"run_page(P(){', ' + run_page_args if run_page_args else ''})\n")
    return AppTest.from_file(str(script), default_timeout=30).run()


def refuses_file_value(key: str, value, match: str, section: str | None = None) -> None:
    """An RTX 4090 hardware file with ``key`` = ``value`` (at the top level, or in table
    ``section`` beside valid compute and memory fractions) is refused with a ConfigError whose
    message matches ``match``."""
    import pytest

    from llmpara_core.errors import ConfigError
    from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict
    from llmpara_core.presets import load_hardware
    d = hardware_to_dict(load_hardware("nvidia-rtx-4090"))
    if section is None:
        d[key] = value
    else:
        d[section] = {"compute": 0.5, "memory": 0.8, key: value}
    with pytest.raises(ConfigError, match=match):
        hardware_from_dict(d, "bad.toml")
