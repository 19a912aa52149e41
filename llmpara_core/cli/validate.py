"""``llmpara validate``: predictions against published measurements and the error summary.

    llmpara validate                                   # shipped measurements, table
    llmpara validate --data my_runs.csv --format json  # your CSV (same columns)
    llmpara validate --data my_runs.csv --refit        # fit the efficiencies on it first
    llmpara validate --loo --regime batched            # leave-one-device-out, one regime
    llmpara validate --regime speculative [--loo]      # speculative speedup vs batch sweeps
                                                       # (--loo: ~1 min; --time-budget 600)
    llmpara validate --regime energy [--loo]           # energy per output token (ML.ENERGY)
    llmpara validate --regime tp [--loo]               # tensor-parallel series (--loo: ~2 min)

Formats: ``table`` prints the error summary, the worst cases with the likely reason and the
skipped rows; ``json`` one object with the summary, the worst cases, the skipped rows and every
prediction; ``csv`` the per-row predictions (errors = predicted / measured - 1).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from ..limits import MAX_REFIT_ROWS, MAX_VALIDATE_ROWS, check_size
from .base import add_output_args, emit, positive_int
from ..errors import ConfigError
from ..calibration.measurements import MAX_CSV_BYTES, REGIMES

SPECULATIVE = "speculative"
ENERGY = "energy"
SERVING_MAXLOAD = "serving-maxload"
MLPERF = "mlperf"
TP = "tp"
SERVING = (SERVING_MAXLOAD, MLPERF)


def register(sub) -> None:
    p = sub.add_parser("validate", help="compare predictions with published measurements")
    p.add_argument("--data", help="measurements CSV (columns of presets/tables/"
                                  "measurements.csv; default: the shipped file)")
    p.add_argument("--refit", action="store_true",
                   help="fit the efficiency model on this data before predicting "
                        "(in-sample errors)")
    p.add_argument("--loo", action="store_true",
                   help="leave-one-device-out: predict each device's rows with the model "
                        "refitted without them (slow: one refit per device)")
    p.add_argument("--regime", choices=("all",) + REGIMES + (SPECULATIVE, ENERGY, TP) + SERVING,
                   default="all",
                   help="only rows of this regime: batch-1 decode, batched (running or "
                        "static batch > 1) or prefill (default all of these); speculative: "
                        "the published speculative-decoding batch sweeps, alpha fitted on each "
                        "sweep's smallest batch and the other batches predicted (--loo: "
                        "leave one sweep out); energy: J per output token of the ML.ENERGY "
                        "rows under the power model (--loo: leave one device out); tp: tokens/s "
                        "per sequence and speedup of the published tensor-parallel series "
                        "(--loo: leave one series out for the stack fitted on them); "
                        "serving-maxload: `llmpara serve` against the TensorRT-LLM max-load "
                        "rows (per GPU, per TP); mlperf: against the MLPerf v4.1 Offline / "
                        "Server rows (never fitted on); serving-maxload --loo: each GPU with "
                        "TensorRT-LLM's runtime reserve, the FP8 power wall's duty and the "
                        "release factors fitted without its rows)")
    p.add_argument("--sample", type=positive_int, metavar="N",
                   help="serving regimes: only every N-th row (a quick look)")
    p.add_argument("--requests", type=positive_int,
                   help="serving regimes: requests simulated per row (default 1000 max-load; "
                        "MLPerf 3000 offline / 1500 server)")
    p.add_argument("--device", action="append", metavar="PRESET",
                   help="with --loo: hold out only these device presets (repeatable)")
    p.add_argument("--pooled", action="store_true",
                   help="serving regimes: every TensorRT-LLM row on the pooled profile (no "
                        "release factors; default: each max-load row at its release's, MLPerf "
                        "v4.1 rows at 0.11's)")
    p.add_argument("--worst", type=positive_int, default=12, help="worst cases to list")
    add_output_args(p)
    p.set_defaults(func=run)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    f = Path(path)
    if not f.is_file():
        raise ConfigError(f"measurements file not found: {path}")
    if f.stat().st_size > MAX_CSV_BYTES:
        raise ConfigError(f"{path}: too large for a measurements CSV")
    try:
        return f.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None


def run(args) -> None:
    if args.regime == SPECULATIVE:
        return _run_speculative(args)
    if args.regime == ENERGY:
        return _run_energy(args)
    if args.regime == TP:
        return _run_tp(args)
    if args.regime in SERVING:
        return _run_serving(args)
    if args.requests is not None or args.sample is not None or args.pooled:
        raise ConfigError("--requests, --sample and --pooled apply to --regime serving-maxload "
                          "or mlperf")
    from ..calibration import efficiency as calibration, fitting, measurements as validation, summary as vs
    data = _read(args.data)
    rows, skipped = (validation.read_measurements(data) if data is not None
                     else validation.read_shipped())
    if data is not None:
        cap = MAX_REFIT_ROWS if args.refit else MAX_VALIDATE_ROWS
        check_size(f"rows in --data{' with --refit' if args.refit else ''}",
                   len(rows) + len(skipped), cap,
                   "split the file into smaller ones" + (" or validate without --refit"
                                                          if args.refit else ""))
    mapped, skipped = validation.map_all(rows, skipped)
    in_regime = [r for r in mapped if args.regime in ("all", validation.regime(r))]
    if not in_regime:
        raise ConfigError(f"no row could be mapped to a scenario ({len(skipped)} skipped; "
                          f"first reason: {skipped[0].reason if skipped else 'none'})")
    if args.device and not args.loo:
        raise ConfigError("--device selects the devices held out by --loo; add --loo")
    table = calibration.default_table()
    if args.refit:
        table = fitting.fit_table(mapped, table)
    if args.loo:      # refits see every row; only the regime's devices are held out
        known = {r.hardware.slug for r in in_regime}
        bad_dev = [d for d in (args.device or []) if d not in known]
        if bad_dev:
            raise ConfigError(f"--device {bad_dev[0]!r} has no {args.regime} rows in this data")
        preds = fitting.leave_one_device_out(mapped, table, args.device or sorted(known))
        preds = [p for p in preds if args.regime in ("all", validation.regime(p.row))]
        bad = []
    else:
        preds, bad = validation.predict_all(in_regime, table)
    summary = vs.summarize(preds, skipped + bad, args.worst,
                           fitted_classes=set(fitting.fitted_classes(table)))
    if args.format == "json":
        emit(vs.summary_dict(summary, preds) | {"refit": bool(args.refit), "loo": args.loo,
                                                "regime": args.regime}, "json")
    elif args.format == "csv":
        emit(None, "csv", [vs.prediction_row(p) | {"regime": validation.regime(p.row)}
                           for p in preds])
    else:
        _print_table(summary, args.loo)


def _run_speculative(args) -> None:
    """``--regime speculative``: the batch-sweep validation (speculative.batch_sweeps)."""
    for flag, given in (("--data", args.data), ("--refit", args.refit),
                        ("--device", args.device)):
        if given:
            raise ConfigError(f"{flag} does not apply to --regime speculative (it validates "
                              "the shipped speculative measurements; alpha is fitted per sweep)")
    from ..speculative import batch_sweeps as bs
    if args.loo:
        from ..speculative.fit import fit_costs
        f = fit_costs()
        v = bs.SweepValidation(tuple(s for s, _ in f.held_out), True)
        how = ("leave-one-sweep-out: each sweep predicted with the speculation costs fitted on "
               "the other sweeps (speculative.fit)")
    else:
        v = bs.validate_sweeps()
        how = "the speculation costs of presets/tables/speculative_costs.toml (fitted on all sweeps)"
    if args.format == "json":
        emit(bs.validation_dict(v) | {"loo": bool(args.loo)}, "json")
    elif args.format == "csv":
        emit(None, "csv", bs.sweep_rows(v))
    else:
        sys.stdout.write(
            f"speculative speedup vs batch: {len(v.sweeps)} published sweep(s); alpha fitted on "
            f"each sweep's smallest batch, the other {len(v.errors)} row(s) predicted at their "
            f"own batch and gamma (estimated rates, the row's stack profile); {how}.\n"
            f"median |error| {_pct(v.median_abs_error)} (criterion <= "
            f"{_pct(bs.SWEEP_TOLERANCE_MEDIAN)}: {'met' if v.passes else 'NOT met'}); "
            "error = predicted / measured - 1.\n\n")
        emit(None, "table", [{k: (_pct(r[k], signed=True) if k == "error" else r[k])
                              for k in ("row_id", "batch", "gamma", "profile", "alpha_fitted",
                                        "role", "measured_speedup", "predicted_speedup",
                                        "error")} for r in bs.sweep_rows(v)])


def _run_energy(args) -> None:
    """``--regime energy``: J per output token of the shipped ML.ENERGY rows under the power
    model (metrics.energy_validation); ``--loo``: each device with constants fitted without
    it (metrics.energy_fit)."""
    for flag, given in (("--data", args.data), ("--refit", args.refit),
                        ("--device", args.device)):
        if given:
            raise ConfigError(f"{flag} does not apply to --regime energy (it validates the "
                              "shipped energy measurements)")
    from ..metrics import energy_fit as ef, energy_validation as ev
    if args.loo:
        fit = ef.fit_energy()
        preds = fit.held_out
        how = ("leave-one-device-out: each device's batched rows predicted with the power "
               "constants fitted on the other device's rows; batch-1 rows are never fitted")
    else:
        preds = ev.predict_rows()
        how = "the power constants of presets/tables/energy_power.toml (fitted on every batched row)"
    groups = [("batched, all", [p for p in preds if p.work.batched])] + [
        (g, [p for p in preds if ev.group_of(p.work) == g])
        for g in ("batched, 1 GPU", "batched, tensor parallel", "batch 1")]
    batched = ev.median_abs(groups[0][1])
    rows = [{"row_id": p.work.measurement.row_id, "hardware": p.work.measurement.hardware_preset,
             "devices": p.work.devices, "model": p.work.measurement.model_preset,
             "batch": p.work.measurement.batch, "stack": p.work.stack, "group": ev.group_of(p.work),
             "measured_j_per_token": p.measured_j_per_token,
             "predicted_j_per_token": p.predicted_j_per_token, "error": p.error}
            for p in preds]
    def component_median(ps):
        e = [abs(ev.component_j_per_token(p.work) / p.measured_j_per_token - 1) for p in ps]
        return statistics.median(e) if e else None
    summary = [{"group": g, "n": len(ps), "median_abs_error": ev.median_abs(ps),
                "component_model_median_abs_error": component_median(ps)} for g, ps in groups]
    if args.format == "json":
        emit({"regime": ENERGY, "loo": bool(args.loo), "method": how,
              "criterion": {"batched_median_abs_error_max": ev.ENERGY_TOLERANCE_MEDIAN},
              "batched_median_abs_error": batched,
              "passes": batched is not None and batched <= ev.ENERGY_TOLERANCE_MEDIAN,
              "groups": summary, "rows": rows}, "json")
    elif args.format == "csv":
        emit(None, "csv", rows)
    else:
        ok = batched is not None and batched <= ev.ENERGY_TOLERANCE_MEDIAN
        sys.stdout.write(
            f"energy per output token (ML.ENERGY, GPU energy, prefill folded in): {len(preds)} "
            f"rows, each timed under the stack it measured; {how}.\n"
            f"batched median |error| {_pct(batched)} (criterion <= "
            f"{_pct(ev.ENERGY_TOLERANCE_MEDIAN)}: {'met' if ok else 'NOT met'}); error = "
            "predicted / measured - 1.\n\n")
        emit(None, "table", [{**r, "median_abs_error": _pct(r["median_abs_error"]),
                              "component_model_median_abs_error":
                                  _pct(r["component_model_median_abs_error"])}
                             for r in summary])
        sys.stdout.write("component model: metrics.energy's static + pJ/FLOP + pJ/byte "
                         "(no constant fitted on these rows), for comparison.\n")
        out = sys.stdout
        out.write("\n")
        emit(None, "table", [{**r, "error": _pct(r["error"], signed=True)} for r in rows])


def _run_tp(args) -> None:
    """``--regime tp``: the published tensor-parallel series (calibration.tp_measurements);
    ``--loo``: each series of a stack fitted on these series predicted with that stack refitted
    without it."""
    for flag, given in (("--data", args.data), ("--refit", args.refit),
                        ("--device", args.device), ("--requests", args.requests),
                        ("--sample", args.sample), ("--pooled", args.pooled)):
        if given:
            raise ConfigError(f"{flag} does not apply to --regime tp (it validates the shipped "
                              "tensor-parallel series)")
    from ..calibration import tp_validation as tpm
    fitted = ", ".join(tpm.tp_fitted_stacks()) or "none"
    if args.loo:
        comps = tpm.held_out_comparisons()
        how = (f"leave-one-series-out: each series of the stacks fitted on these series "
               f"({fitted}) predicted with the stack refitted on the other series; the other "
               "stacks' constants come from decode rows, never from these")
    else:
        comps = tpm.compare_tp_measurements()
        how = (f"the shipped efficiency table (in sample for {fitted}, fitted on these series; "
               "--loo for the held-out figure)")
    s = tpm.tp_error_summary(comps)
    rows = [{"row_id": c.measurement.row_id, "series": c.series, "framework": c.framework,
             "tp": c.measurement.tp, "pp": c.measurement.pp,
             "measured_tokens_per_s": c.measurement.decode_tokens_per_s,
             "predicted_tokens_per_s": c.predicted_tokens_per_s, "error": c.error,
             "measured_speedup": c.measured_speedup, "predicted_speedup": c.predicted_speedup,
             "speedup_error": c.speedup_error, "superlinear_series": c.superlinear_series}
            for c in comps]
    if args.format == "json":
        emit({"regime": TP, "loo": bool(args.loo), "method": how, "summary": s, "rows": rows},
             "json")
        return
    if args.format == "csv":
        emit(None, "csv", rows)
        return
    sys.stdout.write(
        f"tensor-parallel series: {s['rows']} rows; tokens/s per sequence = generated tokens / "
        f"end-to-end time; speedup within a series over its fewest-device row ({s['scaled_rows']}"
        f" rows that scale, a superlinear series set aside); {how}. error = predicted / "
        "measured - 1.\n\n")
    groups = [("all", s)] + [(f"framework: {k}", v) for k, v in s["per_framework"].items()]
    emit(None, "table", [{"group": g, "n": v["rows"],
                          "median_abs_error": _pct(v["median_abs_error"]),
                          "signed_median": _pct(v["median_signed_error"], signed=True),
                          "median_abs_speedup_error": _pct(v["median_abs_speedup_error"])}
                         for g, v in groups])


def _run_serving(args) -> None:
    """``--regime serving-maxload | mlperf``: the serving simulator against published serving
    results (shipped copies of the shared rows). One constant is fitted on the max-load rows,
    the FP8 power wall's duty (``serving.cost.TENSOR_DUTY``): ``--loo`` predicts each GPU's
    rows with the duty fitted without them (``serving.duty_fit``). Nothing is fitted on the
    MLPerf rows, so ``--loo`` prints the same figures there."""
    for flag, given in (("--data", args.data), ("--refit", args.refit),
                        ("--device", args.device)):
        if given:
            raise ConfigError(f"{flag} does not apply to --regime {args.regime} (it validates "
                              "the shipped serving rows; nothing is fitted on them)")
    from ..serving import mlperf, validation as sv
    duties = reserves = None
    releases = not args.pooled
    if args.regime == SERVING_MAXLOAD:
        rows = sv.load_rows(sv.SHIPPED_MAX_LOAD)[::args.sample or 1]
        comps = sv.compare(rows, args.requests or sv.MAX_LOAD_REQUESTS, releases)
        if args.loo and releases:
            # TensorRT-LLM's runtime reserve, the power wall's duty and the release factors,
            # all refitted without each GPU (``serving.reserve_fit``)
            from ..serving import reserve_fit
            by_reserve = reserve_fit.record_all(rows,
                                                requests=args.requests or sv.MAX_LOAD_REQUESTS)
            held, picked = reserve_fit.leave_one_gpu_out(by_reserve)
            duties = {g: d for g, (_, d) in picked.items()}
            reserves = {g: r for g, (r, _) in picked.items()}
        elif args.loo:              # pooled: the duty alone, at the shipped reserve
            from ..serving import duty_fit
            records = duty_fit.record(rows, args.requests or sv.MAX_LOAD_REQUESTS)
            held, duties = duty_fit.leave_one_gpu_out(records)
        if args.loo:
            err = {id(r): e for r, e in held}
            comps = tuple(sv.MaxLoadComparison(c.row, c.row.measured * (1 + err[id(c.row)]))
                          if id(c.row) in err else c for c in comps)
        s = sv.error_summary(comps)
        per_row = [{"row_id": c.row.row_id, "hardware": c.row.hardware, "model": c.row.model,
                    "precision": c.row.precision, "tp": c.row.tp, "isl": c.row.isl,
                    "osl": c.row.osl, "measured": c.row.measured, "predicted": c.predicted,
                    "error": c.error, "skipped": c.skipped} for c in comps]
        title = (f"serving max-load output tokens/s, TensorRT-LLM ({s['rows']} rows, "
                 f"{s['skipped']} skipped)")
        groups = [("all", "", s)] + [("gpu (leave-one-GPU-out)" if args.loo else "gpu", k, v)
                                     for k, v in s["per_gpu"].items()] \
            + [("tp", f"TP{k}", v) for k, v in s["per_tp"].items()]
    else:
        rows = mlperf.load_rows()[::args.sample or 1]
        if args.requests:
            comps = mlperf.compare(rows, args.requests, args.requests, releases)
        else:
            comps = mlperf.compare(rows, releases=releases)
        s = mlperf.error_summary(comps)
        per_row = [{"system": c.row.system, "gpu": c.row.gpu, "tp": c.row.tp, "pp": c.row.pp,
                    "instances": c.row.instances, "benchmark": c.row.benchmark,
                    "scenario": c.row.scenario, "precision": c.row.precision,
                    "measured": c.row.measured, "predicted": c.predicted, "error": c.error,
                    "skipped": c.skipped} for c in comps]
        title = f"MLPerf Inference v4.1 output tokens/s ({s['rows']} rows, {s['skipped']} skipped)"
        groups = [("all", "", s)] + [("scenario", k, v) for k, v in s["per_scenario"].items()] \
            + [("gpu (= leave-one-GPU-out)", k, v) for k, v in s["per_gpu"].items()]
    if args.format == "json":
        emit({"regime": args.regime, "loo": args.loo, "summary": s, "rows": per_row}
             | ({"loo_duty_by_gpu": duties} if duties is not None else {})
             | ({"loo_runtime_reserve_gib_by_gpu": reserves} if reserves is not None else {}),
             "json")
        return
    if args.format == "csv":
        emit(None, "csv", per_row)
        return
    if args.regime == SERVING_MAXLOAD:
        from ..serving import cost as serving_cost
        from ..serving.config import TRTLLM_RUNTIME_RESERVE_GIB
        fitted = (f"the FP8 power wall's duty ({serving_cost.TENSOR_DUTY:g})"
                  + ("" if args.pooled else ", TensorRT-LLM's runtime reserve "
                     f"({TRTLLM_RUNTIME_RESERVE_GIB:g} GiB per device: serving.reserve_fit) and "
                     "the release factors (each row at its release's: serving.stack_version)")
                  + " are fitted on these rows")
        note = (fitted + "; --loo predicts each GPU's rows with them fitted without its rows "
                "(duty: " + ", ".join(f"{k}: {v:g}" for k, v in duties.items())
                + ("" if reserves is None else "; reserve [GiB]: " + ", ".join(
                    f"{k}: {v:g}" for k, v in reserves.items())) + ")"
                if duties is not None else
                fitted + " (in sample; --loo for the leave-one-GPU-out figures)")
    else:
        from ..serving.stack_version import MLPERF_V41_VERSION
        note = ("nothing is fitted on these rows, so each GPU's figure is its leave-one-GPU-out "
                f"figure{' (--loo: the same)' if args.loo else ''}"
                + ("" if args.pooled else f"; TensorRT-LLM rows at release {MLPERF_V41_VERSION}"
                   "'s factors (the round's release)"))
    sys.stdout.write(f"{title}: error = predicted / measured - 1; {note}.\n\n")
    emit(None, "table", [{"group": k if not g else f"{k}: {g}", "n": v["rows"],
                          "median_abs_error": _pct(v["median_abs_error"]),
                          "signed_median": _pct(v["median_signed_error"], signed=True)}
                         for k, g, v in groups])


def _print_table(summary, loo: bool = False) -> None:
    out = sys.stdout
    h = summary.headline
    out.write(("leave-one-device-out: each device predicted by a fit without its rows.\n"
               if loo else ""))
    out.write(f"{summary.rows} rows predicted, {len(summary.skipped)} skipped. Estimated "
              f"batch-1 decode tokens/s: median |error| {_pct(h.median_abs)} over {h.n} "
              "rows.\n"
              "error = predicted / measured - 1; generic = class values (stack-agnostic), "
              "estimated = with the row's stack profile (a row naming no stack: its class's "
              "default stack).\n\n")
    rows = [{"metric": g.metric, "group": g.group if g.kind == "all" else f"{g.kind}: {g.group}",
             "n": g.estimated.n, "ideal": _pct(g.ideal.median_abs),
             "generic": _pct(g.generic.median_abs), "estimated": _pct(g.estimated.median_abs),
             "bias": _pct(g.estimated.median_signed, signed=True),
             "within_15pct": _pct(g.estimated.within_band)} for g in summary.groups]
    emit(None, "table", rows)
    out.write("\nworst cases (estimated):\n")
    emit(None, "table", [{"row_id": w.prediction.row.measurement.row_id,
                          "metric": w.prediction.row.measurement.metric,
                          "hardware": w.prediction.row.hardware.name,
                          "model": w.prediction.row.model.name,
                          "measured": w.prediction.measured,
                          "estimated": w.prediction.estimated,
                          "error": _pct(w.prediction.error, signed=True),
                          "why": "; ".join(w.reasons)} for w in summary.worst])
    if summary.skipped:
        out.write("\nskipped rows:\n")
        emit(None, "table", [vs_skipped(s) for s in summary.skipped])


def vs_skipped(s) -> dict:
    return {"row_id": s.row_id, "hardware": s.hardware, "model": s.model, "reason": s.reason}


def _pct(x, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%}" if signed else f"{x:.1%}"
