"""NVIDIA AIConfigurator side by side with ``llmpara serve`` on the shared TensorRT-LLM
max-load rows it supports.

    python benchmarks/peers/aiconfigurator.py [--max-configs N] [--out FILE.csv]

AIConfigurator (``aiconfigurator`` on the package index; NVIDIA ai-dynamo/aiconfigurator) looks
kernel times up in databases measured per GPU and TensorRT-LLM release. It is a dev-only tool
and is never installed with this project: it runs from its OWN virtualenv,

    python -m venv /work/venv-aic && /work/venv-aic/bin/pip install aiconfigurator

(``--venv`` points elsewhere). Without that venv the script says so and exits 0.

Each supported row (AIConfigurator systems h100_sxm, a100_sxm, a100_pcie, l40s; Llama-2/3/3.1/
3.3 8B and 70B as the Llama-3.1 configs of the same shape, Mixtral-8x7B; FP16/BF16 or FP8 with
an FP8 KV cache) is estimated in AIConfigurator's aggregated (in-flight batching) mode with the
row's TP, ISL and OSL and a 8,192-token context budget, at concurrencies 64 ... 2,048; the
max-load answer is the highest output tokens/s among those that fit the GPU's memory (a
max-load run holds as many requests as fit). Ours is ``serving.validation.compare`` (the same
as ``llmpara validate --regime serving-maxload``). Both medians are over the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

VENV = Path(os.environ.get("AIC_VENV", "/work/venv-aic"))
SYSTEMS = {"NVIDIA H100 SXM 80GB": ("h100_sxm", 80), "NVIDIA A100 SXM4 80GB": ("a100_sxm", 80),
           "NVIDIA A100 PCIe 80GB": ("a100_pcie", 80), "NVIDIA L40S": ("l40s", 48)}
MODELS = {"Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
          "Llama-3-8B": "meta-llama/Meta-Llama-3.1-8B",
          "Llama-2-7B": None, "Mistral-7B": None,
          "Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
          "Llama-3-70B": "meta-llama/Meta-Llama-3.1-70B",
          "Llama-3.3-70B": "meta-llama/Meta-Llama-3.1-70B", "Llama-2-70B": None,
          "Mixtral-8x7B": "mistralai/Mixtral-8x7B-v0.1"}
BATCHES = (64, 128, 256, 512, 1024, 2048)
CTX_TOKENS = 8192


# ---- worker: runs inside AIConfigurator's venv ----------------------------------------------

def worker() -> None:
    here = Path(__file__).resolve().parent       # this file's name shadows the package
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != here]
    import logging
    logging.disable(logging.WARNING)
    from aiconfigurator.cli.api import cli_estimate
    jobs = json.load(sys.stdin)
    out = {}
    for key, j in jobs.items():
        best, note = None, ""
        for bs in BATCHES:
            try:
                r = cli_estimate(j["model"], j["system"], mode="agg", backend_name="trtllm",
                                 isl=j["isl"], osl=j["osl"], batch_size=bs, ctx_tokens=CTX_TOKENS,
                                 tp_size=j["tp"], gemm_quant_mode=j["gemm"],
                                 kvcache_quant_mode=j["kv"])
            except Exception as e:         # noqa: BLE001 - reported per configuration
                note = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
                continue
            if r.memory > j["memory_gb"] or r.kv_cache_warning:
                break
            if best is None or r.tokens_per_second > best:
                best = r.tokens_per_second
        out[key] = {"tokens_per_s": best, "note": note}
        print(json.dumps({"done": key}), file=sys.stderr, flush=True)
    json.dump(out, sys.stdout)


# ---- driver: runs in this project's environment ---------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default=str(VENV))
    ap.add_argument("--max-configs", type=int, default=0,
                    help="estimate at most this many distinct configurations (an even spread "
                         "over the sorted list; 0 = all)")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--out", help="per-row CSV")
    ap.add_argument("--reuse", metavar="CSV",
                    help="take AIConfigurator's answers from a previous --out file (only ours "
                         "are recomputed: no venv needed)")
    a = ap.parse_args()
    py = Path(a.venv) / "bin" / "python"
    if a.reuse:
        return rescore(a)
    if not py.exists():
        print(f"AIConfigurator side-by-side skipped: no virtualenv at {a.venv} (create it with "
              f"`python -m venv {a.venv} && {a.venv}/bin/pip install aiconfigurator`; it is a "
              "dev-only peer, never a dependency of this project).")
        return
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from statistics import median
    from llmpara_core.serving import validation as sv
    rows = [r for r in sv.load_rows(sv.SHIPPED_MAX_LOAD)
            if r.hardware in SYSTEMS and MODELS.get(r.model) and r.precision in
            ("FP16", "BF16", "FP8")]
    def key(r):
        return f"{MODELS[r.model]}|{SYSTEMS[r.hardware][0]}|{r.tp}|{r.precision}|{r.isl}|{r.osl}"
    keys = sorted({key(r) for r in rows})
    if a.max_configs and len(keys) > a.max_configs:
        step = len(keys) / a.max_configs
        keys = [keys[int(i * step)] for i in range(a.max_configs)]
    keep = set(keys)
    rows = [r for r in rows if key(r) in keep]
    jobs = {}
    for r in rows:
        k = key(r)
        fp8 = r.precision == "FP8"
        jobs[k] = {"model": MODELS[r.model], "system": SYSTEMS[r.hardware][0], "tp": r.tp,
                   "isl": r.isl, "osl": r.osl, "memory_gb": SYSTEMS[r.hardware][1],
                   "gemm": "fp8" if fp8 else "bfloat16", "kv": "fp8" if fp8 else "bfloat16"}
    print(f"{len(rows)} rows, {len(jobs)} configurations; AIConfigurator running in {a.venv} ...",
          flush=True)
    p = subprocess.run([str(py), __file__, "--worker"], input=json.dumps(jobs), text=True,
                       capture_output=True, check=False)
    if p.returncode != 0:
        print("AIConfigurator failed: " + (p.stderr.strip().splitlines() or ["?"])[-1])
        return
    aic = json.loads(p.stdout)
    ours = {c.row.row_id: c for c in sv.compare(rows, a.requests)}
    table = []
    for r in rows:
        o, x = ours[r.row_id], aic[key(r)]["tokens_per_s"]
        if o.predicted is None or not x:
            continue
        table.append({"row_id": r.row_id, "hardware": r.hardware, "model": r.model,
                      "precision": r.precision, "tp": r.tp, "isl": r.isl, "osl": r.osl,
                      "measured": r.measured, "llmpara": o.predicted, "aiconfigurator": x,
                      "llmpara_error": o.predicted / r.measured - 1,
                      "aiconfigurator_error": x / r.measured - 1})
    if not table:
        print("no row was estimated by both")
        return
    def med(k, rs):
        return median(abs(t[k]) for t in rs), median(t[k] for t in rs)
    print(f"{len(table)} rows estimated by both (of {len(rows)} supported):")
    for name in ("llmpara", "aiconfigurator"):
        m, s = med(f"{name}_error", table)
        print(f"  {name:15s} median |error| {m:.1%}, signed {s:+.1%}")
    for tp in sorted({t["tp"] for t in table}):
        rs = [t for t in table if t["tp"] == tp]
        print(f"  TP{tp}: {len(rs)} rows, llmpara {med('llmpara_error', rs)[0]:.1%}, "
              f"aiconfigurator {med('aiconfigurator_error', rs)[0]:.1%}")
    if a.out:
        import csv
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)


def rescore(a) -> None:
    """Our side recomputed on the rows of a previous run, AIConfigurator's answers reused."""
    import csv
    from statistics import median
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from llmpara_core.serving import validation as sv
    with open(a.reuse, newline="") as f:
        prev = {r["row_id"]: float(r["aiconfigurator"]) for r in csv.DictReader(f)}
    rows = [r for r in sv.load_rows(sv.SHIPPED_MAX_LOAD) if r.row_id in prev]
    table = [(c.row, c.predicted / c.row.measured - 1, prev[c.row.row_id] / c.row.measured - 1)
             for c in sv.compare(rows, a.requests) if c.predicted is not None]
    print(f"{len(table)} rows of {a.reuse} (AIConfigurator's answers reused):")
    for i, name in ((1, "llmpara"), (2, "aiconfigurator")):
        e = [t[i] for t in table]
        print(f"  {name:15s} median |error| {median(map(abs, e)):.1%}, signed {median(e):+.1%}")
    for tp in sorted({t[0].tp for t in table}):
        rs = [t for t in table if t[0].tp == tp]
        print(f"  TP{tp}: {len(rs)} rows, llmpara {median(abs(t[1]) for t in rs):.1%}, "
              f"aiconfigurator {median(abs(t[2]) for t in rs):.1%}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker()
    else:
        main()
