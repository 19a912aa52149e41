"""Fit ``serving.cost.TENSOR_DUTY`` (the power wall of an FP8 serving iteration: the share of
its time a device can run its tensor cores at their full-clock FP8 rate within its TDP) on the
TensorRT-LLM max-load rows (``presets/tables/serving_max_load.csv``, copied from the shared
``batched_throughput.csv``), with a leave-one-GPU-out figure, and print the MLPerf v4.1 check
(rows never fitted on).

    python scripts/fit_tensor_duty.py [--requests N] [--duties 0.4,0.45,...] [--cache F.pkl]
                                      [--no-mlperf]

Each max-load configuration is simulated once without the wall, recording every iteration's
roofline compute time, tensor-core work and collective time. Under TensorRT-LLM's reserve
(no-eviction) policy at max load, which requests run in which iteration does not depend on
time, so the run's makespan under a wall of duty d is exactly
sum(max(compute, work / d) + collectives) over its iterations: every duty is scored from the
one simulation. The duty kept is the one with the lowest median |error| over all rows (grid);
leave-one-GPU-out picks it on the other GPUs' rows and scores the held-out GPU's rows.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.precision import DType  # noqa: E402
from llmpara_core.serving import cost as C, mlperf, validation as sv  # noqa: E402

DEFAULT_DUTIES = "0.36,0.38,0.4,0.42,0.44,0.46,0.47,0.48,0.5,0.52,0.55,0.6,0.7"


def collect(requests: int):
    """[(row, key)], {key: (out tokens, comp (n,), work (n,), comm (n,))}: the iterations of
    each distinct configuration simulated once without the wall."""
    saved, C.TENSOR_DUTY = C.TENSOR_DUTY, None
    orig = C.IterationCost._stage_parts
    rec: list = []

    def spy(self, i, F, n_seqs):
        comp, work, comm = orig(self, i, F, n_seqs)
        fp8 = self._rates.dtype_used is DType.FP8      # the wall applies to FP8 passes
        rec.append((comp.copy(), work.copy() if fp8 else np.zeros_like(work),
                    np.broadcast_to(comm, comp.shape).copy(), self.plan.overlap))
        return comp, work, comm
    C.IterationCost._stage_parts = spy
    rows, runs = [], {}
    try:
        for r in sv.load_rows(sv.SHIPPED_MAX_LOAD):
            dev, model = sv.device_for(r), sv.MODELS.get(r.model)
            prec = sv.PRECISIONS.get(r.precision)
            if dev is None or model is None or prec is None:
                continue
            key = (model, dev, prec, r.tp, r.isl, r.osl, r.max_batch, r.max_num_tokens)
            if key not in runs:
                rec.clear()
                sv.predict.cache_clear()
                try:
                    res = _simulate(model, dev, prec, r, requests)
                except Exception:       # noqa: BLE001 - rows that cannot run are left out
                    runs[key] = None
                    continue
                # the engine keeps the first k rows of a decode block (all of them at max load)
                comp = np.concatenate([c for c, _, _, _ in rec])
                work = np.concatenate([w for _, w, _, _ in rec])
                comm = np.concatenate([m for _, _, m, _ in rec])
                total = comp + comm
                if abs(total.sum() - res.busy_s) > 1e-6 * res.busy_s:
                    raise RuntimeError(f"{key}: recorded iterations do not add up to the run")
                runs[key] = (float(res.osl.sum()), comp, work, comm)
            if runs[key] is not None:
                rows.append((r, key))
    finally:
        C.IterationCost._stage_parts = orig
        C.TENSOR_DUTY = saved
        sv.predict.cache_clear()
    return rows, runs


def _simulate(model, dev, prec, r, requests):
    from dataclasses import replace

    from llmpara_core.calibration.efficiency import efficiency_for
    from llmpara_core.parallel import ParallelPlan
    from llmpara_core.precision import precision_preset
    from llmpara_core.presets import load_hardware, load_model
    from llmpara_core.serving.config import FRAMEWORK_DEFAULTS
    from llmpara_core.serving.engine import simulate
    from llmpara_core.serving.requests import RequestSpec
    hw = load_hardware(dev)
    cost = C.IterationCost(load_model(model), hw, precision_preset(prec), ParallelPlan(tp=r.tp),
                           efficiency_for(hw, "tensorrt-llm"))
    cfg = FRAMEWORK_DEFAULTS["tensorrt-llm"].config
    if r.max_batch or r.max_num_tokens:
        cfg = replace(cfg, max_batch=r.max_batch or cfg.max_batch,
                      max_num_tokens=r.max_num_tokens or cfg.max_num_tokens)
    return simulate(cost, cfg, RequestSpec(isl=r.isl, osl=r.osl, requests=requests))


def errors(rows, runs, duty: float | None) -> list[tuple]:
    """[(row, error)] with the wall at ``duty`` (None: no wall)."""
    out = []
    for r, key in rows:
        tok, comp, work, comm = runs[key]
        c = comp if duty is None else np.maximum(comp, work / duty)
        out.append((r, tok / float((c + comm).sum()) / r.measured - 1))
    return out


def stats(errs) -> str:
    e = [x for _, x in errs]
    return f"{median(map(abs, e)):.1%} (signed {median(e):+.1%}, {len(e)} rows)"


def groups(errs) -> str:
    by = defaultdict(list)
    for r, e in errs:
        by[f"TP{r.tp}"].append(e)
        shape = ("prompt-heavy" if r.isl >= 4 * r.osl else
                 "decode-heavy" if r.osl >= 4 * r.isl else "balanced")
        by[f"{r.precision} {shape}"].append(e)
    return "; ".join(f"{k} {median(map(abs, v)):.1%} ({median(v):+.1%})"
                     for k, v in sorted(by.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=sv.MAX_LOAD_REQUESTS)
    ap.add_argument("--duties", default=DEFAULT_DUTIES)
    ap.add_argument("--cache", help="pickle of the recorded iterations (written if missing)")
    ap.add_argument("--no-mlperf", action="store_true")
    a = ap.parse_args()
    try:
        duties = [float(x) for x in a.duties.split(",")]
    except ValueError:
        print(f"--duties must be numbers separated by commas, got {a.duties!r}", file=sys.stderr)
        return 2
    if a.requests < 1 or not duties or not all(0 < d <= 1 for d in duties):
        print("requests must be >= 1 and duties in (0, 1]", file=sys.stderr)
        return 2
    if a.cache and Path(a.cache).exists():
        rows, runs = pickle.loads(Path(a.cache).read_bytes())
    else:
        rows, runs = collect(a.requests)
        if a.cache:
            Path(a.cache).write_bytes(pickle.dumps((rows, runs)))
    base = errors(rows, runs, None)
    print(f"no wall: {stats(base)}\n  {groups(base)}")
    res = {d: errors(rows, runs, d) for d in duties}
    for d in duties:
        print(f"duty {d:.2f}: {stats(res[d])}")

    def score(d, keep):
        return median(abs(e) for r, e in res[d] if keep(r.hardware))
    best = min(duties, key=lambda d: score(d, lambda g: True))
    print(f"\nfitted TENSOR_DUTY = {best:.2f}: {stats(res[best])}\n  {groups(res[best])}")
    held = []
    for g in sorted({r.hardware for r, _ in base}):
        d = min(duties, key=lambda x: score(x, lambda h: h != g))
        out = [(r, e) for r, e in res[d] if r.hardware == g]
        held += out
        print(f"leave out {g}: duty fitted on the others {d:.2f}; held out {stats(out)} "
              f"(no wall {stats([(r, e) for r, e in base if r.hardware == g])})")
    print(f"leave-one-GPU-out, all rows: {stats(held)}\n  {groups(held)}")
    if not a.no_mlperf:
        saved, C.TENSOR_DUTY = C.TENSOR_DUTY, best
        try:
            mlperf.predict.cache_clear()
            comps = mlperf.compare()
            s = mlperf.error_summary(comps)
            print(f"\nMLPerf v4.1 at duty {best:.2f} (never fitted on): median "
                  f"{s['median_abs_error']:.1%}, signed {s['median_signed_error']:+.1%}; "
                  + "; ".join(f"{k} {v['median_abs_error']:.1%} ({v['median_signed_error']:+.1%})"
                              for k, v in {**s['per_scenario'], **s['per_gpu']}.items()))
        finally:
            C.TENSOR_DUTY = saved
            mlperf.predict.cache_clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
