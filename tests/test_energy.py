"""Energy, TCO and CO2e: formulas against hand-derived numbers, properties, the reference's
defects (reference-tool §10 items 15-17, 21-22, 26), the CLI keys, every hardware preset, and
predicted energy per token against published measurements (ML.ENERGY) with stated tolerances."""

import io
import json
import math
import statistics
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from helpers import H100, LLAMA3_8B, MIXTRAL, TINY
from llmpara_core.analysis import OpRow, analyze
from llmpara_core.metrics.carbon import carbon_per_million_tokens, grid_region, grid_regions
from llmpara_core.cli import main
from llmpara_core.metrics.cost import (MetricsSettings, compare_hardware, metrics_to_dict,
                               scenario_metrics, tco)
from llmpara_core.metrics.energy import (EnergyParams, energy_params, energy_report, energy_roofline,
                                 j_per_token_with_step_time, op_energy,
                                 read_energy_measurements, tdp_fraction_op_energy,
                                 tdp_fraction_roofline, validate_energy)
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency
from llmpara_core.operators import OpKind
from llmpara_core.precision import PRECISION_PRESETS, DType
from llmpara_core.presets import list_presets, load_hardware, load_model
from llmpara_core.units import HOURS_PER_YEAR
from llmpara_core.workload import Workload

DATA = Path(__file__).resolve().parents[1] / "presets" / "tables" / "energy_measurements.csv"
FP16 = PRECISION_PRESETS["FP16"]


def _row(**kw):
    base = dict(phase="decode", name="op", kind=OpKind.FFN, group="", count=1, flops=0.0,
                weight_bytes=0.0, act_read_bytes=0.0, act_write_bytes=0.0, kv_read_bytes=0.0,
                kv_write_bytes=0.0, comm_bytes=0.0, compute_s=0.0, memory_s=0.0, ideal_s=0.0,
                estimated_s=0.0)
    base.update(kw)
    return OpRow(**base)


PARAMS = EnergyParams("test", DType.FP16, flop_j=0.5e-12, weight_j_per_byte=60e-12,
                      kv_j_per_byte=40e-12, act_j_per_byte=30e-12, link_j_per_byte=10e-12,
                      main_j_per_byte=60e-12, static_w=100.0, idle_w=80.0, tdp_w=700.0)


# ---------------------------------------------------------------------------- formulas

def test_op_energy_hand_derived():
    row = _row(flops=1e12, weight_bytes=1e9, kv_read_bytes=2e8, kv_write_bytes=1e6,
               act_read_bytes=1e8, act_write_bytes=5e7, comm_bytes=1e7, estimated_s=0.01)
    e = op_energy(row, PARAMS)
    # compute 1e12 x 0.5 pJ = 0.5 J; memory 1e9 x 60 pJ + 2.01e8 x 40 pJ + 1.5e8 x 30 pJ
    # = 0.06 + 0.00804 + 0.0045 = 0.07254 J; link 1e7 x 10 pJ = 1e-4 J; static 100 W x 10 ms = 1 J
    assert e.compute_j == pytest.approx(0.5)
    assert e.memory_j == pytest.approx(0.07254)
    assert e.comm_j == pytest.approx(1e-4)
    assert e.static_j == pytest.approx(1.0)
    assert e.total_j == pytest.approx(1.57264)
    assert e.power_w == pytest.approx(157.264)
    assert e.flops_per_j == pytest.approx(1e12 / 1.57264)


