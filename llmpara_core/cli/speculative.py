"""``llmpara speculative``: draft-verify speculative decoding for one target, draft and device."""

from __future__ import annotations

import argparse

from .types import bounded
from .base import (add_framework_arg, add_model_hw_args, add_output_args, add_precision_args,
                   add_workload_args, emit, positive_int,
                   precision_from_args, print_stack, stack_line, with_framework,
                   workload_from_args)
from ..errors import ConfigError
from ..precision import precision_preset
from ..speculative.drafts import DRAFT_PRESETS

DRAFT_KINDS = ("model", "eagle", "eagle3", "mtp", "medusa", "ngram")


_unit = bounded("unit_fraction", "acceptance")


def _rates(s: str) -> tuple[float, ...]:
    try:
        return tuple(_unit(x.strip()) for x in s.split(",") if x.strip())
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"--acceptance: {e}") from None


_gamma = bounded("gamma", "gamma")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "speculative", help="speculative decoding: speedup, optimal gamma, memory, energy",
        description="Draft-verify speculative decoding on the core's forward pass. Estimated "
                    "figures at the top level, peak-rate figures under 'ideal' (SI units).")
    add_model_hw_args(p, model_flag="--target")
    add_framework_arg(p)
    p.add_argument("--draft", help="draft model preset or config.json (needed for --draft-kind "
                                   "model); presets offered first: " + ", ".join(DRAFT_PRESETS))
    p.add_argument("--draft-kind", choices=DRAFT_KINDS, default="model",
                   help="separate model, EAGLE/EAGLE-3/MTP head built from the target (EAGLE-3: "
                        "3h->h fusion and its own 32k-token LM head), Medusa heads, or "
                        "n-gram lookup (default: model)")
    p.add_argument("--head-params", type=bounded("head_params", "head parameters"),
                   help="own parameters of an eagle/eagle3/mtp head, e.g. 0.25e9 (default: one "
                        "target-shaped layer)")
    p.add_argument("--head-layers", type=positive_int,
                   help="decoder layers of an eagle/eagle3/mtp head (default 1)")
    p.add_argument("--draft-hardware", help="device the draft runs on (default: the target's)")
    p.add_argument("--draft-precision", help="precision preset of the draft (default: the "
                                             "target's)")
    p.add_argument("--gamma", type=_gamma, required=True, help="draft tokens per step")
    p.add_argument("--alpha", type=_unit, help="per-token acceptance probability")
    p.add_argument("--acceptance", type=_rates,
                   help="per-position acceptance rates a1,a2,... (overrides --alpha)")
    p.add_argument("--expected-tokens", type=bounded("expected_tokens", "expected tokens"),
                   help="measured tokens per target pass E (overrides --alpha/--acceptance)")
    p.add_argument("--verify-tokens", type=positive_int,
                   help="tokens per verification pass (tree verification; default gamma + 1)")
    p.add_argument("--gamma-max", type=_gamma, default=16,
                   help="largest gamma searched for the optimum (default 16)")
    add_workload_args(p)
    add_precision_args(p)
    add_output_args(p)
    p.set_defaults(func=run)


def _draft(args, target, dhw):
    from ..presets import load_model
    from ..speculative.engine import head_draft, medusa_draft, model_draft, ngram_draft
    dprec = precision_preset(args.draft_precision) if args.draft_precision else None
    kind = args.draft_kind
    if kind not in ("eagle", "eagle3", "mtp"):
        for flag, value in (("--head-params", args.head_params),
                            ("--head-layers", args.head_layers)):
            if value is not None:
                raise ConfigError(f"{flag} is only used with --draft-kind eagle, eagle3 or mtp")
    if kind == "ngram" and (dprec or dhw):
        raise ConfigError("--draft-precision and --draft-hardware are not used with --draft-kind "
                          "ngram (no draft network)")
    if kind == "model":
        if not args.draft:
            raise ConfigError("--draft is required with --draft-kind model")
        return model_draft(load_model(args.draft), dprec, dhw)
    if args.draft:
        raise ConfigError(f"--draft is not used with --draft-kind {kind}")
    if kind in ("eagle", "eagle3", "mtp"):
        return head_draft(target, kind, args.head_params, args.head_layers or 1,
                          precision=dprec, hardware=dhw)
    if kind == "medusa":
        return medusa_draft(dprec, dhw)
    return ngram_draft()


def run(args) -> None:
    from ..presets import load_hardware, load_model
    from ..speculative.engine import (Setup, Speculation, analyze_speculative, break_even_alpha,
                              optimal_gamma, report_to_dict)
    target = load_model(args.model)
    hw, stack = with_framework(load_hardware(args.hardware), args.framework)
    dhw, dstack = (with_framework(load_hardware(args.draft_hardware), args.framework)
                   if args.draft_hardware else (None, None))
    setup = Setup(target, hw, precision_from_args(args), workload_from_args(args),
                  _draft(args, target, dhw))
    spec = Speculation(args.gamma, alpha=args.alpha, acceptance=args.acceptance,
                       expected_tokens=args.expected_tokens, verify_tokens=args.verify_tokens)
    report = analyze_speculative(setup, spec)
    d = report_to_dict(report)
    if args.alpha is not None or args.acceptance is not None:
        g, sp = optimal_gamma(setup, args.alpha, args.gamma_max, args.acceptance)
        d["optimal_gamma"] = {"gamma": g, "speedup": sp}
    else:
        d["optimal_gamma"] = None
    d["break_even_alpha"] = break_even_alpha(setup, args.gamma) if args.gamma else None
    d["stack"] = stack.to_dict()
    if dstack is not None:
        d["draft_stack"] = dstack.to_dict()
    if args.format == "json":
        emit(d, "json")
        return
    rows = []
    for k, v in d.items():
        if k in ("stack", "draft_stack"):
            continue
        if isinstance(v, dict) and k != "ideal":
            rows += [{"quantity": f"{k}.{kk}", "value": vv} for kk, vv in v.items()
                     if not isinstance(vv, dict)]
            for kk, vv in v.items():
                if isinstance(vv, dict):
                    rows += [{"quantity": f"{k}.{kk}.{k3}", "value": v3} for k3, v3 in vv.items()]
        elif not isinstance(v, (dict, list)) and k != "ideal":
            rows.append({"quantity": k, "value": v})
    rows.append({"quantity": "ideal.speedup", "value": d["ideal"]["speedup"]})
    if args.format == "table":
        print_stack(stack)
        if dstack is not None:
            print("draft " + stack_line([dstack]))
    emit(None, args.format, rows)
    if args.format == "table":
        for note in report.notes:
            print(f"note: {note}")
