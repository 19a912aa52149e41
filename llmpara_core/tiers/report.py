"""Tier-migration and batch sweeps, the replaced reference tool's own hetero formula (for
comparison), the check of its published claims, and plain-data views of a
:class:`~llmpara_core.tiers.HeteroResult` (CLI JSON/CSV, page downloads)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InfeasibleError
from ..hardware import Hardware
from ..model import Model
from ..precision import Precision
from .engine import MIGRATION_BITS, HeteroResult, Placement, TierTiming, hetero
from ..workload import Workload


# ---- sweeps --------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class SweepPoint:
    """One point of a tier-migration or batch sweep. ``result`` is None when infeasible;
    ``reference`` is what the replaced tool's formula says at the same point (it never
    reports infeasibility)."""
    label: str
    weight_bits: float
    kv_bits: float
    batch: int
    feasible: bool
    reason: str
    result: HeteroResult | None
    reference: "ReferenceEstimate | None" = None

    def tier_weight_bytes(self) -> tuple[float, ...] | None:
        if self.result is None:
            return None
        return tuple(self.result.placement.weight_bytes_per_tier())


def quantised(precision: Precision, bits: float, kv_follows: bool = True) -> Precision:
    """``precision`` with every weight (attention, FFN, embedding/LM head) at ``bits`` and,
    with ``kv_follows``, the KV cache too (norms, activations and compute type unchanged)."""
    changes = dict(weight_attn_bits=bits, weight_ffn_bits=bits, weight_embed_bits=bits,
                   name=f"W{bits:g}" + (f" KV{bits:g}" if kv_follows else ""))
    if kv_follows:
        changes["kv_bits"] = bits
    return replace(precision, **changes)


def _point(label: str, model: Model, hardware: Hardware, precision: Precision,
           workload: Workload, kw: dict) -> SweepPoint:
    ref = reference_estimate(model, hardware, precision, workload)
    try:
        r = hetero(model, hardware, precision, workload, **kw)
        return SweepPoint(label, precision.weight_ffn_bits, precision.kv_bits, workload.batch,
                          True, "", r, ref)
    except InfeasibleError as e:
        return SweepPoint(label, precision.weight_ffn_bits, precision.kv_bits, workload.batch,
                          False, str(e), None, ref)


def tier_migration(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                   bits: tuple[float, ...] = MIGRATION_BITS, kv_follows: bool = True,
                   **kw) -> tuple[SweepPoint, ...]:
    """Sweep weight (and KV) precision: where the model lands and tokens/s at each step."""
    out = []
    for nb in bits:
        p = quantised(precision, nb, kv_follows)
        out.append(_point(p.name, model, hardware, p, workload, kw))
    return tuple(out)


def batch_sweep(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128), **kw
                ) -> tuple[SweepPoint, ...]:
    """Decode at several batch sizes, re-placing each (the KV cache grows with the batch)."""
    return tuple(_point(f"b={int(b)}", model, hardware, precision,
                        replace(workload, batch=int(b)), kw) for b in batches)


# ---- the reference's own formula (to show what it would have said) -------------------------

@dataclass(frozen=True)
class ReferenceEstimate:
    """What the reference tool's ``compute_decode_throughput`` reports (reference-tool §5.2):
    tokens/s = bandwidth of the slowest tier holding any weight / (batch x layer weights)."""
    decode_tokens_per_s: float
    bottleneck_tier: str
    bytes_per_token: float
    weight_tier_bytes: tuple[float, ...]
    spilled_bytes: float           # weights beyond the second-fastest tier


def _reference_sizes(model: Model, precision: Precision, workload: Workload) -> dict:
    """The reference's sizes [bytes] (reference-tool §5.1), defects included."""
    h, L, n = model.hidden_size, model.num_hidden_layers, model.num_attention_heads
    d = h // n
    hkv = model.num_key_value_heads * d
    wa, wf, a = precision.weight_attn_bits, precision.weight_ffn_bits, precision.activation_bits
    b, s = workload.batch, workload.prompt_len
    moe = model.moe
    inter = moe.expert_intermediate_size if moe is not None else model.intermediate_size
    mats = 3 if model.ffn_kind.value == "gated" else 2
    experts_all = moe.num_experts if moe is not None else 1
    experts_active = moe.experts_per_token if moe is not None else 1
    attn = ((h * h + 2 * h * hkv) * wa + h * h * wa) / 8.0
    w_layer = attn + mats * inter * h * experts_all * wf / 8.0 + 2.0 * h * a / 8.0
    return {
        "w_layer": w_layer,
        "w_active": attn + mats * inter * h * experts_active * wf / 8.0,
        "w_total": L * w_layer + 2.0 * model.vocab_size * h * wa / 8.0,
        "kv": (L * model.num_key_value_heads * d * 2 * precision.kv_bits / 8.0
               * (s + workload.gen_len) * b),
        "act": max(b * n * s * s, b * s * model.intermediate_size) * a / 8.0,
    }