def test_tdp_calibration_h100_hand_derived():
    # Test H100: TDP 700 W, no idle figure -> 0.15 x 700 = 105 W idle + 38 W active increment
    # = 143 W static. No slug -> class default HBM3 40 pJ/B + 19.2 pJ/B on-chip = 59.2 pJ/B.
    # e_flop(fp16) = (700 - 143 - 59.2e-12 x 3.35e12 x 0.6) / (989.4e12 x 0.7)
    #              = (557 - 118.992) / 692.58e12 = 0.632430 pJ/FLOP
    p = energy_params(H100, DType.FP16)
    assert p.static_w == pytest.approx(143.0)
    assert p.weight_j_per_byte == pytest.approx(59.2e-12)
    assert p.flop_j == pytest.approx(438.008 / 692.58e12, rel=1e-9)
    # fp8 doubles the peak, so the same budget gives half the energy per FLOP
    assert dict(p.flop_j_by_dtype)[DType.FP8] == pytest.approx(438.008 / (1978.9e12 * 0.7))
    # at the ridge of the estimated roofline the device draws exactly its TDP
    r = estimated_rates_of(H100)
    assert p.static_w + p.flop_j * r.flops_per_s + p.main_j_per_byte * r.bytes_per_s == \
        pytest.approx(700.0)


def estimated_rates_of(hw):
    from llmpara_core.roofline import rates
    return rates(hw, DType.FP16, estimated=True)


def test_tdp_fraction_op_hand_derived():
    # I = 2 FLOP/B < ridge 100: u_c = 0.02, u_m = 1; P = 700 (0.55 x 0.02 + 0.45) = 322.7 W
    row = _row(flops=2e9, weight_bytes=1e9, estimated_s=0.01)
    e = tdp_fraction_op_energy(row, 700.0, 0.55, 100.0)
    assert e.total_j == pytest.approx(3.227)
    assert e.compute_j == pytest.approx(700 * 0.55 * 0.02 * 0.01)
    # I = 1000 > ridge: u_c = 1, u_m = 0.1; P = 700 (0.55 + 0.045) = 416.5 W
    e2 = tdp_fraction_op_energy(_row(flops=1e12, weight_bytes=1e9, estimated_s=0.01),
                                700.0, 0.55, 100.0)
    assert e2.power_w == pytest.approx(416.5)
    # alpha = 1 in the memory-bound limit: the 5 % floor applies, 35 W
    e3 = tdp_fraction_op_energy(_row(flops=0.0, weight_bytes=1e9, estimated_s=1.0),
                                700.0, 1.0, 100.0)
    assert e3.total_j == pytest.approx(35.0)


def test_energy_roofline_formula():
    r = estimated_rates_of(H100)
    curve = energy_roofline(PARAMS, r, [1.0, 1e6])
    # I = 1 (memory-bound): 1 / (0.5 pJ + 60 pJ + 100 W / (1 x 2.01e12 B/s)) FLOP/J
    expect = 1 / (0.5e-12 + 60e-12 + 100 / (3.35e12 * 0.6))
    assert curve.flops_per_j[0] == pytest.approx(expect)
    # ceiling: 1 / (e_flop + P_static / P_eff)
    assert curve.ceiling_flops_per_j == pytest.approx(1 / (0.5e-12 + 100 / (989.4e12 * 0.7)))
    assert curve.flops_per_j[1] < curve.ceiling_flops_per_j
    assert curve.energy_balance == pytest.approx(120.0)   # 60 pJ/B / 0.5 pJ/FLOP
    ref = tdp_fraction_roofline(700.0, 0.55, r, [r.ridge_flops_per_byte])
    assert ref.flops_per_j[0] == pytest.approx(r.flops_per_s / 700.0)   # P/TDP at the ridge


