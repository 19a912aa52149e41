"""Sharding core (llmpara_core.parallel*): the single-device limit, pipeline physics, alpha-beta
collectives checked by hand, per-device sizes of dense / GQA / MoE / MLA models, plan
validation messages, pipeline formulas, largest batch, scaling curves and the plan search."""

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import DEEPSEEK_V3, GEMMA2_9B, GPT2, H100, LLAMA3_8B, MIXTRAL
from llmpara_core import parallel as P
from llmpara_core.analysis import analyze
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency, Interconnect, Topology
from llmpara_core.memory import kv_cache_bytes
from llmpara_core.model import count_params
from llmpara_core.precision import precision_preset
from llmpara_core.presets import list_presets, load_hardware, load_model
from llmpara_core.roofline import rates
from llmpara_core.workload import Workload

BF16 = precision_preset("BF16")
CLUSTERS = [i.slug for i in list_presets("hardware") if load_hardware(i.slug).interconnect]
WL = Workload(batch=4, prompt_len=512, gen_len=64)


def with_links(hw, devices=8, topology=Topology.FULLY_CONNECTED, bw=300e9, lat=1e-6, **kw):
    return replace(hw, interconnect=Interconnect(bw, lat, topology, devices, **kw))


H100X8 = with_links(H100, 8, bw=450e9, lat=0.2e-6)


# ---- the single-device limit ----------------------------------------------------------------

@pytest.mark.parametrize("model", [LLAMA3_8B, MIXTRAL, DEEPSEEK_V3, GEMMA2_9B, GPT2],
                         ids=lambda m: m.name)
@pytest.mark.parametrize("hw", [H100, H100X8, load_hardware("2x-nvidia-rtx-4090-pcie")],
                         ids=["single", "h100x8", "rtx4090x2"])
def test_tp1_pp1_equals_single_device_analysis(model, hw):
    wl = Workload(batch=3, prompt_len=700, gen_len=50)
    r = P.shard_analyze(model, hw, BF16, wl, P.ParallelPlan())
    a = analyze(model, hw, BF16, wl)
    for mode in ("estimated", "ideal"):
        for k in ("ttft_s", "tpot_s", "e2e_latency_s", "throughput_tokens_per_s"):
            assert getattr(getattr(r, mode), k) == pytest.approx(getattr(getattr(a, mode), k),
                                                                 rel=1e-12), (mode, k)
    st_ = r.memory[0]
    assert st_.weight_bytes == pytest.approx(a.memory.weight_bytes, rel=1e-12)
    assert st_.kv_cache_bytes == pytest.approx(a.memory.kv_cache_bytes, rel=1e-12)
    assert st_.activation_bytes == pytest.approx(a.memory.activation_bytes, rel=1e-12)
    assert r.max_batch == a.max_batch
    assert r.collectives == () and r.decode_breakdown.communication_s == 0.0
    assert r.parallel_efficiency == pytest.approx(1.0)


def test_efficiency_override_matches_analyze():
    eff = Efficiency(0.5, 0.8, 2e-6)
    wl = Workload(batch=2, prompt_len=300, gen_len=20)
    r = P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl, P.ParallelPlan(), efficiency=eff)
    a = analyze(LLAMA3_8B, H100X8, BF16, wl, efficiency=eff)
    assert r.estimated.tpot_s == pytest.approx(a.estimated.tpot_s, rel=1e-12)
    assert r.estimated.ttft_s == pytest.approx(a.estimated.ttft_s, rel=1e-12)
    tp = P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl, P.ParallelPlan(tp=4), efficiency=eff)
    same = P.shard_analyze(LLAMA3_8B, replace(H100X8, efficiency=eff), BF16, wl,
                           P.ParallelPlan(tp=4))
    assert tp.estimated.tpot_s == same.estimated.tpot_s
    assert tp.estimated.tpot_s != P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl,
                                                  P.ParallelPlan(tp=4)).estimated.tpot_s


def test_dense_dp_replicas_are_independent_single_devices():
    wl = Workload(batch=8, prompt_len=256, gen_len=32)
    r = P.shard_analyze(LLAMA3_8B, H100, BF16, wl, P.ParallelPlan(dp=4))   # no links needed
    one = analyze(LLAMA3_8B, H100, BF16, replace(wl, batch=2))
    assert r.estimated.tpot_s == pytest.approx(one.estimated.tpot_s, rel=1e-12)
    assert r.estimated.throughput_tokens_per_s == pytest.approx(
        4 * one.estimated.throughput_tokens_per_s, rel=1e-12)
    assert r.collectives == ()


