"""Benchmark: design-space exploration at scale, and the Design space page.

    python benchmarks/bench_dse.py [--runs N] [--samples N] [--skip-page] [--skip-app]

Pin one core for comparable figures: ``taskset -c 0 python benchmarks/bench_dse.py``.

1. Whole process, the issue's command: ``llmpara dse --model "Llama-3 8B" --samples 1000000
   --seed 1 --format json`` (Quick Scan axes, 10^6 random designs reduced to the Pareto front
   of tokens/s, $/Mtok and J/token; the JSON holds the front, not every design), run N times
   as a child process: wall time from ``time.perf_counter`` around the child, CPU time (user +
   sys) and peak memory from the operating system's accounting of the finished child
   (``os.wait4``). Target: <= 0.6 s wall and <= 150 MB, medians, on one core.
2. The page's run, in a child process: the core call the Design space page makes for a
   10^6-design Latin hypercube (``explore`` with the hypervolume and a 15,000-design cloud)
   plus its data prep (front and cloud taken, hover columns, front rows): time, the peak of
   Python + numpy allocations (``tracemalloc``) and the growth of the process's peak RSS.
   Target: <= 2 s and <= 250 MB.
3. In process, the same million designs: sampling, the streamed run (evaluation chunk by
   chunk + front of the chunks' candidates) and, for reference, the front of all designs
   at once (medians).
4. The page itself under ``streamlit.testing.v1.AppTest``: server time of one script run of
   the Design space page with the same 10^6-design Latin hypercube (charts and tables
   included), and of Quick Scan's grid.

The machine may be shared: quote medians and look at the spread.
"""

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REFERENCE_S_PER_POINT = 1.9e-3   # reference-tool §6 / issue 6: ~1.9 ms per design point
CLOUD_MAX = 15_000               # designs the page keeps for its cloud (design_space_page)
LHS_QUERY = {"ds_method": "Latin hypercube", "ds_n": "1000000", "ds_seed": "1"}


def _child(cmd: list[str]) -> tuple[float, float, int, bytes]:
    """(wall s, user + sys s, peak RSS KiB, stdout) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"child failed: {' '.join(cmd)}\n{err.decode()[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, out


def _stats(label: str, xs: list[float], unit: str = "s") -> None:
    print(f"  {label:<34} median {statistics.median(xs):8.3f} {unit}   "
          f"min {min(xs):8.3f}   max {max(xs):8.3f}   (n={len(xs)})")


def whole_process(runs: int, samples: int) -> None:
    cmd = [sys.executable, "-m", "llmpara_core", "dse", "--model", "Llama-3 8B", "--samples",
           str(samples), "--seed", "1", "--format", "json"]
    print("1. whole process:", " ".join(cmd[1:]))
    _child(cmd)                                  # warm-up (file cache, bytecode)
    walls, cpus, rss = [], [], []
    for _ in range(runs):
        wall, cpu, kib, out = _child(cmd)
        walls.append(wall)
        cpus.append(cpu)
        rss.append(kib / 1024)
    d = json.loads(out)
    print(f"  points_evaluated {d['points_evaluated']:,}, feasible {d['feasible']:,}, "
          f"Pareto front {d['pareto_size']} designs ({len(out):,} bytes of JSON)")
    _stats("wall", walls)
    _stats("cpu (user + sys)", cpus)
    _stats("peak memory", rss, "MiB")
    per = statistics.median(walls) / d["points_evaluated"]
    print(f"  {per * 1e9:.0f} ns per design, whole process: "
          f"{REFERENCE_S_PER_POINT / per:,.0f}x faster per design than the reference")


def _quick_scan_context():
    from llmpara_core import dse
    from llmpara_core.dse import space as dse_space
    from llmpara_core.metrics.cost import MetricsSettings
    from llmpara_core.precision import precision_preset
    from llmpara_core.presets import load_hardware, load_model
    from llmpara_core.workload import Workload
    space = dse_space.find_space("quick-scan").without_axis("tdp").without_axis("price")
    ctx = dse.DesignContext(load_model("llama-3-8b"), precision_preset("FP16"), Workload(),
                            load_hardware(space.base_hardware), MetricsSettings())
    return ctx, space


def in_process(runs: int, samples: int) -> None:
    from llmpara_core import dse
    from llmpara_core.dse import space as dse_space
    ctx, space = _quick_scan_context()
    parts: dict[str, list[float]] = {"sample": [], "explore (streamed, front kept)": [],
                                     "evaluate all at once": [], "front of all at once": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        dse_space.sample(space, "random", samples, 1)
        t1 = time.perf_counter()
        dse.explore(ctx, space, "random", samples, 1, keep_sample=0)
        t2 = time.perf_counter()
        ev = ctx.evaluate(dse_space.sample(space, "random", samples, 1))
        t3 = time.perf_counter()
        dse.pareto_front(ev, dse.DEFAULT_OBJECTIVES)
        t4 = time.perf_counter()
        del ev
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            parts[k].append(v)
    print(f"3. in process, {samples:,} Quick Scan designs (explore includes sampling):")
    for k, v in parts.items():
        _stats(k, v)


def _peak_rss_mb() -> float:
    """This process's peak RSS [MiB]: VmHWM (Linux; ru_maxrss would also count the parent's
    memory at the fork), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def page_core_child(samples: int) -> None:
    """The page's core call + data prep, timed, then once more under ``tracemalloc``; prints
    a JSON line (see the module docstring)."""
    import tracemalloc

    from llmpara_core import dse
    ctx, space = _quick_scan_context()
    _page_core_run(ctx, space, 1000)                            # warm caches and imports
    rss0 = _peak_rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    front, cloud = _page_core_run(ctx, space, samples)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss1 = _peak_rss_mb()
    del front, cloud
    tracemalloc.start()
    _page_core_run(ctx, space, samples)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"wall": wall, "cpu": cpu, "traced_peak_mb": peak / 2**20,
                      "rss_growth_mb": rss1 - rss0, "rss_peak_mb": rss1,
                      "front": front_n[0], "cloud": CLOUD_MAX}))


