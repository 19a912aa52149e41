"""Fit the efficiency model to published measurements and rewrite its table.

    python scripts/fit_efficiency.py                 # fit, print errors, rewrite the table
    python scripts/fit_efficiency.py --dry-run       # fit and print, write nothing
    python scripts/fit_efficiency.py --data my.csv --out /tmp/eff.toml --no-cv

Reads ``presets/tables/measurements.csv`` and ``batched_measurements.csv`` (or ``--data``),
maps every row to a scenario (``llmpara_core.calibration.measurements``), fits the class and
memory-technology values on single-device llama.cpp rows, the stack profiles on their rows and
the stacks of the tensor-parallel series on ``tp_measurements.toml``, HF eager's per-kernel
cost on the measured time per token of its energy rows
(``presets/tables/energy_measurements.csv``; ``llmpara_core.calibration.fitting``), checks the fit with leave-one-device-out refits (by
regime, class and stack), and writes ``presets/tables/efficiency.toml``. Deterministic: the fit
always starts from the provisional constants in ``llmpara_core/hardware.py`` and the cited
architecture factors, so rerunning on the same data gives the same table.

The reference stack's build rules (``fitting.BUILD_RULES``: ``measurements.PROMPT_GEMM_WAVES``,
a pre-June-2024 llama.cpp CUDA build's prompt GEMMs in whole waves over the SMs, and
``parallel.evaluation.PROMPT_PIPELINE``, its layer split's prompt pipeline; both on) time
llama.cpp's prompt passes and nothing else. The rule the fit follows: everything is fitted with
the wave rule off (classes, memory technologies, architecture factors, streaming bounds and
every stack profile, as without the rules), then only the GEMM fractions (compute,
attention_compute, quant_compute, expert_half_tokens) of the classes with rows the wave rule
times are refitted with it on, every other value held; the stacks other than llama.cpp apply
their profiles to the GEMM fractions fitted without it (``[stack_class.*]``). A stack whose
rows the rules do not time thus keeps exactly the profile and the effective values it has with
the rules off: the serving regimes (TensorRT-LLM, vLLM, SGLang), the tensor-parallel series
(FasterTransformer) and the energy rows' stacks give the same figures either way.
Measured (branch prefill28, this fit, `llmpara validate` on the refitted table): serving
max-load in sample 8.9 %, +1.2 % and MLPerf 9.5 %, +9.5 %, as with the rules off.
"""

from __future__ import annotations

import argparse
import statistics
from concurrent.futures import ProcessPoolExecutor
import sys
import time
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core import calibration
from llmpara_core.calibration import fitting, measurements as validation, summary as validation_summary
from llmpara_core.efficiency_table import TABLE_PATH
from llmpara_core.errors import LLMParaError
from llmpara_core.metrics.energy import read_energy_measurements