# ---- pipeline parallelism never speeds up a batch-1 stream ----------------------------------

MODEL_SLUGS = [i.slug for i in list_presets("models")]
DEVICE_SLUGS = [i.slug for i in list_presets("hardware")]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODEL_SLUGS), device=st.sampled_from(DEVICE_SLUGS),
       pp=st.integers(2, 8), prompt=st.integers(0, 4096), gen=st.integers(1, 300),
       topology=st.sampled_from(list(Topology)), lat_us=st.floats(0, 5),
       uneven=st.booleans())
def test_pp_alone_never_lowers_batch1_tpot(model, device, pp, prompt, gen, topology, lat_us,
                                           uneven):
    m, hw = load_model(model), load_hardware(device)
    hw = with_links(hw, 8, topology, lat=lat_us * 1e-6)
    wl = Workload(batch=1, prompt_len=prompt, gen_len=gen)
    pp = min(pp, m.num_hidden_layers)
    layers = None
    if uneven and pp > 1:
        rest = m.num_hidden_layers - (pp - 1)
        layers = (rest,) + (1,) * (pp - 1)                   # a heavy first stage
    base = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan())
    r = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(pp=pp, stage_layers=layers))
    assert r.layout.microbatches == 1
    # a prompt of n micro-batches (a stack with prompt_ubatch_tokens: llama.cpp, the class fit)
    # pipelines over the stages (llama.cpp PR #6017): at best 1 + (n - 1) / PP passes of one
    n = P.evaluation.prompt_chunks(P.evaluation._shard_ctx(m, hw, BF16, wl,
                                                           P.ParallelPlan(pp=pp,
                                                                          stage_layers=layers)))
    gain = n / (1 + (n - 1) / pp)
    for mode in ("estimated", "ideal"):
        assert getattr(r, mode).tpot_s >= getattr(base, mode).tpot_s * (1 - 1e-12), mode
        assert getattr(r, mode).ttft_s >= getattr(base, mode).ttft_s / gain * (1 - 1e-12), mode
    # ... and the stages hold the whole model between them (tied embedding held twice)
    total = sum(s.weight_bytes for s in r.memory)
    extra = m.vocab_size * m.hidden_size * BF16.weight_embed_bits / 8 if (
        m.tie_word_embeddings and pp > 1) else 0.0
    assert total == pytest.approx(base.memory[0].weight_bytes + extra, rel=1e-9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODEL_SLUGS), tp=st.sampled_from([1, 2, 4, 8, 16]),
       pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 4]),
       ep=st.sampled_from([1, 2, 8]), batch=st.integers(4, 64))
def test_any_valid_plan_gives_consistent_finite_results(model, tp, pp, dp, ep, batch):
    """Every plan either raises ConfigError or yields finite times whose breakdown sums to the
    phase time, ideal <= estimated, and weights per device no larger than on one device."""
    hw = load_hardware("16x-nvidia-h100-sxm-infiniband")
    m = load_model(model)
    wl = Workload(batch=batch, prompt_len=500, gen_len=40)
    try:
        r = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=tp, pp=pp, dp=dp, ep=ep))
    except ConfigError:
        return
    for t in (r.estimated.tpot_s, r.estimated.ttft_s, r.ideal.tpot_s):
        assert math.isfinite(t) and t > 0
    assert r.ideal.tpot_s <= r.estimated.tpot_s and r.ideal.ttft_s <= r.estimated.ttft_s
    assert r.decode_breakdown.total_s == pytest.approx(r.estimated.tpot_s, rel=1e-9)
    assert r.prefill_breakdown.total_s == pytest.approx(r.estimated.ttft_s, rel=1e-9)
    one = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(dp=dp)) if m.moe is None else None
    if one is not None:
        assert r.worst_stage.weight_bytes <= one.worst_stage.weight_bytes * (1 + 1e-9)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODEL_SLUGS), tp=st.sampled_from([1, 2, 4, 8, 16]),
       pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2]), batch=st.integers(1, 64),
       memory=st.floats(0.2, 1.0), overhead_us=st.floats(0.0, 20.0),
       hop_us=st.floats(0.0, 100.0))
