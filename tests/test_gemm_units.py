"""Issue 27, item 2: GEMMs at the rate of the unit that runs them. llama.cpp's quantised
matmuls (MMQ) run on the int8 tensor cores (the file's ``int8``, NVIDIA Turing and newer);
its F16 matmuls accumulate in FP16 (the file's ``fp16_acc16``: GeForce 2x the spec sheet's
FP32-accumulate ``fp16``); other stacks run at ``fp16``. Presets carry the spec-sheet figures."""

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from llmpara_core.calibration.efficiency import default_table
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency, Hardware, HardwareClass
from llmpara_core.hardware_io import hardware_from_dict, hardware_to_dict, read_hardware_file
from llmpara_core.precision import DType, precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import gemm_peaks, quant_flops_factor, rates
from llmpara_core.analysis import analyze
from llmpara_core.workload import Workload

from helpers import refuses_file_value

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "hardware"
# The dense FP16/BF16 tensor figures of ../shared/data/hardware_specs.csv (columns name,
# peak_dense_fp16_bf16_tflops, int8_tops, notes, source; rows with an FP16 figure), copied
# for this test.
SPECS = Path(__file__).resolve().parent / "data" / "hardware_specs_fp16.csv"
T = 1e12


def _eff(**kw) -> Efficiency:
    return Efficiency(compute=0.5, memory=0.8, quant_compute=0.4, **kw)


def test_mmq_runs_at_the_int8_rate_and_f16_at_the_fp16_accumulate_rate():
    hw = load_hardware("nvidia-rtx-4090")
    assert (hw.peak_fp16_flops_per_s, hw.peak_fp16_acc16_flops_per_s,
            hw.peak_int8_flops_per_s) == (165.15 * T, 330.3 * T, 660.6 * T)
    both = _eff(gemm_fp16_acc16=True, quant_gemm_int8=True)
    r = rates(hw, DType.FP16, True, both)
    assert r.flops_per_s == pytest.approx(0.5 * 330.3 * T)
    # quantised matmuls: int8 peak x compute x quant_compute
    assert r.flops_per_s * r.quant_compute == pytest.approx(0.5 * 0.4 * 660.6 * T)
    assert quant_flops_factor(r, True) == pytest.approx(330.3 / (0.4 * 660.6))
    # a stack with neither unit: the spec sheet's rate, quantised at quant_compute of it
    r = rates(hw, DType.FP16, True, _eff())
    assert r.flops_per_s == pytest.approx(0.5 * 165.15 * T)
    assert r.quant_compute == pytest.approx(0.4)
    # ideal mode: the spec sheet's peak
    assert rates(hw, DType.FP16, False).flops_per_s == 165.15 * T


def test_the_units_need_the_device_to_have_them():
    both = _eff(gemm_fp16_acc16=True, quant_gemm_int8=True)
    # professional / datacenter parts: no fp16_acc16 -> fp16; int8 on Ampere/Hopper -> int8
    a100 = load_hardware("nvidia-a100-sxm-80gb")
    assert a100.peak_fp16_acc16_flops_per_s is None
    assert gemm_peaks(a100, DType.FP16, both) == (312 * T, DType.FP16, 2.0)
    # an Apple GPU has no int8 matrix unit (Metal dequantises to half): a file's int8 is not it
    m2 = replace(load_hardware("apple-m2-ultra"), peak_int8_flops_per_s=100 * T)
    peak, _, ratio = gemm_peaks(m2, DType.FP16, both)
    assert ratio == 1.0 and peak == m2.peak_flops_per_s(DType.FP16)[0]
    # no int8 in the file: quantised matmuls at the 16-bit rate
    no_int8 = replace(load_hardware("nvidia-rtx-4090"), peak_int8_flops_per_s=None)
    assert gemm_peaks(no_int8, DType.FP16, both)[2] == 1.0
    # passes in their own data type (W8A8, FP8) keep that type's peak
    hw = load_hardware("nvidia-rtx-4090")
    assert gemm_peaks(hw, DType.INT8, both) == (660.6 * T, DType.INT8, 1.0)


def test_stacks_declare_their_gemm_units():
    t, hw = default_table(), load_hardware("nvidia-rtx-4090")
    ref = t.efficiency_for(hw, "llama.cpp")
    assert ref.gemm_fp16_acc16 and ref.quant_gemm_int8
    for stack in ("vllm", "tensorrt-llm", "gpt-fast", "exllamav2", "mlx"):
        e = t.efficiency_for(hw, stack)
        assert not (e.gemm_fp16_acc16 or e.quant_gemm_int8), stack
    # a profile built in memory (the fit's, a leave-one-device-out fold's) declares the same
    from llmpara_core.calibration.efficiency import FrameworkProfile
    built = FrameworkProfile("llama.cpp", "llama.cpp")
    assert built.gemm_fp16_acc16 and built.quant_gemm_int8
    assert not FrameworkProfile("vllm", "vLLM").quant_gemm_int8
    # the class fit is the reference stack's: the fitted GPU classes carry its units
    gen = t.efficiency_for(hw, "generic")
    assert gen.gemm_fp16_acc16 and gen.quant_gemm_int8


