"""Shareable links: the scenario's URL keys, how raw query strings are validated, and how a
scenario state is written back as a complete, versioned query string.

No Streamlit here, so encode -> decode can be tested as an identity.

Link format v=1, keys (every one is written by "Copy link", defaults included):

    model, hardware             preset slugs (names and aliases are accepted when reading)
    prec                        precision preset (FP16, BF16, W8A8, W4A16, Q4_0, ...)
    wbits                       bits of every weight tensor (like the CLI's --weight-bits)
    wattn, wffn, wemb           per-component weight bits: attention, FFN, embedding/LM head
    abits, kvbits               activation and KV cache bits
    dtype                       compute data type whose peak the matmuls use (fp16, fp8, ...)
    batch, prompt, gen          batch size, prompt tokens, generated tokens
    flash                       FlashAttention (1 or 0)
    fw                          inference stack whose efficiency profile the estimate uses:
                                a profile (llama.cpp, gpt-fast, vllm, tensorrt-llm, mlc, ...),
                                generic (the stack-agnostic class fit) or default (the
                                hardware class's default stack; "auto" is read as default).
                                "Copy link" spells the stack the default resolved to, so the
                                link keeps its numbers if a class's default changes; the
                                address bar keeps "default" (the sidebar follows the hardware)

Hardware overrides and edited model dimensions, written only when set (absent = the preset's
own figure):

    peak_fp32 .. peak_fp4       dense peak [TFLOP/s]
    bw [GB/s], cap [GB], tdp [W], price [USD]
    eff_compute, eff_memory     achievable fraction of peak compute / bandwidth (0..1]
    overhead_us                 fixed cost per kernel launch [us]
    a_hidden, a_layers, a_heads, a_kv, a_ffn, a_vocab, a_experts, a_topk, a_expert_ffn,
    a_shared, a_kv_rank, a_q_rank
                                model dimensions (integers) replacing the preset's (MoE
                                fields on a dense model make it MoE; MLA ranks need MLA)
    a_rope_theta, a_rope_scale  RoPE base and scaling factor (numbers)
    a_ffn_kind                  gated | plain;   a_norm   rmsnorm | layernorm

Reading precedence for weight bits: the preset's bits, then ``wbits`` (all weights), then the
per-component keys. Unknown keys are ignored; an invalid value falls back to the default and
produces a warning naming the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from llmpara_core.calibration import FRAMEWORKS, GENERIC
from llmpara_core.calibration.stacks import DEFAULT, DEFAULT_NAMES
from llmpara_core.precision import DType
from llmpara_core.limits import bound, FRACTION, HARDWARE, MODEL_INT, PRECISION, WORKLOAD_INT
from llmpara_core.units import BYTES_PER_GB, FLOPS_PER_TFLOP, S_PER_US

from .format import escape_md

FORMAT_VERSION = "1"
MAX_VALUE_CHARS = 120          # a longer value is never a valid one

# Workload and bit ranges of the sidebar widgets (batch: llmpara_core.limits; the core accepts
# longer sequences than the sidebar offers).
BATCH_RANGE = (int(WORKLOAD_INT["batch"].lo), int(WORKLOAD_INT["batch"].hi))
TOKENS_RANGE = (0, 10_000_000)
BITS_RANGE = (PRECISION["bits"].lo, PRECISION["bits"].hi)

DTYPES = tuple(d.value for d in DType)   # fp32 fp16 fp8 int8 int4 fp4
FRAMEWORK_OPTIONS = (DEFAULT, GENERIC, *FRAMEWORKS)
WEIGHT_COMPONENT_KEYS = ("wattn", "wffn", "wemb")


@dataclass(frozen=True)
class Override:
    """A hardware override: URL key, label with unit, bounds, and the factor to SI."""
    key: str
    label: str
    lo: float
    hi: float
    to_si: float
    lo_open: bool = True


def _hw_override(key: str, label: str, limit: str, to_si: float) -> Override:
    """An override whose bounds are ``llmpara_core.limits.HARDWARE[limit]`` in the key's unit."""
    b = bound(limit)
    return Override(key, label, b.lo / to_si, b.hi / to_si, to_si, lo_open=b.lo == 0)