def test_shard_timings_are_the_reports_timings(model, tp, pp, dp, batch, memory, overhead_us,
                                               hop_us):
    """The fits' timing-only path (``shard_timings``: no single-device baseline, memory or
    breakdowns) gives bit for bit the Timing of ``shard_analyze`` under any efficiency."""
    hw = load_hardware("16x-nvidia-h100-sxm-infiniband")
    m, plan = load_model(model), P.ParallelPlan(tp=tp, pp=pp, dp=dp)
    wl = Workload(batch=batch, prompt_len=300, gen_len=30)
    eff = Efficiency(0.6, memory, overhead_us * 1e-6, stage_hop_s=hop_us * 1e-6)
    try:
        r = P.shard_analyze(m, hw, BF16, wl, plan, efficiency=eff)
    except ConfigError:
        with pytest.raises(ConfigError):
            P.shard_timings(m, hw, BF16, wl, plan, efficiency=eff)
        return
    assert P.shard_timings(m, hw, BF16, wl, plan, efficiency=eff) == (r.ideal, r.estimated)
    assert P.shard_timings(m, hw.with_efficiency(eff), BF16, wl, plan)[1] == r.estimated


def test_with_efficiency_is_replace_without_the_checks():
    eff, before = Efficiency(0.5, 0.7, 3e-6), H100X8.efficiency
    assert H100X8.with_efficiency(eff) == replace(H100X8, efficiency=eff)
    assert H100X8.with_efficiency(eff).with_efficiency(None) == replace(H100X8, efficiency=None)
    assert H100X8.efficiency is before        # the original is not touched


def test_pp_raises_throughput_only_with_microbatches():
    wl = Workload(batch=8, prompt_len=512, gen_len=64)
    one = P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl, P.ParallelPlan())
    pp4 = P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl, P.ParallelPlan(pp=4))
    assert pp4.layout.microbatches == 4 and pp4.layout.microbatch == 2
    # the decode round is max(one token through every stage, 4 microbatches on the slowest)
    assert pp4.decode_bubble_fraction >= 0.0
    assert pp4.estimated.tpot_s > 0.5 * one.estimated.tpot_s


# ---- collectives: the alpha-beta formulas by hand --------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("m_bytes", [8192.0, 64e6])
def test_ring_all_reduce_matches_alpha_beta_by_hand(n, m_bytes):
    alpha, beta = 1.5e-6, 50e9
    hw = with_links(H100, n, Topology.RING, bw=beta, lat=alpha)
    ri = rates(hw, BF16.compute_dtype, estimated=False)
    t = P.collective_time_s(P.Collective.ALL_REDUCE, n, m_bytes, ri, alpha, Topology.RING)
    assert t == pytest.approx(2 * (n - 1) * alpha + 2 * (n - 1) / n * m_bytes / beta, rel=1e-12)
    net = P.Net.of(hw, BF16)
    eff = H100.efficiency
    est = net.time(P.Collective.ALL_REDUCE, n, m_bytes, nodes=1, est=True)
    by_hand = (2 * (n - 1) * alpha + P.COLLECTIVE_SYNC_S + eff.kernel_overhead_s
               + 2 * (n - 1) / n * m_bytes / (beta * eff.memory))
    assert est == pytest.approx(by_hand, rel=1e-12)
    assert net.time(P.Collective.ALL_REDUCE, n, m_bytes, 1, est=False) == pytest.approx(t)
    assert est > t


def test_other_collectives_and_topologies_by_hand():
    a, b, m = 2e-6, 100e9, 1e6
    r = rates(with_links(H100, 16, bw=b, lat=a), BF16.compute_dtype, estimated=False)

    def t(kind, n, topo):
        return P.collective_time_s(kind, n, m, r, a, topo)
    C, T = P.Collective, Topology
    assert t(C.ALL_GATHER, 8, T.RING) == pytest.approx(7 * a + 7 / 8 * m / b)
    assert t(C.REDUCE_SCATTER, 8, T.RING) == pytest.approx(7 * a + 7 / 8 * m / b)
    assert t(C.ALL_REDUCE, 8, T.FULLY_CONNECTED) == pytest.approx(2 * a + 2 * 7 / 8 * m / b)
    # 4 x 4 torus: a 2D ring pass has (4-1)+(4-1) steps
    assert t(C.ALL_REDUCE, 16, T.TORUS_2D) == pytest.approx(2 * 6 * a + 2 * 15 / 16 * m / b)
    assert t(C.SEND_RECV, 2, T.RING) == pytest.approx(a + m / b)
    # all-to-all on a ring of 8: bytes travel 16/7 hops on average, diameter 4
    assert P.mean_hops(T.RING, 8) == pytest.approx(16 / 7)
    assert t(C.ALL_TO_ALL, 8, T.RING) == pytest.approx(4 * a + m * 16 / 7 / b)
    assert t(C.ALL_TO_ALL, 8, T.FULLY_CONNECTED) == pytest.approx(a + m / b)
    assert P.collective_time_s(C.ALL_REDUCE, 1, m, r, a, T.RING) == 0.0
    assert P.grid_dims(12) == (3, 4)