def test_llama_cpp_q4_prefill_beats_the_fp16_spec_roofline_on_geforce():
    """The issue's mechanism end to end: on an RTX 4090, llama.cpp's Q4_0 prompt processing of
    an 8B model runs above what the card's FP16 spec figure (FP32 accumulate) allows at 100 %,
    and a stack at that rate (vLLM) is slower than llama.cpp here."""
    model, hw = load_model("llama-3-8b"), load_hardware("nvidia-rtx-4090")
    wl = Workload(1, 512, 1)
    t = default_table()
    q4 = precision_preset("Q4_0")
    rep = analyze(model, replace(hw, efficiency=t.efficiency_for(hw, "llama.cpp")), q4, wl)
    flops = sum(r.flops for r in rep.prefill.rows)
    assert flops / rep.estimated.ttft_s > 0.5 * hw.peak_fp16_flops_per_s
    with_vllm = analyze(model, replace(hw, efficiency=replace(
        t.efficiency_for(hw, "llama.cpp"), gemm_fp16_acc16=False, quant_gemm_int8=False)),
        q4, wl)
    assert with_vllm.estimated.ttft_s > rep.estimated.ttft_s


def test_efficiency_units_are_booleans():
    for f in ("gemm_fp16_acc16", "quant_gemm_int8"):
        with pytest.raises(ConfigError, match=f):
            Efficiency(**{f: 1})


def _spec_rows():
    with SPECS.open(newline="", encoding="utf-8") as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def test_presets_fp16_is_the_spec_sheet_figure():
    """Every preset whose name or alias is a spec-sheet row with an FP16 figure carries that
    figure as ``fp16`` (FP32 accumulate); GeForce presets carry 2x it as ``fp16_acc16`` and no
    other preset has a ``fp16_acc16`` different from ``fp16``."""
    specs, checked, geforce = _spec_rows(), [], []
    for path in sorted(PRESET_DIR.glob("*.toml")):
        hw = read_hardware_file(path)
        names = [hw.name, *hw.aliases]
        row = next((specs[n] for n in names if n in specs), None)
        if row is not None:
            assert hw.peak_fp16_flops_per_s == pytest.approx(
                float(row["peak_dense_fp16_bf16_tflops"]) * T, rel=1e-9), path.stem
            checked.append(path.stem)
        acc16 = hw.peak_fp16_acc16_flops_per_s
        if "GeForce" in hw.name:
            assert acc16 == pytest.approx(2 * hw.peak_fp16_flops_per_s, rel=1e-9), path.stem
            geforce.append(path.stem)
        else:
            assert acc16 is None, path.stem
    assert {"nvidia-rtx-4090", "nvidia-rtx-3090", "nvidia-rtx-5090", "nvidia-rtx-4080",
            "nvidia-a100-sxm-80gb", "nvidia-h100-sxm", "nvidia-rtx-a6000"} <= set(checked)
    assert len(geforce) >= 12


def test_hardware_file_fp16_acc16_round_trips_and_hostile_values_are_refused():
    hw = load_hardware("nvidia-rtx-4090")
    d = hardware_to_dict(hw)
    assert d["peak_TFLOPS"]["fp16_acc16"] == pytest.approx(330.3)
    assert hardware_from_dict(d, "x.toml") == hw
    for bad, match in ((100.0, "between the fp16 peak"), (400.0, "between the fp16 peak"),
                       (-1.0, "fp16_acc16"), ("fast", "fp16_acc16"), (float("nan"), "fp16_acc16"),
                       (float("inf"), "fp16_acc16"), (True, "fp16_acc16")):
        dd = hardware_to_dict(hw)
        dd["peak_TFLOPS"]["fp16_acc16"] = bad
        with pytest.raises(ConfigError, match=match):
            hardware_from_dict(dd, "bad.toml")
    no_fp16 = hardware_to_dict(hw)
    del no_fp16["peak_TFLOPS"]["fp16"]
    with pytest.raises(ConfigError, match="needs the fp16 peak"):
        hardware_from_dict(no_fp16, "bad.toml")
    with pytest.raises(ConfigError, match="fp16_acc16"):
        Hardware("x", HardwareClass.CONSUMER_GPU, 1e12, 1e10, peak_fp16_flops_per_s=1e14,
                 peak_fp16_acc16_flops_per_s=3e14)
    # a misspelt key is named
    refuses_file_value("peak_TFLOPS", {"fp16": 100, "fp16_acc_16": 200}, "fp16_acc16")


def test_a_refit_keeps_the_reference_stacks_gemm_units():
    """The reference profile a fit builds in memory (and every leave-one-device-out fold
    predicts with) declares llama.cpp's units, as the profile read from the table does."""
    from llmpara_core.calibration import fitting
    t = fitting.fit_table([], default_table(), frameworks=False, classes_too=False)
    e = t.efficiency_for(load_hardware("nvidia-rtx-5080"), "llama.cpp")
    assert e.gemm_fp16_acc16 and e.quant_gemm_int8
    assert rates(load_hardware("nvidia-rtx-5080"), DType.FP16, True, e).quant_compute == \
        pytest.approx(2 * e.quant_compute, rel=1e-3)
