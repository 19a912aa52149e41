"""Command line: ``llmpara`` / ``python -m llmpara_core``.

Every error a user can cause ends with exit code 2 and one line on stderr, never a traceback.
Extended analyses register their subcommand in ``SUBCOMMANDS`` (a module with
``register(subparsers)`` that sets ``func`` on its parser).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import math
import sys

from .. import __version__
from ..errors import ConfigError, LLMParaError
from ..budget import (BUDGET_ENV, DEFAULT_CLI_BUDGET_S, MAX_BUDGET_S, TimeBudgetExceeded,
                      check_time_budget, cli_budget_s, time_budget)
from ..envelope import check_mapping
from ..export import csv_safe
from ..precision import DType, Precision
from .compat import console_summary, old_tool_argv, precision_by_name
from .types import bounded
from ..workload import Workload

# Modules that add subcommands: (module name relative to this package).
SUBCOMMANDS: list[str] = ["hetero", "metrics", "speculative", "shard",
                          "dse", "validate", "serve", "plan"]

FORMATS = ("table", "json", "csv")
MAX_ERROR_CHARS = 500


class UsageError(Exception):
    """Bad command-line usage (raised instead of argparse's print-usage-and-exit)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):           # one line, exit 2 (handled in main)
        raise UsageError(message)


# ---- shared option groups -------------------------------------------------------------------

def number_in(lo: float, hi: float, lo_open: bool = False, what: str = "a number"):
    """An argparse type: a finite number in [lo, hi] (or (lo, hi] with ``lo_open``)."""
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None
        if not math.isfinite(v) or v > hi or v < lo or (lo_open and v == lo):
            raise argparse.ArgumentTypeError(f"expected {what} in {'(' if lo_open else '['}"
                                             f"{lo:g}, {hi:g}], got {s}")
        return v
    return parse


def _short(n: int) -> str:
    """10**9 -> '1e9' (bounds in messages); other integers as they are."""
    k = len(str(n)) - 1
    return f"1e{k}" if n >= 10**6 and n == 10**k else str(n)


def integer_in(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi]."""
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{_short(lo)}, {_short(hi)}], got {s}")
        return v
    return parse


positive_int = integer_in(1, 10**9)
nonneg_int = integer_in(0, 10**9)


bits = bounded("bits", "bits")


def add_output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")


def add_model_hw_args(p: argparse.ArgumentParser, model_flag: str = "--model") -> None:
    flags = ("-m", model_flag) if model_flag == "--model" else (model_flag,)
    p.add_argument(*flags, required=True, dest="model",
                   help="model preset name or path to a Hugging Face config.json")
    p.add_argument("-hw", "--hardware", required=True,
                   help="hardware preset name or path to a hardware TOML file")


def add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--batch", "--batch-size", type=bounded("batch"), default=1,
                   dest="batch", help="sequences decoded together")
    p.add_argument("-s", "--prompt-len", "--seq-len", type=bounded("prompt_len"), default=2048,
                   dest="prompt_len", help="prompt tokens (--seq-len: the reference tool's name)")
    p.add_argument("--gen-len", type=bounded("gen_len"), default=256)
    p.add_argument("--no-flash-attention", action="store_true",
                   help="materialise the attention score matrix")
    p.add_argument("--flash-attn", action="store_true",
                   help="FlashAttention (the default here; accepted for the reference tool)")


def add_precision_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--precision", "--quant", default="FP16", dest="precision",
                   help="precision preset (FP16, BF16, FP32, FP8, W8A8, W8A16, W4A16, W4A8, "
                        "Q8_0, Q4_0, Q4_K_M, 'BitNet 1.58', or the reference tool's fp32, "
                        "fp16, int8, int4, w4a8); the bit flags override it")
    p.add_argument("--weight-bits", type=bits, help="bits of every weight tensor")
    p.add_argument("--act-bits", type=bits, help="activation bits")
    p.add_argument("--kv-bits", type=bits, help="KV cache bits")
    p.add_argument("--compute-dtype", choices=[d.value for d in DType],
                   help="data type whose peak the matmuls use")


def precision_from_args(args) -> Precision:
    base = precision_by_name(args.precision)
    changes = {}
    if args.weight_bits is not None:
        changes.update(weight_attn_bits=args.weight_bits, weight_ffn_bits=args.weight_bits,
                       weight_embed_bits=args.weight_bits)
    if args.act_bits is not None:
        changes["activation_bits"] = args.act_bits
    if args.kv_bits is not None:
        changes["kv_bits"] = args.kv_bits
    if args.compute_dtype is not None:
        changes["compute_dtype"] = DType(args.compute_dtype)
    if not changes:
        return base
    from dataclasses import replace
    return replace(base, name="custom", **changes)


def workload_from_args(args) -> Workload:
    if args.flash_attn and args.no_flash_attention:
        raise UsageError("--flash-attn and --no-flash-attention contradict each other")
    return Workload(batch=args.batch, prompt_len=args.prompt_len, gen_len=args.gen_len,
                    flash_attention=not args.no_flash_attention)


# ---- output ---------------------------------------------------------------------------------

def emit(obj, fmt: str, rows: list[dict] | None = None, out=None) -> None:
    """Print ``obj`` as JSON, or ``rows`` as CSV / an aligned text table."""
    out = out or sys.stdout
    check_mapping(obj if obj is not None else rows)     # the output envelope (envelope.py)
    if fmt == "json":
        json.dump(obj, out, indent=2, allow_nan=False, default=str)
        out.write("\n")
        return
    rows = rows if rows is not None else (obj if isinstance(obj, list) else [obj])
    if not rows:
        return
    cols = list(rows[0].keys())
    if fmt == "csv":
        w = csv.DictWriter(out, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows({k: csv_safe(v) for k, v in r.items()} for r in rows)
        return
    cells = [[_fmt_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    out.write("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip() + "\n")
    for row in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")


def _fmt_cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# ---- built-in subcommands -------------------------------------------------------------------

def _cmd_models(args) -> None:
    from ..model import count_params
    from ..presets import list_presets, load_model
    rows = []
    for i, info in enumerate(list_presets("models")):
        check_time_budget(f"{i} models listed")
        m = load_model(info.slug)
        pc = count_params(m)
        rows.append({"slug": info.slug, "name": info.name, "family": info.category,
                     "params_total": pc.total, "params_active": pc.active,
                     "features": ",".join(k for k, v in m.features.items() if v)})
    emit(rows, args.format)


def _cmd_hardware(args) -> None:
    from ..precision import DType as D
    from ..presets import list_presets, load_hardware
    rows = []
    for i, info in enumerate(list_presets("hardware")):
        check_time_budget(f"{i} devices listed")
        hw = load_hardware(info.slug)
        row = {"slug": info.slug, "name": info.name, "class": hw.hw_class.value,
               "architecture": hw.architecture.value if hw.architecture else None,
               "memory_type": hw.memory_type.value if hw.memory_type else None}
        for d in D:
            row[f"peak_{d.value}_flops_per_s"] = hw.peak_flops_per_s_raw(d)
        row["peak_fp16_acc16_flops_per_s"] = hw.peak_fp16_acc16_flops_per_s
        row.update(memory_bandwidth_bytes_per_s=hw.memory_bandwidth_bytes_per_s,
                   memory_capacity_bytes=hw.memory_capacity_bytes, tdp_w=hw.tdp_w,
                   price_usd=hw.price_usd)
        rows.append(row)
    emit(rows, args.format)


def _cmd_analyze(args) -> None:
    from ..analysis import analyze
    from ..export import report_to_dict, row_to_dict
    from ..presets import load_hardware, load_model
    model, hw = load_model(args.model), load_hardware(args.hardware)
    stack_hw, stack = with_framework(hw, args.framework)
    report = analyze(model, hw, precision_from_args(args), workload_from_args(args),
                     stack_hw.efficiency)
    d = report_to_dict(report)
    d["framework"] = stack.name
    d["stack"] = stack.to_dict()
    for hook in ANALYZE_HOOKS:
        d.update(hook(report, args))
    rows = [row_to_dict(r) for r in report.prefill.rows + report.decode.rows]
    if args.output:
        _write(args.output, lambda f: emit(None, "csv", rows, out=f))
    if args.json:
        _write(args.json, lambda f: emit(d, "json", out=f))
    if args.format == "json":
        emit(d, "json")
    elif args.format == "csv":
        emit(None, "csv", rows)
    else:
        print_stack(stack)
        summary = {k: v for k, v in d.items()
                   if not isinstance(v, (dict, list)) and k != "schema_version"}
        summary.update({f"ideal_{k}": v for k, v in d["ideal"].items()})
        emit(None, "table", [{"quantity": k, "value": v} for k, v in summary.items()])
        for note in report.notes:
            print(f"note: {note}")
        print("\n".join(console_summary(report)))


def _write(path: str, write) -> None:
    """Write a file (``--output`` / ``--json``); an unwritable path is a usage error."""
    try:
        with open(path, "w", encoding="utf-8", newline="") as f:
            write(f)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


FRAMEWORK_HELP = ("inference stack whose efficiency profile the estimate uses (default: "
                  "'default' = the device class's usual stack: vLLM on datacenter GPUs, "
                  "llama.cpp on consumer GPUs, unified-memory SoCs and CPUs, generic on other "
                  "classes); a profile: llama.cpp, gpt-fast, vllm, vllm-legacy, sglang, "
                  "tensorrt-llm, mlc, exllamav2, mlx, fastertransformer, hf-eager; or generic: "
                  "the stack-agnostic class fit (no stack profile, wider error)")


def add_framework_arg(p) -> None:
    """``--framework``: the stack whose efficiency profile the estimate uses."""
    p.add_argument("--framework", help=FRAMEWORK_HELP)


def with_framework(hw, name: str | None):
    """(``hw`` under the ``--framework`` stack, the resolved ``Stack``); None or "default" =
    the class default. Unknown names are a ConfigError with close matches."""
    from ..calibration.stacks import with_stack
    return with_stack(hw, name)


def stack_line(stacks) -> str:
    """The header line of a table result: "stack: vLLM — default for datacenter GPUs" (the
    distinct stacks, in order, when several devices run under their own)."""
    seen = list(dict.fromkeys(s.caption for s in stacks))
    return "stack: " + "; ".join(seen)


def print_stack(*stacks, out=None) -> None:
    """Print ``stack_line`` of ``stacks`` (table output only; JSON carries a ``stack`` field)."""
    (out or sys.stdout).write(stack_line(stacks) + "\n")


# Functions (report, args) -> dict adding keys to `analyze` JSON (energy, cost, ...).
ANALYZE_HOOKS: list = []
# Functions (parser) adding options to `analyze`.
ANALYZE_ARG_HOOKS: list = []


def build_parser(command: str | None = None) -> _Parser:
    """The whole parser; with ``command`` naming an analysis's own subcommand (a module of
    ``SUBCOMMANDS``), only that module is imported and registered: the other analyses'
    imports would cost a large share of a short run (``llmpara dse`` starts in ~0.1 s)."""
    p = _Parser(prog="llmpara", description="First-order LLM inference performance model")
    p.add_argument("--version", action="version", version=f"llmpara {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, required=True)
    m = sub.add_parser("models", help="list model presets")
    add_output_args(m)
    m.set_defaults(func=_cmd_models)
    h = sub.add_parser("hardware", help="list hardware presets")
    add_output_args(h)
    h.set_defaults(func=_cmd_hardware)
    a = sub.add_parser("analyze", help="analyse one model on one device")
    add_model_hw_args(a)
    add_workload_args(a)
    add_precision_args(a)
    a.add_argument("-o", "--output", metavar="FILE",
                   help="also write the operator rows as CSV to FILE (the reference tool's -o)")
    a.add_argument("--json", metavar="FILE", help="also write the JSON result to FILE")
    add_framework_arg(a)
    add_output_args(a)
    a.set_defaults(func=_cmd_analyze)
    for mod_name in [command] if command in SUBCOMMANDS else SUBCOMMANDS:
        importlib.import_module(f".{mod_name}", __package__).register(sub)
    for hook in ANALYZE_ARG_HOOKS:
        hook(a)
    for name, subparser in sub.choices.items():
        add_time_budget_arg(subparser)
    return p


def add_time_budget_arg(p) -> None:
    """``--time-budget`` on every subcommand (added by ``build_parser`` to each one, so a new
    subcommand has it without asking)."""
    if any("--time-budget" in a.option_strings for a in p._actions):
        return
    p.add_argument("--time-budget", type=bounded_budget, metavar="SECONDS", default=None,
                   help=f"wall seconds the command may compute before it stops with what it "
                        f"did (default {DEFAULT_CLI_BUDGET_S:g}, or {BUDGET_ENV})")


def bounded_budget(s: str) -> float:
    """A --time-budget value: seconds in (0, MAX_BUDGET_S]."""
    return number_in(0, MAX_BUDGET_S, lo_open=True, what="a number of seconds")(s)


BUDGET_ADVICE = ("give it more time (--time-budget SECONDS or {env}) or ask for less "
                 "(fewer requests, rates, designs, generations or plans)")


def run_with_budget(args) -> None:
    """``args.func(args)`` inside the command's wall-clock budget."""
    seconds = cli_budget_s(getattr(args, "time_budget", None))
    with time_budget(None, BUDGET_ADVICE.format(env=BUDGET_ENV), wall_s=seconds):
        args.func(args)


def main(argv: list[str] | None = None) -> int:
    try:
        words = old_tool_argv(sys.argv[1:] if argv is None else list(argv))
        parser = build_parser(next((w for w in words if not w.startswith("-")), None))
        args = parser.parse_args(words)
        run_with_budget(args)
        return 0
    except UsageError as e:
        _fail(str(e))
    except TimeBudgetExceeded as e:
        _fail(str(e))
    except (LLMParaError, ConfigError) as e:
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:      # noqa: BLE001 - a bug or an input no check foresaw
        first = str(e).splitlines()[0] if str(e) else ""
        _fail(f"could not complete the analysis ({type(e).__name__}: {first})")
    return 2


def _fail(message: str) -> None:
    """One line on stderr, cut to MAX_ERROR_CHARS (a hostile value cannot flood the terminal)."""
    message = " ".join(message.split())
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS - 3] + "..."
    sys.stderr.write(f"llmpara: error: {message}\n")


if __name__ == "__main__":   # pragma: no cover
    sys.exit(main())