def test_carbon_hand_derived():
    # 0.5 J and 10 ms per token; idle 50 W over (1 - 0.5)/0.5 of the busy time -> +0.5 J;
    # (1.0 J x 1.2 / 3.6e6) x 400 g/kWh = 1.33333e-4 g/token = 133.333 g/Mtok.
    # embodied 1000 x 150 kg x 0.01 s / (3 y x 8766 h x 3600 s x 0.5) = 3.16881e-5 g -> 31.688
    c = carbon_per_million_tokens(0.5, 0.01, 400.0, 1.2, 3.0, 0.5, 150.0, idle_w=50.0)
    assert c.operational_g_per_million_tokens == pytest.approx(133.3333, rel=1e-5)
    assert c.embodied_g_per_million_tokens == pytest.approx(
        1e6 * 1500 / (3 * HOURS_PER_YEAR * 3600 * 0.5))
    assert c.embodied_g_per_million_tokens == pytest.approx(31.688, rel=1e-4)
    assert c.idle_share_of_operational == pytest.approx(0.5)
    unknown = carbon_per_million_tokens(0.5, 0.01, 400.0, 1.2, 3.0, 0.5, None)
    assert unknown.embodied_g_per_million_tokens is None and not unknown.embodied_known
    assert unknown.total_g_per_million_tokens == unknown.operational_g_per_million_tokens


def test_tco_hand_derived():
    # hours = 3 x 8766 = 26298; capex/busy h = 30000 / (26298 x 0.5) = 2.281542;
    # electricity/busy h = 0.10 x 1.5 x (400 + 100 x 0.5/0.5) / 1000 = 0.075;
    # 1000 tok/s = 3.6e6 tok/h -> (2.281542 + 0.075) / 3.6 = 0.654595 $/Mtok
    t = tco(30000.0, 400.0, 100.0, 1000.0, 3.0, 0.5, 0.10, 1.5)
    assert t.capex_usd_per_busy_hour == pytest.approx(30000 / (26298 * 0.5))
    assert t.usd_per_million_tokens == pytest.approx((30000 / 13149 + 0.075) / 3.6)
    assert t.capex_usd_per_hour == pytest.approx(30000 / 26298)
    # wall clock electricity: half the hours at 400 W, half at 100 W, x PUE x price
    assert t.electricity_usd_per_hour == pytest.approx(0.10 * 1.5 * 0.25)
    assert t.lifetime_tco_usd == pytest.approx(30000 + 0.0375 * 26298)
    assert tco(None, 400.0, 100.0, 1000.0, 3.0, 0.5, 0.10, 1.5).usd_per_million_tokens is None


def test_energy_report_totals_are_consistent_with_the_timing():
    r = analyze(LLAMA3_8B, H100, FP16, Workload(batch=4, prompt_len=512, gen_len=64))
    e = energy_report(r)
    assert e.total_time_s == pytest.approx(r.estimated.e2e_latency_s, rel=1e-9)
    assert e.total_j == pytest.approx(e.prefill_j + 63 * e.decode_step_j)
    assert e.j_per_output_token == pytest.approx(e.total_j / (4 * 64))
    assert e.request_j == pytest.approx(e.total_j / 4)
    assert e.tokens_per_j == pytest.approx(1 / e.j_per_output_token)
    # decode energy uses the exactly integrated decode time (mean step x steps)
    assert sum(o.time_s for o in e.decode) == pytest.approx(r.estimated.tpot_s)


def test_scenario_efficiency_is_energy_weighted_not_a_mean_of_rows():
    """Reference defect §10.15: the headline efficiency was an unweighted mean of per-row
    FLOP/J over prefill and decode rows. Ours is total FLOPs / total energy."""
    r = analyze(LLAMA3_8B, H100, FP16, Workload(batch=1, prompt_len=2048, gen_len=256))
    e = energy_report(r)
    rows = e.decode
    weighted = sum(o.flops for o in rows) / sum(o.total_j for o in rows)
    mean = statistics.mean(o.flops_per_j for o in rows if o.flops_per_j)
    assert weighted != pytest.approx(mean, rel=0.05)
    assert e.decode_step_j == pytest.approx(sum(o.total_j for o in rows))


