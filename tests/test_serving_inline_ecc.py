"""Inline ECC of datacenter GDDR memory in serving iterations (``serving.cost.inline_ecc``,
``INLINE_ECC_RATE``): the check bits share the data bus, so a memory-bound pass on an L40S
lasts 16/15 as long as it would without them; compute-bound work, HBM parts and consumer
GDDR cards (ECC off by default) are not touched."""

import numpy as np
import pytest

from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import cost as C


def _cost(device, prec="FP8", framework="tensorrt-llm"):
    hw = load_hardware(device)
    return C.IterationCost(load_model("llama-3.1-8b"), hw, precision_preset(prec),
                           ParallelPlan(), efficiency_for(hw, framework))


@pytest.mark.parametrize("device, inline", [
    ("nvidia-l40s", True), ("nvidia-l4", True), ("nvidia-a10", True), ("nvidia-a10g", True),
    ("nvidia-h100-sxm", False), ("nvidia-a100-sxm-80gb", False),     # HBM: sideband ECC
    ("nvidia-rtx-4090", False),                                      # consumer GDDR: ECC off
])
def test_which_devices_have_inline_ecc(device, inline):
    assert C.inline_ecc(load_hardware(device)) is inline


def test_memory_bound_decode_pass_slower_by_the_check_bits(monkeypatch):
    """A decode pass of 8 sequences is memory-bound: its operator time (the iteration less
    launches and the per-pass host cost, which ECC does not touch) scales by 16/15."""
    ecc = _cost("nvidia-l40s")
    monkeypatch.setattr(C, "INLINE_ECC_RATE", 1.0)
    plain = _cost("nvidia-l40s")
    assert ecc.memory_bytes_per_s == pytest.approx(plain.memory_bytes_per_s * 15 / 16)
    f = np.array(ecc.feature_row(8, 1, 500))
    fixed = ecc.stages[0].kernels * ecc._rates.kernel_overhead_s \
        + float(ecc.rates_for(np.array([8.0]), np.array([8.0]))[1][0])
    t_ecc, t_plain = ecc.time_one_s(f, 8) - fixed, plain.time_one_s(f, 8) - fixed
    assert t_ecc == pytest.approx(t_plain * 16 / 15, rel=1e-9)


def test_compute_bound_prompt_and_hbm_parts_unchanged(monkeypatch):
    monkeypatch.setattr(C, "TENSOR_DUTY", None)
    ecc = _cost("nvidia-l40s", "FP16")
    h100 = _cost("nvidia-h100-sxm")
    monkeypatch.setattr(C, "INLINE_ECC_RATE", 1.0)
    plain = _cost("nvidia-l40s", "FP16")
    h100_plain = _cost("nvidia-h100-sxm")
    prompt = np.array(ecc.feature_row(1, 4096, 4096))          # GEMMs compute-bound
    assert ecc.time_one_s(prompt, 1) < plain.time_one_s(prompt, 1) * 1.02
    decode = np.array(h100.feature_row(8, 1, 500))
    assert h100.time_one_s(decode, 8) == h100_plain.time_one_s(decode, 8)
