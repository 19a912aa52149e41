"""Multi-device sharding: tensor (TP), pipeline (PP), data (DP) and expert (EP) parallelism,
with collective costs from an alpha-beta model of the links.

How a plan runs (the conventions every number below follows)
------------------------------------------------------------
* Devices = TP x PP x DP. Ranks are laid out TP-innermost (``rank = tp_rank + TP * (dp_rank +
  DP * pp_rank)``), so TP groups sit on the fastest links and pipeline stages are the outermost
  split (across nodes first).
* **TP** (Megatron-LM): attention heads, FFN columns and the vocabulary are split TP ways;
  Q/K/V and up/gate are column-parallel, O and down row-parallel, each followed by an
  all-reduce of the hidden states (2 per layer). Norms, residual adds and the MoE router are
  replicated. KV heads: KV/TP per device, or, when TP > KV heads, one KV head per device
  replicated TP/KV times (vLLM). MLA: the latent down-projections and the latent KV cache are
  replicated on every TP rank; the per-head up-projections and O are split. Embedding and LM
  head are vocabulary-parallel (one all-reduce after the lookup, one all-gather of logits).
  The device's operators are ``forward_ops`` of :func:`shard_model` -- the one forward builder
  run on the device's slice of the model (sizes that do not divide are padded up).
  **Row split** (a stack whose efficiency has ``tp_row_copy_s`` > 0: llama.cpp's tensor
  split): the same slice of every matmul, but gathered on one device -- each split matmul's
  input goes to and its output comes back from every other device of the group (2 (TP - 1)
  point-to-point copies per matmul, each paying ``tp_row_copy_s`` beyond the link's time, the
  host driving them) in place of the all-reduces.
* **PP**: contiguous layer stages (even split, extra layers on the first stages, or
  ``stage_layers``); the embedding on the first stage, final norm and LM head on the last (a
  tied embedding is held again by the last stage). Hidden states go stage to stage
  (point-to-point); in decode the sampled token ids return from the last stage to the first.
  With ``m`` microbatches: TTFT = sum of stage times + (m - 1) x slowest stage (GPipe fill);
  TPOT = max(sum of stage times, m x slowest stage). With m = 1 (always at batch 1) a token
  passes every stage in turn, so PP alone can never lower batch-1 TPOT.
* **DP**: independent replicas; the workload's batch is the global batch, ceil(B/DP) per
  replica (aggregate throughput = B / TPOT of the fullest replica).
* **EP / MoE layers** run on the TP x DP devices of a stage (vLLM folds them the same way):
  EP groups of experts, each expert split ETP = TP*DP/EP ways in width; expert weights are
  therefore never replicated across DP. With DP > 1, tokens of the other replicas reach a
  device by an all-to-all (dispatch) and return by another (combine). Weight traffic of the
  busiest expert rank (expected maximum of distinct experts touched per rank) sets the time,
  so EP at small batch pays its load imbalance; FLOPs and activations use the mean.

Collectives (alpha-beta; alpha = link latency per step, beta = per-device unidirectional link
bandwidth, M = message bytes; see :func:`collective_terms`)
* ring all-reduce: 2(N-1) alpha + 2(N-1)/N M / beta (Patarasuk & Yuan 2009); fully connected
  (NVSwitch, xGMI mesh): reduce-scatter and all-gather in one step each, 2 alpha + same bytes;
  2D torus/mesh a x b: 2(a-1 + b-1) alpha + same bytes (2D ring, bandwidth-optimal).
* all-gather / reduce-scatter: half of the all-reduce.
* all-to-all: M = bytes each device sends to the others; M x mean hop distance / beta plus
  alpha x network diameter.
* point-to-point: alpha + M / beta.
* across nodes: hierarchical (reduce-scatter in node, all-reduce of M/g across nodes,
  all-gather in node); all-to-all splits its bytes between the two links.
* The bandwidth term goes through ``roofline.op_time_s`` with the link rate (estimated: the
  link derated like memory bandwidth, plus one kernel launch per collective); the latency term
  is added in both ideal and estimated times; estimated adds ``COLLECTIVE_SYNC_S`` per
  collective (per level when hierarchical) for the participants' handshake.

Modules: :mod:`.plan` (plan, validation, the device's slice of the model),
:mod:`.collectives` (collectives), :mod:`.evaluation` (``shard_analyze``: memory, time,
breakdowns), :mod:`.search` (scaling curves, best-plan search). This module re-exports their
public names, so ``from llmpara_core import parallel`` is all a caller needs. The published TP
measurements and their predictions are :mod:`llmpara_core.calibration.tp_measurements` (they
run under fitted stack profiles; ``parallel`` never imports ``calibration``).
"""

from __future__ import annotations

from .collectives import (COLLECTIVE_SYNC_S, Collective, CommCost, Net, collective_terms,
                            collective_time_s, grid_dims, mean_hops)
from .evaluation import (TOKEN_ID_BYTES, ShardReport, StageMemory, TimeBreakdown,
                            shard_analyze, shard_report_to_dict, shard_timings)
from .plan import (MAX_DEGREE, Layout, ParallelPlan, busiest_rank_experts, divisors,
                            ranks_hit_per_token, resolve_plan, shard_model)
from .search import (OBJECTIVES, STRATEGIES, PlanCandidate, ScalingPoint,
                              candidate_plans, default_device_counts, scaling_curve,
                              search_plans)

__all__ = [
    "COLLECTIVE_SYNC_S", "Collective", "CommCost", "Net", "collective_terms", "collective_time_s",
    "grid_dims", "mean_hops", "TOKEN_ID_BYTES", "ShardReport", "StageMemory", "TimeBreakdown",
    "shard_analyze", "shard_report_to_dict", "shard_timings", "MAX_DEGREE", "Layout", "ParallelPlan",
    "busiest_rank_experts", "divisors", "ranks_hit_per_token", "resolve_plan", "shard_model",
    "OBJECTIVES", "STRATEGIES", "PlanCandidate", "ScalingPoint", "candidate_plans",
    "default_device_counts", "scaling_curve", "search_plans",
]
