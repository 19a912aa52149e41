"""TensorRT-LLM release profiles (``serving.stack_version``): parsing, the factor's place in
an iteration's time, the re-timing the fit relies on, and the CLI option."""

import json
import subprocess
import sys

import numpy as np
import pytest

from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import cost as C, stack_version as V


@pytest.mark.parametrize("v, rng", [("0.12", "0.12"), ("0.12.0", "0.12"), ("0.11.0", "0.11"),
                                    ("v0.17", "0.15-0.17"), ("0.10.0", "0.10"),
                                    ("0.21", "0.18-0.21")])
def test_release_ranges(v, rng):
    assert V.range_of(v) == rng


@pytest.mark.parametrize("bad", ["abc", "", "0.9", "0.22", "1.0", "0..1", "12"])
def test_bad_release_is_refused(bad):
    with pytest.raises(ConfigError):
        V.time_scale(bad, False)


def test_no_release_is_the_pooled_profile():
    assert V.time_scale(None, True) == 1.0
    # every fitted group names a known range and family, within the fit grid
    for (rng, fam), s in V.TIME_SCALE.items():
        assert rng in V.versions() and fam in V.FAMILIES
        assert min(V.SCALES) <= s <= max(V.SCALES)


def test_factor_scales_compute_not_collectives_or_power_wall():
    """A 16-bit TP1 pass (no collectives, no power wall) takes exactly the factor times as
    long; an FP8 pass under the wall is not shortened below work / duty by a factor < 1."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("nvidia-h100-sxm")
    F = np.array([C.IterationCost(m, hw, precision_preset("BF16"), ParallelPlan())
                  .feature_row(64, 1, 900), C.IterationCost(
                      m, hw, precision_preset("BF16"), ParallelPlan()).feature_row(2, 2000, 2000)])
    base = C.IterationCost(m, hw, precision_preset("BF16"), ParallelPlan())
    slow = C.IterationCost(m, hw, precision_preset("BF16"), ParallelPlan(), time_scale=1.3)
    assert slow.time_s(F, 64) == pytest.approx(1.3 * base.time_s(F, 64), rel=1e-12)
    fp8 = C.IterationCost(m, hw, precision_preset("FP8"), ParallelPlan())
    fast = C.IterationCost(m, hw, precision_preset("FP8"), ParallelPlan(), time_scale=0.5)
    comp, work, _ = fp8._stage_parts(0, F[1:], 2)
    wall = work / C.TENSOR_DUTY
    assert fast.time_s(F[1:], 2)[0] >= wall[0] * (1 - 1e-12)
    with pytest.raises(ConfigError):
        C.IterationCost(m, hw, precision_preset("BF16"), ParallelPlan(), time_scale=0.0)


def test_refit_retiming_equals_predicting_at_the_release():
    """The fit scores factors by re-timing recorded passes; that equals simulating each row at
    its release's factor (what ``validate --regime serving-maxload`` does)."""
    from llmpara_core.serving import duty_fit, validation as sv
    rows = [r for r in sv.load_rows(sv.SHIPPED_MAX_LOAD)
            if r.model == "Llama-3.1-8B" and r.precision == "FP8" and r.tp == 1
            and r.hardware.startswith("NVIDIA H100") and r.isl == 128 and r.osl == 128]
    rows = [r for r in rows if V.range_of(r.version) in ("0.13-0.14", "0.15-0.17")][:2]
    assert rows
    recs = duty_fit.record(rows, 60)
    sv.predict.cache_clear()
    try:
        direct = [c.error for c in sv.compare(rows, 60)]
    finally:
        sv.predict.cache_clear()
    assert [e for _, e in V.errors(recs, C.TENSOR_DUTY, V.TIME_SCALE)] == \
        pytest.approx(direct, rel=1e-9)
    # the fit on two rows picks factors from its grid for their groups only
    table = V.fit(recs, C.TENSOR_DUTY, scales=(0.9, 1.0, 1.1))
    assert set(table) <= {(V.range_of(r.version), "dense") for r in rows}
    assert set(table.values()) <= {0.9, 1.0, 1.1}


def test_mlperf_rows_run_at_their_rounds_release():
    from llmpara_core.serving import mlperf
    row = next(r for r in mlperf.load_rows() if r.framework == "tensorrt-llm"
               and r.benchmark == "mixtral-8x7b")
    cost, _ = mlperf._setup(row)
    assert cost.time_scale == V.time_scale(V.MLPERF_V41_VERSION, True)
    assert mlperf._setup(row, releases=False)[0].time_scale == 1.0
    amd = next(r for r in mlperf.load_rows() if r.framework == "vllm")
    assert mlperf._setup(amd)[0].time_scale == 1.0


def _serve(*extra):
    return subprocess.run([sys.executable, "-c", "import sys; from llmpara_core.cli import main; "
                           "sys.exit(main())", "serve", "--model", "llama-3.1-8b", "--hardware",
                           "nvidia-h100-sxm", "--max-load", "--requests", "60", "--format",
                           "json", *extra], capture_output=True, text=True, timeout=120)


def test_cli_stack_version():
    a = _serve("--framework", "tensorrt-llm", "--stack-version", "0.10")
    b = _serve("--framework", "tensorrt-llm", "--stack-version", "0.17")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    assert da["stack_version"]["range"] == "0.10" and db["stack_time_scale"] == \
        V.time_scale("0.17", False)
    # 0.10's factor is the larger (slower release): fewer tokens/s on the same run
    assert (da["output_tokens_per_s"] < db["output_tokens_per_s"]) == \
        (V.time_scale("0.10", False) > V.time_scale("0.17", False))
    for extra in (("--framework", "vllm", "--stack-version", "0.12"),
                  ("--framework", "tensorrt-llm", "--stack-version", "0.9"),
                  ("--framework", "tensorrt-llm", "--stack-version", "x")):
        r = _serve(*extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