def test_hierarchical_all_reduce_across_nodes_by_hand():
    hw = load_hardware("16x-nvidia-h100-sxm-infiniband")
    ic = hw.interconnect
    net = P.Net.of(hw, BF16)
    m = 1e6
    t = net.time(P.Collective.ALL_REDUCE, 16, m, nodes=2, est=False)
    a, b = ic.latency_s, ic.bandwidth_bytes_per_s
    ai, bi = ic.inter_node_latency_s, ic.inter_node_bandwidth_bytes_per_s
    local_rs = a + 7 / 8 * m / b                       # NVSwitch: one step
    remote_ar = 2 * ai + 2 * 1 / 2 * (m / 8) / bi      # 2 nodes, M/8 each
    local_ag = a + 7 / 8 * m / b
    assert t == pytest.approx(local_rs + remote_ar + local_ag, rel=1e-12)


def test_tp_all_reduces_in_the_report_match_the_formula():
    hw = load_hardware("4x-nvidia-a100-sxm-80gb-nvlink")
    wl = Workload(batch=2, prompt_len=128, gen_len=16)
    r = P.shard_analyze(LLAMA3_8B, hw, BF16, wl, P.ParallelPlan(tp=4))
    dec = [c for c in r.collectives if c.phase == "decode" and c.name.startswith("tp_all_reduce")]
    assert {c.count for c in dec} == {32} and len(dec) == 2          # attention + FFN per layer
    ic = hw.interconnect
    m = 2 * 1 * 4096 * 2                                             # batch x hidden x 2 bytes
    for c in dec:
        assert c.message_bytes == m
        assert c.ideal_s == pytest.approx(2 * ic.latency_s + 2 * 3 / 4 * m
                                          / ic.bandwidth_bytes_per_s, rel=1e-12)
    comm = sum(c.estimated_s * c.count for c in r.collectives if c.phase == "decode")
    assert r.decode_breakdown.communication_s == pytest.approx(comm, rel=1e-9)
    # vocabulary-parallel embedding and LM head add one all-reduce and one logits all-gather
    names = {c.name for c in r.collectives}
    assert {"embedding_all_reduce", "lm_head_all_gather"} <= names
    no_vp = P.shard_analyze(LLAMA3_8B, hw, BF16, wl, P.ParallelPlan(tp=4, vocab_parallel=False))
    assert not {"embedding_all_reduce", "lm_head_all_gather"} & {c.name for c in
                                                                 no_vp.collectives}


def test_overlap_hides_communication_under_compute():
    wl = Workload(batch=16, prompt_len=1024, gen_len=32)
    r0 = P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl, P.ParallelPlan(tp=8))
    r1 = P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl, P.ParallelPlan(tp=8, overlap=1.0))
    half = P.shard_analyze(LLAMA3_8B, H100X8, BF16, wl, P.ParallelPlan(tp=8, overlap=0.5))
    assert r1.estimated.tpot_s < half.estimated.tpot_s < r0.estimated.tpot_s
    comp = r0.estimated.tpot_s - r0.decode_breakdown.communication_s
    assert r1.estimated.tpot_s == pytest.approx(comp, rel=1e-9)      # comm < compute here
    assert r1.decode_breakdown.communication_s == pytest.approx(0.0, abs=1e-15)