def test_operational_carbon_uses_roofline_time_and_pue():
    """Reference defect §10.16: operational CO2 = TDP x FLOPs / peak, no PUE. For batch-1
    decode (memory-bound) that undercounts by an order of magnitude; ours uses the operators'
    estimated time and applies PUE."""
    r = analyze(LLAMA3_8B, H100, FP16, Workload(batch=1, prompt_len=2048, gen_len=256))
    m = scenario_metrics(r, MetricsSettings(pue=1.5, include_idle=False))
    ref_j_per_token = 700.0 * r.decode.flops / r.peak_flops_per_s      # reference formula
    assert m.energy.decode_j_per_token > 5 * ref_j_per_token
    m1 = scenario_metrics(r, MetricsSettings(pue=1.0, include_idle=False))
    assert m.carbon.operational_g_per_million_tokens == pytest.approx(
        1.5 * m1.carbon.operational_g_per_million_tokens)


def test_cost_depends_on_the_workload():
    """Reference defect §10.17: TCO per peak FLOP, identical for every workload. Ours is per
    output token of the scenario, so batching changes it."""
    s = MetricsSettings()
    a = scenario_metrics(analyze(LLAMA3_8B, H100, FP16, Workload(1, 512, 128)), s)
    b = scenario_metrics(analyze(LLAMA3_8B, H100, FP16, Workload(32, 512, 128)), s)
    assert b.tco.usd_per_million_tokens < a.tco.usd_per_million_tokens / 10


def test_the_devices_own_tdp_price_and_overrides_are_used():
    """Reference defects §10.21-22: custom hardware overrides never reached the energy tab and
    every platform got $5000 / 300 W. Here the device's figures, and any override, are used."""
    r = analyze(LLAMA3_8B, H100, FP16, Workload(8, 512, 128))
    hot = replace(H100, tdp_w=1000.0, price_usd=60000.0)
    r2 = analyze(LLAMA3_8B, hot, FP16, Workload(8, 512, 128))
    m, m2 = scenario_metrics(r), scenario_metrics(r2)
    assert m.tco.price_usd == 30000.0 and m2.tco.price_usd == 60000.0
    assert m2.energy.params.static_w > m.energy.params.static_w
    assert m2.tco.usd_per_million_tokens > m.tco.usd_per_million_tokens
    over = scenario_metrics(r, MetricsSettings(price_usd=1000.0, embodied_kgco2e=0.0))
    assert over.tco.price_usd == 1000.0 and over.carbon.embodied_g_per_million_tokens == 0.0


def test_params_overrides_and_validation():
    p = PARAMS.with_overrides(static_w=10.0, flop_j=None)
    assert p.static_w == 10.0 and p.flop_j == PARAMS.flop_j
    assert any("override" in a for a in p.assumptions)
    with pytest.raises(ConfigError):
        PARAMS.with_overrides(static_w=-1.0)
    with pytest.raises(ConfigError):
        MetricsSettings(region="Atlantis")
    with pytest.raises(ConfigError):
        MetricsSettings(utilisation=0.0)
    with pytest.raises(ConfigError):
        scenario_metrics(analyze(TINY, H100, FP16, Workload(1, 16, 0)))


def test_grid_regions_cover_the_reference_and_more():
    # the reference's 9 regions, by their reference names
    ref = ["US_Average", "US_California", "US_Texas", "EU_Average", "France", "Germany",
           "China", "Iceland", "Global_Average"]
    vals = {n: grid_region(n).gco2e_per_kwh for n in ref}
    assert vals["Global_Average"] == 473.01 and grid_region(None).key == "world"
    assert vals["France"] < 60 and vals["China"] > 500 and vals["Iceland"] < 40
    types = {r.region_type for r in grid_regions()}
    assert {"country", "cloud_region", "us_state", "world"} <= types
    assert len(grid_regions()) > 100
    assert all(r.source for r in grid_regions())
    with pytest.raises(ConfigError, match="did you mean"):
        grid_region("Frnace")


# ---------------------------------------------------------------------------- properties

@settings(max_examples=25, deadline=None)
@given(b1=st.integers(1, 256), b2=st.integers(1, 256), ctx=st.integers(16, 4096),
       moe=st.booleans())