# Factors to SI are the unit definitions of llmpara_core.units (TFLOP/s, GB/s, GB, us).
OVERRIDES: tuple[Override, ...] = (
    *(_hw_override(f"peak_{d}", f"Peak {d.upper()} (TFLOP/s)", "peak_flops_per_s",
                   FLOPS_PER_TFLOP) for d in DTYPES),
    _hw_override("bw", "Memory bandwidth (GB/s)", "bandwidth_bytes_per_s", BYTES_PER_GB),
    _hw_override("cap", "Memory capacity (GB)", "capacity_bytes", BYTES_PER_GB),
    _hw_override("tdp", "TDP (W)", "tdp_w", 1.0),
    Override("price", "Price (USD)", 0.0, HARDWARE["price_usd"].hi, 1.0, lo_open=False),
    Override("eff_compute", "Compute efficiency (0-1]", FRACTION["efficiency_fraction"].lo,
             1.0, 1.0, lo_open=False),
    Override("eff_memory", "Bandwidth efficiency (0-1]", FRACTION["efficiency_fraction"].lo,
             1.0, 1.0, lo_open=False),
    Override("overhead_us", "Kernel overhead (us)", 0.0, 1e6, S_PER_US, lo_open=False),
)
OVERRIDE_KEYS = tuple(o.key for o in OVERRIDES)


@dataclass(frozen=True)
class ArchEdit:
    """An edited model dimension: URL key, label, the Model / MoE field it sets; its range is
    the field's bound in ``llmpara_core.limits.MODEL_INT``."""
    key: str
    label: str
    field: str

    @property
    def range(self) -> tuple[int, int]:
        b = MODEL_INT[self.field]
        return int(b.lo), int(b.hi)


ARCH_EDITS: tuple[ArchEdit, ...] = (
    ArchEdit("a_hidden", "Hidden size", "hidden_size"),
    ArchEdit("a_layers", "Layers", "num_hidden_layers"),
    ArchEdit("a_heads", "Attention heads", "num_attention_heads"),
    ArchEdit("a_kv", "KV heads (GQA)", "num_key_value_heads"),
    ArchEdit("a_ffn", "FFN intermediate size", "intermediate_size"),
    ArchEdit("a_vocab", "Vocabulary size", "vocab_size"),
    ArchEdit("a_experts", "Experts (MoE)", "num_experts"),
    ArchEdit("a_topk", "Experts per token (MoE)", "experts_per_token"),
    ArchEdit("a_expert_ffn", "Expert FFN size (MoE)", "expert_intermediate_size"),
    ArchEdit("a_shared", "Shared expert FFN size (MoE)", "shared_intermediate_size"),
    ArchEdit("a_kv_rank", "KV latent rank (MLA)", "kv_lora_rank"),
    ArchEdit("a_q_rank", "Query latent rank (MLA)", "q_lora_rank"),
)
@dataclass(frozen=True)
class ArchChoice:
    """An edited architecture feature that is not an integer: a float in (lo, hi] or one of
    ``options`` (the core's enum values)."""
    key: str
    label: str
    field: str
    options: tuple[str, ...] = ()
    lo: float = 0.0
    hi: float = 0.0


ARCH_CHOICES: tuple[ArchChoice, ...] = (
    ArchChoice("a_rope_theta", "RoPE theta", "rope_theta", lo=0.0, hi=1e12),
    ArchChoice("a_rope_scale", "RoPE scaling factor", "rope_scaling_factor", lo=0.0, hi=1e4),
    ArchChoice("a_ffn_kind", "FFN", "ffn_kind", options=("gated", "plain")),
    ArchChoice("a_norm", "Norm", "norm_kind", options=("rmsnorm", "layernorm")),
)
ARCH_KEYS = tuple(a.key for a in ARCH_EDITS) + tuple(a.key for a in ARCH_CHOICES)
OPTIONAL_KEYS = OVERRIDE_KEYS + ARCH_KEYS
"""Scenario keys written only when set (absent = the preset's own value)."""

SCENARIO_KEYS = ("v", "model", "hardware", "prec", "wbits", *WEIGHT_COMPONENT_KEYS, "abits",
                 "kvbits", "dtype", "batch", "prompt", "gen", "flash", "fw", *OVERRIDE_KEYS,
                 *ARCH_KEYS)
"""Every URL key the shared sidebar owns. Page-local widgets must use other keys."""