front_n = [0]


def _page_core_run(ctx, space, samples: int):
    import numpy as np

    from llmpara_core import dse
    objs = dse.DEFAULT_OBJECTIVES
    if "keep_sample" in inspect.signature(dse.explore).parameters:
        res = dse.explore(ctx, space, "lhs", samples, 1, objs, with_hypervolume=True,
                          keep_sample=CLOUD_MAX)
        ev = res.evaluation
        front, cloud = ev.take(res.front), ev.take(res.sample)
        rows = front.points(range(front.n))                     # the page's front table
    else:                          # a build before streamed runs (its page kept every design)
        res = dse.explore(ctx, space, "lhs", samples, 1, objs, with_hypervolume=True)
        ev = res.evaluation
        pick = (np.arange(ev.n) if ev.n <= CLOUD_MAX else
                np.sort(np.random.default_rng(0).choice(ev.n, CLOUD_MAX, replace=False)))
        front, cloud = ev.take(res.front), ev.take(pick)
        rows = [front.point(i) for i in range(front.n)]
    for part in (front, cloud):                                 # the page's hover columns
        names = np.array(part.memory_names)[part["memory_index"]]
        np.column_stack([part["peak_tflops"], part["bw_gbps"], part["cap_gb"], names,
                         part["tdp_w"], part["price_usd"]] + [part[o] for o in objs])
    front_n[0] = len(rows)
    return front, cloud


def page_core(runs: int, samples: int) -> None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child-page-core",
           "--samples", str(samples)]
    got = [json.loads(_child(cmd)[3]) for _ in range(runs)]
    print(f"2. the page's core call + data prep, {samples:,}-design Latin hypercube "
          f"(front {got[-1]['front']} designs, cloud {got[-1]['cloud']:,}):")
    _stats("time", [g["wall"] for g in got])
    _stats("cpu", [g["cpu"] for g in got])
    _stats("traced allocations, peak", [g["traced_peak_mb"] for g in got], "MiB")
    _stats("peak RSS growth", [g["rss_growth_mb"] for g in got], "MiB")
    _stats("process peak RSS", [g["rss_peak_mb"] for g in got], "MiB")


def page_app(runs: int) -> None:
    import logging

    from streamlit.testing.v1 import AppTest
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").disabled = True
    print("4. Design space page, one script run (AppTest, fresh session, imports warm):")
    for label, query in (("Quick Scan grid", {}), ("LHS 10^6 designs", LHS_QUERY)):
        times = []
        for i in range(runs + 1):
            at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=120)
            for k, v in query.items():
                at.query_params[k] = v
            at.run()
            at.switch_page("app_pages/design_space_page.py")
            t0 = time.perf_counter()
            at.run()
            if i:                                    # the first run imports the page's modules
                times.append(time.perf_counter() - t0)
            assert not at.exception, at.exception
        _stats(f"server time, {label}", times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--skip-page", action="store_true", help="skip sections 3 and 4")
    ap.add_argument("--skip-app", action="store_true", help="skip section 4 (AppTest)")
    ap.add_argument("--child-page-core", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_page_core:
        page_core_child(args.samples)
        return
    whole_process(args.runs, args.samples)      # children first, while this process is small
    if not args.skip_page:
        page_core(args.runs, args.samples)
    in_process(args.runs, args.samples)
    if not args.skip_page and not args.skip_app:
        page_app(args.runs)


if __name__ == "__main__":
    main()