def test_decode_energy_per_token_falls_with_batch(b1, b2, ctx, moe):
    lo, hi = sorted((b1, b2))
    model = MIXTRAL if moe else LLAMA3_8B
    e = [energy_report(analyze(model, H100, FP16, Workload(b, ctx, 8))).decode_j_per_token
         for b in (lo, hi)]
    assert e[1] <= e[0] * (1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(ci=st.floats(0, 1500), k=st.floats(0.01, 3), pue=st.floats(1, 2),
       emb=st.one_of(st.none(), st.floats(0, 2000)))
def test_carbon_scales_linearly_with_grid_intensity(ci, k, pue, emb):
    a = carbon_per_million_tokens(0.3, 0.002, ci, pue, 4.0, 0.6, emb, idle_w=70.0)
    b = carbon_per_million_tokens(0.3, 0.002, ci * k, pue, 4.0, 0.6, emb, idle_w=70.0)
    assert b.operational_g_per_million_tokens == pytest.approx(
        k * a.operational_g_per_million_tokens, rel=1e-9, abs=1e-12)
    assert b.embodied_g_per_million_tokens == a.embodied_g_per_million_tokens


@settings(max_examples=30, deadline=None)
@given(tps=st.floats(1e-3, 1e6), power=st.floats(0, 2000), idle=st.floats(0, 200),
       price=st.floats(0, 1e6), u=st.floats(0.01, 1), years=st.floats(0.5, 10))
def test_cost_per_million_tokens_halves_when_throughput_doubles(tps, power, idle, price, u, years):
    a = tco(price, power, idle, tps, years, u, 0.12, 1.3)
    b = tco(price, power, idle, 2 * tps, years, u, 0.12, 1.3)
    assert b.usd_per_million_tokens == pytest.approx(a.usd_per_million_tokens / 2, rel=1e-12)


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 512), prompt=st.integers(1, 8192), gen=st.integers(1, 64),
       dtype=st.sampled_from(["FP16", "FP8", "W4A16", "W8A8"]))
def test_no_operator_draws_more_than_tdp(batch, prompt, gen, dtype):
    """With e_flop calibrated on TDP, power peaks at TDP at the ridge point (and kernel
    launch overhead only lowers it)."""
    r = analyze(LLAMA3_8B, H100, PRECISION_PRESETS[dtype], Workload(batch, prompt, gen))
    e = energy_report(r)
    assert max(o.power_w for o in e.rows() if o.power_w) <= 700.0 * (1 + 1e-9)
    assert e.avg_power_w >= e.params.static_w


def test_tdp_fraction_model_floor_and_alpha():
    r = analyze(LLAMA3_8B, H100, FP16, Workload(1, 512, 32))
    e = energy_report(r, model="tdp-fraction")
    assert e.alpha == 0.55   # the reference's datacenter-GPU preset value
    for o in e.rows():
        if o.time_s > 0:
            assert 0.05 * 700 * (1 - 1e-9) <= o.power_w <= 700 * (1 + 1e-9)
    assert energy_report(r, model="tdp-fraction", alpha=0.9).alpha == 0.9
    with pytest.raises(ConfigError):
        energy_report(r, model="magic")


def test_tiered_device_prices_bytes_at_their_tier():
    hw = load_hardware("cambricon-llm-chiplet")     # SRAM 1 pJ/B, DRAM 3.7, Flash 25
    small = energy_params(hw, DType.FP16, sizes={"weight": 0.1e9, "kv": 0.01e9, "act": 1e6})
    big = energy_params(hw, DType.FP16, sizes={"weight": 16e9, "kv": 1e9, "act": 1e6})
    assert small.weight_j_per_byte == pytest.approx(1e-12)
    # activations 1 MB in SRAM; weights 16 GB: 0.499 GB in SRAM, 15.501 GB in DRAM
    # -> (0.499 x 1 + 15.501 x 3.7) / 16 = 3.61579 pJ/B; KV 1 GB: 0.499 GB left in DRAM,
    # 0.501 GB in Flash -> 0.499 x 3.7 + 0.501 x 25 = 14.3713 pJ/B
    assert big.weight_j_per_byte == pytest.approx((0.499 + 15.501 * 3.7) / 16 * 1e-12)
    assert big.kv_j_per_byte == pytest.approx((0.499 * 3.7 + 0.501 * 25) * 1e-12)
    assert big.act_j_per_byte == pytest.approx(1e-12)