@dataclass(frozen=True)
class Catalog:
    """What valid values are: resolvers for preset names (-> canonical value or None) and the
    precision presets' bits (prec name -> dict of bit fields and dtype)."""
    resolve_model: Callable[[str], str | None]
    resolve_hardware: Callable[[str], str | None]
    resolve_precision: Callable[[str], str | None]
    precision_bits: Callable[[str], dict]
    default_model: str
    default_hardware: str
    default_precision: str = "FP16"


def defaults(cat: Catalog) -> dict:
    """The scenario state when the URL says nothing."""
    state = {"v": FORMAT_VERSION, "model": cat.default_model, "hardware": cat.default_hardware,
             "prec": cat.default_precision, "batch": 1, "prompt": 2048, "gen": 256,
             "flash": True, "fw": DEFAULT}
    state.update(cat.precision_bits(cat.default_precision))
    state.update({k: None for k in OPTIONAL_KEYS})
    return state


def show_value(raw: str) -> str:
    """A raw URL value made safe to quote in a message: control characters visible, length
    capped, markdown and HTML escaped (the message is rendered as markdown)."""
    text = repr(str(raw))[1:-1]
    text = text if len(text) <= 40 else text[:37] + "..."
    return escape_md(text)


def parse_int(raw: str, lo: int, hi: int) -> int | None:
    """An integer in [lo, hi] from a URL value ("8", "8.0" and "1e3" accepted), else None."""
    try:
        v = float(raw)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v) or not v.is_integer() or not lo <= v <= hi:
        return None
    return int(v)


def parse_float(raw: str, lo: float, hi: float, lo_open: bool = False) -> float | None:
    """A finite number in [lo, hi] (or (lo, hi]) from a URL value, else None."""
    try:
        v = float(raw)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v) or v > hi or v < lo or (lo_open and v == lo):
        return None
    return v


def parse_bool(raw: str) -> bool | None:
    s = str(raw).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    return None


def _last(values) -> str:
    if isinstance(values, (list, tuple)):
        return str(values[-1]) if values else ""
    return str(values)


def repeat_warning(key: str, values) -> str | None:
    """The warning for a single-valued key given more than once (the last value is used; the
    others are dropped, and the visitor is told so), else None."""
    if not isinstance(values, (list, tuple)) or len(values) < 2:
        return None
    n = len(values)
    return (f"Link parameter `{key}` appears {n:,} times; using the last value "
            f"'{show_value(values[-1])}' and dropping the other {n - 1:,}.")


