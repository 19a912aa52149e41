"""The fleet planner: traffic files (good and hostile), the closed-form prune never dropping the
plan the full search picks (property test), the chosen plan meeting its SLO when re-simulated,
determinism across executors (in process, process pool, Ray) and the CLI."""

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmpara_core.cli import main
from llmpara_core.errors import ConfigError
from llmpara_core.fleet import (Candidates, Demand, InProcess, LocalPool, TrafficMix, bounds,
                                enumerate_candidates, evaluate_candidate, load_traffic,
                                make_executor, parse_traffic, plan, plan_to_dict)
from llmpara_core.fleet.search import Task
from llmpara_core.parallel import ParallelPlan
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.serving import RequestSpec, Slo, engine_config, serve

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "presets" / "fleet" / "example-mix.toml"

SMALL = """
seed = 3
requests = 60
runners_up = 1
[candidates]
hardware = ["8x-nvidia-h100-sxm-nvlink", "8x-nvidia-l40s-pcie"]
precisions = ["FP16", "FP8"]
frameworks = ["vllm", "sglang"]
tp = [1, 2]
pp = [1]

[[workload]]
name = "small"
model = "Qwen2.5-0.5B"
rate_rps = 30
isl = 256
osl = 64
ttft_slo_ms = 300
tpot_slo_ms = 30

[[workload]]
name = "mid"
model = "Llama-3.2-1B"
rate_rps = 12
isl = 512
osl = 96
lengths = "lognormal"
spread = 0.5
ttft_slo_ms = 500
tpot_slo_ms = 25
slo_percentile = 95
"""


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def chosen(p):
    return [(r.workload, r.hardware, r.tp, r.pp, r.precision, r.framework, r.replicas,
             round(r.usd_per_hour, 9)) for r in p.chosen]


# ---- the traffic file ------------------------------------------------------------------------

def test_example_mix_reads_and_has_over_1000_configurations():
    mix = load_traffic(EXAMPLE)
    assert [w.model for w in mix.workloads] == ["Llama-3.1-8B", "Llama-3.1-70B", "Mixtral-8x7B",
                                               "DeepSeek-V3", "Qwen2.5-7B"]
    assert [w.rate_rps for w in mix.workloads] == [50, 10, 5, 2, 20]
    assert len(enumerate_candidates(mix)) >= 1000


