"""Efficiency model v2 (issue 13): the GEMM curve over tokens in flight and the per-pass costs
behind the one time function (roofline.rates / op_time_s), memory-technology and architecture
values instead of a device-name table, stack profiles with batched-regime values, the batched
measurements, `--framework` on every predicting subcommand, `validate --regime/--loo`, and the
achieved errors pinned (in-sample and leave-one-device-out) so a regression fails."""

import json
import tomllib
from dataclasses import replace

import pytest

from helpers import H100, LLAMA3_8B
from llmpara_core import calibration
from llmpara_core.analysis import analyze
from llmpara_core.calibration import fitting, measurements as validation, stack_fit
from llmpara_core.calibration import summary as vs
from llmpara_core.cli import main
from llmpara_core.efficiency_table import TABLE_PATH, read_table
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import (CLASS_DEFAULTS, Architecture, Efficiency, HardwareClass,
                                   MemoryType, clock_overhead_factor, generic_efficiency,
                                   kernel_class)
from llmpara_core.hardware import PROVISIONAL_EFFICIENCY as _PROV
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import rates
from llmpara_core.workload import Workload

MARGIN = 0.01      # a regression of more than one percentage point fails
# In-sample median |estimated / measured - 1| by regime with the shipped table.
# llama.cpp's quantised matmuls at their own share of the GEMM rate (quant_compute, fitted
# per class on devices with both 16-bit and quantised prefill rows of one model): prefill in
# sample 9.7 -> 7.1 %, held out 10.4 -> 9.2 % (Apple SoCs 5.4 -> 3.7 %, consumer GPUs 17.0 ->
# 16.1 %); batch 1 held out 5.47 -> 5.52 % (consumer GPUs 4.1 -> 4.3 %).
PINNED_IN_SAMPLE = {"batch-1": 0.040, "batched": 0.080, "prefill": 0.071}
# Leave-one-device-out (the device's rows, and its power-limited twin's, predicted by a fit
# without them; no value fitted with them survives). Before the leak was closed the
# datacenter batch-1 figure read 12.2 % with the A100 class values fitted on the A100 itself.
# The batched fit's best of several starts and its weak prior on gemm_half_tokens
# (stack_fit.GEMM_HALF_STARTS / GEMM_HALF_TILE): TensorRT-LLM 11.2 -> 10.9 %.
PINNED_LOO_BATCHED = {"all": 0.104, "tensorrt-llm": 0.109, "vllm-legacy": 0.096}
# KV reads per query head (llama.cpp, kv_reread 0.3) flattened the A100 Llama-3-70B error over
# context but moved its level: datacenter 12.7 -> 13.2 %, its llama.cpp rows 10.7 -> 12.3 %
# (batch 1 overall 7.2 -> 6.8 %, consumer 5.3 -> 5.0 %, SoC 6.2 -> 5.0 %). The layer split's
# cost per stage boundary (llama.cpp, 248 us, fitting.fit_stage_hop): batch 1 held out 6.8 ->
# 6.6 % (consumer 5.0 -> 5.3 %), in sample 5.1 -> 5.4 % (it is set by step time vs GPU count
# within a device, not by the level of the rows); datacenter unchanged. llama.cpp's
# activation-quantising launch before each quantised matmul on GPUs (act_quant_kernels = 1,
# cited from its source; the fitted per-kernel cost fell 4.03 -> 2.74 us): batch 1 held out
# 6.6 -> 6.5 % (datacenter 13.2 -> 11.9 %, gpt-fast 13.5 -> 10.5 %, consumer 5.3 -> 5.5 %),
# in sample 5.4 -> 5.2 %; batched in sample 7.9 -> 8.9 %, held out 10.4 -> 10.8 % (the
# serving stacks share the class's per-kernel cost, their per-pass costs refitted). gpt-fast's
# own cost per quantised matmul (fitted on its BF16 vs int8/int4 rows, 1.8 launches): batch 1
# in sample 5.2 -> 4.7 %, held out 6.5 -> 6.4 % (datacenter 11.9 -> 11.0 %, gpt-fast 10.5 ->
# 8.1 %). The two 2023 llm-perf-bench vLLM rows mapped to the vLLM < 0.6 profile (the source
# names the commit, 2023-10-06): their errors +133 / -5 % -> +76 / -14 %, datacenter 11.0 ->
# 11.5 %. llama.cpp's tensor split modelled as the row split it is (2 (TP - 1) host-driven
# copies per matmul, 7.3 us each, fitting.fit_row_copy) instead of Megatron all-reduces: its
# three tensor-split rows +122 / +341 / +257 % -> +5 / -19 / +7 % held out, datacenter 11.5
# -> 11.0 % (in sample 7.9 -> 6.6 %), batch 1 in sample 4.7 -> 4.6 %, held out 6.40 -> 6.39 %.
# The per-kernel cost at each GPU's boost clock ((2000 MHz / f) ** 0.5, hardware.
# clock_overhead_factor): batch 1 held out 6.39 -> 5.6 % (consumer 5.5 -> 4.4 %), in sample
# 4.6 -> 4.1 %; datacenter 11.0 -> 11.8 %: its llama.cpp rows 11.0 -> 8.2 %, but gpt-fast's A100
# rows, held out, are predicted by its profile fitted on the MI250X's two rows, which cannot pin
# its per-kernel scale (in sample 0.70 of llama.cpp's; held out it stays 1). llama.cpp's
# weight-streaming bound per compute unit (5.9 / 8.1 B per SM-cycle for 16-bit / quantised
# weights, fitting.fit_stream_limits): its A100 F16 and Q4_K rows no longer need one HBM
# fraction between them -- datacenter 11.8 -> 10.1 % (its llama.cpp rows 8.2 -> 6.7 %),
# consumer 4.4 -> 4.1 %, batch 1 held out 5.6 -> 5.8 %, in sample 4.1 -> 4.0 %. gpt-fast's
# kernel plan from its source (one wqkv matmul, w1 and w3 apart, residual adds folded into
# the next norm: 14 -> 11 launches per layer; in-sample per-kernel scale 0.67 -> 0.82):
# datacenter 10.1 -> 9.0 %, gpt-fast 12.3 -> 10.2 %, batch 1 held out 5.8 -> 5.5 %.
PINNED_LOO_DATACENTER_BATCH1 = {"all": 0.090}
FP16 = precision_preset("FP16")