# ---------------------------------------------------------------------------- presets, CLI

def test_every_hardware_preset_runs_the_comparison():
    hws = [load_hardware(i.slug) for i in list_presets("hardware")]
    rows = compare_hardware(load_model("Llama-3.1 8B"), hws, PRECISION_PRESETS["BF16"],
                            Workload(8, 512, 128))
    assert len(rows) == len(hws) >= 40
    assert [r.error for r in rows if r.error] == []
    for r in rows:
        assert r.j_per_token > 0 and r.output_tokens_per_s > 0
        assert r.co2e_g_per_million_tokens > 0
        assert r.usd_per_million_tokens is None or r.usd_per_million_tokens > 0
    no_fit = [r for r in rows if r.fits is False]
    assert no_fit, "small devices (phones, 8 GB boards) must be kept and marked"
    big = compare_hardware(load_model("Llama-3.1 405B"), hws[:3], FP16, Workload(1, 128, 8))
    assert all(r.fits is False and r.j_per_token for r in big)


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_analyze_json_gains_energy_cost_carbon_keys():
    args = ["analyze", "--model", "Llama-3 8B", "--hardware", "NVIDIA H100 SXM", "--batch", "4",
            "--prompt-len", "1024", "--gen-len", "128", "--format", "json"]
    code, out, err = _cli(*args)
    assert code == 0, err
    d = json.loads(out)
    for k in ("energy_j_per_token", "cost_usd_per_million_tokens", "co2e_g_per_million_tokens"):
        assert d[k] > 0
    a = d["metrics_assumptions"]
    assert a["region"] == "world" and a["pue"] == 1.25 and a["lifetime_years"] == 3.0
    assert a["notes"]
    code, out2, _ = _cli(*args, "--region", "France", "--pue", "1.1", "--usd-per-kwh", "0.2",
                         "--lifetime-years", "5", "--utilisation", "0.9")
    d2 = json.loads(out2)
    assert d2["metrics_assumptions"]["gco2e_per_kwh"] == grid_region("France").gco2e_per_kwh
    assert d2["co2e_operational_g_per_million_tokens"] < d["co2e_operational_g_per_million_tokens"] / 5
    assert d2["energy_j_per_token"] == pytest.approx(d["energy_j_per_token"])
    code, out3, _ = _cli(*args, "--energy-model", "tdp-fraction", "--alpha", "0.6")
    assert json.loads(out3)["metrics_assumptions"]["alpha"] == 0.6
    for bad in (["--region", "Mars"], ["--pue", "0.9"], ["--utilisation", "0"]):
        code, _, err = _cli(*args, *bad)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_metrics_subcommand():
    code, out, err = _cli("metrics", "--model", "Llama-3 8B", "--hardware", "H100 SXM",
                          "nvidia-rtx-4090", "--batch", "2", "--format", "json")
    assert code == 0, err
    devs = json.loads(out)["devices"]
    assert [d["slug"] for d in devs] == ["nvidia-h100-sxm", "nvidia-rtx-4090"]
    code, out, _ = _cli("metrics", "--list-regions", "--format", "csv")
    assert code == 0 and "Global_Average" in out
    assert _cli("metrics", "--model", "Llama-3 8B")[0] == 2


def test_metrics_to_dict_is_plain_json():
    r = analyze(LLAMA3_8B, H100, FP16, Workload(2, 256, 32))
    d = metrics_to_dict(scenario_metrics(r))
    json.dumps(d, allow_nan=False)
    assert d["energy_j_per_token"] == pytest.approx(d["energy_total_j"] / 64)


