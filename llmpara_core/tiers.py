"""Heterogeneous memory tiers (SRAM / DRAM / Flash, or any ordered list): placement of weights,
KV cache and activations across tiers, per-tier streaming time of decode, tier migration under
quantisation, and energy per token from per-tier energy per byte.

Model
-----
*Placement.* The stored data are split into items: each weight tensor of each layer (and each
routed expert of each MoE layer), the embedding table, final norm and LM head, the KV cache of
each layer (at the workload's full context, for the whole batch) and the activation working set
(the largest live set of any operator of a decode step or of a prefill pass of at most
``prefill_chunk_tokens`` tokens — chunked prefill, as serving engines run it). Items are laid into tiers under their
capacities, byte-exactly (an item may straddle two tiers; its reads are then split in the same
proportion). Strategies:

``greedy``
    The reference tool's algorithm (its ``compute_data_placement``), generalised to N tiers:
    activations and then as many *whole layers* as fit go to the first tier; the KV cache and
    then all remaining weights (model order: embedding, layers, final norm, LM head) fill the
    other tiers in the listed order (fastest first in the presets, as the reference's fixed
    SRAM, DRAM, Flash), and only then any room left in the first tier. Unlike the reference,
    the last tier's capacity is checked.
``hot-first``
    Activations first, then items by *read density* (bytes read per decode step per stored
    byte), into the tiers by decreasing bandwidth. Dense weights are read once per step (density 1); among them
    attention, shared experts/router, norms and the LM head go before the dense FFN. Routed
    experts are read with probability 1 - (1 - q_e)^b (q_e = k/E uniform, or a Zipf popularity),
    the KV cache at (mean context / full context), and the embedding table is only gathered
    (b rows of V), so it sinks to the slowest tier. Filling tiers fastest-first in order of
    density is the fractional-knapsack optimum of sum(bytes_t / bandwidth_t) when every operator
    is memory-bound.
``pinned``
    User pins (``selector -> tier name``) are placed first, in their tier, then ``hot-first``
    for everything else. Pins may also be given with the other strategies.

If something cannot be placed, :class:`~llmpara_core.errors.InfeasibleError` says what, how
many bytes, and what the tiers hold.

*Time.* Each operator of a decode step (from :func:`~llmpara_core.forward.forward_ops`, the
single forward-pass builder) has its weight bytes attributed to the tiers holding that operator's
weights, its KV-cache reads/writes to the tiers holding that layer's cache and its activation
traffic to the tiers holding the activations. Its memory time is the sum over tiers of
bytes_t / bandwidth_t (tiers stream one after the other, not in parallel), and

    t_op = max(FLOPs / peak, sum_t bytes_t / bw_t) + latency + kernels * overhead      (operator)
    t_step = max(sum FLOPs / peak, sum_t bytes_t / bw_t) + latency + overhead           (step)

with ``overlap="operator"`` (default; equal to :func:`~llmpara_core.analysis.analyze` for a single
tier) or ``overlap="step"`` (compute of one operator hidden under the streaming of the others).
Latency: with ``prefetch=True`` only *data-dependent* accesses pay a tier's access latency —
the embedding gather (depends on the token) and routed experts (depend on the router); weight
and KV streams are predictable and prefetched. With ``prefetch=False`` every operator execution
pays it. An execution pays the largest latency of the tiers it reads (the requests are issued
together; the transfers then share the data path, hence the sum of bytes_t / bw_t). Decode is
integrated exactly over all generated tokens (bytes and FLOPs are affine in the context between
sliding-window breakpoints; max(affine, affine) is summed exactly at the crossover), as in
:func:`~llmpara_core.analysis.integrate_decode`. *Ideal* uses peak rates; *estimated* derates
compute and every tier's bandwidth by the hardware's efficiency factors and adds the per-kernel
overhead.

*Energy.* Per decode step: sum_t bytes_t * energy_t (tier pJ/B; the class default when a tier
does not say) + FLOPs * the class's energy per FLOP + idle power * step time; per token = / batch.

References: reference-tool §5 (its hetero model) and §10 item 14 (its defects: whole model at
the slowest tier's bandwidth as soon as a byte spills, tokens/s falling as 1/batch, LM head and
KV reads ignored, Flash capacity never checked), which this module fixes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from .analysis import _sum_max_affine, decode_segments
from .errors import ConfigError, InfeasibleError
from .forward import forward_ops
from .hardware import Efficiency, Hardware, MemoryTier
from .memory import activation_peak_bytes, weight_bytes
from .model import Model, PositionKind
from .operators import OpKind, Operator
from .precision import Precision
from .roofline import rates
from .units import BYTES_PER_GB, bits_to_bytes
from .workload import Workload

STRATEGIES = ("greedy", "hot-first", "pinned")
# Tokens per prefill pass when sizing the activation buffer (vLLM's chunked-prefill default
# max_num_batched_tokens was 2048); None = the whole batch's prompts in one pass.
DEFAULT_PREFILL_CHUNK = 2048
OVERLAPS = ("operator", "step")
MIGRATION_BITS = (16.0, 8.0, 4.0, 2.0)

# Item categories, in the hot-first tie-break order (equal read density -> lower rank first).
CATEGORY_RANK = {
    "activations": -1,
    "attention": 0,
    "shared_expert": 1,
    "router": 1,
    "norm": 2,
    "lm_head": 3,
    "ffn": 4,
    "moe_expert": 5,
    "kv_cache": 6,
    "embedding": 7,
    "other": 8,
}
CATEGORIES = tuple(CATEGORY_RANK)
WEIGHT_CATEGORIES = tuple(c for c in CATEGORIES if c not in ("activations", "kv_cache"))

_KIND_CATEGORY = {
    OpKind.QKV: "attention", OpKind.OUT_PROJ: "attention", OpKind.ATTENTION: "attention",
    OpKind.ROPE: "attention", OpKind.KV_CACHE: "attention", OpKind.NORM: "norm",
    OpKind.FFN: "ffn", OpKind.ELEMENTWISE: "ffn", OpKind.MOE_ROUTER: "router",
    OpKind.MOE_EXPERT: "moe_expert", OpKind.SHARED_EXPERT: "shared_expert",
    OpKind.LM_HEAD: "lm_head", OpKind.EMBEDDING: "embedding", OpKind.COMM: "other",
}

# Relative tolerance for capacity checks (float sums of many items).
_CAP_RTOL = 1e-9


# ---- items and placement -------------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    """One placeable piece of data.

    ``stored_bytes`` is its size; ``read_density`` the bytes read per decode step (at the mean
    context, batch of the workload) per stored byte, used for hot-first ordering and shown to
    the user. ``layer`` is the decoder layer (None for model-level items), ``expert`` the routed
    expert's popularity rank (0 = most used) when experts are placed one by one (skewed
    routing); with uniform routing one item holds all routed experts of a layer. ``group`` is the forward pass's
    layer-group label ("global/dense", ...) or "model"."""
    key: str
    category: str
    stored_bytes: float
    read_density: float
    layer: int | None = None
    expert: int | None = None            # None for a layer's routed experts taken together
    group: str = "model"
    ops: tuple[str, ...] = ()
    order: int = 0


@dataclass(frozen=True, eq=False)
class Placement:
    """Where every item sits. ``tier_bytes[i, t]`` = bytes of item i in tier t (tiers in the
    hardware's order, fastest first). ``notes`` explain choices (e.g. unsorted tiers)."""
    tiers: tuple[MemoryTier, ...]
    strategy: str
    items: tuple[Item, ...]
    tier_bytes: np.ndarray
    pins: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def used_bytes(self) -> np.ndarray:
        """Bytes placed in each tier."""
        return self.tier_bytes.sum(axis=0)

    @property
    def free_bytes(self) -> np.ndarray:
        return np.array([t.capacity_bytes for t in self.tiers]) - self.used_bytes

    @property
    def fractions(self) -> np.ndarray:
        """Share of each item in each tier (rows sum to 1; 0-byte items are put in tier 0)."""
        size = np.array([it.stored_bytes for it in self.items])
        out = np.zeros_like(self.tier_bytes)
        nz = size > 0
        out[nz] = self.tier_bytes[nz] / size[nz, None]
        out[~nz, 0] = 1.0
        return out

    def bytes_by_category(self) -> dict[str, np.ndarray]:
        """Stored bytes of each category in each tier (categories with no bytes left out)."""
        out: dict[str, np.ndarray] = {}
        for it, row in zip(self.items, self.tier_bytes):
            out.setdefault(it.category, np.zeros(len(self.tiers)))
            out[it.category] = out[it.category] + row
        return {k: v for k, v in out.items() if v.sum() > 0}

    def weight_bytes_per_tier(self) -> np.ndarray:
        mask = np.array([it.category in WEIGHT_CATEGORIES for it in self.items])
        return self.tier_bytes[mask].sum(axis=0) if mask.any() else np.zeros(len(self.tiers))

    def moved(self, item: int, src: int, dst: int, nbytes: float) -> "Placement":
        """A copy with ``nbytes`` of item ``item`` moved from tier ``src`` to tier ``dst``
        (capacities not checked: for what-if evaluations and tests)."""
        tb = self.tier_bytes.copy()
        nbytes = min(nbytes, tb[item, src])
        tb[item, src] -= nbytes
        tb[item, dst] += nbytes
        tb.setflags(write=False)
        return replace(self, tier_bytes=tb, strategy=f"{self.strategy} (edited)")


def _layer_indices(model: Model) -> dict[str, list[int]]:
    """Decoder-layer indices of each layer-group label, as forward_ops groups them."""
    from .model import LayerKind
    out: dict[str, list[int]] = {}
    for i in range(model.num_hidden_layers):
        kind = LayerKind(model.layer_is_sliding(i), model.layer_is_moe(i))
        out.setdefault(kind.label, []).append(i)
    return out


def expert_selection_probs(model: Model, zipf_s: float = 0.0) -> np.ndarray | None:
    """Per-token probability q_e that routed expert e (by popularity rank) is among the k picked:
    q_e = k/E (uniform, ``zipf_s`` = 0) or proportional to 1/(rank+1)^s, capped at 1 with the
    excess redistributed so that sum q_e = k. None for dense models."""
    moe = model.moe
    if moe is None:
        return None
    if not math.isfinite(zipf_s) or zipf_s < 0:
        raise ConfigError(f"expert popularity exponent must be >= 0, got {zipf_s}")
    e, k = moe.num_experts, moe.experts_per_token
    w = 1.0 / np.arange(1, e + 1, dtype=float) ** zipf_s
    q = np.zeros(e)
    free = np.ones(e, dtype=bool)
    budget = float(k)
    for _ in range(e):                      # water-filling: cap at 1, redistribute the rest
        trial = budget * w[free] / w[free].sum()
        if (trial <= 1.0 + 1e-12).all():
            q[free] = trial
            break
        over = np.flatnonzero(free)[trial > 1.0]
        q[over] = 1.0
        free[over] = False
        budget = k - q[~free].sum()
    return np.minimum(q, 1.0)


def _touched(q: np.ndarray, tokens: float) -> np.ndarray:
    """Probability each expert is used by at least one of ``tokens`` tokens."""
    return 1.0 - (1.0 - q) ** tokens


def build_items(model: Model, precision: Precision, workload: Workload,
                expert_zipf_s: float = 0.0,
                prefill_chunk_tokens: int | None = DEFAULT_PREFILL_CHUNK) -> tuple[Item, ...]:
    """The placeable items of a scenario (see the module docstring). Stored weight bytes sum to
    :func:`~llmpara_core.memory.weight_bytes`; KV items to the cache at full context."""
    wl, b = workload, workload.batch
    lo, hi = _decode_range(wl)
    mean_ctx = (lo + hi) / 2.0
    dec = forward_ops(model, precision, b, 1, hi, wl.flash_attention)
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    act = max(_prefill_activation_bytes(model, precision, wl, prefill_chunk_tokens),
              activation_peak_bytes(dec))
    items: list[Item] = [Item("activations", "activations", act, 1.0, order=-1)]
    layers = _layer_indices(model)
    q = expert_selection_probs(model, expert_zipf_s)
    h, eb = model.hidden_size, precision.weight_embed_bits
    order = 0

    def add(**kw):
        nonlocal order
        items.append(Item(order=order, **kw))
        order += 1

    # Tables that are only gathered. A tied table is the LM head's (its reads go there); a
    # learned position table of unknown size is read from the token table's tier.
    table_ops = ["embedding"] if model.tie_word_embeddings else []
    pos_rows = model.max_position_embeddings or 0
    if model.position is PositionKind.LEARNED and pos_rows == 0:
        table_ops.append("position_embedding")
    for o in dec:
        if o.group != "model" or o.kind is not OpKind.EMBEDDING:
            continue
        if o.name == "embedding":
            if model.tie_word_embeddings:
                continue
            rows = model.vocab_size
            ops = ("embedding", *[x for x in table_ops if x == "position_embedding"])
        elif pos_rows:
            rows, ops = pos_rows, (o.name,)
        else:
            continue
        stored = bits_to_bytes(rows * h, eb)
        add(key=o.name, category="embedding", stored_bytes=stored,
            read_density=o.weight_bytes / stored, ops=ops)

    by_group: dict[str, list[Operator]] = {}
    for o in dec:
        if o.group != "model":
            by_group.setdefault(o.group, []).append(o)
    per_layer: dict[int, list[tuple[str, Operator]]] = {}
    for g, ops in by_group.items():
        for i in layers[g]:
            per_layer[i] = [(g, o) for o in ops]
    touched_b = (model.moe.expected_active_experts(b) if model.moe is not None else 0.0)
    for i in range(model.num_hidden_layers):
        expert_ops: list[Operator] = []
        for g, o in per_layer[i]:
            if o.weight_bytes <= 0:
                continue
            if o.kind is OpKind.MOE_EXPERT:
                expert_ops.append(o)
                continue
            # MLA's absorbed decode matrices are the halves of prefill's kv_b_proj
            ops = (o.name, "kv_b_proj") if o.name in ("mla_q_absorb", "mla_v_absorb") else (
                o.name,)
            add(key=f"layer {i} · {o.name}", category=_KIND_CATEGORY[o.kind],
                stored_bytes=o.weight_bytes, read_density=1.0, layer=i, group=g, ops=ops)
        if expert_ops:
            g = per_layer[i][0][0]
            per_expert = sum(o.weight_bytes for o in expert_ops) / touched_b
            dens = _touched(q, b)
            names = tuple(o.name for o in expert_ops)
            if expert_zipf_s == 0:           # all experts alike: one item for the layer's E
                add(key=f"layer {i} · routed experts", category="moe_expert",
                    stored_bytes=per_expert * len(q), read_density=float(dens[0]), layer=i,
                    group=g, ops=names)
                continue
            for e in range(model.moe.num_experts):
                add(key=f"layer {i} · expert #{e}", category="moe_expert",
                    stored_bytes=per_expert, read_density=float(dens[e]), layer=i, expert=e,
                    group=g, ops=names)
    for o in dec:
        if o.group == "model" and o.name == "final_norm" and o.weight_bytes > 0:
            add(key="final_norm", category="norm", stored_bytes=o.weight_bytes,
                read_density=1.0, ops=(o.name,))
    lm = next(o for o in dec if o.kind is OpKind.LM_HEAD)
    lm_ops = ("lm_head", *table_ops) if model.tie_word_embeddings else ("lm_head",)
    lm_dens = 1.0 + (b / model.vocab_size if model.tie_word_embeddings else 0.0)
    add(key="lm_head" + (" (tied embedding)" if model.tie_word_embeddings else ""),
        category="lm_head", stored_bytes=lm.weight_bytes, read_density=lm_dens, ops=lm_ops)

    total_w = weight_bytes(model, precision)
    placed_w = sum(it.stored_bytes for it in items if it.category in WEIGHT_CATEGORIES)
    if total_w - placed_w > 1e-9 * total_w:   # e.g. attention sinks: stored, never streamed
        add(key="other weights", category="other", stored_bytes=total_w - placed_w,
            read_density=0.0)

    kv_tok = bits_to_bytes(model.kv_cache_elements_per_token_per_layer(), precision.kv_bits)
    from .model import LayerKind
    for i in range(model.num_hidden_layers):
        kind = LayerKind(model.layer_is_sliding(i), model.layer_is_moe(i))
        full = model.cached_tokens(kind, wl.max_context)
        if full <= 0:
            continue
        mean_read = min(model.cached_tokens(kind, int(round(mean_ctx))), full)
        items.append(Item(f"layer {i} · kv_cache", "kv_cache", b * full * kv_tok,
                          mean_read / full, layer=i, group=kind.label, order=10**7 + i))
    return tuple(items)


def _prefill_activation_bytes(model: Model, precision: Precision, wl: Workload,
                              chunk: int | None) -> float:
    """Largest live activation set of prefill. With chunked prefill (``chunk`` tokens per pass,
    as serving engines do) a pass holds whole prompts of several sequences, or one chunk of a
    long prompt attending to its whole context (the last chunk is the largest)."""
    s, b = wl.prompt_len, wl.batch
    if not s:
        return 0.0
    logits = s if wl.logits_all_tokens else 1
    if chunk is None or b * s <= chunk:
        ops = forward_ops(model, precision, b, s, s, wl.flash_attention, logits)
    elif s <= chunk:
        ops = forward_ops(model, precision, chunk // s, s, s, wl.flash_attention, logits)
    else:
        ops = forward_ops(model, precision, 1, chunk, s, wl.flash_attention, min(logits, chunk))
    return activation_peak_bytes(ops)


def _fill(sizes: np.ndarray, free: np.ndarray, tier_order: list[int]) -> tuple[np.ndarray,
                                                                                np.ndarray]:
    """Lay ``sizes`` (in order) byte-exactly into the tiers of ``tier_order`` (in order).
    Returns (bytes per item per tier, bytes left over per item); updates nothing in place."""
    n, nt = len(sizes), len(free)
    out = np.zeros((n, nt))
    if n == 0:
        return out, np.zeros(0)
    end = np.cumsum(sizes)
    start = end - sizes
    bound = 0.0
    for t in tier_order:
        cap = max(0.0, float(free[t]))
        lo_b, hi_b = bound, bound + cap
        out[:, t] = np.clip(np.minimum(end, hi_b) - np.maximum(start, lo_b), 0.0, None)
        bound = hi_b
    left = np.clip(end - np.maximum(start, bound), 0.0, None)
    left = np.where(left <= _CAP_RTOL * np.maximum(sizes, 1.0), 0.0, left)
    return out, left


def _select(items: tuple[Item, ...], selector: str) -> list[int]:
    """Indices of the items a pin selector names: a category (``attention``, ``lm_head``,
    ``kv_cache``, ...), ``layers:A-B`` / ``layer:N``, ``CATEGORY@layers:A-B``, or an exact key."""
    sel = selector.strip()
    cat, _, rng = sel.partition("@")
    if cat.startswith(("layer:", "layers:")) and not rng:
        cat, rng = "", cat
    layers = None
    if rng:
        m = re.fullmatch(r"layers?:(\d+)(?:-(\d+))?", rng.strip())
        if not m:
            raise ConfigError(f"pin {selector!r}: layer range must look like layers:0-7")
        a = int(m.group(1))
        z = int(m.group(2)) if m.group(2) is not None else a
        layers = range(a, z + 1)
    cat = cat.strip()
    exact = [i for i, it in enumerate(items) if it.key == sel]
    if exact:
        return exact
    if cat and cat not in CATEGORY_RANK:
        raise ConfigError(f"pin {selector!r}: unknown selector; use a category "
                          f"({', '.join(CATEGORIES)}), layers:A-B, CATEGORY@layers:A-B or an "
                          f"item key such as 'layer 0 · q_proj'")
    out = [i for i, it in enumerate(items)
           if (not cat or it.category == cat) and (layers is None or it.layer in layers)]
    if not out:
        raise ConfigError(f"pin {selector!r} matches no item of this model")
    return out


def _tier_index(tiers: tuple[MemoryTier, ...], name: str) -> int:
    for i, t in enumerate(tiers):
        if t.name.strip().lower() == str(name).strip().lower():
            return i
    raise ConfigError(f"unknown tier {name!r}; tiers are {', '.join(t.name for t in tiers)}")


def _gb(x: float) -> str:
    return f"{x / BYTES_PER_GB:.3g} GB"


def place(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
          strategy: str = "greedy", pins: dict[str, str] | tuple | None = None,
          expert_zipf_s: float = 0.0,
          prefill_chunk_tokens: int | None = DEFAULT_PREFILL_CHUNK) -> Placement:
    """Place a scenario's weights, KV cache and activations into ``hardware.tiers``.

    Raises InfeasibleError when something does not fit (message: what, how much, where).
    ``pins`` maps selectors (see :func:`_select`) to tier names."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    tiers = hardware.tiers
    items = build_items(model, precision, workload, expert_zipf_s, prefill_chunk_tokens)
    nt, n = len(tiers), len(items)
    cap = np.array([t.capacity_bytes for t in tiers], dtype=float)
    bw = np.array([t.bandwidth_bytes_per_s for t in tiers])
    fast = sorted(range(nt), key=lambda t: -bw[t])      # stable: ties keep the given order
    notes = []
    if fast != list(range(nt)):
        notes.append("tiers are not listed fastest first: greedy fills them in the listed "
                     "order (as the reference does), hot-first by bandwidth")
    if strategy == "greedy":
        fast = list(range(nt))
    placed = np.zeros((n, nt))
    done = np.zeros(n, dtype=bool)
    sizes = np.array([it.stored_bytes for it in items])
    pin_list = tuple(pins.items()) if isinstance(pins, dict) else tuple(pins or ())

    def put(idx: list[int], order: list[int], what: str, strict: bool = True):
        idx = [i for i in idx if not done[i]]
        if not idx:
            return
        free = cap - placed.sum(axis=0)
        got, left = _fill(sizes[idx], free, order)
        placed[idx] += got
        done[idx] = True
        if strict and left.sum() > 0:
            _raise_infeasible(items, sizes, cap, tiers, placed, workload, what, left.sum(),
                              [tiers[t].name for t in order])

    for selector, tier_name in pin_list:
        t = _tier_index(tiers, tier_name)
        put(_select(items, selector), [t], f"pin {selector} -> {tiers[t].name}")
    act = [i for i, it in enumerate(items) if it.category == "activations"]
    put(act, fast, "activations")
    if strategy == "greedy":
        _place_greedy(items, sizes, cap, placed, done, fast, put)
    else:
        rest = [i for i in range(n) if not done[i]]
        rest.sort(key=lambda i: (-round(items[i].read_density, 12),
                                 CATEGORY_RANK[items[i].category], items[i].order))
        put(rest, fast, "remaining data (hot-first)")
    if strategy == "pinned" and not pin_list:
        notes.append("no pins given: 'pinned' placed everything hot-first")
    tb = placed
    tb.setflags(write=False)
    return Placement(tiers, strategy, items, tb, pin_list, tuple(notes))


def _place_greedy(items, sizes, cap, placed, done, fast, put) -> None:
    """The reference's order (reference-tool §5.1), generalised to N tiers."""
    nt = len(cap)
    lower = fast[1:] + fast[:1] if nt > 1 else fast
    if nt > 1:
        free0 = cap[fast[0]] - placed[:, fast[0]].sum()
        layer_of = {}
        for i, it in enumerate(items):
            if it.layer is not None and it.category in WEIGHT_CATEGORIES and not done[i]:
                layer_of.setdefault(it.layer, []).append(i)
        for layer in sorted(layer_of):
            need = sizes[layer_of[layer]].sum()
            if need > free0 * (1 + _CAP_RTOL):
                break
            put(layer_of[layer], [fast[0]], f"layer {layer} (whole, fastest tier)")
            free0 -= need
    kv = [i for i, it in enumerate(items) if it.category == "kv_cache"]
    put(kv, lower, "KV cache")
    rest = sorted((i for i in range(len(items)) if not done[i]), key=lambda i: items[i].order)
    put(rest, lower, "weights")


def _raise_infeasible(items, sizes, cap, tiers, placed, workload, what, short, tier_names):
    need = {"weights": 0.0, "KV cache": 0.0, "activations": 0.0}
    for it in items:
        k = ("KV cache" if it.category == "kv_cache" else
             "activations" if it.category == "activations" else "weights")
        need[k] += it.stored_bytes
    total = sum(need.values())
    tiers_txt = ", ".join(f"{t.name} {_gb(t.capacity_bytes)}" for t in tiers)
    parts = ", ".join(f"{k} {_gb(v)}" for k, v in need.items())
    if total > cap.sum() * (1 + _CAP_RTOL):
        raise InfeasibleError(
            f"does not fit: needs {_gb(total)} ({parts}; KV at {workload.max_context} tokens × "
            f"batch {workload.batch}) but the tiers hold {_gb(cap.sum())} ({tiers_txt})")
    raise InfeasibleError(
        f"{what}: {_gb(short)} does not fit in {', '.join(tier_names)} "
        f"(needs {_gb(total)} in all: {parts}; tiers: {tiers_txt})")


# ---- attribution of operator bytes to tiers ------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Index:
    """Tier shares per (group, op) of weight reads (summing to 1), expert fractions per group
    (E x N, summed over the group's layers), KV fractions per group, activation fractions."""
    weights: dict
    experts: dict            # group -> (E x N) fractions summed over the group's layers
    kv: dict
    act: np.ndarray
    q: np.ndarray | None
    zipf_s: float


def _index(placement: Placement, model: Model, expert_zipf_s: float) -> _Index:
    nt = len(placement.tiers)
    frac = placement.fractions
    weights: dict = {}
    experts: dict = {}
    kv: dict = {}
    act = np.zeros(nt)
    e_count = model.moe.num_experts if model.moe is not None else 0
    for it, f in zip(placement.items, frac):
        if it.category == "activations":
            act = act + f
        elif it.category == "kv_cache":
            kv[it.group] = kv.get(it.group, np.zeros(nt)) + f
        elif it.category == "moe_expert":
            m = experts.setdefault(it.group, np.zeros((e_count, nt)))
            if it.expert is None:            # a whole layer's experts (uniform routing)
                m += f
            else:
                m[it.expert] += f
        else:
            for name in it.ops:
                key = (it.group, name)
                weights[key] = weights.get(key, np.zeros(nt)) + f * it.stored_bytes
    for key, v in weights.items():       # byte-weighted share of each tier, summing to 1
        total = v.sum()
        weights[key] = v / total if total > 0 else np.eye(nt)[0]
    return _Index(weights, experts, kv, act, expert_selection_probs(model, expert_zipf_s),
                  expert_zipf_s)


def _attribute(op: Operator, idx: _Index, model: Model, tokens: float, nt: int):
    """Bytes of ``op`` (all ``count`` executions) per tier, split as (weights, kv, act), and a
    boolean mask of tiers read by data-dependent accesses."""
    n = op.count
    w = np.zeros(nt)
    dep = np.zeros(nt, dtype=bool)
    if op.weight_bytes > 0:
        if op.kind is OpKind.MOE_EXPERT:
            m = idx.experts[op.group]
            per_expert = op.weight_bytes / model.moe.expected_active_experts(tokens)
            w = per_expert * (_touched(idx.q, tokens) @ m)
            dep = w > 0
        else:
            f = idx.weights.get((op.group, op.name))
            if f is None:
                raise InfeasibleError(f"internal: no placement for {op.group}/{op.name}")
            w = op.weight_bytes * n * f
            if op.kind is OpKind.EMBEDDING:
                dep = w > 0
    kv_b = (op.kv_read_bytes + op.kv_write_bytes) * n
    kv = np.zeros(nt)
    if kv_b > 0:
        f = idx.kv.get(op.group)
        if f is None or f.sum() <= 0:
            raise InfeasibleError(f"internal: no KV placement for group {op.group}")
        kv = kv_b * f / f.sum()
    act_b = (op.act_read_bytes + op.act_write_bytes) * n
    a = act_b * idx.act / idx.act.sum() if act_b > 0 else np.zeros(nt)
    return w, kv, a, dep


# ---- evaluation ----------------------------------------------------------------------------

@dataclass(frozen=True)
class TierOpRow:
    """One decode operator, mean per step over the generated tokens (all ``count``
    executions). ``tier_bytes`` per tier; times in seconds at ideal rates, plus the estimated
    total time."""
    name: str
    kind: OpKind
    group: str
    count: int
    flops: float
    tier_bytes: tuple[float, ...]
    weight_tier_bytes: tuple[float, ...]
    compute_s: float
    memory_s: float
    latency_s: float
    ideal_s: float
    estimated_s: float

    @property
    def memory_bytes(self) -> float:
        return sum(self.tier_bytes)

    @property
    def effective_bandwidth_bytes_per_s(self) -> float | None:
        """Bytes / ideal memory time: the harmonic mix of the tiers it reads."""
        return self.memory_bytes / self.memory_s if self.memory_s > 0 else None

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"


@dataclass(frozen=True)
class TierTiming:
    """Decode (and prefill) timing at one set of rates. ``tier_memory_s`` is each tier's
    streaming time per decode step (bytes_t / bw_t summed over operators), ``compute_s`` the
    compute time per step; ``tpot_s`` the step time after overlap, latency and overhead."""
    tpot_s: float
    decode_tokens_per_s: float        # per sequence, 1 / TPOT
    throughput_tokens_per_s: float    # aggregate over the batch, batch / TPOT
    ttft_s: float
    e2e_latency_s: float
    compute_s: float
    tier_memory_s: tuple[float, ...]
    latency_s: float
    overhead_s: float
    compute_bound_share: float        # share of step time in compute-bound operators


@dataclass(frozen=True)
class TierEnergy:
    """Energy per generated token [J] (decode), by tier and source."""
    tier_j: tuple[float, ...]
    memory_j: float
    compute_j: float
    static_j: float | None
    total_j: float
    assumed_tiers: tuple[str, ...] = ()   # tiers without their own pJ/B (class default used)


@dataclass(frozen=True, eq=False)
class HeteroResult:
    model: Model
    hardware: Hardware
    precision: Precision
    workload: Workload
    placement: Placement
    overlap: str
    prefetch: bool
    expert_zipf_s: float
    rows: tuple[TierOpRow, ...]
    tier_bytes_per_step: tuple[float, ...]          # mean decode step, all kinds
    tier_weight_bytes_per_step: tuple[float, ...]
    tier_kv_bytes_per_step: tuple[float, ...]
    tier_act_bytes_per_step: tuple[float, ...]
    flops_per_step: float
    ideal: TierTiming
    estimated: TierTiming
    energy: TierEnergy
    notes: tuple[str, ...] = field(default=())

    @property
    def tiers(self) -> tuple[MemoryTier, ...]:
        return self.placement.tiers

    @property
    def decode_tokens_per_s(self) -> float:
        """Estimated decode tokens/s per sequence (1 / TPOT)."""
        return self.estimated.decode_tokens_per_s


def _decode_range(wl: Workload) -> tuple[int, int]:
    first, last = wl.decode_contexts
    if last >= first:
        return first, last
    return wl.prompt_len + 1, wl.prompt_len + 1


def _rates(hardware: Hardware, precision: Precision, estimated: bool,
           efficiency: Efficiency | None):
    r = rates(hardware, precision.compute_dtype, estimated, efficiency)
    eff = (efficiency or hardware.effective_efficiency) if estimated else None
    bw = np.array([t.bandwidth_bytes_per_s for t in hardware.tiers])
    if eff is not None:
        bw = bw * eff.memory
    return r, bw


def evaluate(placement: Placement, model: Model, hardware: Hardware, precision: Precision,
             workload: Workload, overlap: str = "operator", prefetch: bool = True,
             expert_zipf_s: float = 0.0, efficiency: Efficiency | None = None) -> HeteroResult:
    """Decode (and prefill) time, throughput and energy of a given placement."""
    if overlap not in OVERLAPS:
        raise ConfigError(f"overlap must be one of {', '.join(OVERLAPS)}, got {overlap!r}")
    tiers = placement.tiers
    if tuple(tiers) != tuple(hardware.tiers):
        raise ConfigError("placement was made for different memory tiers")
    nt = len(tiers)
    wl, b = workload, workload.batch
    idx = _index(placement, model, expert_zipf_s)
    lat = np.array([t.latency_s or 0.0 for t in tiers])
    notes = list(placement.notes)
    unknown_lat = [t.name for t in tiers if t.latency_s is None]
    if unknown_lat and nt > 1:
        notes.append(f"latency unknown for {', '.join(unknown_lat)}: taken as 0")
    ri, bwi = _rates(hardware, precision, False, None)
    re_, bwe = _rates(hardware, precision, True, efficiency)
    if ri.dtype_used is not precision.compute_dtype:
        notes.append(f"{hardware.name} has no {precision.compute_dtype.value} peak; used its "
                     f"{ri.dtype_used.value} peak")

    def op_parts(o: Operator, tokens: float):
        w, kv, a, dep = _attribute(o, idx, model, tokens, nt)
        tb = w + kv + a
        touched = tb > 0 if not prefetch else dep
        return tb, w, kv, a, _latency(lat, touched) * o.count

    lo, hi = _decode_range(wl)
    steps_eval = hi - lo + 1
    acc: dict[int, list] = {}
    tot = {"ideal": 0.0, "est": 0.0}
    step_u = {"ideal": [], "est": []}      # per segment (u0, u1, v0, v1, n, const)
    sums = dict(tb=np.zeros(nt), w=np.zeros(nt), kv=np.zeros(nt), a=np.zeros(nt), flops=0.0,
                lat=0.0, ovh=0.0, cb_i=0.0, cb_e=0.0)
    for a_, z_ in decode_segments(model, lo, hi):
        n = z_ - a_ + 1
        ops_a = forward_ops(model, precision, b, 1, a_, wl.flash_attention)
        ops_z = forward_ops(model, precision, b, 1, z_, wl.flash_attention) if z_ > a_ else ops_a
        seg = {"ideal": [0.0, 0.0, 0.0, 0.0, 0.0], "est": [0.0, 0.0, 0.0, 0.0, 0.0]}
        for i, (oa, oz) in enumerate(zip(ops_a, ops_z)):
            pa, pz = op_parts(oa, b), op_parts(oz, b)
            fa, fz = oa.flops * oa.count, oz.flops * oz.count
            latency = pa[4]
            row = acc.setdefault(i, [oa, 0.0, np.zeros(nt), np.zeros(nt), 0.0, 0.0, 0.0, 0.0,
                                     0.0])
            mean = lambda x, y: n * (x + y) / 2.0   # noqa: E731  (arithmetic series)
            row[1] += mean(fa, fz)
            row[2] = row[2] + mean(pa[0], pz[0])
            row[3] = row[3] + mean(pa[1], pz[1])
            for key, r, bw, slot in (("ideal", ri, bwi, 6), ("est", re_, bwe, 7)):
                u0, u1 = fa / r.flops_per_s, fz / r.flops_per_s
                v0, v1 = float((pa[0] / bw).sum()), float((pz[0] / bw).sum())
                ovh = oa.count * r.kernel_overhead_s if key == "est" else 0.0
                t_op = _sum_max_affine(u0, u1, v0, v1, n) + n * (latency + ovh)
                row[slot] += t_op
                tot[key] += t_op
                s = seg[key]
                s[0] += u0; s[1] += u1; s[2] += v0; s[3] += v1; s[4] += latency + ovh  # noqa: E702
                if key == "ideal":
                    row[4] += mean(u0, u1)
                    row[5] += mean(v0, v1)
                    if (u0 + u1) > (v0 + v1):
                        sums["cb_i"] += t_op
                else:
                    if (u0 + u1) > (v0 + v1):
                        sums["cb_e"] += t_op
            row[8] += n * latency
            sums["tb"] += mean(pa[0], pz[0])
            sums["w"] += mean(pa[1], pz[1])
            sums["kv"] += mean(pa[2], pz[2])
            sums["a"] += mean(pa[3], pz[3])
            sums["flops"] += mean(fa, fz)
            sums["lat"] += n * latency
            sums["ovh"] += n * oa.count * re_.kernel_overhead_s
        for key in ("ideal", "est"):
            step_u[key].append((*seg[key], n))
    if overlap == "step":
        for key in ("ideal", "est"):
            tot[key] = sum(_sum_max_affine(u0, u1, v0, v1, n) + n * c
                           for u0, u1, v0, v1, c, n in step_u[key])
    k = steps_eval
    rows = tuple(
        TierOpRow(o.name, o.kind, o.group, o.count, fl / k, tuple(tb / k), tuple(wb / k),
                  cs / k, ms / k, lt / k, ti / k, te / k)
        for o, fl, tb, wb, cs, ms, ti, te, lt in acc.values())

    ttft_i, ttft_e = _prefill_time(model, precision, wl, idx, lat, prefetch, ri, bwi, re_, bwe,
                                   nt, overlap)
    steps = wl.decode_steps
    tier_b = sums["tb"] / k

    def timing(key, r, bw, ttft, cb):
        tpot = tot[key] / k
        ttft = ttft if wl.prompt_len else tpot
        return TierTiming(
            tpot_s=tpot,
            decode_tokens_per_s=1.0 / tpot if tpot > 0 else math.inf,
            throughput_tokens_per_s=b / tpot if tpot > 0 else math.inf,
            ttft_s=ttft, e2e_latency_s=ttft + steps * tpot,
            compute_s=sums["flops"] / k / r.flops_per_s,
            tier_memory_s=tuple(tier_b / bw),
            latency_s=sums["lat"] / k,
            overhead_s=sums["ovh"] / k if key == "est" else 0.0,
            compute_bound_share=(cb / tot[key]) if tot[key] > 0 else 0.0)

    ideal = timing("ideal", ri, bwi, ttft_i, sums["cb_i"])
    est = timing("est", re_, bwe, ttft_e, sums["cb_e"])
    energy = _energy(hardware, tier_b, sums["flops"] / k, est.tpot_s, b)
    if energy.assumed_tiers:
        notes.append(f"no energy per byte for {', '.join(energy.assumed_tiers)}: used the "
                     f"{hardware.hw_class.value} class default")
    return HeteroResult(model, hardware, precision, wl, placement, overlap, prefetch,
                        expert_zipf_s, rows, tuple(tier_b), tuple(sums["w"] / k),
                        tuple(sums["kv"] / k), tuple(sums["a"] / k), sums["flops"] / k,
                        ideal, est, energy, tuple(notes))


def _latency(lat: np.ndarray, touched: np.ndarray) -> float:
    """Exposed access latency of one operator execution: its tiers are accessed concurrently,
    so the slowest first byte counts (max, not sum)."""
    return float(lat[touched].max()) if touched.any() else 0.0


def _prefill_time(model, precision, wl, idx, lat, prefetch, ri, bwi, re_, bwe, nt, overlap):
    """TTFT of the prompt with the same attribution (ideal, estimated)."""
    if not wl.prompt_len:
        return 0.0, 0.0
    logits = wl.prompt_len if wl.logits_all_tokens else 1
    ops = forward_ops(model, precision, wl.batch, wl.prompt_len, wl.prompt_len,
                      wl.flash_attention, logits)
    tokens = wl.batch * wl.prompt_len
    out = []
    for r, bw, est in ((ri, bwi, False), (re_, bwe, True)):
        total = comp = mem = const = 0.0
        for o in ops:
            w, kv, a, dep = _attribute(o, idx, model, tokens, nt)
            tb = w + kv + a
            touched = tb > 0 if not prefetch else dep
            c = o.flops * o.count / r.flops_per_s
            m = float((tb / bw).sum())
            k = _latency(lat, touched) * o.count + (o.count * r.kernel_overhead_s
                                                          if est else 0.0)
            total += max(c, m) + k
            comp += c
            mem += m
            const += k
        out.append(total if overlap == "operator" else max(comp, mem) + const)
    return out[0], out[1]


def _energy(hardware: Hardware, tier_bytes: np.ndarray, flops: float, tpot_s: float,
            batch: int) -> TierEnergy:
    default = hardware.defaults.memory_energy_j_per_byte
    assumed = tuple(t.name for t in hardware.tiers if t.energy_j_per_byte is None)
    e = np.array([t.energy_j_per_byte if t.energy_j_per_byte is not None else default
                  for t in hardware.tiers])
    tier_j = tier_bytes * e / batch
    compute_j = flops * hardware.defaults.compute_energy_j_per_flop / batch
    idle = hardware.effective_idle_w
    static = idle * tpot_s / batch if idle is not None else None
    mem = float(tier_j.sum())
    return TierEnergy(tuple(tier_j), mem, compute_j, static,
                      mem + compute_j + (static or 0.0), assumed)


def hetero(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
           strategy: str = "greedy", pins: dict[str, str] | None = None,
           overlap: str = "operator", prefetch: bool = True, expert_zipf_s: float = 0.0,
           efficiency: Efficiency | None = None,
           prefill_chunk_tokens: int | None = DEFAULT_PREFILL_CHUNK) -> HeteroResult:
    """Place the scenario on the hardware's tiers and evaluate decode. Raises InfeasibleError
    when it does not fit."""
    p = place(model, hardware, precision, workload, strategy, pins, expert_zipf_s,
              prefill_chunk_tokens)
    return evaluate(p, model, hardware, precision, workload, overlap, prefetch, expert_zipf_s,
                    efficiency)


# ---- sweeps --------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class SweepPoint:
    """One point of a tier-migration or batch sweep. ``result`` is None when infeasible."""
    label: str
    weight_bits: float
    kv_bits: float
    batch: int
    feasible: bool
    reason: str
    result: HeteroResult | None

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


def tier_migration(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                   bits: tuple[float, ...] = MIGRATION_BITS, kv_follows: bool = True,
                   **kw) -> tuple[SweepPoint, ...]:
    """Sweep weight (and KV) precision: where the model lands and tokens/s at each step."""
    out = []
    for nb in bits:
        p = quantised(precision, nb, kv_follows)
        try:
            r = hetero(model, hardware, p, workload, **kw)
            out.append(SweepPoint(p.name, nb, p.kv_bits, workload.batch, True, "", r))
        except InfeasibleError as e:
            out.append(SweepPoint(p.name, nb, p.kv_bits, workload.batch, False, str(e), None))
    return tuple(out)


def batch_sweep(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128), **kw
                ) -> tuple[SweepPoint, ...]:
    """Decode at several batch sizes, re-placing each (the KV cache grows with the batch)."""
    out = []
    for bsz in batches:
        wl = replace(workload, batch=int(bsz))
        try:
            r = hetero(model, hardware, precision, wl, **kw)
            out.append(SweepPoint(f"b={bsz}", precision.weight_ffn_bits, precision.kv_bits,
                                  int(bsz), True, "", r))
        except InfeasibleError as e:
            out.append(SweepPoint(f"b={bsz}", precision.weight_ffn_bits, precision.kv_bits,
                                  int(bsz), False, str(e), None))
    return tuple(out)


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


def reference_estimate(model: Model, hardware: Hardware, precision: Precision,
                       workload: Workload) -> ReferenceEstimate:
    """Reproduce the reference's decode throughput, defects included (for comparison only):
    its sizes (§5.1: no norms, embedding + LM head counted twice over V*h, activations
    max(b*n*s^2, b*s*I), KV at s + gen), its greedy placement, and bytes/token = b * L *
    layer weights (no LM head, no KV reads, multiplied by the batch)."""
    h, L, n = model.hidden_size, model.num_hidden_layers, model.num_attention_heads
    d = h // n
    hkv = model.num_key_value_heads * d
    wa, wf = precision.weight_attn_bits, precision.weight_ffn_bits
    b, s = workload.batch, workload.prompt_len
    moe = model.moe
    inter = moe.expert_intermediate_size if moe is not None else model.intermediate_size
    mats = 3 if model.ffn_kind.value == "gated" else 2
    experts_all = moe.num_experts if moe is not None else 1
    experts_active = moe.experts_per_token if moe is not None else 1
    attn = ((h * h + 2 * h * hkv) * wa + h * h * wa) / 8.0
    w_layer = attn + mats * inter * h * experts_all * wf / 8.0 + 2.0 * h * precision.activation_bits / 8.0
    w_active = attn + mats * inter * h * experts_active * wf / 8.0
    w_total = L * w_layer + 2.0 * model.vocab_size * h * wa / 8.0
    kv = L * model.num_key_value_heads * d * 2 * precision.kv_bits / 8.0 * (s + workload.gen_len) * b
    act = max(b * n * s * s, b * s * model.intermediate_size) * precision.activation_bits / 8.0
    tiers = hardware.tiers
    order = list(range(len(tiers)))     # the reference's SRAM, DRAM, Flash: listed order
    free = [t.capacity_bytes for t in tiers]
    wt = [0.0] * len(tiers)
    f0 = order[0]
    free[f0] -= min(act, free[f0])
    layers0 = min(L, int(max(0.0, free[f0]) // w_layer)) if len(tiers) > 1 else 0
    wt[f0] = layers0 * w_layer
    free[f0] -= wt[f0]
    rest_w = w_total - wt[f0]
    lower = order[1:] if len(tiers) > 1 else order
    kv_left = kv
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
    per_token = b * L * w_active
    return ReferenceEstimate(tiers[bottleneck].bandwidth_bytes_per_s / per_token,
                             tiers[bottleneck].name, per_token, tuple(wt),
                             sum(wt[t] for t in order[2:]))


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
