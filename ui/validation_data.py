"""What the Validation page shows, as plain JSON-able data computed by the core (the page
caches it with ``st.cache_data``)."""

from __future__ import annotations

import json

from llmpara_core import calibration
from llmpara_core.calibration import fitting, measurements as validation
from llmpara_core.calibration.efficiency import KERNEL_PLANS
from llmpara_core.calibration import summary as vs
from llmpara_core.efficiency_table import read_table
from llmpara_core.errors import ConfigError
from llmpara_core.limits import MAX_REFIT_ROWS, MAX_VALIDATE_ROWS, check_size
from llmpara_core.metrics import energy_validation
from llmpara_core.speculative import batch_sweeps, costs as spec_costs
from llmpara_core.units import S_PER_US


def compute(upload: bytes | None, source: str, refit: bool, refit_frameworks: bool) -> dict:
    """Everything the page shows (raises the core's ConfigError). ``source``: "Shipped",
    "Uploaded" or "Both"."""
    rows, skipped = ([], []) if source == "Uploaded" else validation.read_shipped()
    if upload is not None and source != "Shipped":
        more, more_skipped = validation.read_measurements(upload)
        check_size("rows in the uploaded file" + (" with the refit" if refit else ""),
                   len(more) + len(more_skipped), MAX_REFIT_ROWS if refit else MAX_VALIDATE_ROWS,
                   "upload a smaller file" + (" or turn the refit off" if refit else ""))
        rows, skipped = rows + more, skipped + more_skipped
    mapped, skipped = validation.map_all(rows, skipped)
    if not mapped:
        raise ConfigError(f"no row could be mapped to a scenario ({len(skipped)} skipped"
                          + (f"; first reason: {skipped[0].reason}" if skipped else "") + ")")
    table = calibration.default_table()
    if refit:
        table = fitting.fit_table(mapped, table, frameworks=refit_frameworks)
    preds, bad = validation.predict_all(mapped, table)
    fitted = set(fitting.fitted_classes(table))
    summary = vs.summarize(preds, skipped + bad, worst=len(preds), fitted_classes=fitted)
    # the speculative regime: the shipped speedup-vs-batch sweeps (not part of an upload)
    spec = batch_sweeps.regime_rows() if source != "Uploaded" else []
    # the energy regime: the shipped ML.ENERGY rows under the power model (not an upload)
    energy = energy_validation.regime_rows() if source != "Uploaded" else []
    return {"predictions": [vs.prediction_row(p) for p in preds],
            "groups": [vs.group_row(g) for g in summary.groups] + spec + energy,
            # leave-one-out figures the energy and speculative fit scripts wrote (recomputed
            # by `llmpara validate --regime energy|speculative --loo`)
            "loo_energy": energy_validation.recorded_fit() if source != "Uploaded" else {},
            "loo_speculative": spec_costs.recorded_fit() if source != "Uploaded" else {},
            "worst": [vs.prediction_row(w.prediction) | {"reasons": list(w.reasons)}
                      for w in summary.worst],
            "skipped": [vs.skipped_row(s) for s in summary.skipped],
            "summary": vs.summary_dict(summary) | {"refit": refit},
            "classes": _class_rows(table), "frameworks": _framework_rows(table),
            "memory_types": _memory_rows(table),
            "table_toml": calibration.table_to_toml(table),
            "headline_median_abs": summary.headline.median_abs,
            # the shipped fit's leave-one-device-out figures (written by the fit script and
            # equal to `llmpara validate --loo`); they describe the shipped table only
            "loo": (read_table().get("fit", {}).get("leave_one_device_out", {})
                    if source == "Shipped" and not refit else {})}


def _class_rows(table) -> list[dict]:
    return [{"class": c.value, "memory (× peak BW)": e.memory,
             "kernel overhead [µs] @ 2 GHz": e.kernel_overhead_s / S_PER_US,
             "kv_read (× achieved BW)": e.kv_read, "compute (× dense peak)": e.compute,
             "quantised GEMMs (× compute on their unit)": e.quant_compute,
             "rows fitted": int(table.class_rows.get(c, 0)),
             "values": "fitted" if table.class_rows.get(c) else "provisional (no data)"}
            for c, e in table.classes.items()]


def _framework_rows(table) -> list[dict]:
    return [{"framework": name, "memory ×": p.memory_scale, "overhead ×": p.overhead_scale,
             "compute ×": p.compute_scale,
             "values replaced": ", ".join(f"{k} = {v:.3g}" for k, v in p.absolute.items()),
             "kernel plan (launches per operator)": ", ".join(
                 f"{k} {v:g}" for k, v in sorted(KERNEL_PLANS.get(name, {}).items())) or "—",
             "native kernels": p.native_kernels, "rows": p.rows, "note": p.note}
            for name, p in table.frameworks.items()]


def _memory_rows(table) -> list[dict]:
    return [{"memory technology": k, "memory (× peak BW)": v.get("memory"),
             "rows fitted": int(table.memory_type_rows.get(k, 0))}
            for k, v in sorted(table.memory_types.items())]


def normalised(result: dict) -> dict:
    """``result`` as it reads back from JSON (tuples -> lists), for comparisons."""
    return json.loads(json.dumps(result, default=str))
