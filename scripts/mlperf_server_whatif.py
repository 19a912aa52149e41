"""What-ifs on the MLPerf v4.1 rows (``presets/tables/mlperf_serving.csv``; nothing is fitted on
them), printed as per-row residual tables (Offline / Server, GPU, model) beside the shipped
comparison (``mlperf.compare``):

    python scripts/mlperf_server_whatif.py --capacity-scale 1.073741824
    python scripts/mlperf_server_whatif.py --stream-k 1 [--stream-k 2 ...]
    python scripts/mlperf_server_whatif.py --operating-points
    python scripts/mlperf_server_whatif.py --server-point 1 [--server-point 5 ...]

``--capacity-scale X``: every device's memory capacity x X (1.073741824 = 2^30 / 1e9: a
"80 GB" preset read as 80 GiB -- what a change of the presets from decimal GB to GiB does to
the MLPerf operating points; nothing else changes).

``--stream-k K``: the Server runs of the TensorRT-LLM rows stream (shipped: K = 1,
``mlperf.SERVER_STREAMING``; K = 0 is the state before it). NVIDIA's MLPerf LLM harness
turns streaming on in every scenario but Offline (mlcommons/inference_results_v4.0@e81135a6:
closed/NVIDIA/code/harness/harness_llm/main_llm.cc, ``config.mIsStreaming =
genConfig["generation_config"]["streaming"] && (FLAGS_scenario != "Offline")``, "Let's disable
it for Offline scenario"), so a Server pass returns a response for every running sequence and
an Offline pass only for the finished ones. TensorRT-LLM's maintainers describe the cost as
per-token host work that shows at high concurrency (NVIDIA/TensorRT-LLM#2613, "Performance of
streaming requests is worse than non-streaming"; PR #6332: "The overhead of streaming is only
revealed when the concurrency gets high enough"); no source gives its size. Here it is K x the
stack's fitted per-sequence per-pass host cost (``Efficiency.seq_overhead_s``, TensorRT-LLM
10.07 us, fitted on the static-batch rows) per token produced (one response per sequence
that produced a token in the pass), added after the pass's kernels (the 0.11-era batch manager's loop is synchronous: the next pass waits for it),
so outside the FP8 power wall's max() (``EngineConfig.stream_s_per_token``). Offline runs, and so the Server search's upper bracket, are unchanged. K is swept, not fitted:
a K picked on these rows would be fitted on them.

``--as-run``: the TensorRT-LLM rows as NVIDIA's harness ran them -- its scheduler policy
default ``max_util`` (MAX_UTILIZATION: blocks as tokens are written, eviction when full; the
same main_llm.cc, ``DEFINE_string(trtllm_batch_sched_policy, "max_util", ...)``; the v4.1
harness passes no policy flag: closed/NVIDIA/code/llama2-70b-99.9/tensorrt/harness.py's
custom arguments) and the rows' own engine settings (``mlperf.predict(..., engine=True)``);
its Server runs stream as shipped (``--stream-k`` scales that on top of it).

``--operating-points``: per row, the Offline run's KV capacity, time-weighted running batch,
mean step time, share of passes on the FP8 power wall, and per-instance tokens/s against the
measured.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import cost as serving_cost  # noqa: E402
from llmpara_core.serving import mlperf  # noqa: E402
from llmpara_core.serving import report  # noqa: E402
from llmpara_core.serving.engine import simulate  # noqa: E402
from llmpara_core.serving.requests import RequestSpec  # noqa: E402


def _short(row) -> str:
    bench = "llama2" if row.benchmark.startswith("llama2") else "mixtral"
    return f"{row.system[:30]:30s} {row.gpu:6s} TP{row.tp} x{row.instances} {bench:7s}"


def stream_scaled(k: float):
    """Make ``mlperf.server_stream_s`` K x the shipped one; returns a function that restores
    it."""
    shipped = mlperf.server_stream_s
    mlperf.server_stream_s = lambda row, cost: k * shipped(row, cost)
    mlperf.predict.cache_clear()

    def restore():
        mlperf.server_stream_s = shipped
        mlperf.predict.cache_clear()
    return restore


def summary(errs: dict) -> str:
    e = list(errs.values())
    out = [f"all {median(abs(x) for x in e):.1%} (signed {median(e):+.1%})"]
    for key, name in ((lambda r: r.scenario, "scenario"), (lambda r: r.gpu, "gpu"),
                      (lambda r: r.benchmark, "model")):
        groups = {}
        for r, x in errs.items():
            groups.setdefault(key(r), []).append(x)
        out.append(f"{name}: " + ", ".join(
            f"{g} {median(abs(x) for x in v):.1%} ({median(v):+.1%})"
            for g, v in sorted(groups.items())))
    return "\n".join(out)


def table(columns: dict[str, dict]) -> None:
    rows = mlperf.load_rows()
    print(f"{'row':3s} {'system / GPU / layout / model':55s} {'scenario':8s} "
          + " ".join(f"{c:>14s}" for c in columns))
    for i, r in enumerate(rows):
        print(f"{i:3d} {_short(r):55s} {r.scenario:8s} "
              + " ".join(f"{v[r]:>+14.1%}" for v in columns.values()))
    for name, errs in columns.items():
        print(f"\n[{name}]\n{summary(errs)}")


def errors(fn) -> dict:
    return {r: fn(r) / r.measured - 1 for r in mlperf.load_rows()}


def operating_points() -> None:
    for i, r in enumerate(mlperf.load_rows()):
        if r.scenario != "Offline":
            continue
        cost, cfg = mlperf._setup(r)
        table_ = mlperf.lengths_for(r.isl, r.osl)
        cost.recorder = []
        res = simulate(cost, cfg, RequestSpec(table=table_, requests=6000))
        comp = np.concatenate([c[0] for c in cost.recorder])
        work = np.concatenate([c[1] for c in cost.recorder])
        cost.recorder = None
        duty = serving_cost.TENSOR_DUTY or 1.0
        walled = float((work / (duty * cost.tdp_scale) > comp * cost.time_scale).mean())
        s = report.summarize(res, cost)
        dt, run, k = res.log["dt_s"], res.log["running"], res.log["iterations"]
        print(f"{i:3d} {_short(r)} KV {res.kv_capacity_tokens:8,d} tok, running "
              f"{s.mean_running_batch:5.0f}, step {1e3 * dt.sum() / k.sum():6.1f} ms, on the "
              f"wall {walled:4.0%}, tok/s per instance {s.output_tokens_per_s:7.0f} "
              f"(measured {r.measured / r.instances:7.0f})")


def server_point(i: int) -> None:
    """Row ``i`` (a Server row) at its measured rate per instance over 600 s of Poisson
    arrivals, with and without streaming: requests in flight (time-weighted), TPOT mean and
    p99, TTFT p99 -- to set beside the run log's (README, MLPerf)."""
    row = mlperf.load_rows()[i]
    if row.scenario != "Server":
        sys.exit(f"error: row {i} is not a Server row")
    cost, cfg = mlperf._setup(row)
    table_ = mlperf.lengths_for(row.isl, row.osl)
    rate = row.measured / row.instances / float(table_.osl.mean())
    spec = RequestSpec(table=table_, requests=int(rate * 600.0)).with_rate(rate)
    for name, c in (("no streaming", cfg), ("streaming", replace(
            cfg, stream_s_per_token=mlperf.server_stream_s(row, cost)))):
        res = simulate(cost, c, spec)
        ttft, tpot, _ = report.per_request(res)
        tpot = tpot[np.isfinite(tpot)]
        run, dt = np.asarray(res.log["running"]), np.asarray(res.log["dt_s"])
        print(f"{i:3d} {_short(row)} {name:12s}: in flight "
              f"{float((run * dt).sum() / dt.sum()):5.0f}, TPOT mean {tpot.mean() * 1e3:4.0f} ms "
              f"p99 {np.percentile(tpot, 99) * 1e3:4.0f} ms, TTFT p99 "
              f"{np.percentile(ttft, 99):5.2f} s")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capacity-scale", type=float)
    ap.add_argument("--stream-k", type=float, action="append", default=[])
    ap.add_argument("--operating-points", action="store_true")
    ap.add_argument("--server-point", type=int, action="append", default=[], metavar="ROW",
                    help="a Server row at its measured rate, with and without streaming")
    ap.add_argument("--as-run", action="store_true",
                    help="the TensorRT-LLM rows as NVIDIA's harness ran them: its default "
                         "MAX_UTILIZATION scheduler (KV blocks as written, eviction when "
                         "full) and the rows' own batch sizes, max_num_tokens and run lengths")
    a = ap.parse_args(argv)
    if a.operating_points:
        operating_points()
        return
    if a.server_point:
        n = len(mlperf.load_rows())
        if any(not 0 <= i < n for i in a.server_point):
            ap.error(f"--server-point must be a row index in 0..{n - 1}")
        for i in a.server_point:
            server_point(i)
        return
    if a.capacity_scale is not None and not 0.5 <= a.capacity_scale <= 2.0:
        ap.error("--capacity-scale must be in [0.5, 2]")
    if any(not 0 <= k <= 100 for k in a.stream_k):
        ap.error("--stream-k must be in [0, 100]")
    cols = {"shipped": errors(mlperf.predict)}
    engine = False
    if a.as_run:
        mlperf.RELEASE_ENGINE = {**mlperf.RELEASE_ENGINE,
                                 "tensorrt-llm": {"policy": "on-demand"}}
        mlperf.predict.cache_clear()
        engine = True
        cols["as run"] = errors(lambda r: mlperf.predict(r, engine=True))
    if a.capacity_scale is not None:
        load = mlperf.load_hardware

        def scaled(name):
            hw = load(name)
            return replace(hw, memory_capacity_bytes=hw.memory_capacity_bytes
                           * a.capacity_scale)
        mlperf.load_hardware = scaled
        mlperf.predict.cache_clear()
        cols[f"capacity x{a.capacity_scale:g}"] = errors(mlperf.predict)
        mlperf.load_hardware = load
        mlperf.predict.cache_clear()
    for k in a.stream_k:
        restore = stream_scaled(k)
        try:
            cols[f"{'as run, ' if engine else ''}stream K={k:g}"] = errors(
                lambda r: mlperf.predict(r, engine=engine))
        finally:
            restore()
    table(cols)


if __name__ == "__main__":
    main()
