"""What-if of the tensor-parallel all-reduce on the TensorRT-LLM max-load rows: simulate each
row once with the alpha-beta (sharding engine) all-reduce, then re-time every iteration with
another all-reduce model. Exact at max load under TensorRT-LLM's reserve (no-eviction) policy:
which requests run in which iteration does not depend on time, so a row's makespan is the sum
of its iterations' times and only the collective term changes.

    python scripts/serving_allreduce_whatif.py [--requests N] [--cache FILE.pkl]

Prints median |error|, signed median and per-TP figures for: the alpha-beta estimate (FP8
activations reduced in 8 bits, as the sharding engine does), the same on the 16-bit residual
stream, NCCL's ring model at the derated link and at NCCL's per-link bus bandwidth, NCCL with
NVLS, and the fastest of a one-shot kernel and NCCL.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration.efficiency import efficiency_for  # noqa: E402
from llmpara_core.parallel import ParallelPlan  # noqa: E402
from llmpara_core.parallel.collectives import (nccl_bus_bytes_per_s,  # noqa: E402
                                               nccl_ring_all_reduce_s)
from llmpara_core.precision import DType, precision_preset  # noqa: E402
from llmpara_core.presets import load_hardware, load_model  # noqa: E402
from llmpara_core.roofline import rates  # noqa: E402
from llmpara_core.serving import validation as sv  # noqa: E402
from llmpara_core.serving.config import FRAMEWORK_DEFAULTS  # noqa: E402
from llmpara_core.serving.cost import IterationCost  # noqa: E402
from llmpara_core.serving.engine import simulate  # noqa: E402
from llmpara_core.serving.requests import RequestSpec  # noqa: E402


def collect(requests: int):
    rows, runs = [], {}
    for r in sv.load_rows(sv.SHIPPED_MAX_LOAD):
        dev, model, prec = sv.device_for(r), sv.MODELS.get(r.model), sv.PRECISIONS.get(r.precision)
        if dev is None or model is None or prec is None:
            continue
        key = (model, dev, prec, r.tp, r.isl, r.osl)
        if key not in runs:
            hw, m = load_hardware(dev), load_model(model)
            try:
                cost = IterationCost(m, hw, precision_preset(prec), ParallelPlan(tp=r.tp),
                                     efficiency_for(hw, "tensorrt-llm"), allreduce="alpha-beta")
                res = simulate(cost, FRAMEWORK_DEFAULTS["tensorrt-llm"].config,
                               RequestSpec(isl=r.isl, osl=r.osl, requests=requests))
            except Exception:       # noqa: BLE001 - rows that cannot run are left out
                runs[key] = None
                continue
            runs[key] = {"tok": res.log["tokens"], "it": res.log["iterations"],
                         "out": float(res.osl.sum()), "makespan": res.makespan_s,
                         "hidden": m.hidden_size, "layers": m.num_hidden_layers}
        if runs[key] is not None:
            rows.append((r, key))
    return rows, runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--cache", help="pickle of the simulated logs (written if missing)")
    a = ap.parse_args()
    if a.cache and Path(a.cache).exists():
        rows, runs = pickle.loads(Path(a.cache).read_bytes())
    else:
        rows, runs = collect(a.requests)
        if a.cache:
            Path(a.cache).write_bytes(pickle.dumps((rows, runs)))
    links = {}

    def link(dev):
        if dev not in links:
            hw = load_hardware(dev)
            r = rates(hw, DType.FP16, True, efficiency_for(hw, "tensorrt-llm"))
            links[dev] = (r.link_bytes_per_s, r.kernel_overhead_s, hw.interconnect.latency_s,
                          nccl_bus_bytes_per_s(hw))
        return links[dev]

    def alpha_beta(m, n, dev):          # Net.time, one node, fully connected, estimated
        bw, k, lat, _ = link(dev)
        return 2 * lat + 2e-6 + k + 2 * (n - 1) / n * m / bw

    def one_shot(m, n, dev):
        bw, k, lat, _ = link(dev)
        return 2 * lat + 2e-6 + k + (n - 1) * m / bw

    def nvls(m, n, dev, bus):           # NCCL NVLS: hwLat 23 us, algorithm bw = bus x 5/6
        return 23e-6 + m / (bus * 5 / 6) if n > 2 else np.inf

    variants = {
        "alpha-beta, FP8 reduced in 8 bits": lambda m8, m, n, d: alpha_beta(m8, n, d),
        "alpha-beta, 16-bit residual": lambda m8, m, n, d: alpha_beta(m, n, d),
        "NCCL ring, derated link": lambda m8, m, n, d: nccl_ring_all_reduce_s(n, m, link(d)[0]),
        "NCCL ring, NCCL bus (shipped)": lambda m8, m, n, d: nccl_ring_all_reduce_s(
            n, m, link(d)[3]),
        "NCCL ring or NVLS": lambda m8, m, n, d: np.minimum(
            nccl_ring_all_reduce_s(n, m, link(d)[3]), nvls(m, n, d, link(d)[3])),
        "one-shot or NCCL ring": lambda m8, m, n, d: np.minimum(
            one_shot(m, n, d), nccl_ring_all_reduce_s(n, m, link(d)[3])),
    }
    for name, fn in variants.items():
        errs = {}
        for r, key in rows:
            c = runs[key]
            model, dev, prec, tp, _, _ = key
            extra = 0.0
            if tp > 1:
                m16 = c["tok"] * c["hidden"] * 2.0
                m8 = m16 / 2 if prec == "FP8" else m16
                nar = 2 * c["layers"] + 1
                extra = float((c["it"] * nar * (fn(m8, m16, tp, dev)
                                                - alpha_beta(m8, tp, dev))).sum())
            e = c["out"] / (c["makespan"] + extra) / r.measured - 1
            errs.setdefault(tp, []).append(e)
        allv = [e for v in errs.values() for e in v]
        per = ", ".join(f"TP{t} {median(map(abs, v)):.1%} ({median(v):+.1%})"
                        for t, v in sorted(errs.items()))
        print(f"{name:36s} median {median(map(abs, allv)):.1%} signed {median(allv):+.1%}; {per}")


if __name__ == "__main__":
    main()