def test_inter_node_tp_is_slower_per_collective():
    hw = load_hardware("16x-nvidia-h100-sxm-infiniband")
    m = load_model("llama-3.1-70b")
    wl = Workload(batch=1, prompt_len=128, gen_len=16)
    r8 = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8))
    r16 = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=16))
    c8 = next(c for c in r8.collectives if c.name == "tp_all_reduce_ffn" and c.phase == "decode")
    c16 = next(c for c in r16.collectives if c.name == "tp_all_reduce_ffn"
               and c.phase == "decode")
    assert c8.nodes == 1 and c16.nodes == 2
    assert c16.ideal_s > 5 * c8.ideal_s          # InfiniBand hop: 2 us latency, 50 GB/s
    assert c16.estimated_s - c8.estimated_s > c16.ideal_s - c8.ideal_s   # + syncs, derating
    # pipeline stages across the two nodes send hidden states over InfiniBand
    pp = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8, pp=2))
    send = next(c for c in pp.collectives if c.name == "pp_send_hidden")
    assert send.nodes == 2


def test_a_tp_group_straddling_two_nodes_uses_the_inter_node_links():
    """TP6 x DP2 on 2 nodes of 8: the second TP group (ranks 6-11) crosses the node boundary,
    so the stage's all-reduces run at the inter-node speed even though the first does not."""
    hw = load_hardware("16x-nvidia-h100-sxm-infiniband")
    m = replace(LLAMA3_8B, num_attention_heads=48, num_key_value_heads=6, head_dim=128,
                hidden_size=6144, name="48 heads")
    r = P.shard_analyze(m, hw, BF16, Workload(batch=2, prompt_len=64, gen_len=8),
                        P.ParallelPlan(tp=6, dp=2))
    assert {c.nodes for c in r.collectives} == {2}


# ---- per-device sizes -----------------------------------------------------------------------

def test_mixtral_tp8_weights_per_device():
    m = load_model("mixtral-8x7b")
    total = count_params(m).total
    assert total == pytest.approx(46.7e9, rel=2e-3)
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    wl = Workload(batch=1, prompt_len=512, gen_len=16)
    for plan in (P.ParallelPlan(tp=8), P.ParallelPlan(tp=8, ep=8)):
        r = P.shard_analyze(m, hw, BF16, wl, plan)
        assert r.worst_stage.weight_bytes == pytest.approx(total * 2 / 8, rel=2e-3), plan.label
    # EP: each device holds whole experts; TP: every device a slice of every expert
    assert P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8, ep=8)).layout.expert_tp == 1
    assert P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8)).layout.expert_tp == 8
    # gpt-fast style: embedding and LM head whole on every rank
    whole = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8, vocab_parallel=False))
    emb = 2 * 32000 * 4096 * 2
    assert whole.worst_stage.weight_bytes == pytest.approx(
        (total * 2 - emb) / 8 + emb, rel=2e-3)


def test_ep_at_batch1_pays_the_busiest_expert_rank():
    m = load_model("mixtral-8x7b")
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    wl = Workload(batch=1, prompt_len=64, gen_len=16)
    tp = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8))
    ep = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8, ep=8))
    assert ep.estimated.tpot_s > tp.estimated.tpot_s     # one whole expert vs 2/8 of two


def test_moe_dp_uses_all_to_all():
    m = load_model("qwen3-30b-a3b")
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    wl = Workload(batch=8, prompt_len=256, gen_len=16)
    r = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=2, dp=4, ep=8))
    kinds = {c.collective for c in r.collectives}
    assert P.Collective.ALL_TO_ALL in kinds
    assert r.layout.expert_tp == 1 and r.layout.replica_batch == 2
    moe = count_params(m)
    # experts spread over all 8 devices (not replicated per DP replica)
    assert r.worst_stage.weight_bytes < (moe.total - moe.moe_experts * 7 / 8) * 2 * 1.01


def test_deepseek_mla_kv_cache_per_device_is_the_replicated_latent():
    m = load_model("deepseek-v3")
    hw = with_links(load_hardware("nvidia-h200-sxm"), 16)
    wl = Workload(batch=2, prompt_len=4000, gen_len=96)
    per_token_layer = (512 + 64) * 2                      # kv_lora_rank + rope dims, 16-bit
    full = 2 * 4096 * 61 * per_token_layer
    assert kv_cache_bytes(m, BF16, 2, 4096) == full
    for plan in (P.ParallelPlan(tp=8), P.ParallelPlan(tp=16)):
        r = P.shard_analyze(m, hw, BF16, wl, plan)
        assert r.worst_stage.kv_cache_bytes == full, plan.label
        assert any("MLA" in n for n in r.notes)
    pp = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8, pp=2))
    assert sum(s.kv_cache_bytes for s in pp.memory) == full       # layers split, not heads
    assert [s.layers for s in pp.memory] == [31, 30]