@pytest.mark.parametrize("text, match", [
    ("this is = = not toml", "not valid TOML"),
    ("seed = 1", "no \\[\\[workload\\]\\]"),
    ("[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1", "missing 'tpot_slo_ms'"),
    ("[[workload]]\nmodel='No-Such-Model'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "unknown model"),
    ("[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=-4\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "rate_rps"),
    ("[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1.5\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "isl must be an integer"),
    ("[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1\nspeed=3", "unknown key 'speed'"),
    ("[candidates]\nframeworks=['vlm']\n[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "unknown framework"),
    ("[candidates]\nprecisions=['FP3']\n[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "FP3"),
    ("[candidates]\nhardware=['Nope 9000']\n[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "unknown hardware"),
    ("[[workload]]\nname='a'\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1\n"
     "[[workload]]\nname='a'\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "two workloads"),
    ("workload = 3", "no \\[\\[workload\\]\\]"),
    ("[constraints]\ngpu_budget=0\n[[workload]]\nmodel='Llama-3.1-8B'\nrate_rps=1\nisl=1\nosl=1\nttft_slo_ms=1\ntpot_slo_ms=1", "gpu_budget"),
])
def test_bad_traffic_files_give_one_clear_line(tmp_path, match, text):
    with pytest.raises(ConfigError, match=match):
        parse_traffic(text)
    f = tmp_path / "bad.toml"
    f.write_text(text)
    code, out, err = run("plan", "--traffic", f, "--executor", "local", "--workers", "1")
    assert code == 2 and out == ""
    assert err.startswith("llmpara: error: ") and err.count("\n") == 1, err


def test_a_search_too_large_is_refused(tmp_path):
    rows = "".join(f"[[workload]]\nname='w{i}'\nmodel='Llama-3.2-1B'\nrate_rps=1\nisl=8\nosl=8\n"
                   f"ttft_slo_ms=100\ntpot_slo_ms=10\n" for i in range(64))
    text = ("[candidates]\ntp=[" + ",".join(map(str, range(1, 33))) + "]\npp=["
            + ",".join(map(str, range(1, 33))) + "]\n" + rows)
    f = tmp_path / "huge.toml"
    f.write_text(text)
    code, out, err = run("plan", "--traffic", f)
    assert code == 2 and "configurations to search" in err and err.count("\n") == 1


def test_missing_and_binary_traffic_files(tmp_path):
    code, _, err = run("plan", "--traffic", tmp_path / "none.toml")
    assert code == 2 and "no such file" in err and err.count("\n") == 1
    f = tmp_path / "bin.toml"
    f.write_bytes(b"\x00\xff\xfe" * 100)
    code, _, err = run("plan", "--traffic", f)
    assert code == 2 and err.count("\n") == 1


# ---- bounds and the search -------------------------------------------------------------------

def test_bounds_reject_what_cannot_run():
    mix = load_traffic(EXAMPLE)
    cands = enumerate_candidates(mix)
    b = {c.key: bounds(mix, c) for c in cands if c.workload == 3 and c.tp * c.pp == 1}
    # DeepSeek-V3 (671 B parameters) never fits one GPU
    assert all(x.stage in ("memory", "support") for x in b.values())
    nv = [c for c in cands if c.precision == "NVFP4" and "h100" in c.hardware][0]
    assert "fp4" in bounds(mix, nv).pruned
    trt = [c for c in cands if c.framework == "tensorrt-llm" and "mi300x" in c.hardware][0]
    assert "NVIDIA" in bounds(mix, trt).pruned


def test_floors_are_below_the_simulated_latency():
    """The zero-load floors bound the simulated TTFT / TPOT at the SLO percentile, and the
    throughput bound the simulated max-load rate. Every third candidate (22 of 64: each
    workload, device, TP, PP, precision and stack is among them), for CI time."""
    mix = parse_traffic(SMALL.replace("pp = [1]", "pp = [1, 2]"))
    for c in enumerate_candidates(mix)[::3]:
        b = bounds(mix, c)
        if b.pruned is not None:
            continue
        r = evaluate_candidate(Task(c, mix.workloads[c.workload], mix.requests, mix.seed))
        assert r["saturation_rps"] <= b.rate_bound_rps
        if r.get("ttft_s") is not None:
            assert b.ttft_floor_s <= r["ttft_s"] * (1 + 1e-9)
            assert b.tpot_floor_s <= r["tpot_s"] * (1 + 1e-9)


@pytest.mark.parametrize("framework, pp, kv_tokens", [
    ("vllm", 1, 3_072), ("vllm", 2, 3_072), ("tensorrt-llm", 1, 8_192), ("vllm", 1, None)])
def test_decode_busy_floor_bounds_the_simulated_busy_time(framework, pp, kv_tokens):
    """The KV-packing bound of the decode busy time is below the simulated busy time at max
    load, including where a small KV cache makes it several times the batch-cap bound."""
    from llmpara_core.calibration.stacks import with_stack
    from llmpara_core.fleet.search import _decode_busy_floor_s
    from llmpara_core.serving import IterationCost, kv_capacity_tokens, simulate
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    shw, _ = with_stack(hw, framework)
    cost = IterationCost(load_model("Qwen2.5-0.5B"), hw, precision_preset("FP16"),
                         ParallelPlan(tp=1, pp=pp), shw.efficiency)
    cfg, _ = engine_config(framework, kv_capacity_tokens=kv_tokens)
    spec = RequestSpec(isl=300, osl=400, requests=80, lengths="lognormal", spread=0.6, seed=2)
    res = simulate(cost, cfg, spec)
    kv = kv_capacity_tokens(cost, cfg)
    floor = _decode_busy_floor_s(cost, res.isl, res.osl, cfg.max_batch, kv)
    assert 0 < floor <= res.busy_s
    if kv_tokens is not None:           # the KV term binds: well above the batch-cap floor
        assert floor > 1.4 * _decode_busy_floor_s(cost, res.isl, res.osl, cfg.max_batch, 10**12)


def test_the_stopped_slo_search_gives_the_replicas_of_the_full_one():
    """``_replica_search`` stops the serving SLO search once the replica count is fixed: the
    same count as the full search (``serving.max_rate_meeting_slo``), at a rate it simulated
    to meet the SLO, in fewer probes; with a replica cap below the answer it stops early and
    says it needs more."""
    from llmpara_core.fleet.search import _cost, _replica_search
    from llmpara_core.serving import max_rate_meeting_slo, replicas_for_rate, simulate
    from llmpara_core.serving.report import per_request
    mix = parse_traffic(SMALL)
    probes = full_probes = 0
    for wi, hw, tp in ((0, "8x-nvidia-l40s-pcie", 1), (1, "8x-nvidia-h100-sxm-nvlink", 2)):
        d = mix.workloads[wi]
        cost = _cost(d.model, hw, tp, 1, "FP16", "vllm")
        cfg, _ = engine_config("vllm")
        spec = RequestSpec(isl=d.isl, osl=d.osl, requests=30, lengths=d.lengths,
                           spread=d.spread, seed=mix.seed)
        res = simulate(cost, cfg, spec)
        sat = len(res.osl) / res.makespan_s
        # a TPOT SLO the max-load rate misses (its median there): a real bisection
        tpot = per_request(simulate(cost, cfg, spec.with_rate(sat)))[1]
        slo = Slo(d.ttft_slo_s, float(np.nanpercentile(tpot, 50)), d.slo_percentile)
        full = max_rate_meeting_slo(cost, cfg, spec, slo, sat)
        assert [ok for r, _, _, ok in full.points if r == sat] == [False] and full.max_rate > 0
        met = {r for r, _, _, ok in full.points if ok}
        for rate in (0.3 * full.max_rate, 2.5 * full.max_rate, 7.0 * full.max_rate):
            want = replicas_for_rate(rate, full.max_rate)
            got_rate, got, n = _replica_search(cost, cfg, spec, slo, sat, rate, None)
            assert got == want and got_rate in met, (wi, hw, rate)
            probes, full_probes = probes + n, full_probes + len(full.points)
            if want > 1:
                _, more, n_cap = _replica_search(cost, cfg, spec, slo, sat, rate, want - 1)
                assert more > want - 1 and n_cap <= n
                assert _replica_search(cost, cfg, spec, slo, sat, rate, want)[1] == want
    assert probes < 0.75 * full_probes, (probes, full_probes)


def test_chosen_plan_meets_its_slo_when_resimulated():
    mix = parse_traffic(SMALL)
    p = plan(mix)
    assert len(p.chosen) == 2 and not p.unserved
    for r in p.chosen:
        d = next(w for w in mix.workloads if w.name == r.workload)
        hw = load_hardware(next(h for h in mix.candidates.hardware
                                if load_hardware(h).name == r.hardware))
        from llmpara_core.calibration.stacks import with_stack
        shw, stack = with_stack(hw, r.framework)
        cfg, _ = engine_config(stack.name)
        spec = RequestSpec(isl=d.isl, osl=d.osl, requests=mix.requests, lengths=d.lengths,
                           spread=d.spread, seed=mix.seed).with_rate(d.rate_rps / r.replicas)
        st_ = serve(load_model(d.model), hw, precision_preset(r.precision), spec, cfg,
                    ParallelPlan(tp=r.tp, pp=r.pp), shw.efficiency,
                    Slo(d.ttft_slo_s, d.tpot_slo_s, d.slo_percentile), search=False)
        assert st_.summary.slo_met, r
        assert r.replicas == math.ceil(d.rate_rps / r.slo_rate_per_replica_rps - 1e-9)
        assert r.usd_per_hour == pytest.approx(r.gpus * (2.69 if "H100" in r.hardware else 0.86))
        assert r.headroom >= 0


_models = st.sampled_from(["Qwen2.5-0.5B", "Llama-3.2-1B", "Qwen2.5-1.5B"])


@st.composite
def small_mixes(draw):
    n = draw(st.integers(1, 2))
    ws = []
    for i in range(n):
        ws.append(Demand(
            name=f"w{i}", model=draw(_models),
            rate_rps=draw(st.floats(1, 80)), isl=draw(st.integers(32, 1500)),
            osl=draw(st.integers(2, 200)),
            ttft_slo_s=draw(st.floats(0.02, 1.0)), tpot_slo_s=draw(st.floats(0.003, 0.05)),
            slo_percentile=draw(st.sampled_from([50.0, 90.0, 99.0])),
            lengths=draw(st.sampled_from(["fixed", "lognormal"]))))
    cand = Candidates(hardware=("8x-nvidia-h100-sxm-nvlink", "8x-nvidia-l40s-pcie"),
                      precisions=("FP16", "FP8"), frameworks=("vllm",), tp=(1, 2), pp=(1,))
    return TrafficMix(tuple(ws), cand, requests=30, seed=draw(st.integers(0, 5)),
                      runners_up=draw(st.integers(0, 1)))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(small_mixes())
def test_pruning_never_drops_the_plan_the_full_search_picks(mix):
    pruned = plan(mix)
    full = plan(mix, prune=False)
    assert chosen(pruned) == chosen(full)
    assert [(r.workload, r.rank, r.usd_per_hour) for r in pruned.rows] == \
        [(r.workload, r.rank, r.usd_per_hour) for r in full.rows]
    assert pruned.counts["simulated"] <= full.counts["simulated"]


def test_plan_is_deterministic_and_the_same_on_a_process_pool():
    mix = parse_traffic(SMALL)
    a = plan(mix, InProcess())
    pool = LocalPool(2)
    try:
        b = plan(mix, pool)
    finally:
        pool.close()
    assert plan_to_dict(a) == plan_to_dict(b)
    c = plan(replace(mix, seed=4))
    assert plan_to_dict(c)["counts"]["configurations"] == a.counts["configurations"]


def test_cancel_keeps_what_finished():
    mix = parse_traffic(SMALL)
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 3
    p = plan(mix, cancel=cancel)
    assert p.cancelled and any("cancelled" in n for n in p.notes)
    assert p.counts["simulated"] <= 3


def test_gpu_budget_and_power_cap_are_respected():
    mix = parse_traffic(SMALL)
    free = plan(mix)
    budget = replace(mix, constraints=replace(mix.constraints, gpu_budget=1))
    p = plan(budget)
    assert sum(r.gpus for r in p.chosen) <= 1 or p.notes
    cap = replace(mix, constraints=replace(mix.constraints, power_cap_w=1.0))
    p = plan(cap)
    assert not p.chosen and len(p.unserved) == 2
    assert free.totals["gpus"] >= 1


# ---- executors --------------------------------------------------------------------------------

def test_ray_and_local_give_identical_plans():
    pytest.importorskip("ray")
    mix = parse_traffic(SMALL)
    local = make_executor("local", 2)
    try:
        a = plan(mix, local)
    finally:
        local.close()
    ray_ex = make_executor("ray", 2)
    try:
        seen = []
        b = plan(mix, ray_ex, progress=lambda d, t, s: seen.append((d, t, s)))
    finally:
        ray_ex.close()
    assert plan_to_dict(a) == plan_to_dict(b)
    assert seen and seen[-1][0] == seen[-1][1]        # progress streamed to the end


def test_executor_choices_are_checked():
    with pytest.raises(ConfigError, match="executor"):
        make_executor("dask")
    with pytest.raises(ConfigError, match="address"):
        make_executor("local", address="auto")


# ---- CLI ----------------------------------------------------------------------------------------

def test_cli_plan_json_table_csv(tmp_path):
    f = tmp_path / "mix.toml"
    f.write_text(SMALL)
    code, out, err = run("plan", "--traffic", f, "--workers", "1", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert {"plans", "totals", "counts", "traffic", "unserved"} <= d.keys()
    ranks0 = [p for p in d["plans"] if p["rank"] == 0]
    assert [p["workload"] for p in ranks0] == ["small", "mid"]
    assert d["totals"]["gpus"] == sum(p["gpus"] for p in ranks0)
    assert d["totals"]["usd_per_hour"] == pytest.approx(sum(p["usd_per_hour"] for p in ranks0))
    code, out, err = run("plan", "--traffic", f, "--workers", "1", "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("workload,rank,model,hardware")
    code, out, err = run("plan", "--traffic", f, "--workers", "1", "--hardware",
                         "8x-nvidia-l40s-pcie", "--precision", "FP8", "--framework", "vllm")
    assert code == 0, err
    assert "fleet:" in out and "H100" not in out and "FP16" not in out


def test_cli_refuses_bad_flags(tmp_path):
    f = tmp_path / "mix.toml"
    f.write_text(SMALL)
    for extra, match in ((("--executor", "spark"), "invalid choice"),
                         (("--address", "auto"), "--executor ray"),
                         (("--hardware", "Nope 9000"), "unknown hardware"),
                         (("--workers", "0"), "integer")):
        code, out, err = run("plan", "--traffic", f, *extra)
        assert code == 2 and match in err and err.count("\n") == 1, (extra, err)