# ---- the one time function ----------------------------------------------------------------

def test_gemm_curve_over_tokens_in_flight():
    eff = Efficiency(compute=0.8, memory=0.7, gemm_half_tokens=64.0)
    assert eff.compute_at(None) == 0.8                     # large-M value
    assert eff.compute_at(64) == pytest.approx(0.4)       # half at M_half
    assert eff.compute_at(1) < eff.compute_at(16) < eff.compute_at(4096) < 0.8
    peak = rates(H100, FP16.compute_dtype, True, eff).flops_per_s
    assert rates(H100, FP16.compute_dtype, True, eff, tokens_in_flight=64).flops_per_s == \
        pytest.approx(peak / 2)
    # no curve (the default) and ideal mode ignore the tokens in flight
    flat = Efficiency(0.8, 0.7)
    assert rates(H100, FP16.compute_dtype, True, flat, tokens_in_flight=1) == \
        rates(H100, FP16.compute_dtype, True, flat)
    assert rates(H100, FP16.compute_dtype, False, eff, tokens_in_flight=1).flops_per_s == \
        H100.peak_fp16_flops_per_s


def test_per_pass_costs_are_added_once_per_step():
    base = Efficiency(0.7, 0.7, 0.0, 0.8)
    wl = Workload(8, 128, 64)
    a = analyze(LLAMA3_8B, H100, FP16, wl, base)
    b = analyze(LLAMA3_8B, H100, FP16, wl, replace(base, step_overhead_s=1e-3,
                                                  seq_overhead_s=1e-4))
    per_pass = 1e-3 + 8 * 1e-4
    assert b.estimated.tpot_s - a.estimated.tpot_s == pytest.approx(per_pass, rel=1e-9)
    assert b.estimated.ttft_s - a.estimated.ttft_s == pytest.approx(per_pass, rel=1e-9)
    assert b.ideal == a.ideal


