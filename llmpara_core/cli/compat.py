"""The replaced tool's command line, accepted as aliases (reference-tool.md §8).

* Flags: ``-m``/``--model``, ``-hw``/``--hardware``, ``-s``/``--seq-len`` (= ``--prompt-len``),
  ``-b``/``--batch-size`` (= ``--batch``), ``-q``/``--quant`` (= ``--precision``),
  ``--flash-attn``, ``-o``/``--output FILE`` (operator rows as CSV), ``--json FILE``.
* Its invocation without a subcommand (``llmpara -m "Llama-3 8B"``) runs ``analyze``;
  ``--list-models`` / ``--list-hardware`` run ``models`` / ``hardware``.
* Its precision names ``fp32 fp16 int8 int4 w4a8`` with its bit widths (activation / attention
  and embedding weights / FFN weights / KV): 32/32/32/32, 16/16/16/16, 8/8/8/8, 8/4/4/4, 8/4/4/8.
* The console summary it printed under the table: total, prefill and decode FLOPs, the ridge,
  memory- and compute-bound operator counts and the top-5 operators by FLOPs.
"""

from __future__ import annotations

from dataclasses import replace

from ..precision import DType, Precision, precision_preset

# name -> (our closest preset, activation, attention+embedding weight, FFN weight, KV bits)
REFERENCE_QUANT: dict[str, tuple[str, float, float, float, float]] = {
    "fp32": ("FP32", 32, 32, 32, 32), "fp16": ("FP16", 16, 16, 16, 16),
    "int8": ("W8A8", 8, 8, 8, 8), "int4": ("W4A8", 8, 4, 4, 4), "w4a8": ("W4A8", 8, 4, 4, 8),
}
LIST_FLAGS = {"--list-models": "models", "--list-hardware": "hardware"}
TOP_N = 5


def precision_by_name(name: str) -> Precision:
    """A precision preset by our name (``FP16``, ``W4A16`` ...) or the reference's
    (``fp16``, ``int8``, ``int4``, ``w4a8``, with its bit widths); ConfigError otherwise."""
    ref = REFERENCE_QUANT.get(str(name).strip().lower())
    if ref is None:
        return precision_preset(name)
    preset, act, w_attn, w_ffn, kv = ref
    base = precision_preset(preset)
    p = replace(base, activation_bits=act, weight_attn_bits=w_attn, weight_embed_bits=w_attn,
                weight_ffn_bits=w_ffn, kv_bits=kv,
                compute_dtype=DType.INT8 if act == 8 else base.compute_dtype)
    return p if p == base else replace(p, name=f"{name.strip().lower()} (reference)")


def old_tool_argv(argv: list[str]) -> list[str]:
    """The reference's invocation rewritten to a subcommand: ``--list-models`` -> ``models``,
    leading flags (``-m X -hw Y``) -> ``analyze -m X -hw Y``; anything else unchanged."""
    if not argv:
        return argv
    for flag, command in LIST_FLAGS.items():
        if flag in argv:
            i = argv.index("--format") if "--format" in argv else -1
            return [command] + (argv[i:i + 2] if i >= 0 else [])
    first = argv[0]
    if first.startswith("-") and first not in ("-h", "--help", "--version"):
        return ["analyze"] + argv
    return argv


def _si(v: float, unit: str) -> str:
    """``v`` with an SI prefix (k M G T P E), as the reference's console did."""
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6),
                          ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def console_summary(report) -> list[str]:
    """The lines of the reference's console summary for an ``analysis.Report``."""
    from ..roofline import rates
    pre, dec, steps = report.prefill, report.decode, report.decode_steps
    total = pre.flops + steps * dec.flops
    est = rates(report.hardware, report.dtype_used, estimated=True)
    peak_ridge = report.peak_flops_per_s / report.bandwidth_bytes_per_s
    lines = ["", "Summary",
             f"  total FLOPs (prefill + {steps} decode steps): {_si(total, 'FLOP')}",
             f"  prefill FLOPs: {_si(pre.flops, 'FLOP')}; one decode step (mean): "
             f"{_si(dec.flops, 'FLOP')}",
             f"  ridge ({report.dtype_used.value}): {peak_ridge:.4g} FLOP/B at peak rates, "
             f"{est.ridge_flops_per_byte:.4g} FLOP/B estimated (derated)"]
    for phase in (pre, dec):
        mem = sum(1 for r in phase.rows if r.bound == "memory")
        lines.append(f"  {phase.name}: {mem} memory-bound, {len(phase.rows) - mem} "
                     "compute-bound operators")
    runs = [(r, r.flops) for r in pre.rows] + [(r, r.flops * steps) for r in dec.rows]
    runs.sort(key=lambda x: x[1], reverse=True)
    lines.append(f"  top-{TOP_N} operators by FLOPs over the run:")
    for r, f in runs[:TOP_N]:
        ai = r.arithmetic_intensity
        lines.append(f"    {r.phase:<8} {r.name:<28} {_si(f, 'FLOP'):>12}  intensity "
                     + ("-" if ai is None else f"{ai:.4g} FLOP/B") + f"  ({r.bound}-bound)")
    return lines