def test_gqa_kv_heads_split_then_replicated():
    m = load_model("llama-3.1-70b")                        # 64 heads, 8 KV heads
    hw = with_links(H100, 16)
    wl = Workload(batch=1, prompt_len=2048, gen_len=16)
    full = kv_cache_bytes(m, BF16, 1, wl.max_context)
    r8 = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=8))
    r16 = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=16))
    assert r8.worst_stage.kv_cache_bytes == pytest.approx(full / 8)
    assert r16.worst_stage.kv_cache_bytes == pytest.approx(full / 8)      # one head each, 2x
    assert r16.layout.kv_replication == 2 and any("replicated 2x" in n for n in r16.notes)


def test_shard_model_slices():
    s = P.shard_model(LLAMA3_8B, tp=4)
    assert (s.num_attention_heads, s.num_key_value_heads, s.intermediate_size,
            s.vocab_size, s.hidden_size) == (8, 2, 3584, 32064, 4096)
    assert P.shard_model(LLAMA3_8B) is LLAMA3_8B
    g = P.shard_model(GEMMA2_9B, first_layer=1, layers=3)
    assert g.num_hidden_layers == 3 and g.sliding_layers == GEMMA2_9B.sliding_layers[1:4]
    d = P.shard_model(DEEPSEEK_V3, tp=8, expert_tp=2, first_layer=2, layers=10)
    assert d.moe.first_dense_layers == 1 and d.moe.expert_intermediate_size == 1024
    assert d.moe.shared_intermediate_size == 256


