"""Serving simulator: the closed-form iteration cost equals the core's analysis, physics of the
simulated engine (low-load limits, saturation, Little's law, the max-load closed form, KV
capacity and preemption), determinism, and the ``llmpara serve`` CLI contract."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from llmpara_core.analysis import analyze
from llmpara_core.cli import main
from llmpara_core.errors import ConfigError
from llmpara_core.parallel import ParallelPlan, shard_analyze
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware
from llmpara_core.serving import (EngineConfig, IterationCost, RequestSpec, Slo, per_request,
                                  serve, simulate, steady_state_output_tokens_per_s, summarize)
from llmpara_core.workload import Workload

from helpers import GEMMA2_9B, H100, LLAMA3_8B, MIXTRAL

FP16 = precision_preset("FP16")


@pytest.fixture(scope="module")
def cost():
    return IterationCost(LLAMA3_8B, H100, FP16, ParallelPlan())


@pytest.mark.parametrize("model", [LLAMA3_8B, GEMMA2_9B, MIXTRAL], ids=lambda m: m.name)
@pytest.mark.parametrize("batch,prompt", [(1, 512), (8, 3000), (32, 9000)])
def test_iteration_cost_equals_analyze(model, batch, prompt, monkeypatch):
    """Without the serving-only MoE routing kernels (``cost.MOE_ROUTING_KERNELS``, their
    exact size is tests/test_moe_routing_kernels.py's) the serving cost is the analysis'."""
    from llmpara_core.serving import cost as serving_cost
    monkeypatch.setattr(serving_cost, "MOE_ROUTING_KERNELS", False)
    c = IterationCost(model, H100, FP16, ParallelPlan())
    r = analyze(model, H100, FP16, Workload(batch=batch, prompt_len=prompt, gen_len=2))
    pre = c.time_s([c.feature_row(batch, prompt, prompt)], batch)[0]
    dec = c.time_s([c.feature_row(batch, 1, prompt + 1)], batch)[0]
    assert pre == pytest.approx(r.estimated.ttft_s, rel=1e-9)
    assert dec == pytest.approx(r.estimated.tpot_s, rel=1e-9)


def test_iteration_cost_with_tensor_parallel_equals_shard_analyze():
    """With the sharding engine's all-reduce (alpha-beta) the serving cost is shard_analyze's."""
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    c = IterationCost(LLAMA3_8B, hw, FP16, ParallelPlan(tp=4), allreduce="alpha-beta")
    r = shard_analyze(LLAMA3_8B, hw, FP16, Workload(batch=4, prompt_len=1024, gen_len=2),
                      ParallelPlan(tp=4))
    assert c.time_s([c.feature_row(4, 1024, 1024)], 4)[0] == pytest.approx(r.estimated.ttft_s,
                                                                           rel=1e-9)
    assert c.time_s([c.feature_row(4, 1, 1025)], 4)[0] == pytest.approx(r.estimated.tpot_s,
                                                                        rel=1e-9)


def test_serving_all_reduces_follow_nccls_model():
    """Serving times TP all-reduces by NCCL's tuning model (fastest ring protocol) on the
    16-bit residual stream: FP8 and FP16 passes reduce the same bytes; the extra over the
    alpha-beta estimate is NCCL's per-step latency (latency-bound small, bandwidth-bound
    large)."""
    from llmpara_core.parallel.collectives import nccl_ring_all_reduce_s
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    fp8 = precision_preset("FP8")
    for p in (FP16, fp8):
        n = IterationCost(LLAMA3_8B, hw, p, ParallelPlan(tp=8))
        st = n.stages[0]
        assert st.ar_count == 2 * LLAMA3_8B.num_hidden_layers + 1
        assert st.ar_bytes_per_token == LLAMA3_8B.hidden_size * 2
    bus = 400e9
    small = nccl_ring_all_reduce_s(8, 1e3, bus)
    assert small == pytest.approx(6.6e-6 + 14 * 0.6e-6 + 1e3 * 14 / 8 / 87.7e9)   # LL
    big = nccl_ring_all_reduce_s(8, 1e9, bus)
    assert big == pytest.approx(8.4e-6 + 14 * 3.4e-6 + 1e9 * 14 / 8 / bus)        # Simple
    assert nccl_ring_all_reduce_s(1, 1e6, bus) == 0
    a = IterationCost(LLAMA3_8B, hw, FP16, ParallelPlan(tp=8), allreduce="alpha-beta")
    n = IterationCost(LLAMA3_8B, hw, FP16, ParallelPlan(tp=8))
    f = [n.feature_row(256, 1, 1000)]
    assert n.time_s(f, 256)[0] > a.time_s(f, 256)[0]
    one = IterationCost(LLAMA3_8B, H100, FP16, ParallelPlan())
    assert one.stages[0].ar_count == 0
    with pytest.raises(ConfigError):
        IterationCost(LLAMA3_8B, hw, FP16, ParallelPlan(tp=2), allreduce="ring")


def test_low_rate_limits_are_single_request_latencies(cost):
    spec = RequestSpec(isl=512, osl=128, arrival="poisson", rate=0.01, requests=40, seed=3)
    res = simulate(cost, EngineConfig(), spec)
    ttft, tpot, _ = per_request(res)
    r = analyze(LLAMA3_8B, H100, FP16, Workload(batch=1, prompt_len=512, gen_len=128))
    assert np.median(ttft) == pytest.approx(r.estimated.ttft_s, rel=0.01)
    assert np.median(tpot) == pytest.approx(r.estimated.tpot_s, rel=0.01)


def test_throughput_rises_then_saturates(cost):
    cfg = EngineConfig(max_batch=64)
    base = RequestSpec(isl=256, osl=64, requests=600, seed=1)
    sat = summarize(simulate(cost, cfg, base), cost).output_tokens_per_s
    tput = [summarize(simulate(cost, cfg, base.with_rate(r)), cost).output_tokens_per_s
            for r in (1.0, 4.0, 16.0, 1e4)]
    assert tput[0] < tput[1] < tput[2]
    assert tput[0] == pytest.approx(64.0, rel=0.1)          # 1 request/s x 64 tokens
    assert tput[-1] == pytest.approx(sat, rel=0.05)
    assert max(tput) <= sat * 1.05


@pytest.mark.parametrize("rate,arrival", [(5.0, "poisson"), (12.0, "gamma")])
def test_littles_law(cost, rate, arrival):
    spec = RequestSpec(isl=512, osl=128, arrival=arrival, rate=rate, burstiness=0.5,
                       requests=1500, seed=7)
    res = simulate(cost, EngineConfig(max_batch=64), spec)
    s = summarize(res, cost)
    _, _, e2e = per_request(res)
    assert s.mean_requests_in_system == pytest.approx(s.requests_per_s * e2e.mean(), rel=0.02)


@pytest.mark.parametrize("cfg", [EngineConfig(max_batch=128),
                                 EngineConfig(max_batch=2048, block_size=64, policy="reserve",
                                              chunked_prefill=False)],
                         ids=["on-demand", "reserve"])
def test_max_load_matches_steady_state_closed_form(cost, cfg):
    res = simulate(cost, cfg, RequestSpec(isl=512, osl=256, requests=2000))
    closed, b = steady_state_output_tokens_per_s(cost, cfg, 512, 256)
    s = summarize(res, cost)
    assert s.output_tokens_per_s == pytest.approx(closed, rel=0.05)
    assert s.mean_running_batch <= b * 1.01


def test_same_seed_same_result_and_other_seed_differs(cost):
    spec = RequestSpec(isl=300, osl=50, arrival="poisson", rate=8, requests=300,
                       lengths="lognormal", seed=11)
    a, b = simulate(cost, EngineConfig(), spec), simulate(cost, EngineConfig(), spec)
    assert np.array_equal(a.finish_s, b.finish_s)
    c = simulate(cost, EngineConfig(), RequestSpec(**{**spec.__dict__, "seed": 12}))
    assert not np.array_equal(a.finish_s, c.finish_s)


def test_small_kv_cache_preempts_and_reserve_never_does(cost):
    spec = RequestSpec(isl=512, osl=512, requests=200)
    small = dict(kv_capacity_tokens=16 * 1024, max_batch=256)
    res = simulate(cost, EngineConfig(**small), spec)
    assert res.preemptions > 0
    assert np.isfinite(res.finish_s).all()
    assert res.log["kv_used"].max() <= 1.0
    assert (res.log["running"] <= 256).all()
    res2 = simulate(cost, EngineConfig(policy="reserve", **small), spec)
    assert res2.preemptions == 0
    assert res2.log["running"].max() <= 16 * 1024 // 1024


def test_prefix_hits_cut_ttft(cost):
    spec = RequestSpec(isl=4000, osl=16, arrival="poisson", rate=0.5, requests=50)
    t0 = np.median(per_request(simulate(cost, EngineConfig(), spec))[0])
    t1 = np.median(per_request(simulate(cost, EngineConfig(prefix_hit_rate=0.75), spec))[0])
    assert t1 < 0.5 * t0


def test_chunked_prefill_off_needs_the_prompt_in_the_budget(cost):
    with pytest.raises(ConfigError, match="max-num-tokens"):
        simulate(cost, EngineConfig(chunked_prefill=False, max_num_tokens=1024),
                 RequestSpec(isl=2048, osl=8, requests=4))


def test_slo_search_and_replicas(cost):
    st = serve(LLAMA3_8B, H100, FP16, RequestSpec(isl=512, osl=128, arrival="poisson",
                                                  rate=2, requests=300),
               EngineConfig(max_batch=64), slo=Slo(0.3, 0.05), target_rate=100)
    m = st.search.max_rate
    assert 0 < m <= st.saturation_requests_per_s
    assert st.replicas == int(np.ceil(100 / m))
    met = [p for p in st.search.points if p[3]]
    assert all(p[0] <= m for p in met)


@pytest.mark.parametrize("bad", [
    dict(isl=0), dict(requests=0), dict(arrival="poisson"), dict(arrival="bad"),
    dict(arrival="poisson", rate=-1.0), dict(lengths="zipf"),
])
def test_bad_request_specs(bad):
    with pytest.raises(ConfigError):
        RequestSpec(**bad)


# ---- CLI ------------------------------------------------------------------------------------

def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["serve", *argv])
    return code, out.getvalue(), err.getvalue()


CONTRACT = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "requests_per_s",
            "mean_running_batch", "ttft_s", "tpot_s", "e2e_s", "kv_cache_capacity_tokens",
            "preemptions", "goodput_requests_per_s", "max_rate_meeting_slo_requests_per_s",
            "gpus")


def test_cli_contract_and_tensorrt_llm_defaults():
    code, out, err = run("--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm", "--isl",
                         "512", "--osl", "128", "--framework", "tensorrt-llm", "--max-load",
                         "--requests", "300", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "100",
                         "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    for k in CONTRACT:
        assert k in d, k
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(d[k]) == {"p50", "p90", "p99"}
        assert d[k]["p50"] <= d[k]["p90"] <= d[k]["p99"]
    assert d["engine"]["max_batch"] == 2048 and d["engine"]["max_num_tokens"] == 8192
    assert "TensorRT-LLM" in d["engine"]["defaults_source"]
    assert d["gpus"] == 1
    assert d["output_tokens_per_s"] == pytest.approx(300 * 128 / d["makespan_s"])


def test_cli_tp_counts_gpus():
    code, out, err = run("--model", "llama-3-8b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                         "--tp", "2", "--rate", "4", "--requests", "100", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["gpus"] == 2
    assert d["output_tokens_per_s_per_gpu"] == pytest.approx(d["output_tokens_per_s"] / 2)
    assert "max_rate_meeting_slo_requests_per_s" not in d


@pytest.mark.parametrize("argv", [
    ("--rate", "-1"), (), ("--rate", "1", "--max-load"), ("--rate", "abc"),
    ("--rate", "1", "--slo-ttft-ms", "100"), ("--rate", "1", "--tp", "2"),
    ("--rate", "1", "--framework", "nosuch"), ("--rate", "1", "--isl", "0"),
    ("--rate", "1", "--chunked-prefill", "off", "--max-num-tokens", "100"),
    ("--rate", "1", "--kv-memory-fraction", "0"), ("--max-load", "--requests", "0"),
    ("--rate", "1", "--max-batch", "512", "--max-num-tokens", "256"),
])
def test_cli_bad_input_exits_2_with_one_line(argv):
    code, out, err = run("--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm",
                         "--requests", "20", *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("llmpara: error:")


# ---- disaggregated serving ------------------------------------------------------------------

def test_disaggregation_best_split_and_transfer():
    from llmpara_core.serving.disagg import disaggregate
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    spec = RequestSpec(isl=2048, osl=128, arrival="poisson", rate=2, requests=200)
    slo = Slo(0.5, 0.04)
    d = disaggregate(LLAMA3_8B, hw, FP16, spec, EngineConfig(), slo, 6)
    assert [(s.prefill_replicas, s.decode_replicas) for s in d.splits] == \
        [(p, 6 - p) for p in range(1, 6)]
    for s in d.splits:
        assert s.rate == pytest.approx(min(s.prefill_replicas * d.prefill_rate_per_replica,
                                           s.decode_replicas * d.decode_rate_per_replica))
    assert d.best.rate == max(s.rate for s in d.splits)
    c = IterationCost(LLAMA3_8B, hw, FP16, ParallelPlan())
    assert d.kv_transfer_s == pytest.approx(
        2048 * c.kv_bytes_per_token() / d.kv_link_bytes_per_s + hw.interconnect.latency_s)
    # 0.2 GB/s: 1.3 s per prompt's KV cache, a large share of the TPOT budget over 127 tokens
    # (at 1 GB/s the decode pool still meets the SLO at its max-load rate)
    slow = disaggregate(LLAMA3_8B, hw, FP16, spec, EngineConfig(), slo, 6,
                        kv_link_bytes_per_s=2e8, colocated_rate=d.colocated_rate_per_replica)
    assert slow.kv_transfer_s > 100 * d.kv_transfer_s
    assert slow.decode_rate_per_replica < d.decode_rate_per_replica
    assert slow.prefill_rate_per_replica == d.prefill_rate_per_replica


def test_disaggregation_needs_a_link_and_a_budget():
    from llmpara_core.serving.disagg import disaggregate
    spec = RequestSpec(isl=512, osl=64, arrival="poisson", rate=2, requests=50)
    with pytest.raises(ConfigError, match="interconnect"):
        disaggregate(LLAMA3_8B, H100, FP16, spec, EngineConfig(), Slo(0.5, 0.05), 4)
    with pytest.raises(ConfigError):
        disaggregate(LLAMA3_8B, load_hardware("8x-nvidia-h100-sxm-nvlink"), FP16, spec,
                     EngineConfig(), Slo(0.5, 0.05), 1)


def test_cli_disaggregation_block():
    code, out, err = run("--model", "llama-3-8b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                         "--isl", "1024", "--osl", "64", "--rate", "2", "--requests", "100",
                         "--slo-ttft-ms", "500", "--slo-tpot-ms", "40", "--disagg-gpus", "4",
                         "--format", "json")
    assert code == 0, err
    dg = json.loads(out)["disaggregated"]
    assert dg["gpu_budget"] == 4 and len(dg["splits"]) == 3
    assert dg["best_split"]["gpus"] == 4
    code, _, err = run("--model", "llama-3-8b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                       "--rate", "2", "--disagg-gpus", "4")
    assert code == 2 and "needs --slo-ttft-ms" in err


# ---- energy: the fitted power model, as the Metrics page prices one scenario ------------------

def test_max_load_energy_is_the_metrics_power_model_of_the_same_batch(cost):
    """At max load with fixed lengths the engine runs waves of B requests: prefill of B
    prompts, then decode steps of B sequences, which is the scenario ``metrics.energy`` prices
    for batch B. Both use the fitted power model by default; J/token and average power agree
    within the makespan's difference (the engine's last wave, its scheduling)."""
    from llmpara_core.metrics.energy import energy_report
    b, isl, osl = 64, 512, 256
    res = simulate(cost, EngineConfig(max_batch=b), RequestSpec(isl=isl, osl=osl, requests=640))
    s = summarize(res, cost)
    assert s.notes[0].startswith("energy: power model")
    e = energy_report(analyze(LLAMA3_8B, H100, FP16, Workload(batch=b, prompt_len=isl,
                                                              gen_len=osl)), model="power")
    assert s.energy_j_per_token == pytest.approx(e.j_per_output_token, rel=0.05)
    assert s.avg_power_w_per_gpu == pytest.approx(e.avg_power_w, rel=0.03)
    # host time is a real share here (vLLM's per-pass cost at batch 64), and it lowers the
    # energy: the same run with every busy second at the kernel power draws more
    share = float(s.notes[0].split("(")[2].split("%")[0]) / 100
    assert 0.02 < share < 0.9


def test_serving_energy_model_follows_the_settings(cost):
    """"components" prices the run with metrics.energy's component model, as before; a device
    without TDP or idle power falls back to it under "auto", and says so."""
    from llmpara_core.metrics.cost import MetricsSettings
    from llmpara_core.metrics.energy_params import energy_params
    res = simulate(cost, EngineConfig(max_batch=32), RequestSpec(isl=256, osl=64, requests=200))
    comp = summarize(res, cost, settings=MetricsSettings(energy_model="components"))
    power = summarize(res, cost)
    assert comp.notes[0].startswith("energy: component model")
    p = energy_params(cost.hardware, FP16.compute_dtype, cost.hardware.effective_efficiency)
    flops, w, kv, act = cost.dynamic_work(res.feature_sum)
    idle = max(0.0, res.makespan_s - res.busy_s)
    expect = (flops * p.flop_j + w * p.weight_j_per_byte + kv * p.kv_j_per_byte
              + act * p.act_j_per_byte + p.static_w * res.busy_s + (p.idle_w or 0) * idle)
    assert comp.energy_j_per_token == pytest.approx(expect / res.osl.sum(), rel=1e-9)
    assert comp.energy_j_per_token != pytest.approx(power.energy_j_per_token, rel=0.01)
    from dataclasses import replace
    c2 = IterationCost(LLAMA3_8B, replace(H100, tdp_w=None), FP16, ParallelPlan())
    s2 = summarize(simulate(c2, EngineConfig(max_batch=8), RequestSpec(isl=128, osl=32,
                                                                       requests=16)), c2)
    assert s2.notes[0].startswith("energy: component model")
    assert any("no TDP or idle power" in n for n in s2.notes)
