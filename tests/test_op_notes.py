"""Operator notes and parameters for the operator table (llmpara_core.op_notes)."""

import pytest

from llmpara_core import presets
from llmpara_core.forward import forward_ops
from llmpara_core.model import count_params
from llmpara_core.op_notes import operator_note, operator_params
from llmpara_core.operators import OpKind
from llmpara_core.precision import PRECISION_PRESETS

FP16 = PRECISION_PRESETS["FP16"]
SINKS = {"gpt-oss-20b", "gpt-oss-120b"}      # attention sinks: no operator holds them


@pytest.mark.parametrize("slug", [i.slug for i in presets.list_presets("models")])
def test_operator_parameters_add_up_to_the_model(slug):
    model = presets.load_model(slug)
    ops = forward_ops(model, FP16, 1, 4, 4, True)
    total = sum(operator_params(model, o.name, o.kind) * o.count for o in ops)
    expected = count_params(model).total
    if slug in SINKS:
        sinks = model.num_hidden_layers * model.num_attention_heads
        assert total == expected - sinks
    else:
        assert total == expected


def test_notes_name_the_features():
    llama = presets.load_model("llama-3-8b")
    assert operator_note(llama, "k_proj", OpKind.QKV) == "GQA 8/32 KV heads, head dim 128"
    assert operator_note(llama, "rope", OpKind.ROPE) == "RoPE theta = 500000"
    assert "FlashAttention" in operator_note(llama, "flash_attention", OpKind.ATTENTION)
    assert operator_note(llama, "attn_norm", OpKind.NORM).startswith("RMSNorm")
    mixtral = presets.load_model("mixtral-8x7b")
    assert operator_note(mixtral, "moe_router", OpKind.MOE_ROUTER) == "top-2 of 8 experts"
    ds = presets.load_model("deepseek-v3")
    assert operator_note(ds, "kv_a_proj", OpKind.QKV).startswith("MLA: latent KV rank 512")
    gpt2 = presets.load_model("gpt2-small")
    assert operator_note(gpt2, "attn_norm", OpKind.NORM).startswith("LayerNorm")