def parse_query(raw: Mapping[str, object], cat: Catalog) -> tuple[dict, list[str]]:
    """Validate a raw query mapping (value: str or list of str, last one wins) into a complete
    scenario state, and the warnings for every key that had to fall back to its default."""
    state = defaults(cat)
    warnings: list[str] = [w for k, v in raw.items() if k in SCENARIO_KEYS
                           for w in [repeat_warning(k, v)] if w]
    got = {k: _last(v) for k, v in raw.items() if k in SCENARIO_KEYS}

    def bad(key: str, why: str, fallback) -> None:
        shown = "(empty)" if fallback is None else fallback
        warnings.append(f"Link parameter `{key}`: {why}; using {shown}.")

    for key, value in list(got.items()):
        if len(value) > MAX_VALUE_CHARS:
            bad(key, "value too long", state.get(key))
            del got[key]

    if "v" in got and got["v"] != FORMAT_VERSION:
        warnings.append(f"Link format `v={show_value(got['v'])}` is not known to this version; "
                        f"reading the link as v={FORMAT_VERSION}.")
    for key, resolve, what in (("model", cat.resolve_model, "model preset"),
                               ("hardware", cat.resolve_hardware, "hardware preset")):
        if key in got:
            found = resolve(got[key])
            if found is None:
                bad(key, f"unknown {what} '{show_value(got[key])}'", state[key])
            else:
                state[key] = found
    if "prec" in got:
        found = cat.resolve_precision(got["prec"])
        if found is None:
            bad("prec", f"unknown precision preset '{show_value(got['prec'])}'", state["prec"])
        else:
            state["prec"] = found
    state.update(cat.precision_bits(state["prec"]))

    def read(key: str, parse: Callable[[str], object], expected: str, fallback=None,
             store: Callable[[object], None] | None = None) -> None:
        """Parse ``got[key]`` if present (an empty optional value means unset)."""
        if key not in got or (key in OPTIONAL_KEYS and got[key] == ""):
            return
        v = parse(got[key])
        if v is None:
            bad(key, f"'{show_value(got[key])}' is not {expected}",
                state[key] if fallback is None else fallback)
        elif store is not None:
            store(v)
        else:
            state[key] = v

    lo, hi = BITS_RANGE
    bits_text = f"a number of bits in [{lo:g}, {hi:g}]"
    read("wbits", lambda r: parse_float(r, lo, hi), bits_text, store=lambda v: state.update(
        {"wbits": v, **{k: v for k in WEIGHT_COMPONENT_KEYS}}))
    for key in (*WEIGHT_COMPONENT_KEYS, "abits", "kvbits"):
        read(key, lambda r: parse_float(r, lo, hi), bits_text)
    read("dtype", lambda r: (lambda d: d if d in DTYPES else None)(
        "fp16" if r.strip().lower() == "bf16" else r.strip().lower()),
        f"one of {', '.join(DTYPES)}")
    for key, (lo_i, hi_i) in (("batch", BATCH_RANGE), ("prompt", TOKENS_RANGE),
                              ("gen", TOKENS_RANGE)):
        read(key, lambda r, a=lo_i, b=hi_i: parse_int(r, a, b), f"an integer in [{lo_i}, {hi_i}]")
    if state["prompt"] + state["gen"] < 1:
        warnings.append("Link parameters `prompt` and `gen` are both 0; using gen=1.")
        state["gen"] = 1
    read("flash", parse_bool, "1 or 0", fallback=int(state["flash"]))
    read("fw", parse_stack, f"one of {', '.join(FRAMEWORK_OPTIONS)}")
    for o in OVERRIDES:
        bound = f"({o.lo:g}" if o.lo_open else f"[{o.lo:g}"
        read(o.key, lambda r, o=o: parse_float(r, o.lo, o.hi, o.lo_open),
             f"a number in {bound}, {o.hi:g}]", fallback="the preset's value")
    for a in ARCH_EDITS:
        lo_a, hi_a = a.range
        read(a.key, lambda r, lo_a=lo_a, hi_a=hi_a: parse_int(r, lo_a, hi_a),
             f"an integer in [{lo_a:,}, {hi_a:,}]", fallback="the preset's value")
    for c in ARCH_CHOICES:
        if c.options:
            read(c.key, lambda r, c=c: r.strip().lower() if r.strip().lower() in c.options
                 else None, f"one of {', '.join(c.options)}", fallback="the preset's value")
        else:
            read(c.key, lambda r, c=c: parse_float(r, c.lo, c.hi, lo_open=True),
                 f"a number in ({c.lo:g}, {c.hi:g}]", fallback="the preset's value")
    return state, warnings


def parse_stack(raw: str) -> str | None:
    """A ``fw`` value: a stack option ("auto" = "default"), else None."""
    key = raw.strip().lower()
    key = DEFAULT if key in DEFAULT_NAMES else key
    return key if key in FRAMEWORK_OPTIONS else None


def share_query(state: Mapping[str, object], resolved_stack: str | None) -> dict[str, str]:
    """``to_query(state)`` for "Copy link": ``fw=default`` spelled as the stack it resolved
    to (``resolved_stack``, e.g. "vllm"), so the link gives the same numbers after a class's
    default changes. ``resolved_stack`` None (no scenario) keeps the state's value."""
    out = to_query(state)
    if out.get("fw") == DEFAULT and resolved_stack:
        out["fw"] = resolved_stack
    return out


def format_number(v: float | int) -> str:
    """Shortest text that reads back as the same number ("16", "4.5", "0.001")."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    f = float(v)
    return str(int(f)) if f.is_integer() and abs(f) < 1e15 else repr(f)


def to_query(state: Mapping[str, object]) -> dict[str, str]:
    """The complete query of a scenario state, in a fixed key order; unset overrides omitted."""
    out: dict[str, str] = {"v": FORMAT_VERSION}
    for key in SCENARIO_KEYS[1:]:
        v = state.get(key)
        if v is None:
            continue
        out[key] = v if isinstance(v, str) else format_number(v)
    return out


def query_string(pairs: Iterable[tuple[str, str]]) -> str:
    from urllib.parse import urlencode
    return urlencode(list(pairs), doseq=False)
