"""Placement of a scenario's weights, KV cache and activations into ordered memory tiers
(greedy / hot-first / pinned). The model, the strategies and their references are described
in :mod:`llmpara_core.tiers`, which evaluates a placement."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError, InfeasibleError
from ..forward import forward_ops
from ..hardware import Hardware, MemoryTier
from ..limits import MAX_TIER_ITEMS, check_float
from ..memory import activation_peak_bytes, weight_bytes
from ..model import Model, PositionKind
from ..operators import OpKind, Operator
from ..precision import Precision
from ..units import BYTES_PER_GB, bits_to_bytes
from ..workload import Workload

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



def _decode_range(wl: Workload) -> tuple[int, int]:
    """Contexts of the first and last decode step (one step after the prompt when nothing is
    generated)."""
    first, last = wl.decode_contexts
    if last >= first:
        return first, last
    return wl.prompt_len + 1, wl.prompt_len + 1


# ---- items and placement -------------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    """One placeable piece of data.

    ``stored_bytes`` is its size; ``read_density`` the bytes read per decode step (at the mean
    context, batch of the workload) per stored byte, used for hot-first ordering and shown to
    the user. ``layer`` is the decoder layer (None for model-level items), ``expert`` the routed
    expert's popularity rank (0 = most used) when experts are placed one by one (skewed
    routing); with uniform routing one item holds all routed experts of a layer. ``group`` is
    the forward pass's layer-group label ("global/dense", ...) or "model"."""
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

    @property
    def weight_bytes(self) -> float:
        """All weight bytes stored, over every tier."""
        return float(self.weight_bytes_per_tier().sum())

    def category_bytes(self, category: str) -> float:
        """Stored bytes of one category over every tier (0 when absent)."""
        return float(sum(row.sum() for it, row in zip(self.items, self.tier_bytes)
                         if it.category == category))

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
    from ..model import LayerKind
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
    check_float("expert_zipf_s", zipf_s, "expert popularity exponent")
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


def _check_item_count(model: Model, expert_zipf_s: float) -> None:
    """Refuse a scenario whose placement would list more than ``MAX_TIER_ITEMS`` items (one per
    routed expert per MoE layer when experts differ in popularity), before building any."""
    if model.moe is None or expert_zipf_s == 0:
        return
    n = (model.num_hidden_layers - model.moe.first_dense_layers) * model.moe.num_experts
    if n > MAX_TIER_ITEMS:
        raise ConfigError(
            f"per-expert placement would list {n:,} experts (MoE layers x experts), more than "
            f"{MAX_TIER_ITEMS:,}; use a popularity exponent of 0 (experts alike) or fewer "
            f"experts or layers")


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
    act = max(_prefill_activation_bytes(model, precision, wl, prefill_chunk_tokens),
              activation_peak_bytes(dec))
    items: list[Item] = [Item("activations", "activations", act, 1.0, order=-1)]
    layers = _layer_indices(model)
    _check_item_count(model, expert_zipf_s)
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
    from ..model import LayerKind
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
        layers = (a, z)          # compared arithmetically: a huge range costs nothing
    cat = cat.strip()
    exact = [i for i, it in enumerate(items) if it.key == sel]
    if exact:
        return exact
    if cat and cat not in CATEGORY_RANK:
        raise ConfigError(f"pin {selector!r}: unknown selector; use a category "
                          f"({', '.join(CATEGORIES)}), layers:A-B, CATEGORY@layers:A-B or an "
                          f"item key such as 'layer 0 · q_proj'")
    out = [i for i, it in enumerate(items)
           if (not cat or it.category == cat) and (
               layers is None or (it.layer is not None and layers[0] <= it.layer <= layers[1]))]
    if not out:
        raise ConfigError(f"pin {selector!r} matches no item of this model")
    return out


def _check_tier_names(tiers: tuple[MemoryTier, ...]) -> None:
    """Pins and reports name tiers, so names must be unique (ignoring case and spaces)."""
    seen: dict[str, str] = {}
    for t in tiers:
        k = t.name.strip().lower()
        if k in seen:
            raise ConfigError(f"tier names must be unique: {seen[k]!r} and {t.name!r}")
        seen[k] = t.name


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
    _check_tier_names(tiers)
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
