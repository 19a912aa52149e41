"""What-if of the per-pass cost on the TensorRT-LLM max-load rows, TP8 first (issue 31).

Each configuration is simulated once with the shipped cost, recording every pass's feature row
and batch (``IterationCost.time_s``'s inputs). At max load under TensorRT-LLM's reserve
(no-eviction) policy which requests run in which pass does not depend on time (the check of
``serving.duty_fit``), so a row's makespan under another per-pass cost is exactly the sum of its
recorded passes re-timed by that cost: a variant that changes only the time of a pass (GEMM
efficiency, collectives) is scored without simulating again. A variant that changes memory
(which requests fit) is not exact here.

Per variant: in sample (the shipped duty and release factors) and leave-one-GPU-out with the
power wall's duty and the release factors refitted without each GPU (``duty_fit``,
``stack_version``), at the shipped 4 GiB runtime reserve (every fold of ``llmpara validate
--regime serving-maxload --loo`` picks it). The full command stays the figure of record.

    python scripts/tp8_whatif.py --table              # the TP8 rows, step by step
    python scripts/tp8_whatif.py --variants base,waves # held-out figures per variant
    [--cache FILE.pkl] (recorded passes, written if missing) [--sample N] [--tp 8]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration.efficiency import efficiency_for  # noqa: E402
from llmpara_core.parallel import ParallelPlan  # noqa: E402
from llmpara_core.precision import precision_preset  # noqa: E402
from llmpara_core.presets import load_hardware, load_model  # noqa: E402
from llmpara_core.serving import cost as C  # noqa: E402
from llmpara_core.serving import duty_fit, stack_version  # noqa: E402
from llmpara_core.serving import validation as sv  # noqa: E402
from llmpara_core.serving.config import FRAMEWORK_DEFAULTS  # noqa: E402
from llmpara_core.serving.engine import simulate  # noqa: E402
from llmpara_core.serving.requests import RequestSpec  # noqa: E402

# variant name -> {module attribute of serving.cost / parallel.collectives: value}; the
# attributes are switches the cost reads when it is built or evaluated
_C = "llmpara_core.serving.cost"
_P = "llmpara_core.parallel.collectives"
VARIANTS: dict[str, dict] = {
    "base": {},
    # issue hypothesis 9: the token count of a routed expert's GEMM rate
    "expert-pass": {f"{_C}:EXPERT_GEMM_TOKENS": "pass"},
    "expert-grouped": {f"{_C}:EXPERT_GEMM_TOKENS": "grouped"},
    # tile and wave quantisation of TP-sharded GEMMs over the SMs (cuBLAS tiles, NVIDIA guide)
    "tile-256x128": {f"{_C}:GEMM_TILE": (256, 128)},
    "tile-128x256": {f"{_C}:GEMM_TILE": (128, 256)},
    "tile-128x128": {f"{_C}:GEMM_TILE": (128, 128)},
    "tile-64x128": {f"{_C}:GEMM_TILE": (64, 128)},
    # the best of the guide's cuBLAS tiles for each GEMM (section 2.3's list)
    "tile-best": {f"{_C}:GEMM_TILE": ((256, 128), (128, 256), (128, 128), (256, 64),
                                       (64, 256), (128, 64), (64, 128), (64, 64))},
    "tile-n-256x128": {f"{_C}:GEMM_TILE": (256, 128), f"{_C}:GEMM_M_WASTE": False},
    "tile-n-128x128": {f"{_C}:GEMM_TILE": (128, 128), f"{_C}:GEMM_M_WASTE": False},
    # sensitivity, not a fit: the column rule with the GEMM share (efficiency.toml, issue 27's
    # fit on the static-batch rows) scaled, as a refit beside the rule might move it
    "tile-n-128x128-share1.06": {f"{_C}:GEMM_TILE": (128, 128), f"{_C}:GEMM_M_WASTE": False,
                                 "__main__:GEMM_SHARE_SCALE": 1.06},
    "tile-n-128x128-share1.10": {f"{_C}:GEMM_TILE": (128, 128), f"{_C}:GEMM_M_WASTE": False,
                                 "__main__:GEMM_SHARE_SCALE": 1.10},
    "tile-best-large": {f"{_C}:GEMM_TILE": ((256, 128), (128, 256), (128, 128))},
    # TensorRT-LLM's AUTO all-reduce (custom ONESHOT / TWOSHOT kernels, NCCL above)
    "ar-auto": {f"{_C}:TRTLLM_ALLREDUCE": "auto"},
    "ar-auto-twoshot": {f"{_C}:TRTLLM_ALLREDUCE": "auto-twoshot"},
    # PCIe boards (issue 31): NCCL's NVLink model on PCIe (the model before the PCI path), the
    # PCI path without the bound of rings that span the host's sockets, and a sensitivity
    # scale on a PCIe ring's bus (not a fit)
    "pcie-as-nvlink": {f"{_P}:NCCL_PCIE_PATH": False},
    "pcie-no-socket": {f"{_P}:NCCL_SOCKET_BOUND": False},
    "pcie-bus0.5": {f"{_P}:PCIE_BUS_SCALE": 0.5},
    "pcie-bus0.25": {f"{_P}:PCIE_BUS_SCALE": 0.25},
    # issue 31, TP4 on PCIe: NCCL's P2P level on the host (rings through host memory, SHM, at
    # NCCL_SHM_SHARE of the PCIe bandwidth): off (P2P everywhere, the model before) and the
    # share over the cited range (github NVIDIA/nccl PR #2080: 24-42 % loss)
    "pcie-p2p": {f"{_P}:NCCL_HOST_P2P_RULE": False},
    **{f"pcie-shm{r:g}": {f"{_P}:NCCL_SHM_SHARE": r} for r in (0.58, 0.62, 0.67, 0.72, 0.76)},
}


GEMM_SHARE_SCALE = 1.0      # sensitivity only: the profile's GEMM share x this (not a fit)


def _cost(key):
    model, dev, prec, tp = key[:4]
    hw = load_hardware(dev)
    eff = efficiency_for(hw, "tensorrt-llm")
    if GEMM_SHARE_SCALE != 1.0:
        eff = replace(eff, compute=eff.compute * GEMM_SHARE_SCALE)
    return C.IterationCost(load_model(model), hw, precision_preset(prec), ParallelPlan(tp=tp),
                           eff)


def cached_record(cache, rows, requests: int):
    """``record(rows(), requests)``, read from the pickle ``cache`` if it exists (written there
    otherwise; None = no cache). ``rows`` is called only when there is no cache to read."""
    if cache and Path(cache).exists():
        return pickle.loads(Path(cache).read_bytes())
    runs, pairs = record(rows(), requests)
    if cache:
        Path(cache).write_bytes(pickle.dumps((runs, pairs)))
    return runs, pairs


def record(rows, requests: int):
    """{config key: (output tokens, [(F, n_seqs)] per time_s call)}, [(row, key)]."""
    runs, out = {}, []
    for r in rows:
        dev, model, prec = sv.device_for(r), sv.MODELS.get(r.model), sv.PRECISIONS.get(r.precision)
        if dev is None or model is None or prec is None:
            continue
        key = (model, dev, prec, r.tp, r.isl, r.osl, r.max_batch, r.max_num_tokens)
        if key not in runs:
            runs[key] = None
            try:
                cost = _cost(key)
            except Exception:       # noqa: BLE001 - a configuration that cannot run
                continue
            calls = []
            orig = cost.time_s

            def spy(F, n, orig=orig, calls=calls):
                t = orig(F, n)
                calls.append((np.array(F, dtype=float), np.broadcast_to(
                    np.asarray(n, dtype=float), (np.atleast_2d(F).shape[0],)).copy()))
                return t
            cost.time_s = spy
            cfg = FRAMEWORK_DEFAULTS["tensorrt-llm"].config
            if r.max_batch or r.max_num_tokens:
                cfg = replace(cfg, max_batch=r.max_batch or cfg.max_batch,
                              max_num_tokens=r.max_num_tokens or cfg.max_num_tokens)
            saved, C.TENSOR_DUTY = C.TENSOR_DUTY, None
            try:
                res = simulate(cost, cfg, RequestSpec(isl=r.isl, osl=r.osl, requests=requests))
                F = np.concatenate([c[0] for c in calls])
                n = np.concatenate([c[1] for c in calls])
                total = float(orig(F, n).sum())
            except Exception:       # noqa: BLE001
                continue
            finally:
                C.TENSOR_DUTY = saved
            # every time_s call is a pass that ran (max load: no arrival cuts a decode block)
            if abs(total - res.busy_s) > 1e-6 * res.busy_s:
                print(f"skip {key}: recorded passes do not add up", file=sys.stderr)
                continue
            runs[key] = (float(res.osl.sum()), F, n)
        if runs[key] is not None:
            out.append((r, key))
    return runs, out


def parts(cost, F, n):
    """(compute, FP8 work, collectives) [s] per pass, and the breakdown sums [s]:
    GEMM (non-attention operators), attention, host (launches + per-pass cost), collectives."""
    comp, work, comm = cost._stage_parts(0, F, n)
    comm = np.broadcast_to(comm, comp.shape)
    st = cost.stages[0]
    flops_c, mem_c = cost._combined[0]
    fr, per_pass = cost.rates_for(F[:, 1], n)
    fr = np.broadcast_to(fr[:, None], (F.shape[0], flops_c.shape[1])).copy()
    if st.expert_gemm is not None and st.expert_gemm.any():
        k = cost.moe.experts_per_token
        fe, _ = cost.rates_for(F[:, 1] * k / np.maximum(F[:, -1], 1.0), n)
        fr = np.where(st.expert_gemm[None, :] > 0, fe[:, None], fr)
    if C.GEMM_TILE is not None and cost.hardware.compute_units and st.gemm_n is not None:
        m_op = np.broadcast_to(F[:, 1:2], fr.shape)
        if st.expert_gemm is not None and st.expert_gemm.any():
            m_op = np.where(st.expert_gemm[None, :] > 0, (F[:, 1] * k / np.maximum(
                F[:, -1], 1.0))[:, None], m_op) if C.EXPERT_GEMM_TOKENS == "per-expert" else m_op
        m_op = np.where(st.lm_head[None, :] > 0, F[:, 2:3], m_op)
        fr = fr * C.gemm_quantisation(m_op, st.gemm_n[None, :], cost.hardware.compute_units,
                                      C.GEMM_TILE)
    per_op = np.maximum((F @ flops_c) / fr, (F @ mem_c) / cost.memory_bytes_per_s)
    att = st.attention.sum(0) > 0
    host = st.kernels * cost._rates.kernel_overhead_s + per_pass
    fp8 = cost._rates.dtype_used.name == "FP8"
    return (comp, work if fp8 else np.zeros_like(work), np.array(comm),
            {"gemm": float(per_op[:, ~att].sum()), "attention": float(per_op[:, att].sum()),
             "host": float(np.broadcast_to(host, comp.shape).sum()),
             "collective": float(comm.sum()), "passes": len(comp),
             "batch": float(n.mean())})


def run_parts(runs, variant: dict):
    """{key: (RunParts, breakdown)} with the variant's switches set."""
    saved = {}
    for attr, v in variant.items():
        mod, name = attr.split(":")
        m = sys.modules[mod]
        saved[attr] = getattr(m, name)
        setattr(m, name, v)
    try:
        out = {}
        for key, run in runs.items():
            if run is None:
                continue
            tok, F, n = run
            comp, work, comm, brk = parts(_cost(key), F, n)
            out[key] = (duty_fit.RunParts(tok, comp, work, comm), brk)
        return out
    finally:
        for attr, v in saved.items():
            mod, name = attr.split(":")
            setattr(sys.modules[mod], name, v)