def test_busiest_rank_experts_exact_against_enumeration():
    from itertools import combinations
    e, ranks = 8, 4
    for d in range(1, e + 1):
        counts = []
        for chosen in combinations(range(e), d):
            per = [0] * ranks
            for x in chosen:
                per[x // (e // ranks)] += 1
            counts.append(max(per))
        assert P.busiest_rank_experts(e, ranks, d) == pytest.approx(sum(counts) / len(counts))
    assert P.busiest_rank_experts(64, 1, 5.5) == 5.5
    assert P.ranks_hit_per_token(8, 2, 8) == pytest.approx(2.0)
    assert P.ranks_hit_per_token(8, 2, 2) == pytest.approx(2 * (1 - 6 / 28))


# ---- validation: clear messages -------------------------------------------------------------

ODD_KV = replace(LLAMA3_8B, num_attention_heads=48, num_key_value_heads=12, head_dim=128,
                 name="48 heads / 12 KV heads")


@pytest.mark.parametrize("model, kwargs, hw, match", [
    (LLAMA3_8B, dict(tp=3), H100X8, "must divide the 32 attention heads"),
    (ODD_KV, dict(tp=8), H100X8, "12 KV heads"),
    (LLAMA3_8B, dict(ep=2), H100X8, "needs a mixture-of-experts model"),
    (LLAMA3_8B, dict(pp=40), with_links(H100, 64), "exceeds the 32 layers"),
    (LLAMA3_8B, dict(pp=2, stage_layers=(10, 20)), H100X8, "sum to 30"),
    (LLAMA3_8B, dict(dp=8), H100X8, "need at least 8 sequences"),
    (LLAMA3_8B, dict(tp=8, pp=2), H100X8, "needs 16 devices"),
    (LLAMA3_8B, dict(tp=2), H100, "no \\[interconnect\\] section"),
    (LLAMA3_8B, dict(pp=2, microbatches=5), H100X8, "5 microbatches need at least 5"),
])
def test_invalid_plans_give_clear_config_errors(model, kwargs, hw, match):
    with pytest.raises(ConfigError, match=match):
        P.shard_analyze(model, hw, BF16, WL, P.ParallelPlan(**kwargs))


def test_invalid_moe_plans():
    hw = with_links(H100, 16)
    with pytest.raises(ConfigError, match="must divide the 8 experts"):
        P.shard_analyze(MIXTRAL, hw, BF16, WL, P.ParallelPlan(tp=16, ep=16))
    with pytest.raises(ConfigError, match="must divide TP x DP = 2"):
        P.shard_analyze(MIXTRAL, hw, BF16, WL, P.ParallelPlan(tp=2, ep=4))
    with pytest.raises(ConfigError, match="need links"):
        P.shard_analyze(MIXTRAL, H100, BF16, WL, P.ParallelPlan(dp=2))


@pytest.mark.parametrize("kwargs", [dict(tp=0), dict(tp=1.5), dict(tp=True), dict(pp=-1),
                                    dict(ep="2"), dict(overlap=2.0), dict(overlap=float("nan")),
                                    dict(microbatches=0), dict(vocab_parallel="yes"),
                                    dict(pp=2, stage_layers=(1,)),
                                    dict(pp=2, stage_layers=(0, 32)), dict(dp=10**6)])
def test_bad_plan_values(kwargs):
    with pytest.raises(ConfigError):
        P.ParallelPlan(**kwargs)


# ---- pipeline formulas, breakdown, memory ---------------------------------------------------

def test_pipeline_formulas_and_breakdown_sum():
    m = load_model("llama-3.1-70b")
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    wl = Workload(batch=8, prompt_len=1024, gen_len=64)
    r = P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=2, pp=4, microbatches=4))
    assert r.layout.microbatch == 2
    stage_dec = [sum(row.estimated_s for row in ph.rows) for ph in r.decode]
    stage_pre = [sum(row.estimated_s for row in ph.rows) for ph in r.prefill]
    assert r.estimated.tpot_s == pytest.approx(max(sum(stage_dec), 4 * max(stage_dec)), rel=1e-9)
    # each microbatch's prompt (2 x 1024 tokens) runs as n = 4 micro-batches of the class fit's
    # 512 tokens, pipelined over the stages (llama.cpp PR #6017): 4 n passes in all
    n = P.evaluation.prompt_chunks(P.evaluation._shard_ctx(m, hw, BF16, wl, r.layout.plan))
    assert n == 4
    assert r.estimated.ttft_s == pytest.approx((sum(stage_pre) + (4 * n - 1) * max(stage_pre))
                                               / n, rel=1e-9)
    for bd, total in ((r.decode_breakdown, r.estimated.tpot_s),
                      (r.prefill_breakdown, r.estimated.ttft_s)):
        assert bd.total_s == pytest.approx(total, rel=1e-9)
        assert 0 < bd.communication_share < 1
    assert 0 <= r.decode_bubble_fraction < 1 and 0 < r.prefill_bubble_fraction < 1
    assert 0 < r.parallel_efficiency <= 1.0 + 1e-9


def test_max_batch_fits_and_one_more_step_does_not():
    m = load_model("llama-3.1-70b")
    hw = load_hardware("4x-nvidia-a100-sxm-80gb-nvlink")
    wl = Workload(batch=1, prompt_len=4096, gen_len=512)
    for plan in (P.ParallelPlan(tp=4), P.ParallelPlan(tp=2, dp=2), P.ParallelPlan(pp=4)):
        mb = P.shard_analyze(m, hw, BF16, wl if plan.dp == 1 else replace(wl, batch=2),
                             plan).max_batch
        assert mb >= plan.dp, plan.label
        assert P.shard_analyze(m, hw, BF16, replace(wl, batch=mb), plan).fits, plan.label
        over = max(mb + plan.dp, int(mb * 1.1) + plan.dp)
        assert not P.shard_analyze(m, hw, BF16, replace(wl, batch=over), plan).fits, plan.label
    assert P.shard_analyze(m, hw, BF16, wl, P.ParallelPlan(tp=1)).max_batch == 0   # 141 GB


def test_report_dict_is_plain_and_complete():
    import json
    r = P.shard_analyze(MIXTRAL, H100X8, BF16, WL, P.ParallelPlan(tp=4, pp=2))
    d = P.shard_report_to_dict(r, include_operators=True)
    json.dumps(d, allow_nan=False)
    assert d["decode_tokens_per_s"] == pytest.approx(1 / d["tpot_s"])
    assert d["plan"]["label"] == "TP4·PP2·DP1" and d["plan"]["stage_layers"] == [16, 16]
    assert {o["stage"] for o in d["operators"]} == {0, 1}
    assert d["memory_bytes_per_device"] == max(s["total_bytes"] for s in d["stages"])


# ---- scaling curves and plan search ---------------------------------------------------------

