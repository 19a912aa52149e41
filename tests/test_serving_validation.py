"""The serving simulator against published measurements (rows copied into tests/data with
their source URLs). The max-load figure is pinned to what the efficiency model (v2: GEMM curve
over tokens in flight, per-pass costs, the TensorRT-LLM stack profile) gives -- nothing is
fitted to these rows; update the pin when the efficiency model changes; the low-rate TTFT
of the TensorRT-LLM serving table is a physics check (one request at a time = prefill)."""

from pathlib import Path

import pytest

from llmpara_core.serving.validation import compare, error_summary, load_rows, rate_points

DATA = Path(__file__).resolve().parent / "data"


def test_max_load_throughput_error_pinned():
    rows = [r for r in load_rows(DATA / "serving_trtllm_max_load.csv")
            if r.tp == 1 and r.model in ("Llama-3.1-8B", "Llama-3-8B") and r.precision == "FP8"]
    assert len(rows) == 146
    s = error_summary(compare(rows, 300))
    assert s["skipped"] == 0
    assert s["median_abs_error"] == pytest.approx(0.117, abs=0.03)
    assert s["median_abs_error"] <= 0.15         # the bar
    # no systematic bias left (was -45 % with v1). The subset is bimodal -- H100 about -18 %,
    # L40S about +5 % -- so its signed median sits between the two clusters: -0.2 % before
    # the FP8 power wall (serving.cost.TENSOR_DUTY), -7.8 % with it (H100 -15.9 -> -17.8 %,
    # L40S +7.6 -> +4.7 %; inline ECC on the L40S's GDDR6, serving.cost.INLINE_ECC_RATE:
    # +4.7 -> +0.9 %); pinned per GPU as well
    assert abs(s["median_signed_error"]) < 0.10
    assert s["per_gpu"]["NVIDIA H100 SXM 80GB"]["median_signed_error"] == pytest.approx(
        -0.178, abs=0.03)
    assert s["per_gpu"]["NVIDIA L40S"]["median_signed_error"] == pytest.approx(0.009, abs=0.03)
    assert set(s["per_gpu"]) == {"NVIDIA H100 SXM 80GB", "NVIDIA L40S"}


def test_low_rate_ttft_matches_the_tensorrt_llm_serving_table():
    pts = [p for p in rate_points(DATA / "serving_rate_rows.csv", 200, rates=(2.0,))
           if "TensorRT" in p.framework]
    assert len(pts) == 6
    signed = [p.predicted["ttft_ms"] / p.measured["ttft_ms"] - 1 for p in pts]
    errs = sorted(abs(e) for e in signed)
    # v2 predicted these 6 points 6-24 % low (median 11 %): the Triton serving path's request
    # handling (HTTP, tokenisation, queueing at 2 req/s) is not in the model, so every point
    # is under-predicted. With the per-kernel cost at each GPU's clock the refit moved 0.4 ms
    # of TensorRT-LLM's per-pass time (step_overhead 3.19 -> 2.78 ms) into its kernels
    # (batched static rows held out 12.5 -> 11.1 %), and a single prefill pass lost it:
    # 6-28 % low, median 15.1 % -- none by more than 30 %.
    assert errs[len(errs) // 2] < 0.17
    assert errs[-1] < 0.30
    assert all(e < 0.05 for e in signed)