# Energy rows with a measured time per token time the stacks measured nowhere else (HF eager).
ENERGY_ROWS = ROOT / "presets" / "tables" / "energy_measurements.csv"

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="measurements CSV (default: the shipped one)")
    ap.add_argument("--out", type=Path, default=TABLE_PATH, help="table to write")
    ap.add_argument("--dry-run", action="store_true", help="print the results, write nothing")
    ap.add_argument("--no-cv", action="store_true", help="skip leave-one-device-out")
    ap.add_argument("--no-frameworks", action="store_true", help="fit the classes only")
    ap.add_argument("--cublas-builds", action="store_true",
                    help="what-if: price the prompt rows of pre-June-2024 llama.cpp CUDA builds "
                         "as their dequantise + FP16 cuBLAS path "
                         "(measurements.CUBLAS_PROMPT_BUILDS; not the shipped fit)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes for the leave-one-device-out refits (default 1; the "
                         "folds are independent, the result is the same)")
    args = ap.parse_args(argv)
    if args.cublas_builds:
        validation.CUBLAS_PROMPT_SOURCES = validation.CUBLAS_PROMPT_BUILDS
    try:
        rows, skipped = (validation.read_measurements(args.data.read_bytes()) if args.data
                         else validation.read_shipped())
    except (OSError, LLMParaError) as e:
        print(f"fit_efficiency: {e}", file=sys.stderr)
        return 2
    mapped, skipped = validation.map_all(rows, skipped)
    t0 = time.time()
    energy = read_energy_measurements(ENERGY_ROWS)
    table = fitting.fit_table(mapped, calibration.provisional_table(),
                              frameworks=not args.no_frameworks, energy=energy)
    # errors and leave-one-device-out with the table as written (4 significant digits), so
    # [fit] holds the numbers `llmpara validate [--loo]` prints from the shipped file
    table = calibration.table_from_dict(tomllib.loads(calibration.table_to_toml(table)),
                                        str(args.out))
    preds, bad = validation.predict_all(mapped, table)
    summary = validation_summary.summarize(preds, skipped + bad,
                                           fitted_classes=set(fitting.fitted_classes(table)))
    print(f"fitted in {time.time() - t0:.1f} s on {len(mapped)} mapped rows "
          f"({len(skipped) + len(bad)} skipped)")
    _print_table(table)
    _print_errors(summary)
    info = fit_info(args.data, mapped, skipped + bad, summary)
    if not args.dry_run and not args.no_cv:    # the fit first: a long check cannot lose it
        args.out.write_text(calibration.table_to_toml(table, info), encoding="utf-8")
    if not args.no_cv:
        info["leave_one_device_out"], info["leave_one_device_out_by_device"] = _cv(
            mapped, table, max(1, args.jobs))
    if not args.dry_run:
        args.out.write_text(calibration.table_to_toml(table, info), encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def fit_info(data, mapped, skipped, summary) -> dict:
    h = summary.headline
    info = {"data": str(data) if data else ("presets/tables/measurements.csv, "
                                            "presets/tables/batched_measurements.csv, "
                                            "presets/tables/tp_measurements.toml, "
                                            "presets/tables/energy_measurements.csv (HF eager)"),
            "rows_mapped": len(mapped), "rows_skipped": len(skipped),
            "decode_median_abs_error": h.median_abs}
    for reg in validation.REGIMES:
        g = summary.stats("all", "regime", reg)
        if g:
            info[f"{reg}_median_abs_error"] = g.estimated.median_abs
    for metric in validation.METRICS:
        g = summary.stats(metric)
        if g:
            info[f"{metric}_estimated_median_abs_error"] = g.estimated.median_abs
            info[f"{metric}_ideal_median_abs_error"] = g.ideal.median_abs
    return info


def _fold(args):
    """One device's held-out predictions (a worker of ``_cv``)."""
    mapped, table, slug = args
    return fitting.leave_one_device_out(mapped, table, [slug])


def _cv(mapped, table, jobs: int = 1) -> tuple[dict, dict]:
    """Leave-one-device-out median |error| by regime, by regime and class, and of the
    batched rows by stack (``jobs`` processes: one fold per held-out device, the folds of
    ``fitting.leave_one_device_out``); and by regime and device preset ("regime.slug": the
    figure ``llmpara validate --loo --regime R --device slug`` prints, so a test can check
    one cheap fold against the table instead of refitting every fold)."""
    t0 = time.time()
    if jobs == 1:
        held = fitting.leave_one_device_out(mapped, table)
    else:
        first = {}
        for r in mapped:                  # one slug per physical device (twins held together)
            first.setdefault(fitting.device_key(r.hardware), r.hardware.slug)
        with ProcessPoolExecutor(jobs) as pool:
            held = [p for part in pool.map(_fold, [(mapped, table, s)
                                                    for s in sorted(first.values())])
                    for p in part]
    by, by_device = defaultdict(list), defaultdict(list)
    for p in held:
        reg = validation.regime(p.row)
        by_device[f"{reg}.{p.row.hardware.slug}"].append(abs(p.error))
        by[reg].append(abs(p.error))
        by[f"{reg}.{p.efficiency_class.value}"].append(abs(p.error))
        by[f"{reg}.{p.row.framework or 'other'}"].append(abs(p.error))
    out = {k: statistics.median(v) for k, v in sorted(by.items()) if len(v) >= 3}
    print(f"\nleave-one-device-out (each device predicted by a fit without it; "
          f"{time.time() - t0:.0f} s): median |error|")
    for k, v in out.items():
        print(f"  {k:36s} {v:6.1%}  ({len(by[k])} rows)")
    return out, {k: statistics.median(v) for k, v in sorted(by_device.items())}


def _print_table(table) -> None:
    print("\nclass            memory  compute  overhead_us  kv_read  rows")
    for cls, rows in table.class_rows.items():
        e = table.classes[cls]
        print(f"{cls.value:16s} {e.memory:6.3f}  {e.compute:7.3f}  "
              f"{e.kernel_overhead_s * 1e6:11.2f}  {e.kv_read:7.3f}  {rows}")
    for name, v in sorted(table.memory_types.items()):
        print(f"memory_type {name:10s} " + "  ".join(f"{k}={x:.3f}" for k, x in v.items()))
    print("\nstack            memory_scale  compute_scale  overhead_scale  rows  absolute")
    for p in table.frameworks.values():
        print(f"{p.name:16s} {p.memory_scale:12.3f}  {p.compute_scale:13.3f}  "
              f"{p.overhead_scale:14.3f}  {p.rows:4d}  "
              + ", ".join(f"{k}={v:.4g}" for k, v in p.absolute.items()))


def _print_errors(summary) -> None:
    print("\nmedian |predicted/measured - 1|     n   ideal  generic  estimated")
    for g in summary.groups:
        if g.kind == "framework" and g.estimated.n < 2:
            continue
        if g.kind == "regime-class":
            continue
        name = f"{g.metric} {g.kind}:{g.group}" if g.kind != "all" else f"{g.metric} (all)"
        print(f"  {name:38s} {g.estimated.n:3d}  {g.ideal.median_abs:6.1%}  "
              f"{g.generic.median_abs:6.1%}  {g.estimated.median_abs:8.1%}")


if __name__ == "__main__":
    sys.exit(main())