def figures(pairs, parts_by_key):
    recs = [(r, parts_by_key[k][0]) for r, k in pairs if k in parts_by_key]
    ins = stack_version.errors(recs, C.TENSOR_DUTY, stack_version.TIME_SCALE)
    held_d, duties = duty_fit.leave_one_gpu_out(recs)
    held, _ = stack_version.leave_one_gpu_out(recs, duties)
    return ins, held, duties


def summary(errs) -> str:
    e = [x for _, x in errs]
    by = defaultdict(list)
    for r, x in errs:
        by[r.tp].append(x)
    return (f"{median(map(abs, e)):.1%} (signed {median(e):+.1%}, {len(e)} rows); TP "
            + " / ".join(f"{median(map(abs, by[t])):.1%}" for t in sorted(by)))


def table(pairs, parts_by_key, tp: int):
    """The rows at ``tp`` (0: all), in sample, with each run's simulated breakdown."""
    recs = [(r, parts_by_key[k][0]) for r, k in pairs
            if k in parts_by_key and (r.tp == tp or not tp)]
    ins = dict((id(r), e) for r, e in stack_version.errors(recs, C.TENSOR_DUTY,
                                                           stack_version.TIME_SCALE))
    keyof = {id(r): k for r, k in pairs}
    print("row_id,release,gpu,tp,model,format,isl,osl,measured,predicted,error,"
          "gemm_share,attention_share,host_share,collective_share,mean_batch,step_ms")
    for r, p in sorted(recs, key=lambda x: (x[0].model, x[0].precision, x[0].isl, x[0].osl,
                                            x[0].version)):
        b = parts_by_key[keyof[id(r)]][1]
        tot = b["gemm"] + b["attention"] + b["host"] + b["collective"]
        e = ins[id(r)]
        print(f"{r.row_id},{r.version},{r.hardware.replace('NVIDIA ', '')},{r.tp},{r.model},"
              f"{r.precision},{r.isl},{r.osl},{r.measured:.0f},{r.measured * (1 + e):.0f},"
              f"{e:+.1%},{b['gemm'] / tot:.2f},{b['attention'] / tot:.2f},"
              f"{b['host'] / tot:.2f},{b['collective'] / tot:.2f},{b['batch']:.0f},"
              f"{1e3 * tot / b['passes']:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache")
    ap.add_argument("--sample", type=int, default=1)
    ap.add_argument("--requests", type=int, default=sv.MAX_LOAD_REQUESTS)
    ap.add_argument("--tp", type=int, default=8, help="--table's TP degree (0: every row)")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--variants", default="base")
    a = ap.parse_args()
    names = a.variants.split(",")
    bad = [v for v in names if v not in VARIANTS]
    if bad or a.sample < 1 or a.requests < 1:
        print(f"unknown variant(s) {bad}; choose from {', '.join(VARIANTS)}" if bad else
              "--sample and --requests must be >= 1", file=sys.stderr)
        return 2
    runs, pairs = cached_record(a.cache, lambda: sv.load_rows(sv.SHIPPED_MAX_LOAD)[::a.sample],
                                a.requests)
    for v in names:
        pk = run_parts(runs, VARIANTS[v])
        if a.table:
            table(pairs, pk, a.tp)
        ins, held, duties = figures(pairs, pk)
        print(f"{v}: in sample {summary(ins)}; held out {summary(held)}; duties "
              + ", ".join(f"{g.replace('NVIDIA ', '')} {d:g}" for g, d in duties.items()))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
