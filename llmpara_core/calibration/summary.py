"""Error summary of predictions against measurements: median absolute error per metric, per
hardware class and per framework (ideal, generic and framework-aware estimates), the worst
cases with the likely reason, and plain rows for tables, CSV and JSON.

Error = predicted / measured - 1 (+0.20 = the model predicts 20 % more tokens/s, or 20 % more
milliseconds for TTFT, than measured).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..hardware import HardwareClass
from .measurements import (METRICS, REGIMES, Prediction, Skipped, lacks_tensor_peak, regime,
                           row_stack, unsteady_prefill)

MODES = ("ideal", "generic", "estimated")
BAND = 0.15                   # the page's +-15 % band
LONG_CONTEXT_TOKENS = 2048
UNIFIED_MEMORY_PRESSURE = 0.6  # share of unified memory the weights take before macOS caps it
ANOMALY = 2.0                  # estimate > 3x the measurement


@dataclass(frozen=True)
class ErrorStats:
    n: int
    median_abs: float | None
    median_signed: float | None
    p90_abs: float | None
    within_band: float | None          # share of rows within +-BAND

    @classmethod
    def of(cls, errors: list[float]) -> "ErrorStats":
        if not errors:
            return cls(0, None, None, None, None)
        a = sorted(abs(e) for e in errors)
        p90 = a[min(len(a) - 1, int(round(0.9 * (len(a) - 1))))]
        return cls(len(errors), statistics.median(a), statistics.median(errors), p90,
                   sum(x <= BAND for x in a) / len(a))


@dataclass(frozen=True)
class GroupStats:
    metric: str
    kind: str                 # "all", "class" or "framework"
    group: str
    ideal: ErrorStats
    generic: ErrorStats
    estimated: ErrorStats


@dataclass(frozen=True)
class Worst:
    prediction: Prediction
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    groups: tuple[GroupStats, ...]
    worst: tuple[Worst, ...]
    skipped: tuple[Skipped, ...]
    rows: int

    def stats(self, metric: str, kind: str = "all", group: str = "all") -> GroupStats | None:
        return next((g for g in self.groups if (g.metric, g.kind, g.group)
                     == (metric, kind, group)), None)

    @property
    def headline(self) -> ErrorStats:
        """Estimated batch-1 decode tokens/s over every mapped row (the issue's target)."""
        g = self.stats("decode_tok_s", "batch-1", "all")
        return g.estimated if g else ErrorStats.of([])


def framework_group(p: Prediction) -> str:
    return p.row.framework or f"other: {p.row.measurement.framework or 'not stated'}"


def _group(metric: str, kind: str, name: str, ps: list[Prediction]) -> GroupStats:
    return GroupStats(metric, kind, name, ErrorStats.of([p.ideal_error for p in ps]),
                      ErrorStats.of([p.generic_error for p in ps]),
                      ErrorStats.of([p.error for p in ps]))


def summarize(preds: list[Prediction], skipped=(), worst: int = 12,
              fitted_classes: set | None = None) -> Summary:
    """Error statistics of ``preds``; ``fitted_classes`` (classes with fitted efficiencies)
    lets the reasons say when a class ran on provisional values."""
    groups = []
    for metric in METRICS:
        ps = [p for p in preds if p.row.measurement.metric == metric]
        if not ps:
            continue
        groups.append(_group(metric, "all", "all", ps))
        if metric == "decode_tok_s":
            groups.append(_group(metric, "batch-1", "all",
                                 [p for p in ps if p.row.measurement.batch == 1]))
        for cls in sorted({p.efficiency_class for p in ps}, key=lambda c: c.value):
            groups.append(_group(metric, "class", cls.value,
                                 [p for p in ps if p.efficiency_class is cls]))
        for fw in sorted({framework_group(p) for p in ps}):
            groups.append(_group(metric, "framework", fw,
                                 [p for p in ps if framework_group(p) == fw]))
    groups += regime_groups(preds)
    ranked = sorted(preds, key=lambda p: -abs(p.error))[:worst]
    unsteady = unsteady_prefill([p.row for p in preds])
    return Summary(tuple(groups),
                   tuple(Worst(p, why(p, fitted_classes, unsteady)) for p in ranked),
                   tuple(skipped), len(preds))


def regime_groups(preds: list[Prediction]) -> list[GroupStats]:
    """Errors by regime (batch-1 decode, batched, prefill), and within each by stack and by
    hardware class (metric "all": a regime pools its metrics)."""
    out = []
    for reg in REGIMES:
        ps = [p for p in preds if regime(p.row) == reg]
        if not ps:
            continue
        out.append(_group("all", "regime", reg, ps))
        for fw in sorted({framework_group(p) for p in ps}):
            out.append(_group("all", "regime-stack", f"{reg} / {fw}",
                              [p for p in ps if framework_group(p) == fw]))
        for cls in sorted({p.efficiency_class.value for p in ps}):
            out.append(_group("all", "regime-class", f"{reg} / {cls}",
                              [p for p in ps if p.efficiency_class.value == cls]))
    return out


def why(p: Prediction, fitted_classes: set | None = None,
        unsteady: set | None = None) -> tuple[str, ...]:
    """Likely reasons a prediction is off, from what the row and the scenario say;
    ``unsteady`` = row ids of prompt sweeps that speed up with their length
    (``measurements.unsteady_prefill`` over the rows validated together)."""
    row, m = p.row, p.row.measurement
    out = list(row.assumptions)
    if unsteady and m.row_id in unsteady:
        out.append("its prompt sweep runs faster at its longest prompt than at its shortest: "
                   "not a steady run (a prompt's work per token grows with its length)")
    fast = p.error > 0          # model faster than measured
    if p.ideal < p.measured:
        out.append("measured beats the ideal roofline: the preset's peak or bandwidth (or the "
                   "stated format size) understates this run")
    if m.metric != "decode_tok_s" and lacks_tensor_peak(row):
        out.append("the preset lists no fp16 tensor peak, so matmuls use the slower fp32 peak")
    if fitted_classes is not None and p.efficiency_class not in fitted_classes:
        out.append(f"class {p.efficiency_class.value} has no fitted efficiency (too few "
                   "measurements): provisional values")
    if row.framework is None and m.framework.strip():
        out.append(f"no profile for {m.framework}: generic class values")
    elif row.framework is None:
        out.append(f"no stack stated: the class's default stack ({row_stack(row)})")
    if p.error > ANOMALY:
        out.append(f"the estimate is {p.estimated / p.measured:.1f}x the measurement: an "
                   "anomalous run or a misconfiguration (offload, fallback kernels, throttling)")
    if row.devices > 1:
        out.append(_multi_device_reason(row, fast))
    if row.model.moe is not None and m.metric != "decode_tok_s" and fast:
        out.append("MoE prefill: routed experts run as many small grouped GEMMs (plus token "
                   "gather/scatter), below dense GEMM efficiency")
    share = _weight_share(row)
    if (p.efficiency_class is HardwareClass.UNIFIED_SOC and share is not None
            and share > UNIFIED_MEMORY_PRESSURE and fast):
        out.append(f"weights fill {share:.0%} of unified memory: macOS caps the GPU's working "
                   "set (about 65-75 % of RAM), so the run is memory-starved")
    if m.metric == "decode_tok_s" and row.workload.max_context > LONG_CONTEXT_TOKENS:
        out.append("long context: KV-cache reads take a growing share of each step")
    if m.metric == "prefill_tok_s" and row.workload.prompt_len > LONG_CONTEXT_TOKENS and fast:
        out.append("long prompt: attention kernels run below the GEMM efficiency fitted here")
    if "num_threads" in m.notes.lower():
        out.append("CPU run limited to the stated NUM_THREADS, fewer than the device's cores")
    if len(out) == len(row.assumptions):
        out.append("runs {} than the class profile: build, driver or settings differ between "
                   "sources".format("slower" if fast else "faster"))
    return tuple(out)


def _multi_device_reason(row, fast: bool) -> str:
    decode = row.measurement.metric == "decode_tok_s"
    if row.pp > 1 and decode:
        return ("layer split: this run's device boundaries cost more per token than the "
                "stack's fitted stage hop (host hand-off and synchronisation)" if fast else
                "layer split across devices (first-order pipeline model)")
    if row.pp > 1:
        return ("layer split: this run's prompt micro-batches overlap across the devices less "
                "than the pipeline modelled (llama.cpp PR #6017)" if fast else
                "layer split: the prompt's micro-batches overlap across the devices more than "
                "modelled")
    stack = row.measurement.framework or "the stack"
    return (f"tensor parallel over {row.tp} devices: {stack} synchronises more often (or over "
            "a slower path) than the modelled all-reduces" if fast else
            f"tensor parallel over {row.tp} devices: collectives overlap better than modelled")


def _weight_share(row) -> float | None:
    from ..memory import weight_bytes
    cap = row.hardware.memory_capacity_bytes
    return weight_bytes(row.model, row.precision) / cap if cap else None


# ---- plain rows -----------------------------------------------------------------------------

def prediction_row(p: Prediction) -> dict:
    """One prediction as a flat dict (CSV/JSON; errors as fractions)."""
    m, r = p.row.measurement, p.row
    return {"row_id": m.row_id, "metric": m.metric, "hardware": m.hardware,
            "preset": r.hardware.slug, "class": p.efficiency_class.value, "model": r.model.name,
            "framework": m.framework, "profile": r.framework or "generic",
            "devices": r.devices, "quant": m.quant, "batch": m.batch,
            "prompt_len": r.workload.prompt_len, "gen_len": r.workload.gen_len,
            "measured": m.value, "ideal": p.ideal, "generic": p.generic,
            "estimated": p.estimated, "ideal_error": p.ideal_error,
            "generic_error": p.generic_error, "error": p.error,
            "assumptions": "; ".join(r.assumptions), "source": m.source}


def group_row(g: GroupStats) -> dict:
    out = {"metric": g.metric, "kind": g.kind, "group": g.group, "n": g.estimated.n}
    for mode in MODES:
        s: ErrorStats = getattr(g, mode)
        out[f"{mode}_median_abs_error"] = s.median_abs
        out[f"{mode}_median_error"] = s.median_signed
        out[f"{mode}_p90_abs_error"] = s.p90_abs
        out[f"{mode}_within_15pct"] = s.within_band
    return out


def skipped_row(s: Skipped) -> dict:
    return {"row_id": s.row_id, "hardware": s.hardware, "model": s.model, "metric": s.metric,
            "reason": s.reason}


def summary_dict(s: Summary, preds: list[Prediction] | None = None) -> dict:
    """JSON-ready summary (and the per-row predictions when given)."""
    h = s.headline
    out = {"rows_predicted": s.rows, "rows_skipped": len(s.skipped),
           "headline": {"metric": "decode_tok_s", "batch": 1, "mode": "estimated",
                        "n": h.n, "median_abs_error": h.median_abs},
           "groups": [group_row(g) for g in s.groups],
           "worst": [prediction_row(w.prediction) | {"why": list(w.reasons)} for w in s.worst],
           "skipped": [skipped_row(x) for x in s.skipped]}
    if preds is not None:
        out["predictions"] = [prediction_row(p) for p in preds]
    return out
