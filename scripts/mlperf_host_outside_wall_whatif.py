"""What-if (not adopted): the per-pass host time and kernel launches of an iteration outside the
FP8 power wall's max() instead of inside it, on the MLPerf v4.1 rows.

``serving.cost.IterationCost._stage_times`` takes max(roofline compute incl. launches and the
stack's per-pass cost, FP8 tensor work / duty): when the wall binds, the host time disappears
under it. Physically the GPU idles (at low power) while the host schedules and launches, so that
time adds to the clocked-down kernel time: t = max(kernels, work / duty) + host. This script
patches that in and prints the MLPerf comparison as JSON (summary and rows). It changes the
max-load physics too (the duty was fitted with the host inside), so it is a measurement for
``serving.cost``'s owner, not a default.

    python scripts/mlperf_host_outside_wall_whatif.py > whatif.json
    python scripts/mlperf_host_outside_wall_whatif.py --maxload   # the shared max-load rows,
                                                                 # in sample, duty as shipped
    python scripts/mlperf_host_outside_wall_whatif.py --loo       # leave-one-GPU-out, duty and
                                                                 # release factors refitted
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dataclasses import dataclass, replace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration.efficiency import efficiency_for  # noqa: E402
from llmpara_core.parallel import ParallelPlan  # noqa: E402
from llmpara_core.precision import DType, precision_preset  # noqa: E402
from llmpara_core.presets import load_hardware, load_model  # noqa: E402
from llmpara_core.serving import cost as serving_cost, duty_fit, mlperf  # noqa: E402
from llmpara_core.serving.config import FRAMEWORK_DEFAULTS  # noqa: E402
from llmpara_core.serving.engine import simulate  # noqa: E402
from llmpara_core.serving.requests import RequestSpec  # noqa: E402


def _stage_times(self, i, F, n_seqs):
    comp, work, comm = self._stage_parts(i, F, n_seqs)
    st, r = self.stages[i], self._rates
    _, per_pass = self.rates_for(F[:, 1], n_seqs)
    host = np.broadcast_to(st.kernels * r.kernel_overhead_s + per_pass, comp.shape)
    kernels = np.maximum(comp - host, 0.0)
    if self.recorder is not None:           # duty_fit: (kernels, FP8 work, comm, host)
        fp8 = self._rates.dtype_used is DType.FP8
        self.recorder.append((kernels, work if fp8 else np.zeros_like(work),
                              np.broadcast_to(comm, comp.shape), host))
    comp = self.power_walled(kernels * self.time_scale, work) + host * self.time_scale
    return comp + comm - np.minimum(self.plan.overlap * comm, comp)


@dataclass(frozen=True)
class _Parts(duty_fit.RunParts):
    """duty_fit.RunParts with the host time outside the wall."""
    host_s: np.ndarray = None

    def tokens_per_s(self, duty, time_scale=1.0):
        c = self.compute_s * time_scale
        c = c if duty is None else np.maximum(c, self.work_s / duty)
        return self.output_tokens / float((c + self.host_s * time_scale + self.comm_s).sum())


def _run(model, dev, prec, r, requests):
    hw = load_hardware(dev)
    cost = serving_cost.IterationCost(load_model(model), hw, precision_preset(prec),
                                      ParallelPlan(tp=r.tp), efficiency_for(hw, "tensorrt-llm"))
    cfg = FRAMEWORK_DEFAULTS["tensorrt-llm"].config
    if r.max_batch or r.max_num_tokens:
        cfg = replace(cfg, max_batch=r.max_batch or cfg.max_batch,
                      max_num_tokens=r.max_num_tokens or cfg.max_num_tokens)
    cost.recorder = []
    saved, serving_cost.TENSOR_DUTY = serving_cost.TENSOR_DUTY, None
    try:
        res = simulate(cost, cfg, RequestSpec(isl=r.isl, osl=r.osl, requests=requests))
    finally:
        serving_cost.TENSOR_DUTY = saved
    parts = [np.concatenate([p[k] for p in cost.recorder]) for k in range(4)]
    if abs(float((parts[0] + parts[2] + parts[3]).sum()) - res.busy_s) > 1e-6 * res.busy_s:
        raise RuntimeError("the recorded passes do not add up to the run")
    return _Parts(float(res.osl.sum()), parts[0], parts[1], parts[2], parts[3])


def _loo() -> dict:
    """Leave-one-GPU-out max-load figure with the duty and release factors refitted without
    each GPU (as ``llmpara validate --regime serving-maxload --loo``), host outside the wall."""
    from llmpara_core.serving import stack_version, validation as sv
    duty_fit._run = _run
    rows = sv.load_rows(sv.SHIPPED_MAX_LOAD)
    records = duty_fit.record(rows, sv.MAX_LOAD_REQUESTS)
    _, duties = duty_fit.leave_one_gpu_out(records)
    held, _ = stack_version.leave_one_gpu_out(records, duties)
    err = {id(r): e for r, e in held}
    comps = sv.compare(rows, sv.MAX_LOAD_REQUESTS, True)
    comps = tuple(sv.MaxLoadComparison(c.row, c.row.measured * (1 + err[id(c.row)]))
                  if id(c.row) in err else c for c in comps)
    return {"summary": sv.error_summary(comps), "duties": duties,
            "in_sample_duty": duty_fit.fit(records)}


def main(argv=None) -> None:
    serving_cost.IterationCost._stage_times = _stage_times
    args = sys.argv[1:] if argv is None else argv
    if "--loo" in args:
        print(json.dumps(_loo(), default=str))
        return
    if "--maxload" in args:
        from llmpara_core.serving import validation as sv
        comps = sv.compare(sv.load_rows(sv.SHIPPED_MAX_LOAD), sv.MAX_LOAD_REQUESTS, True)
        s = sv.error_summary(comps)
        print(json.dumps({"summary": s}, default=str))
        return
    comps = mlperf.compare()
    print(json.dumps({"summary": mlperf.error_summary(comps),
                      "rows": [{"system": c.row.system, "gpu": c.row.gpu, "tp": c.row.tp,
                                "benchmark": c.row.benchmark, "scenario": c.row.scenario,
                                "measured": c.row.measured, "predicted": c.predicted,
                                "error": c.error} for c in comps]}))


if __name__ == "__main__":
    main()
