"""What the KV memory fraction is a share of (``EngineConfig.kv_fraction_of_total``):
TensorRT-LLM's ``free_gpu_memory_fraction`` is a share of the memory left after the weights,
vLLM's ``gpu_memory_utilization`` a share of the device's total, which the weights and
activations share with the KV cache."""

from dataclasses import replace

import pytest

from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving.config import FRAMEWORK_DEFAULTS, GENERIC_DEFAULTS, EngineConfig
from llmpara_core.serving.cost import IterationCost
from llmpara_core.serving.engine import kv_capacity_tokens


def _cost(model, hardware, precision="FP16", tp=1):
    hw = load_hardware(hardware)
    return IterationCost(load_model(model), hw, precision_preset(precision),
                         ParallelPlan(tp=tp), efficiency_for(hw, "vllm"))


def test_share_of_total_takes_the_rest_of_the_device_off():
    cost = _cost("llama-3.1-8b", "nvidia-h100-sxm")
    cfg = EngineConfig(block_size=1, kv_memory_fraction=0.9, kv_fraction_of_total=True)
    left = cost.free_bytes_per_device(cfg.max_num_tokens)
    total = cost.hardware.memory_capacity_bytes
    per = cost.kv_bytes_per_token()
    assert kv_capacity_tokens(cost, cfg) == int((left - 0.1 * total) // per)
    # below the share of what is left: 0.1 of the total is more than 0.1 of what is left
    assert kv_capacity_tokens(cost, cfg) < kv_capacity_tokens(
        cost, replace(cfg, kv_fraction_of_total=False))
    # at fraction 1 the two readings agree: everything left goes to the KV cache
    one = replace(cfg, kv_memory_fraction=1.0)
    assert kv_capacity_tokens(cost, one) == kv_capacity_tokens(
        cost, replace(one, kv_fraction_of_total=False)) == int(left // per)


def test_vllm_cannot_load_70b_fp16_on_one_h200_trtllm_can():
    """70.6e9 parameters x 2 B = 131 GiB of weights; an H200 has 140.4 GiB (143,771 MiB):
    vLLM's 0.9 of the total (126 GiB) does not hold the weights, TensorRT-LLM's 0.9 of what
    is left after them gives a small KV cache."""
    cost = _cost("llama-3-70b", "nvidia-h200-sxm")
    vllm = replace(FRAMEWORK_DEFAULTS["vllm"].config, block_size=1)
    trt = replace(FRAMEWORK_DEFAULTS["tensorrt-llm"].config, block_size=1, runtime_reserve_bytes=0)
    assert vllm.kv_fraction_of_total and not trt.kv_fraction_of_total
    assert not GENERIC_DEFAULTS.config.kv_fraction_of_total
    assert kv_capacity_tokens(cost, vllm) == 0
    assert kv_capacity_tokens(cost, trt) > 0
    assert kv_capacity_tokens(_cost("llama-3-70b", "8x-nvidia-h200-sxm-nvlink", tp=2), vllm) > 0


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_flag_is_a_bool(bad):
    with pytest.raises(ConfigError, match="KV fraction of total"):
        EngineConfig(kv_fraction_of_total=bad)
