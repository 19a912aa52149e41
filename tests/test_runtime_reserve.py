"""The device memory a serving stack holds outside weights, activations and KV cache
(``EngineConfig.runtime_reserve_bytes``), the KV capacity it leaves, and the leave-one-GPU-out
fit of TensorRT-LLM's (``serving.reserve_fit``)."""

import math
from dataclasses import replace

import numpy as np
import pytest

from llmpara_core.calibration.efficiency import efficiency_for
from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import reserve_fit
from llmpara_core.serving.config import (FRAMEWORK_DEFAULTS, TRTLLM_RUNTIME_RESERVE_GIB,
                                         EngineConfig)
from llmpara_core.serving.cost import IterationCost
from llmpara_core.serving.duty_fit import RunParts
from llmpara_core.serving.engine import kv_capacity_tokens
from llmpara_core.serving.validation import MaxLoadRow

GIB = 2**30


def _cost(capacity_bytes=None):
    hw = load_hardware("nvidia-h100-sxm")
    if capacity_bytes is not None:
        hw = replace(hw, memory_capacity_bytes=capacity_bytes)
    return IterationCost(load_model("llama-3.1-70b"), hw, precision_preset("FP8"),
                         ParallelPlan(), efficiency_for(hw, "tensorrt-llm"))


@pytest.fixture(scope="module")
def cost():
    return _cost()


def test_reserve_comes_off_before_the_kv_fraction(cost):
    cfg = EngineConfig(block_size=1, kv_memory_fraction=0.9)
    free = cost.free_bytes_per_device(cfg.max_num_tokens)
    per = cost.kv_bytes_per_token()
    assert kv_capacity_tokens(cost, cfg) == int(free * 0.9 // per)
    for r_gib in (1.0, 3.0):
        got = kv_capacity_tokens(cost, replace(cfg, runtime_reserve_bytes=r_gib * GIB))
        assert got == int((free - r_gib * GIB) * 0.9 // per)
    # a 70B model in FP8 on one 80 GB card: the weights leave ~12 GB, so each GiB held by the
    # runtime is ~8 % of the KV cache
    assert kv_capacity_tokens(cost, replace(cfg, runtime_reserve_bytes=GIB)) \
        < 0.95 * kv_capacity_tokens(cost, cfg)
    assert kv_capacity_tokens(cost, replace(cfg, runtime_reserve_bytes=free + 1)) == 0


def test_capacity_in_the_driver_unit_is_what_the_kv_cache_gets(cost):
    # the H100 preset holds nvidia-smi's 81,559 MiB: 5.52 GB more than "80 GB" read as 80e9 B
    cfg = EngineConfig(block_size=1, kv_memory_fraction=0.9)
    assert cost.hardware.memory_capacity_bytes == 81559 * 2**20
    as_decimal = _cost(80e9)
    gained = kv_capacity_tokens(cost, cfg) - kv_capacity_tokens(as_decimal, cfg)
    assert gained == pytest.approx((81559 * 2**20 - 80e9) * 0.9 / cost.kv_bytes_per_token(),
                                   abs=1)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, 2e12, "1", True])
def test_reserve_is_checked(bad):
    with pytest.raises(ConfigError, match="runtime reserve"):
        EngineConfig(runtime_reserve_bytes=bad)


def test_tensorrt_llm_profile_carries_the_fitted_reserve():
    cfg = FRAMEWORK_DEFAULTS["tensorrt-llm"].config
    assert cfg.runtime_reserve_bytes == TRTLLM_RUNTIME_RESERVE_GIB * GIB
    assert TRTLLM_RUNTIME_RESERVE_GIB in reserve_fit.RESERVES_GIB
    assert FRAMEWORK_DEFAULTS["vllm"].config.runtime_reserve_bytes == 0.0


def _records(scale_gpu: str | None = None, factor: float = 1.0):
    """Synthetic max-load records on three GPUs for two reserves: the larger reserve cuts the
    throughput of the three memory-bound rows of each GPU (0.6x, measured 0.62x)."""
    out = {}
    for res in (0.0, 3.0):
        recs = []
        for gi, gpu in enumerate(("GPU A", "GPU B", "GPU C")):
            for k in range(4):
                tight = k < 3
                speed = 1000.0 * (1 + gi) * (0.6 if tight and res else 1.0)
                measured = 1000.0 * (1 + gi) * (0.62 if tight else 1.0) * (1 + 0.01 * k)
                if gpu == scale_gpu:
                    measured *= factor
                row = MaxLoadRow(f"{gpu}-{k}", gpu, "m", "FP16", 1, 128, 128, measured, "src")
                n = 10
                recs.append((row, RunParts(speed, np.full(n, 0.1), np.zeros(n),
                                           np.zeros(n))))
        out[res] = recs
    return out


def test_fit_picks_the_reserve_the_rows_need():
    assert reserve_fit.fit(_records()) == 3.0


def test_held_out_gpu_never_sees_its_own_rows():
    held, chosen = reserve_fit.leave_one_gpu_out(_records())
    held2, chosen2 = reserve_fit.leave_one_gpu_out(_records("GPU B", 1.5))
    assert chosen2["GPU B"] == chosen["GPU B"]                    # picked on A and C alone
    e1 = {r.row_id: e for r, e in held if r.hardware == "GPU B"}
    e2 = {r.row_id: e for r, e in held2 if r.hardware == "GPU B"}
    for k, e in e1.items():
        assert e2[k] == pytest.approx((1 + e) / 1.5 - 1, rel=1e-12)


def _serve_json(*extra):
    import io
    import json
    from contextlib import redirect_stderr, redirect_stdout

    from llmpara_core.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["serve", "-m", "llama-3.1-8b", "-hw", "nvidia-h100-sxm",
                         "--framework", "tensorrt-llm", "--max-load", "--requests", "40",
                         "--no-search", "--format", "json", *extra])
        except SystemExit as e:          # argparse refuses a bad value with exit 2
            code = e.code
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue()


def test_cli_runtime_reserve_flag():
    """``serve --runtime-reserve-gib`` replaces the framework's reserve: the KV cache grows by
    the freed GiB x the KV fraction; hostile values are refused in one line."""
    code, default, _ = _serve_json()
    assert code == 0
    assert default["engine"]["runtime_reserve_bytes"] == TRTLLM_RUNTIME_RESERVE_GIB * GIB
    code, none, _ = _serve_json("--runtime-reserve-gib", "0")
    assert code == 0 and none["engine"]["runtime_reserve_bytes"] == 0
    gained = none["kv_cache_capacity_tokens"] - default["kv_cache_capacity_tokens"]
    per = 32 * 8 * 128 * 2 * 2      # Llama-3.1-8B, FP16 KV: layers x KV heads x dim x (K, V) x 2 B
    expect = TRTLLM_RUNTIME_RESERVE_GIB * GIB * 0.9 / per
    assert abs(gained - expect) <= 64, (gained, expect)      # whole 64-token blocks
    for bad in ("-1", "nan", "lots"):
        code, _, err = _serve_json("--runtime-reserve-gib", bad)
        assert code == 2 and "--runtime-reserve-gib" in err and "Traceback" not in err
    code, _, err = _serve_json("--runtime-reserve-gib", "100")
    assert code == 2 and "runtime reserve of 100 GiB" in err
