"""Benchmark: the serving simulator.

    python benchmarks/bench_serve.py [--runs N] [--points N] [--workers N]

1. One simulation of 10,000 requests, ISL 512 / OSL 256, Llama-3 8B FP16 on one H100 SXM with
   the generic (vLLM-like) engine, at max load and at a Poisson rate of 80 % of the max-load
   rate: wall time of ``simulate`` (median of N runs; the iteration-cost fit is timed
   separately). Target <= 2 s on one core: the figure printed is CPU time of this process
   (median), with the wall-time range beside it.
   The same with lengths drawn from MLPerf's OpenOrca requests (``--lengths openorca``: 24,576
   real (input, output) pairs, skewed): max load and Poisson at 80 % of its max-load rate.
   Target <= 2 s on one core.
2. ``serve`` with an SLO (TTFT 500 ms, TPOT 50 ms at p90) on 1,000 requests: the simulation,
   the max-load reference and the bisection over the request rate. Target <= 10 s.
3. A fleet sweep over (model, hardware, TP, rate) points with ``run_sweep``: one process vs
   ``--workers`` processes (``concurrent.futures``), wall time of each.

The machine may be shared: quote medians and compare ratios. To compare two versions of the
code, run each one's copy of this script in the same minute, alternating (A B B A), e.g.
``PYTHONPATH=/path/to/other nice -n 10 python /path/to/other/benchmarks/bench_serve.py ...``
(the script puts its own checkout first on the path); report the load average beside them.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.parallel import ParallelPlan  # noqa: E402
from llmpara_core.precision import precision_preset  # noqa: E402
from llmpara_core.presets import load_hardware, load_model  # noqa: E402
from llmpara_core.serving import (EngineConfig, IterationCost, RequestSpec, Slo,  # noqa: E402
                                  SweepPoint, lengths, run_sweep, serve, simulate, summarize)


def timed(fn, runs: int) -> tuple[float, list[float], object]:
    """(median CPU seconds of this process, wall seconds of each run, last result). CPU time
    is what one core spends; on a shared machine the wall time is longer."""
    out, ts, cpu = None, [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        ts.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(cpu), ts, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--points", type=int, default=24)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    model, hw = load_model("llama-3-8b"), load_hardware("nvidia-h100-sxm")
    p = precision_preset("FP16")
    fit, _, cost = timed(lambda: IterationCost(model, hw, p, ParallelPlan()), a.runs)
    print(f"iteration-cost fit: {fit * 1e3:.1f} ms CPU (median of {a.runs})")
    cfg = EngineConfig()
    spec = RequestSpec(isl=512, osl=256, requests=10_000)
    med, ts, res = timed(lambda: simulate(cost, cfg, spec), a.runs)
    s = summarize(res, cost)
    print(f"10,000 requests, max load: {med:.3f} s CPU (wall {min(ts):.3f}-{max(ts):.3f}); "
          f"{res.iterations} iterations, {s.output_tokens_per_s:.0f} output tokens/s")
    rate = 0.8 * s.requests_per_s
    med, ts, res = timed(lambda: simulate(cost, cfg, spec.with_rate(rate)), a.runs)
    print(f"10,000 requests, Poisson {rate:.1f} req/s: {med:.3f} s CPU "
          f"(wall {min(ts):.3f}-{max(ts):.3f}); {res.iterations} iterations")
    table = lengths.named("openorca")
    drawn = RequestSpec(table=table, requests=10_000)
    med, ts, res = timed(lambda: simulate(cost, cfg, drawn), a.runs)
    s = summarize(res, cost)
    print(f"10,000 requests, OpenOrca lengths, max load: {med:.3f} s CPU "
          f"(wall {min(ts):.3f}-{max(ts):.3f}); {res.iterations} iterations")
    rate = 0.8 * s.requests_per_s
    med, ts, res = timed(lambda: simulate(cost, cfg, drawn.with_rate(rate)), a.runs)
    print(f"10,000 requests, OpenOrca lengths, Poisson {rate:.1f} req/s: {med:.3f} s CPU "
          f"(wall {min(ts):.3f}-{max(ts):.3f}); {res.iterations} iterations")
    slo = Slo(0.5, 0.05)
    med, ts, st = timed(lambda: serve(model, hw, p, RequestSpec(isl=512, osl=256, requests=1000,
                                                                 arrival="poisson", rate=5),
                                      cfg, slo=slo), max(1, a.runs // 2))
    print(f"serve + SLO search (1,000 requests, {len(st.search.points)} simulations): "
          f"{med:.2f} s CPU (wall {min(ts):.2f}-{max(ts):.2f}); max rate "
          f"{st.search.max_rate:.2f} req/s")
    pts = [SweepPoint(m, h, tp, r, requests=500)
           for m in ("llama-3-8b", "qwen2.5-7b") for h, tp in (("nvidia-h100-sxm", 1),
                                                               ("nvidia-a100-sxm-80gb", 1),
                                                               ("8x-nvidia-h100-sxm-nvlink", 2))
           for r in (None, 2.0, 8.0, 16.0)][:a.points]
    for w in (1, a.workers):
        t0 = time.perf_counter()
        out = run_sweep(pts, workers=w)
        dt = time.perf_counter() - t0
        bad = sum(1 for o in out if o["error"])
        print(f"sweep of {len(pts)} points on {w} process(es): {dt:.2f} s ({bad} errors)")


if __name__ == "__main__":
    main()