# ---------------------------------------------------------------------------- measurements

# Published measurements: ML.ENERGY Leaderboard v2 (vLLM, GPU energy via Zeus/NVML, online
# serving with continuous batching; J/token = energy per request / output tokens, prefill
# folded in) and v1 (HF eager, batch 1), single-GPU rows on A100-SXM4-40GB and H100 SXM
# (presets/tables/energy_measurements.csv, each row with its source).
#
# Stated tolerances (not fitted; no energy constant was tuned on these rows):
# * power model given the measured time per step (``j_per_token_with_step_time``): every
#   row within a factor of 2 of the measurement, geometric-mean ratio in [0.5, 1.25];
# * full prediction (the model's own estimated time, with the calibrated efficiency of
#   presets/tables/efficiency.toml): every row within a factor of 2, geometric-mean ratio in
#   [0.6, 1.25] (measured 0.80 with the first calibration; the uncalibrated roofline was
#   at 0.25-1.0); median |log error| within 0.20 (issue 13: energy per token within 20 %
#   median). With the efficiency model v2 the predicted time is about as good as the
#   measured one, so the full prediction's median error is no longer larger than the timed
#   one's (0.076 vs 0.081); both are bounded. The two HF-eager rows are timed by that stack's
#   per-kernel cost, fitted on their own measured time per token (calibration.stack_fit.
#   fit_energy_profiles: no other rows measure HF eager), so for them the full prediction
#   checks the power model only (before: the device's llama.cpp-like values, 0.50 of the
#   measured J/token).


def _validation():
    return [v for v in validate_energy([m for m in read_energy_measurements(DATA)
                                        if m.in_tolerance_test])]


def test_energy_per_token_against_published_measurements():
    vs = _validation()
    assert len(vs) >= 30
    full = [v.ratio for v in vs]
    timed = [v.ratio_with_measured_time for v in vs]
    gmean = lambda xs: math.exp(statistics.mean(math.log(x) for x in xs))   # noqa: E731
    assert all(0.5 <= r <= 2.0 for r in timed), sorted(timed)
    assert 0.5 <= gmean(timed) <= 1.25
    assert all(0.5 <= r <= 2.0 for r in full), sorted(full)
    assert 0.6 <= gmean(full) <= 1.25
    med_abs_log = lambda xs: statistics.median(abs(math.log(x)) for x in xs)   # noqa: E731
    assert med_abs_log(full) <= 0.20 and med_abs_log(timed) <= 0.20


def test_measured_batch_sweeps_and_predictions_both_fall_with_batch():
    vs = _validation()
    series: dict = {}
    for v in vs:
        m = v.measurement
        if m.batch > 1:
            series.setdefault((m.model_preset, m.hardware_preset), []).append(v)
    assert len(series) >= 4
    for key, rows in series.items():
        rows.sort(key=lambda v: v.measurement.batch)
        pred = [v.predicted_j_per_token for v in rows]
        assert all(b <= a * 1.02 for a, b in zip(pred, pred[1:])), key
        assert rows[-1].measurement.measured_j_per_token < rows[0].measurement.measured_j_per_token


def test_step_time_substitution():
    r = analyze(LLAMA3_8B, H100, FP16, Workload(8, 256, 32))
    e = energy_report(r)
    assert j_per_token_with_step_time(e, r.estimated.tpot_s) == pytest.approx(e.j_per_output_token)
    slower = j_per_token_with_step_time(e, 2 * r.estimated.tpot_s)
    # static power x the extra time: 31 steps x tpot x 143 W / 256 tokens
    assert slower - e.j_per_output_token == pytest.approx(
        31 * r.estimated.tpot_s * e.params.static_w / 256)