@pytest.mark.parametrize("field, bad", [("gemm_half_tokens", -1.0), ("step_overhead_s", 2.0),
                                        ("seq_overhead_s", float("nan")),
                                        ("attention_compute", 0.0)])
def test_efficiency_rejects_bad_new_fields(field, bad):
    with pytest.raises(ConfigError):
        Efficiency(0.5, 0.5, **{field: bad})


def test_attention_flops_run_at_their_own_fraction():
    """Prefill attention at attention_compute of the GEMM rate: only ATTENTION rows slow
    down, and more so with a longer prompt."""
    eff = Efficiency(0.5, 0.7, 0.0)
    slow = replace(eff, attention_compute=0.25)
    for prompt in (512, 8192):
        a = analyze(LLAMA3_8B, H100, FP16, Workload(1, prompt, 1), eff)
        b = analyze(LLAMA3_8B, H100, FP16, Workload(1, prompt, 1), slow)
        for ra, rb in zip(a.prefill.rows, b.prefill.rows):
            if ra.kind.value == "attention":
                assert rb.estimated_s > ra.estimated_s
            else:
                assert rb.estimated_s == ra.estimated_s
    short = [analyze(LLAMA3_8B, H100, FP16, Workload(1, 512, 1), e).estimated.ttft_s
             for e in (eff, slow)]
    long = [analyze(LLAMA3_8B, H100, FP16, Workload(1, 8192, 1), e).estimated.ttft_s
            for e in (eff, slow)]
    assert long[1] / long[0] > short[1] / short[0] > 1.0


def test_batched_decode_is_not_capped_by_batch1_values():
    """The issue's case: vLLM on H100, Llama-3.1-8B, batch 511. The reference (llama.cpp)
    profile saturates; the vLLM profile (paged attention, native GEMMs) does not."""
    model, hw = load_model("llama-3.1-8b"), load_hardware("nvidia-h100-sxm")
    wl = Workload(511, 512, 256)
    generic = analyze(model, hw, precision_preset("BF16"), wl)
    vllm = analyze(model, hw, precision_preset("BF16"), wl,
                   calibration.efficiency_for(hw, "vllm"))
    assert vllm.estimated.throughput_tokens_per_s > 2 * generic.estimated.throughput_tokens_per_s
    # below the ideal roofline, above the measured-elsewhere 9,000 tok/s regime's half
    assert 5_000 < vllm.estimated.throughput_tokens_per_s < vllm.ideal.throughput_tokens_per_s


# ---- memory technology, architecture, kernel class -----------------------------------------

def test_memory_technology_replaces_device_names():
    mt = {"gddr6": {"memory": 0.88}, "hbm": {"memory": 0.5}}
    dc = HardwareClass.DATACENTER_GPU
    assert generic_efficiency(dc, MemoryType.GDDR6, None, memory_types=mt).memory == 0.88
    assert generic_efficiency(dc, MemoryType.HBM3E, None, memory_types=mt).memory == 0.5  # family
    assert generic_efficiency(dc, None, None, memory_types=mt) == CLASS_DEFAULTS[dc].efficiency
    cpu = HardwareClass.CPU                  # limited by the cores, not the DRAM technology
    assert generic_efficiency(cpu, MemoryType.GDDR6, None, memory_types=mt).memory == \
        CLASS_DEFAULTS[cpu].efficiency.memory


