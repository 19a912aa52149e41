"""Drafters for speculative decoding: a separate model, a self-drafting head (EAGLE-style or
DeepSeek MTP, derived from the target or of a given size), Medusa heads, n-gram lookup; the
draft presets; and the tokenizer compatibility check between a draft and its target."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from ..errors import ConfigError, require_float, require_int
from ..hardware import Hardware
from ..model import FFNKind, Model, count_params
from ..operators import OpKind, Operator, elementwise, linear
from ..precision import Precision
from ..units import bits_to_bytes

# The separate draft models the page and CLI offer first (presets/models/<slug>.toml); other
# presets marked ``draft = true`` follow, and any model preset or config.json can be a draft.
DRAFT_PRESETS = ("gpt2-small", "gpt2-xl", "phi-3-mini", "llama-3.2-1b", "llama-3.2-3b",
                 "qwen2.5-0.5b", "qwen2.5-1.5b", "llama-2-7b")


# Self-drafting head styles (``head_draft``).
HEAD_STYLES = ("eagle", "eagle3", "mtp")
# EAGLE-3's draft vocabulary: the released Llama-3.1-8B-Instruct EAGLE-3 head predicts over the
# 32,000 most frequent target tokens (config.json "draft_vocab_size": 32000, github SafeAILab/EAGLE
# and yuhuili/EAGLE3-LLaMA3.1-Instruct-8B on the Hugging Face Hub), not the target's 128,256.
EAGLE3_DRAFT_VOCAB = 32000


class DraftKind(Enum):
    """How draft tokens are produced."""
    MODEL = "model"      # a separate small model, gamma autoregressive passes
    HEAD = "head"        # EAGLE / DeepSeek-MTP style: decoder layer(s) on the target's features,
                         # gamma autoregressive passes, the target's embedding and LM head shared
    MEDUSA = "medusa"    # gamma parallel heads (ResBlock + own LM head) in one pass per step
    NGRAM = "ngram"      # prompt lookup / n-gram: no network, no cost


@dataclass(frozen=True)
class Draft:
    """The drafter. ``precision``/``hardware`` None mean the target's (same device: draft and
    target share its memory and run one after the other)."""
    kind: DraftKind
    model: Model | None = None
    precision: Precision | None = None
    hardware: Hardware | None = None
    shares_lm_head: bool = False     # HEAD: the LM head read each step is the target's

    def __post_init__(self):
        if not isinstance(self.kind, DraftKind):
            raise ConfigError(f"draft kind must be a DraftKind, got {self.kind!r}")
        if self.kind in (DraftKind.MODEL, DraftKind.HEAD) and self.model is None:
            raise ConfigError(f"a {self.kind.value} draft needs a model")

    @property
    def own_params(self) -> float | None:
        """The draft's own parameters: a model's total; a head's without the embedding (and
        LM head) it shares with the target; None for Medusa heads and n-gram lookup."""
        if self.kind is DraftKind.MODEL:
            return float(count_params(self.model).total)
        if self.kind is DraftKind.HEAD:
            pc = count_params(self.model)
            return float(pc.total - pc.embedding - (pc.lm_head if self.shares_lm_head else 0))
        return None

    @property
    def name(self) -> str:
        if self.kind in (DraftKind.MODEL, DraftKind.HEAD):
            return self.model.name
        return "Medusa heads" if self.kind is DraftKind.MEDUSA else "n-gram lookup"


def model_draft(model: Model, precision: Precision | None = None,
                hardware: Hardware | None = None) -> Draft:
    """A separate draft model (Leviathan/Chen), optionally at its own precision and device."""
    return Draft(DraftKind.MODEL, model, precision, hardware)


def head_draft(target: Model, style: str = "eagle", params: float | None = None,
               layers: int = 1, vocab_size: int | None = None,
               precision: Precision | None = None, hardware: Hardware | None = None) -> Draft:
    """A self-drafting head run autoregressively on the target's features.

    ``style`` "eagle" (EAGLE-1/2: dense decoder layer(s) of the target's attention shape and dense
    FFN width, plus the 2h -> h feature fusion, reading the target's LM head), "eagle3" (EAGLE-3,
    Li et al. 2025, arXiv 2503.01840: one such layer whose attention takes the 2h-wide
    [embedding; feature] input, the 3h -> h fusion of low, middle and high target features,
    and its own reduced LM head over ``EAGLE3_DRAFT_VOCAB`` tokens unless ``vocab_size`` says
    otherwise) or "mtp" (DeepSeek-V3 multi-token prediction: one
    full target layer, MoE included, plus the 2h -> h projection). ``params`` [parameters]
    replaces the derived size by a dense head of that many own parameters (embedding and LM head,
    shared with the target, excluded). ``vocab_size`` gives the head its own reduced LM head
    (EAGLE-3's draft vocabulary); otherwise it reads the target's LM head every step.
    The 2h -> h projection (2h^2 weights) is folded into the FFN width (same bytes and FLOPs).
    """
    style = str(style).lower()
    if style not in HEAD_STYLES:
        raise ConfigError(f"head style must be one of {', '.join(HEAD_STYLES)}, got {style!r}")
    layers = require_int("head layers", layers, 1, 64)
    h = target.hidden_size
    gated = target.ffn_kind is FFNKind.GATED
    extra = 2 * h * h                                # the 2h -> h fusion [parameters]
    if style == "eagle3":
        # 3h -> h fusion, plus the Q, K, V projections' second h of input (2h-wide attention
        # input: the token embedding and the hidden state, concatenated)
        kv_width = target.num_key_value_heads * target.head_size
        extra = 3 * h * h + h * (target.num_attention_heads * target.head_size + 2 * kv_width)
        if vocab_size is None:
            vocab_size = EAGLE3_DRAFT_VOCAB
    fold = round(extra / h / (3 if gated else 2))    # extra params as extra FFN width
    base = replace(target, name=f"{target.name} {style.upper()} head", num_hidden_layers=layers,
                   sliding_layers=None if target.sliding_layers is None
                   else target.sliding_layers[:layers],
                   tie_word_embeddings=False, warnings=(), source="derived from the target",
                   moe=None)
    if vocab_size is not None:
        base = replace(base, vocab_size=require_int("head vocab_size", vocab_size, 1, 10**7))
    if params is not None:
        params = require_float("head params", params, lo=0, lo_open=True)
        if params >= count_params(target).total:
            raise ConfigError(f"head params {params:.3g} must be smaller than the target "
                              f"{target.name} ({count_params(target).total:.3g} parameters)")
        dense = replace(base, intermediate_size=1)
        pc = count_params(dense)
        fixed = pc.total - pc.embedding - pc.lm_head - pc.ffn_dense
        per_width = (3 if gated else 2) * h * layers
        inter = int(round((params - fixed) / per_width))
        if inter < 1:
            raise ConfigError(
                f"head params {params:.3g} is smaller than {layers} attention layer(s) of "
                f"{target.name} ({fixed:.3g} parameters)")
        model = replace(dense, intermediate_size=inter)
    elif style == "mtp" and target.moe is not None:
        moe = replace(target.moe, first_dense_layers=0,
                      shared_intermediate_size=target.moe.shared_intermediate_size + fold)
        model = replace(base, moe=moe)
    else:
        model = replace(base, intermediate_size=target.intermediate_size + fold)
    return Draft(DraftKind.HEAD, model, precision, hardware, shares_lm_head=vocab_size is None)


def medusa_draft(precision: Precision | None = None, hardware: Hardware | None = None) -> Draft:
    """Medusa heads (Cai et al. 2024, arXiv 2401.10774): head i = ResBlock (h x h + bias, SiLU,
    residual) + its own h x V LM head; all gamma heads run once per step on the last hidden state."""
    return Draft(DraftKind.MEDUSA, None, precision, hardware)


def ngram_draft() -> Draft:
    """Prompt lookup / n-gram drafting: no model and no device time."""
    return Draft(DraftKind.NGRAM)



def draft_preset_slugs() -> tuple[str, ...]:
    """Model preset slugs for a separate draft: ``DRAFT_PRESETS`` first, then every other preset
    marked ``draft = true``, then the remaining presets."""
    from ..presets import list_presets
    infos = list_presets("models")
    known = {i.slug for i in infos}
    first = [s for s in DRAFT_PRESETS if s in known]
    flagged = [i.slug for i in infos if i.draft and i.slug not in first]
    rest = [i.slug for i in infos if not i.draft and i.slug not in first]
    return tuple(first + flagged + rest)


def default_draft_slug(target: Model) -> str | None:
    """A sensible separate draft for ``target``: among ``DRAFT_PRESETS`` and the other presets
    marked ``draft = true``, the smallest one of the target's own family (then of any family)
    whose tokenizer is known to match and that has at most a quarter of the target's
    parameters; None when there is none (use a self-drafting head)."""
    from ..presets import find_preset, list_presets, load_model
    flagged = {i.slug for i in list_presets("models") if i.draft}
    total = count_params(target).total
    try:
        family = find_preset("models", target.name).category.lower()
    except ConfigError:
        family = None
    best = None
    for slug in draft_preset_slugs():
        if slug not in flagged and slug not in DRAFT_PRESETS:
            continue
        m = load_model(slug)
        size = count_params(m).total
        if size > total / 4 or vocab_check(target, model_draft(m)).compatible is not True:
            continue
        key = (_family(m) is None or _family(m).lower() != family, size)
        if best is None or key < best[0]:
            best = (key, slug)
    return best[1] if best else None


# ---- Medusa heads as operators ---------------------------------------------------------------

def medusa_ops(target: Model, precision: Precision, batch: int, heads: int) -> tuple[Operator, ...]:
    """One pass of ``heads`` Medusa heads on ``batch`` hidden states: per head a biased h x h
    linear, SiLU, the residual add and an h x V LM head (its own weights)."""
    if heads <= 0:
        return ()
    h, v, a = target.hidden_size, target.vocab_size, precision.activation_bits
    one = (linear("medusa_resblock", OpKind.FFN, batch, h, h, precision.weight_ffn_bits, a, True),
           elementwise("medusa_silu_residual", OpKind.ELEMENTWISE, batch * h, 6.0, 2, a),
           linear("medusa_lm_head", OpKind.LM_HEAD, batch, h, v, precision.weight_embed_bits, a))
    return tuple(replace(o, count=heads, group="medusa") for o in one)


def medusa_weight_bytes(target: Model, precision: Precision, heads: int) -> float:
    h, v = target.hidden_size, target.vocab_size
    return heads * (bits_to_bytes(h * h + h, precision.weight_ffn_bits)
                    + bits_to_bytes(h * v, precision.weight_embed_bits))



# ---- vocabulary ------------------------------------------------------------------------------

@dataclass(frozen=True)
class VocabCheck:
    compatible: bool | None           # None: could not tell
    message: str


# (family, vocabulary size) -> tokenizer, for tokenizers shared ACROSS preset families.
# Phi-3: "uses the same tokenizer [as Llama-2] with vocabulary size of 32064" (Abdin et al.,
# Phi-3 Technical Report, arXiv 2404.14219, section 2); ids 32000-32063 are added chat tokens.
# Mixtral 8x7B / 8x22B v0.1 ship Mistral 7B v0.1's 32000-token SentencePiece vocabulary
# (mistralai/*-v0.1 tokenizer.model; Jiang et al., arXiv 2401.04088, Table 1: vocab 32000).
SHARED_TOKENIZERS = {
    ("llama", 32000): "Llama-1/2 SentencePiece (32000)",
    ("phi", 32064): "Llama-1/2 SentencePiece (32000)",
    ("mistral", 32000): "Mistral v0.1 SentencePiece (32000)",
    ("mixtral", 32000): "Mistral v0.1 SentencePiece (32000)",
}


def _family(model: Model) -> str | None:
    from ..presets import find_preset
    try:
        return find_preset("models", model.name).category or None
    except ConfigError:
        return None


def vocab_check(target: Model, draft: Draft) -> VocabCheck:
    """Can the draft's tokens be verified by the target directly? Heads and n-gram drafts share
    the target's tokenizer; a separate model must use the same tokenizer: a known shared
    tokenizer (``SHARED_TOKENIZERS``), or the same family and a vocabulary of about the same
    size (checkpoints pad embeddings differently, e.g. Qwen2.5 151936 vs 152064)."""
    if draft.kind is not DraftKind.MODEL:
        return VocabCheck(True, "the draft shares the target's tokenizer")
    d = draft.model
    vt, vd = target.vocab_size, d.vocab_size
    ft, fd = _family(target), _family(d)
    tt = SHARED_TOKENIZERS.get(((ft or "").lower(), vt))
    td = SHARED_TOKENIZERS.get(((fd or "").lower(), vd))
    if tt and td and tt == td:
        extra = (f"; the draft's ids above {min(vt, vd) - 1} do not exist in the target"
                 if vd > vt else "")
        return VocabCheck(True, f"same tokenizer: {tt}{extra}")
    close = abs(vt - vd) <= 0.01 * max(vt, vd)
    if ft and fd and ft.lower() != fd.lower():
        if vt == vd:
            return VocabCheck(None, f"draft family {fd!r} differs from target family {ft!r}; "
                              f"vocabularies have the same size ({vt}) but may not be the same "
                              "tokenizer")
        return VocabCheck(False, f"tokenizers differ: {d.name} ({fd}, vocabulary {vd}) cannot "
                          f"draft for {target.name} ({ft}, vocabulary {vt}) without token "
                          "translation, which lowers acceptance")
    if not close:
        return VocabCheck(False, f"vocabulary sizes differ ({d.name}: {vd}, {target.name}: "
                          f"{vt}); the draft's token ids do not map onto the target's")
    if ft is None or fd is None:
        return VocabCheck(None, f"vocabulary sizes match ({vd} vs {vt}) but the tokenizer "
                          "families are unknown")
    return VocabCheck(True, f"same tokenizer family ({ft})")
