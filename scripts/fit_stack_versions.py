"""Fit ``serving.stack_version.TIME_SCALE`` (a TensorRT-LLM release range's factor on the
roofline compute time of an iteration, per model family) on the TensorRT-LLM max-load rows
(``presets/tables/serving_max_load.csv``, copied from the shared ``batched_throughput.csv``),
with a leave-one-GPU-out figure (duty and factors refitted without each GPU).

    python scripts/fit_stack_versions.py [--requests N] [--cache F.pkl]

Prints the measured release effect first: on configurations measured under two releases, the
median ratio of their measured throughputs (no model involved). Then the model's error by
release before and after the factors. Method: ``llmpara_core.serving.stack_version`` on the
passes ``serving.duty_fit.record`` records (each configuration simulated once; re-timing is
exact at max load under the no-eviction policy). ``llmpara validate --regime serving-maxload
[--loo]`` gives the same figures.
"""

from __future__ import annotations

import argparse
import csv
import pickle
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import cost as C, duty_fit, stack_version as V, validation as sv  # noqa: E402,E501


def measured_effect(path) -> None:
    """Median measured ratio release / 0.17 on the same configuration, per family and
    precision (rows of both releases only)."""
    cfg = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["metric"] != "output_tok_s_total":
                continue
            k = (r["hardware"], r["model"], r["precision_weights"], r["tp"], r["isl"], r["osl"])
            cfg[k][r["framework_version"]].append(float(r["value"]))
    agg = defaultdict(list)
    for k, d in cfg.items():
        if "0.17" not in d:
            continue
        ref = median(d["0.17"])
        fam = "moe" if "Mixtral" in k[1] else "dense"
        for v, vals in d.items():
            if v != "0.17":
                agg[(fam, k[2], v)].append(median(vals) / ref)
    print("measured throughput, release / 0.17, same configuration (median, configurations):")
    for k in sorted(agg, key=lambda t: (t[0], t[1], V.parse(t[2]))):
        print(f"  {k[0]:5s} {k[1]:4s} {k[2]:7s} {median(agg[k]):.3f} ({len(agg[k])})")


def by_release(errs) -> str:
    by = defaultdict(list)
    for r, e in errs:
        by[(V._group(r) or ("-", "-"))].append(e)
    return "\n".join(f"  {g[0]:9s} {g[1]:5s} {median(map(abs, v)):.1%} ({median(v):+.1%}, "
                     f"{len(v)})" for g, v in sorted(by.items()))


def by_tp(errs) -> str:
    by = defaultdict(list)
    for r, e in errs:
        by[r.tp].append(e)
    return "; ".join(f"TP{k} {median(map(abs, v)):.1%} ({median(v):+.1%})"
                     for k, v in sorted(by.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=sv.MAX_LOAD_REQUESTS)
    ap.add_argument("--cache", help="pickle of the recorded passes (written if missing)")
    a = ap.parse_args()
    if a.requests < 1:
        print("--requests must be >= 1", file=sys.stderr)
        return 2
    measured_effect(sv.SHIPPED_MAX_LOAD)
    rows = sv.load_rows(sv.SHIPPED_MAX_LOAD)
    if a.cache and Path(a.cache).exists():
        by_id = {r.row_id: r for r in rows}
        records = [(by_id[i], p) for i, p in pickle.loads(Path(a.cache).read_bytes())]
    else:
        records = duty_fit.record(rows, a.requests)
        if a.cache:
            Path(a.cache).write_bytes(pickle.dumps([(r.row_id, p) for r, p in records]))
    duty = C.TENSOR_DUTY
    base = V.errors(records, duty, {})
    print(f"\npooled profile (factor 1): {V.summary(base)}\n  {by_tp(base)}\n{by_release(base)}")
    table = V.fit(records, duty)
    res = V.errors(records, duty, table)
    print("\nfitted TIME_SCALE = {" + ", ".join(f"{k!r}: {v:.2f}" for k, v in table.items())
          + "}")
    print(f"with the factors: {V.summary(res)}\n  {by_tp(res)}\n{by_release(res)}")
    _, duties = duty_fit.leave_one_gpu_out(records)
    held, chosen = V.leave_one_gpu_out(records, duties)
    held0, _ = duty_fit.leave_one_gpu_out(records)
    for g in chosen:
        print(f"leave out {g}: held out {V.summary([x for x in held if x[0].hardware == g])} "
              f"(without factors {V.summary([x for x in held0 if x[0].hardware == g])})")
    print(f"leave-one-GPU-out, all rows: {V.summary(held)} (without factors "
          f"{V.summary(held0)})\n  {by_tp(held)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