def test_architecture_factor_applies_to_the_reference_stack_only():
    table = calibration.default_table()
    hopper = load_hardware("nvidia-h100-sxm")
    assert hopper.architecture is Architecture.HOPPER
    assert table.architectures["hopper"]["legacy_kernel_factor"] == 0.5
    ampere_like = replace(hopper, architecture=Architecture.AMPERE)
    assert table.efficiency_for(hopper).compute == pytest.approx(
        0.5 * table.efficiency_for(ampere_like).compute)
    assert table.efficiency_for(hopper, "tensorrt-llm").compute == \
        table.efficiency_for(ampere_like, "tensorrt-llm").compute


def test_unified_soc_on_a_discrete_gpu_architecture_uses_gpu_kernels():
    assert kernel_class(HardwareClass.UNIFIED_SOC, Architecture.BLACKWELL) is \
        HardwareClass.CONSUMER_GPU
    assert kernel_class(HardwareClass.UNIFIED_SOC, Architecture.APPLE_M2) is \
        HardwareClass.UNIFIED_SOC
    spark = load_hardware("nvidia-dgx-spark")
    table = calibration.default_table()
    gpu = table.classes[HardwareClass.CONSUMER_GPU]
    # the GPU kernels' per-kernel cost, at the GB10 GPU's own clock
    assert spark.effective_efficiency.kernel_overhead_s == pytest.approx(
        gpu.kernel_overhead_s * clock_overhead_factor(HardwareClass.CONSUMER_GPU,
                                                      spark.boost_clock_mhz))
    assert spark.boost_clock_mhz == 2418


def test_table_documents_every_parameter():
    text = TABLE_PATH.read_text(encoding="utf-8")
    data = read_table()
    for key in ("memory", "compute", "kernel_overhead_us", "kv_read", "gemm_half_tokens",
                "attention_compute", "arXiv:2307.08691",
                "step_overhead_us", "seq_overhead_us", "legacy_kernel_factor", "native_kernels",
                "[memory_type.*]", "[architecture.*]", "[framework.*]", "arXiv:2407.08608"):
        assert key in text, key
    assert "device" not in data
    assert {"vllm", "vllm-legacy", "sglang", "tensorrt-llm", "fastertransformer"} <= \
        set(data["framework"])
    assert data["framework"]["tensorrt-llm"]["native_kernels"] is True


# ---- measurements -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shipped():
    rows, skipped = validation.read_shipped()
    mapped, skipped = validation.map_all(rows, skipped)
    preds, bad = validation.predict_all(mapped)
    return mapped, skipped + bad, preds


def test_batched_rows_are_mapped_with_their_batch(shipped):
    mapped, skipped, _ = shipped
    by_id = {r.measurement.row_id: r for r in mapped}
    static = by_id["BT0005"]                     # TRT-LLM v0.5 H100 FP8 Llama-2-7B, batch 64
    assert static.measurement.metric == "output_tok_s"
    assert static.workload == Workload(64, 128, 128)
    assert static.precision.compute_dtype.value == "fp8" and static.precision.kv_bits == 8
    assert validation.regime(static) == "batched"
    energy = by_id["E0230"]                      # ML.ENERGY vLLM H100, avg batch 509.8
    assert energy.workload.batch == 510 and energy.framework == "vllm-legacy"
    maxload = by_id["BT4766"]                    # vLLM 0.6 max load: batch = max_num_seqs
    assert maxload.workload.batch == 256 and maxload.framework == "vllm"
    reasons = {s.row_id: s.reason for s in skipped}
    assert "GPT-J-6B" in reasons["BT0001"]       # no preset: skipped with the reason
    assert validation.regime(by_id["D0001"]) == "batch-1"
    assert validation.regime(by_id["D0002"]) == "prefill"