def test_per_pass_fixed_time_is_drawn_at_static_power():
    # a stack with per-pass costs (scheduler, sampling, host sync): the energy report's time
    # is the report's end-to-end time, and the fixed time is charged static power
    wl = Workload(8, 256, 32)
    eff = replace(H100.effective_efficiency, step_overhead_s=2e-3, seq_overhead_s=1e-4)
    plain = analyze(LLAMA3_8B, H100, FP16, wl, efficiency=replace(eff, step_overhead_s=0.0,
                                                                  seq_overhead_s=0.0))
    fixed = analyze(LLAMA3_8B, H100, FP16, wl, efficiency=eff)
    e0, e1 = energy_report(plain), energy_report(fixed)
    per_pass = 2e-3 + 8 * 1e-4
    assert e1.decode_fixed_s == pytest.approx(per_pass)
    assert e1.prefill_fixed_s == pytest.approx(per_pass)
    assert e1.total_time_s == pytest.approx(fixed.estimated.e2e_latency_s, rel=1e-9)
    assert e0.total_time_s == pytest.approx(plain.estimated.e2e_latency_s, rel=1e-9)
    assert e1.total_j - e0.total_j == pytest.approx(e1.params.static_w * per_pass * 32, rel=1e-9)
    parts = e1.whole_run_parts_j()
    assert sum(parts.values()) == pytest.approx(e1.total_j)
    assert any("per-pass fixed time" in a for a in e1.assumptions)
    assert not any("per-pass fixed time" in a for a in e0.assumptions)
    # the TDP-fraction model draws its idle floor over the same time
    t1 = energy_report(fixed, model="tdp-fraction")
    t0 = energy_report(plain, model="tdp-fraction")
    assert t1.total_j - t0.total_j == pytest.approx(0.05 * H100.tdp_w * per_pass * 32, rel=1e-9)
    # throughput for cost follows the report's time
    m = scenario_metrics(fixed)
    assert m.energy.total_time_s == pytest.approx(fixed.estimated.e2e_latency_s, rel=1e-9)


def test_energy_per_flop_is_the_devices_whatever_the_stack():
    wl = Workload(1, 128, 16)
    base = H100.effective_efficiency
    fast = analyze(LLAMA3_8B, H100, FP16, wl, efficiency=replace(base, compute=0.9, memory=0.95))
    slow = analyze(LLAMA3_8B, H100, FP16, wl, efficiency=replace(base, compute=0.3, memory=0.5))
    pf, ps = energy_report(fast).params, energy_report(slow).params
    assert pf.flop_j == ps.flop_j == energy_params(H100, DType.FP16).flop_j
    # the slower stack takes longer, so it spends more static energy per token
    assert energy_report(slow).j_per_output_token > energy_report(fast).j_per_output_token


def test_validation_times_each_row_with_the_stack_it_measured():
    from llmpara_core.calibration import efficiency_for
    rows = read_energy_measurements(DATA)
    vllm = next(m for m in rows if "vLLM" in m.framework and m.in_tolerance_test)
    v, = validate_energy([vllm])
    hw = load_hardware(vllm.hardware_preset)
    r = analyze(load_model(vllm.model_preset), hw, PRECISION_PRESETS[vllm.precision_preset],
                Workload(vllm.batch, vllm.prompt_len, vllm.gen_len),
                efficiency=efficiency_for(hw, "vllm-legacy"))
    assert v.predicted_s_per_step == pytest.approx(r.estimated.tpot_s)
    assert v.predicted_s_per_step != pytest.approx(analyze(
        load_model(vllm.model_preset), hw, PRECISION_PRESETS[vllm.precision_preset],
        Workload(vllm.batch, vllm.prompt_len, vllm.gen_len)).estimated.tpot_s)


def test_efficiency_override_changes_calibration():
    p1 = energy_params(H100, DType.FP16, Efficiency(0.7, 0.6, 0))
    p2 = energy_params(H100, DType.FP16, Efficiency(0.35, 0.6, 0))
    assert p2.flop_j == pytest.approx(2 * p1.flop_j)
