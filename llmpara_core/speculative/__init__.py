"""Speculative decoding: a draft (model, EAGLE/MTP head, Medusa, n-gram) proposes gamma tokens and
the target verifies them in one pass. ``engine`` sums the steps in closed form from
``forward.forward_ops`` and ``roofline.op_time_s`` (as ``analysis.integrate_decode`` does for
plain decode); ``drafts`` builds drafts, ``views`` the page's tables, ``measurements`` the
published speedups, ``batch_sweeps`` the speedup-vs-batch validation (alpha fitted on a
published sweep's smallest batch, the other batches predicted).
"""

from .drafts import (DRAFT_PRESETS, DraftKind, default_draft_slug, draft_preset_slugs, head_draft,
                     medusa_draft, model_draft, ngram_draft, vocab_check)
from .engine import (DEFAULT_ALPHAS, Setup, Speculation, analyze_speculative, batch_sweep,
                     break_even_alpha, expected_tokens_from_rates, expected_tokens_per_step,
                     implied_alpha, optimal_gamma, report_to_dict, speedup, speedup_grid)

__all__ = ["DRAFT_PRESETS", "DraftKind", "default_draft_slug", "draft_preset_slugs", "head_draft",
           "medusa_draft", "model_draft", "ngram_draft", "vocab_check", "DEFAULT_ALPHAS", "Setup",
           "Speculation", "analyze_speculative", "batch_sweep", "break_even_alpha",
           "expected_tokens_from_rates", "expected_tokens_per_step", "implied_alpha",
           "optimal_gamma", "report_to_dict", "speedup", "speedup_grid"]