def test_static_throughput_counts_prefill_and_generation(shipped):
    mapped, _, _ = shipped
    row = next(r for r in mapped if r.measurement.row_id == "BT0005")
    ideal, est, _ = validation.timings(row, calibration.efficiency_for(row.hardware,
                                                                        "tensorrt-llm"))
    value = validation.metric_value("output_tok_s", est, row.workload)
    assert value == pytest.approx(64 * 128 / est.e2e_latency_s)
    # the fast fitting path agrees with the full core on a batched single-device row
    eff = calibration.efficiency_for(row.hardware, "tensorrt-llm")
    assert fitting.features(row).predict(eff) == pytest.approx(value, rel=0.03)


def test_in_sample_errors_by_regime_are_pinned(shipped):
    _, skipped, preds = shipped
    s = vs.summarize(preds, skipped)
    for reg, pinned in PINNED_IN_SAMPLE.items():
        g = s.stats("all", "regime", reg)
        assert g.estimated.n >= 100 and g.estimated.median_abs <= pinned + MARGIN, reg
    assert s.stats("all", "regime-stack", "batched / vllm-legacy").estimated.median_abs <= 0.15
    assert s.stats("all", "regime-stack", "batched / tensorrt-llm").estimated.median_abs <= 0.15


# ---- CLI --------------------------------------------------------------------------------------

def _groups(out: str) -> dict:
    d = json.loads(out)
    return {g["group"]: g for g in d["groups"] if g["kind"].startswith("regime")}


def _loo_table() -> tuple[dict, dict]:
    """The fit's leave-one-device-out figures as written into efficiency.toml: (by regime,
    class and stack; by regime and device preset)."""
    fit = read_table()["fit"]
    return fit["leave_one_device_out"], fit["leave_one_device_out_by_device"]


def _one_fold(capsys, regime: str, device: str) -> dict:
    """`llmpara validate --loo --regime R --device D`: one device held out and refitted."""
    assert main(["validate", "--loo", "--regime", regime, "--device", device,
                 "--format", "json"]) == 0
    return _groups(capsys.readouterr().out)[regime]


# The full leave-one-device-out takes minutes (scripts/fit_efficiency.py writes its figures
# into efficiency.toml); the tests pin those figures and recompute the cheapest folds with the
# CLI, which must give the figure the fit wrote for that device -- so a change to the code of
# the folds fails here until the fit is rerun, and a worse refit fails the pins.
def test_validate_loo_batched_is_pinned(capsys):
    loo, by_device = _loo_table()
    assert loo["batched"] <= PINNED_LOO_BATCHED["all"] + MARGIN
    for stack in ("tensorrt-llm", "vllm-legacy"):
        assert loo[f"batched.{stack}"] <= PINNED_LOO_BATCHED[stack] + MARGIN, stack
    # one fold per batched stack: the A100 40GB (vLLM < 0.6 only) and the L40S (TensorRT-LLM)
    for device, n in (("nvidia-a100-sxm-40gb", 15), ("nvidia-l40s", 32)):
        g = _one_fold(capsys, "batched", device)
        assert g["n"] == n, device
        assert g["estimated_median_abs_error"] == pytest.approx(
            by_device[f"batched.{device}"], abs=5e-4), device


def test_validate_loo_datacenter_batch1_is_pinned(capsys):
    loo, by_device = _loo_table()
    assert loo["batch-1.datacenter-gpu"] <= PINNED_LOO_DATACENTER_BATCH1["all"] + MARGIN
    # the A10G's fold refits the reference stack's classes, MLC and vLLM < 0.6 without it
    g = _one_fold(capsys, "batch-1", "nvidia-a10g")
    assert g["n"] == 6
    assert g["estimated_median_abs_error"] == pytest.approx(
        by_device["batch-1.nvidia-a10g"], abs=5e-4)


def test_validate_regime_table_and_errors(capsys):
    assert main(["validate", "--regime", "prefill"]) == 0
    out = capsys.readouterr().out
    assert "regime: prefill" in out and "regime: batched" not in out
    assert main(["validate", "--device", "nvidia-h100-sxm"]) == 2
    assert "--loo" in capsys.readouterr().err
    assert main(["validate", "--loo", "--regime", "batched", "--device", "apple-m1-7c"]) == 2
    assert "no batched rows" in capsys.readouterr().err