def test_tp_scaling_curve_is_sublinear_and_consistent():
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    wl = Workload(batch=1, prompt_len=128, gen_len=64)
    pts = P.scaling_curve(LLAMA3_8B, hw, BF16, wl, "tp")
    assert [p.devices for p in pts] == [1, 2, 4, 8]
    assert pts[0].speedup == pytest.approx(1.0)
    for a, b in zip(pts, pts[1:]):
        assert b.speedup > a.speedup                         # still faster...
        assert b.efficiency < a.efficiency                   # ...but less efficient
    for p in pts:
        assert p.ideal_speedup == p.devices and p.speedup < p.devices + 1e-9
        assert p.efficiency == pytest.approx(p.speedup / p.devices)
    pp = P.scaling_curve(LLAMA3_8B, hw, BF16, wl, "pp")
    assert all(p.speedup <= 1.0 + 1e-12 for p in pp)        # batch 1: PP never helps
    dp = P.scaling_curve(LLAMA3_8B, hw, BF16, wl, "dp")
    assert [p.speedup for p in dp] == pytest.approx([1, 2, 4, 8])     # weak scaling, no comm
    ep = P.scaling_curve(LLAMA3_8B, hw, BF16, wl, "ep")
    assert ep[1].speedup is None and "dense" in ep[1].note
    with pytest.raises(ConfigError, match="unknown scaling strategy"):
        P.scaling_curve(LLAMA3_8B, hw, BF16, wl, "zz")


def test_search_returns_only_fitting_plans_best_first():
    m = load_model("llama-3.1-70b")
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    wl = Workload(batch=8, prompt_len=1024, gen_len=128)
    found = P.search_plans(m, hw, BF16, wl, "min_tpot")
    assert found and all(c.plan.devices <= 8 for c in found)
    assert [c.tpot_s for c in found] == sorted(c.tpot_s for c in found)
    assert found[0].plan.tp == 8                            # lowest TPOT: widest TP
    assert all(c.memory_per_device_bytes <= hw.memory_capacity_bytes for c in found)
    assert not any(c.plan.devices == 1 for c in found)     # 141 GB does not fit on one
    per_dev = P.search_plans(m, hw, BF16, wl, "max_throughput_per_device", fill_batch=True)
    tputs = [c.throughput_per_device for c in per_dev]
    assert tputs == sorted(tputs, reverse=True) and per_dev[0].batch > wl.batch
    few = P.search_plans(m, hw, BF16, wl, "min_tpot", max_devices=2)
    assert {c.plan.devices for c in few} == {2}
    assert P.search_plans(load_model("deepseek-v3"), hw, BF16, wl) == ()
    with pytest.raises(ConfigError, match="unknown objective"):
        P.search_plans(m, hw, BF16, wl, "fastest")


def test_candidate_plans_include_ep_for_moe():
    plans = P.candidate_plans(MIXTRAL, 8, batch=8)
    assert any(p.ep == 8 for p in plans) and all(p.devices <= 8 for p in plans)
    assert all(p.ep == 1 for p in P.candidate_plans(LLAMA3_8B, 8, batch=8))
    assert {p.devices for p in P.candidate_plans(LLAMA3_8B, 8, 8, exact_devices=4)} == {4}


@pytest.mark.parametrize("slug", CLUSTERS)
def test_every_cluster_preset_runs_its_widest_tp(slug):
    hw = load_hardware(slug)
    n = hw.interconnect.devices
    tp = max(d for d in (1, 2, 4, 8, 16) if d <= n)
    r = P.shard_analyze(load_model("llama-3.1-70b"), hw, BF16,
                        Workload(batch=1, prompt_len=256, gen_len=32),
                        P.ParallelPlan(tp=tp, pp=n // tp))
    assert r.devices == n and math.isfinite(r.estimated.tpot_s)
    assert 0 < r.decode_breakdown.communication_share < 1
    assert hw.interconnect.latency_s > 0 and "interconnect" in hw.source


def test_efficiency_override_changes_links_like_memory():
    slow = replace(H100X8, efficiency=Efficiency(0.7, 0.3, 4e-6))
    fast = P.Net.of(H100X8, BF16).intra[1].link_bytes_per_s
    assert P.Net.of(slow, BF16).intra[1].link_bytes_per_s == pytest.approx(fast / 2)
