"""Activations between kernels under quantised GEMMs (``serving.cost.INTERKERNEL_ACTIVATION_BITS``):
an FP8 / FP4 GEMM writes a 16-bit output, so the tensors that cross memory between kernels are
16-bit while weights, KV cache and the GEMMs' data type keep the precision's width."""

import numpy as np
import pytest

from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import cost as C


def _cost(prec, model="mixtral-8x7b", device="nvidia-h200-sxm"):
    hw = load_hardware(device)
    return C.IterationCost(load_model(model), hw, precision_preset(prec), ParallelPlan(),
                           efficiency_for(hw, "tensorrt-llm"))


@pytest.mark.parametrize("prec, bits", [("FP8", 16.0), ("NVFP4", 16.0), ("FP16", 16.0),
                                        ("W4A16", 16.0), ("FP32", 32.0)])
def test_operator_activation_width(prec, bits):
    p = precision_preset(prec)
    q = C.op_precision(p)
    assert q.activation_bits == bits
    # everything else is the precision's own
    assert (q.weight_ffn_bits, q.kv_bits, q.compute_dtype) == (p.weight_ffn_bits, p.kv_bits,
                                                               p.compute_dtype)


def test_switch_off_keeps_the_precision(monkeypatch):
    monkeypatch.setattr(C, "INTERKERNEL_ACTIVATION_BITS", None)
    p = precision_preset("FP8")
    assert C.op_precision(p) is p


def test_fp8_pass_moves_the_16_bit_activations(monkeypatch):
    """A large FP8 MoE pass: the per-token activation bytes double, weight and KV bytes per
    pass do not change, and the pass takes longer (its elementwise kernels are memory-bound)."""
    monkeypatch.setattr(C, "TENSOR_DUTY", None)
    wide = _cost("FP8")
    monkeypatch.setattr(C, "INTERKERNEL_ACTIVATION_BITS", None)
    narrow = _cost("FP8")
    f = np.array([1.0, 4000.0, 1000.0, 500e3, 500e3, 8.0])     # 1, T, L, P, K, X
    act_w, act_n = wide.stages[0].energy[3] @ f, narrow.stages[0].energy[3] @ f
    assert act_w == pytest.approx(2.0 * act_n, rel=0.02)
    for row in (1, 2):                                  # weight and KV bytes: unchanged
        assert wide.stages[0].energy[row] @ f == pytest.approx(narrow.stages[0].energy[row] @ f)
    assert wide.time_one_s(f, 1000) > narrow.time_one_s(f, 1000) * 1.02


def test_16_bit_precision_unchanged(monkeypatch):
    fp16 = _cost("FP16", "llama-3.1-8b")
    monkeypatch.setattr(C, "INTERKERNEL_ACTIVATION_BITS", None)
    plain = _cost("FP16", "llama-3.1-8b")
    f = np.array(fp16.feature_row(64, 1, 700))
    assert fp16.time_one_s(f, 64) == plain.time_one_s(f, 64)