SUBCOMMANDS = [
    ["analyze", "--model", "llama-3.1-8b", "--hardware", "nvidia-h100-sxm", "--batch", "64"],
    ["metrics", "--model", "llama-3.1-8b", "--hardware", "nvidia-h100-sxm", "--batch", "64"],
    ["shard", "--model", "llama-3.1-8b", "--hardware", "nvidia-h100-sxm", "--batch", "64"],
    ["hetero", "--model", "llama-3.1-8b", "--hardware", "nvidia-h100-sxm", "--batch", "64"],
    ["speculative", "--target", "llama-3.1-8b", "--hardware", "nvidia-h100-sxm",
     "--draft-kind", "ngram", "--gamma", "3", "--alpha", "0.7", "--batch", "16"],
]


@pytest.mark.parametrize("argv", SUBCOMMANDS, ids=lambda a: a[0])
def test_framework_flag_on_every_predicting_subcommand(argv, capsys):
    assert main(argv + ["--format", "json"]) == 0
    generic = capsys.readouterr().out
    assert main(argv + ["--framework", "vllm", "--format", "json"]) == 0
    assert capsys.readouterr().out != generic
    assert main(argv + ["--framework", "vlm"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'vllm'" in err and err.count("\n") == 1


def test_dse_takes_a_framework(capsys):
    argv = ["dse", "--model", "llama-3.2-1b", "--samples", "4", "--method", "random",
            "--format", "json"]
    assert main(argv + ["--framework", "nope"]) == 2
    assert "unknown framework" in capsys.readouterr().err


# ---- speculative ------------------------------------------------------------------------------

def test_speculative_speedup_falls_steadily_with_batch_under_vllm():
    from llmpara_core.speculative.engine import Setup, Speculation, batch_sweep, head_draft
    model, hw = load_model("llama-3.1-8b"), load_hardware("nvidia-h100-sxm")
    su = Setup(model, hw, precision_preset("BF16"), Workload(1, 512, 256),
               head_draft(model, "eagle"), efficiency=calibration.efficiency_for(hw, "vllm"))
    sp = [p.speedup for p in batch_sweep(su, Speculation(3, alpha=0.7), [2, 4, 8, 16, 32, 64])]
    assert all(a > b for a, b in zip(sp, sp[1:])), sp
    # batch 64 at 1.34x with the speculation costs fitted on the published sweeps
    # (presets/tables/speculative_costs.toml; 2.8 % held out): well below batch 2's speedup
    assert sp[0] > 1.5 and sp[-1] < 1.4 and sp[-1] < 0.75 * sp[0]


def test_table_round_trip_keeps_absolute_values():
    table = calibration.default_table()
    again = calibration.table_from_dict(tomllib.loads(calibration.table_to_toml(table)))
    assert again.frameworks["vllm-legacy"].absolute["seq_overhead_s"] == pytest.approx(
        table.frameworks["vllm-legacy"].absolute["seq_overhead_s"], rel=1e-3)


# ---- leave-one-device-out: no leak, twins, one number ---------------------------------------

def test_table_as_written_predicts_as_the_fitted_table(shipped):
    """The fit script scores the table after a TOML round trip, so [fit] holds what the CLI
    recomputes from the shipped file."""
    table = calibration.default_table()
    again = calibration.table_from_dict(tomllib.loads(calibration.table_to_toml(table)))
    rows = [r for r in shipped[0] if validation.regime(r) == "batch-1"][:40]
    a, _ = validation.predict_all(rows, table)
    b, _ = validation.predict_all(rows, again)
    assert [p.estimated for p in a] == pytest.approx([p.estimated for p in b], rel=1e-12)


def test_power_limited_twin_is_held_out_with_its_device():
    sxm, capped = load_hardware("nvidia-a100-sxm-80gb"), load_hardware("nvidia-a100-sxm-80gb-330w")
    assert capped.tdp_w != sxm.tdp_w
    assert fitting.device_key(sxm) == fitting.device_key(capped)
    assert fitting.device_key(sxm) != fitting.device_key(load_hardware("nvidia-a100-pcie-80gb"))


def test_a_refit_without_a_class_rows_keeps_nothing_fitted_on_them(shipped):
    """A fold left without a class's reference rows falls back to the provisional values (with
    the donor class's GEMM fractions), never to the values fitted with the held-out rows."""
    mapped = shipped[0]
    dc = HardwareClass.DATACENTER_GPU
    table = calibration.default_table()
    assert table.class_rows[dc] and "hbm2e" in table.memory_types
    train = [r for r in mapped if r.hardware.hw_class is not dc]
    t = fitting.fit_table(train, table, frameworks=False)
    assert t.class_rows[dc] == 0 and t.classes[dc] != table.classes[dc]
    assert t.classes[dc].memory == _PROV[dc].memory
    assert t.classes[dc].compute == t.classes[HardwareClass.CONSUMER_GPU].compute
    assert "hbm2e" not in t.memory_types and "hbm" not in t.memory_types



# ---- memory-controller generation ----------------------------------------------------------

def test_gpu_generation_memory_factor_per_memory_family():
    """Discrete-GPU generations carry a fitted factor per memory family (their GDDR and HBM
    controllers are different designs); Apple generations carry none."""
    table = calibration.default_table()
    arch = table.architectures
    assert arch["ada"]["memory_factor_gddr"] > 1.0 > arch["ampere"]["memory_factor_gddr"]
    assert not any(k.startswith("memory_factor") for a in ("apple-m1", "apple-m2", "apple-m3")
                   for k in arch.get(a, {}))
    gddr6x = table.memory_types["gddr6x"]["memory"]
    for slug, gen in (("nvidia-rtx-4090", "ada"), ("nvidia-rtx-3090", "ampere")):
        hw = load_hardware(slug)
        assert table.efficiency_for(hw).memory == pytest.approx(
            gddr6x * arch[gen]["memory_factor_gddr"], rel=1e-9)
    # a refit drops every fitted factor it cannot refit and keeps the cited ones
    bare = fitting._with_arch_memory(table, [])
    assert bare.architectures == {"hopper": {"legacy_kernel_factor": 0.5}}


@pytest.mark.parametrize("bump", [0.997, 1.003])
def test_batched_fit_end_does_not_hang_on_rounding_of_what_it_inherits(shipped, bump):
    """The GEMM fraction and the tokens at which half of it is reached trade along a shallow
    valley with several local minima on TensorRT-LLM's batched rows. From one start, a 0.3 %
    change in the inherited per-kernel cost sent gemm_half_tokens from 94 to 61 or to 1; the
    fit keeps the best of several starts (``stack_fit.GEMM_HALF_STARTS``)."""
    mapped = shipped[0]
    rows = [r for r in mapped if r.framework == "tensorrt-llm" and r.devices == 1
            and validation.regime(r) == "batched" and r.hardware.efficiency is None]
    t = calibration.default_table()
    cls = HardwareClass.DATACENTER_GPU
    bumped = replace(t, classes={**t.classes, cls: replace(
        t.classes[cls], kernel_overhead_s=t.classes[cls].kernel_overhead_s * bump)})
    a, b = (stack_fit.fit_batched("tensorrt-llm", rows, x) for x in (t, bumped))
    assert b["gemm_half_tokens"] == pytest.approx(a["gemm_half_tokens"], rel=0.02)
    assert b["compute"] == pytest.approx(a["compute"], rel=0.01)
    assert len(stack_fit.GEMM_HALF_STARTS) >= 2