def reference_estimate(model: Model, hardware: Hardware, precision: Precision,
                       workload: Workload) -> ReferenceEstimate:
    """Reproduce the reference's decode throughput, defects included (for comparison only):
    its sizes (§5.1: no norms, embedding + LM head counted twice over V*h, activations
    max(b*n*s^2, b*s*I), KV at s + gen), its greedy placement, and bytes/token = b * L *
    layer weights (no LM head, no KV reads, multiplied by the batch)."""
    z = _reference_sizes(model, precision, workload)
    L = model.num_hidden_layers
    tiers = hardware.tiers
    order = list(range(len(tiers)))     # the reference's SRAM, DRAM, Flash: listed order
    free = [t.capacity_bytes for t in tiers]
    wt = [0.0] * len(tiers)
    f0 = order[0]
    free[f0] -= min(z["act"], free[f0])
    layers0 = min(L, int(max(0.0, free[f0]) // z["w_layer"])) if len(tiers) > 1 else 0
    wt[f0] = layers0 * z["w_layer"]
    free[f0] -= wt[f0]
    rest_w = z["w_total"] - wt[f0]
    lower = order[1:] if len(tiers) > 1 else order
    kv_left = z["kv"]
    for t in lower:
        take = min(kv_left, max(0.0, free[t]))
        free[t] -= take
        kv_left -= take
    for t in lower[:-1]:
        take = min(rest_w, max(0.0, free[t]))
        wt[t] += take
        free[t] -= take
        rest_w -= take
    wt[lower[-1]] += rest_w                      # capacity never checked (defect 14e)
    holders = [t for t in order if wt[t] > 0]
    bottleneck = holders[-1] if holders else order[0]
    per_token = workload.batch * L * z["w_active"]
    return ReferenceEstimate(tiers[bottleneck].bandwidth_bytes_per_s / per_token,
                             tiers[bottleneck].name, per_token, tuple(wt),
                             sum(wt[t] for t in order[2:]))


# ---- the reference's published claims, checked ---------------------------------------------

# reference-tool §9.3: H1 (tex §V-C: LLaMA-3 8B FP16 on Cambricon-LLM "1.00 tok/s") and H3
# (tex §V-C, conclusion, README Finding 4: "INT4 ... about 35x").
PAPER_FP16_TOKENS_PER_S = 1.0
PAPER_INT4_SPEEDUP = 35.0
# The reference's LLaMA-3 8B preset workload: batch 1, prompt 2048, max generation 8192.
REFERENCE_WORKLOAD = Workload(batch=1, prompt_len=2048, gen_len=8192)


@dataclass(frozen=True, eq=False)
class ClaimCheck:
    """The reference's FP16 and INT4 claims for one model and device, against its own code and
    per-tier streaming with greedy (its placement) and hot-first placement. INT4 = every weight
    at 4 bits, the KV cache at the baseline's bits (the claim is about weights)."""
    workload: Workload
    fp16: Precision
    int4: Precision
    reference_fp16: ReferenceEstimate
    reference_int4: ReferenceEstimate
    greedy_fp16: HeteroResult
    hot_first_fp16: HeteroResult
    greedy_int4: HeteroResult
    hot_first_int4: HeteroResult
    paper_fp16_tokens_per_s: float = PAPER_FP16_TOKENS_PER_S
    paper_int4_speedup: float = PAPER_INT4_SPEEDUP

    @property
    def reference_int4_speedup(self) -> float:
        return self.reference_int4.decode_tokens_per_s / self.reference_fp16.decode_tokens_per_s

    @property
    def greedy_int4_speedup(self) -> float:
        """At peak rates, like the reference (the estimated ratio is close)."""
        return (self.greedy_int4.ideal.decode_tokens_per_s
                / self.greedy_fp16.ideal.decode_tokens_per_s)

    @property
    def hot_first_int4_speedup(self) -> float:
        return (self.hot_first_int4.ideal.decode_tokens_per_s
                / self.hot_first_fp16.ideal.decode_tokens_per_s)


def check_reference_claims(model: Model, hardware: Hardware, fp16: Precision,
                           workload: Workload = REFERENCE_WORKLOAD) -> ClaimCheck:
    """Evaluate the reference's headline hetero claims (InfeasibleError if the model does not
    fit the device at all)."""
    int4 = replace(quantised(fp16, 4.0, kv_follows=False), name="W4 (KV as baseline)")
    runs = {(p.name, s): hetero(model, hardware, p, workload, strategy=s)
            for p in (fp16, int4) for s in ("greedy", "hot-first")}
    return ClaimCheck(workload, fp16, int4,
                      reference_estimate(model, hardware, fp16, workload),
                      reference_estimate(model, hardware, int4, workload),
                      runs[fp16.name, "greedy"], runs[fp16.name, "hot-first"],
                      runs[int4.name, "greedy"], runs[int4.name, "hot-first"])


# ---- plain-data view (CLI JSON, page downloads) --------------------------------------------

def placement_rows(placement: Placement, aggregate_experts: bool = True) -> list[dict]:
    """One dict per item (routed experts of a layer folded into one row by default)."""
    names = [t.name for t in placement.tiers]
    rows: list[dict] = []
    folded: dict[int, dict] = {}
    for it, tb in zip(placement.items, placement.tier_bytes):
        if aggregate_experts and it.category == "moe_expert":
            r = folded.get(it.layer)
            if r is None:
                r = {"key": f"layer {it.layer} · routed experts", "category": "moe_expert",
                     "layer": it.layer, "stored_bytes": 0.0, "read_density": 0.0,
                     "experts": 0, "tiers": {nm: 0.0 for nm in names}}
                folded[it.layer] = r
                rows.append(r)
            r["stored_bytes"] += it.stored_bytes
            r["read_density"] += it.read_density * it.stored_bytes
            r["experts"] += 1
            for nm, v in zip(names, tb):
                r["tiers"][nm] += float(v)
            continue
        rows.append({"key": it.key, "category": it.category, "layer": it.layer,
                     "stored_bytes": it.stored_bytes, "read_density": it.read_density,
                     "tiers": {nm: float(v) for nm, v in zip(names, tb)}})
    for r in folded.values():
        r["read_density"] = r["read_density"] / r["stored_bytes"] if r["stored_bytes"] else 0.0
    return rows


def tier_rows(result: HeteroResult) -> list[dict]:
    """Per-tier summary: capacity, what is stored, bytes per decode step, time and energy."""
    p = result.placement
    cats = p.bytes_by_category()
    used = p.used_bytes
    w = p.weight_bytes_per_tier()
    tot_i = sum(result.ideal.tier_memory_s) or 1.0
    out = []
    for t, tier in enumerate(p.tiers):
        out.append({
            "tier": tier.name,
            "capacity_bytes": tier.capacity_bytes,
            "bandwidth_bytes_per_s": tier.bandwidth_bytes_per_s,
            "energy_j_per_byte": tier.energy_j_per_byte,
            "latency_s": tier.latency_s,
            "used_bytes": float(used[t]),
            "weight_bytes": float(w[t]),
            "kv_cache_bytes": float(cats.get("kv_cache", np.zeros(len(p.tiers)))[t]),
            "activation_bytes": float(cats.get("activations", np.zeros(len(p.tiers)))[t]),
            "read_bytes_per_step": result.tier_bytes_per_step[t],
            "weight_read_bytes_per_step": result.tier_weight_bytes_per_step[t],
            "kv_read_write_bytes_per_step": result.tier_kv_bytes_per_step[t],
            "activation_bytes_per_step": result.tier_act_bytes_per_step[t],
            "ideal_time_s_per_step": result.ideal.tier_memory_s[t],
            "estimated_time_s_per_step": result.estimated.tier_memory_s[t],
            "time_share": result.ideal.tier_memory_s[t] / tot_i,
            "energy_j_per_token": result.energy.tier_j[t],
        })
    return out


def _finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _timing_dict(t: TierTiming, names) -> dict:
    return {"tpot_s": t.tpot_s, "decode_tokens_per_s": _finite(t.decode_tokens_per_s),
            "throughput_tokens_per_s": _finite(t.throughput_tokens_per_s), "ttft_s": t.ttft_s,
            "e2e_latency_s": t.e2e_latency_s, "compute_s_per_step": t.compute_s,
            "tier_time_s_per_step": dict(zip(names, t.tier_memory_s)),
            "latency_s_per_step": t.latency_s, "overhead_s_per_step": t.overhead_s,
            "compute_bound_share": t.compute_bound_share}


def result_to_dict(result: HeteroResult, include_items: bool = True,
                   include_operators: bool = True) -> dict:
    """JSON-ready dict (SI units): estimated figures at the top level, peak-rate figures under
    ``ideal``; per-tier rows, placement, operators."""
    names = [t.name for t in result.tiers]
    est = result.estimated
    en = result.energy
    d = {
        "model": result.model.name,
        "hardware": result.hardware.name,
        "precision": result.precision.name,
        "weight_bits": result.precision.weight_ffn_bits,
        "kv_bits": result.precision.kv_bits,
        "batch": result.workload.batch,
        "prompt_len": result.workload.prompt_len,
        "gen_len": result.workload.gen_len,
        "strategy": result.placement.strategy,
        "pins": [list(p) for p in result.placement.pins],
        "overlap": result.overlap,
        "prefetch": result.prefetch,
        "expert_zipf_s": result.expert_zipf_s,
        **_timing_dict(est, names),
        "ideal": _timing_dict(result.ideal, names),
        "flops_per_step": result.flops_per_step,
        "bytes_per_step": float(sum(result.tier_bytes_per_step)),
        "energy_j_per_token": en.total_j,
        "energy": {"tier_j_per_token": dict(zip(names, en.tier_j)),
                   "memory_j_per_token": en.memory_j, "compute_j_per_token": en.compute_j,
                   "static_j_per_token": en.static_j, "assumed_tiers": list(en.assumed_tiers)},
        "tiers": tier_rows(result),
        "placement_summary": {c: dict(zip(names, map(float, v)))
                              for c, v in result.placement.bytes_by_category().items()},
        "notes": list(result.notes),
    }
    if include_items:
        d["placement"] = placement_rows(result.placement)
    if include_operators:
        d["operators"] = [{
            "name": r.name, "kind": r.kind.value, "group": r.group, "count": r.count,
            "flops": r.flops, "tier_bytes": dict(zip(names, r.tier_bytes)),
            "memory_bytes": r.memory_bytes, "compute_s": r.compute_s, "memory_s": r.memory_s,
            "latency_s": r.latency_s, "ideal_s": r.ideal_s, "estimated_s": r.estimated_s,
            "effective_bandwidth_bytes_per_s": r.effective_bandwidth_bytes_per_s,
            "bound": r.bound} for r in result.rows]
    return d
