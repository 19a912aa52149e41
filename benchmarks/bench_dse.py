"""Benchmark: design-space exploration at scale, and the Design space page.

    python benchmarks/bench_dse.py [--runs N] [--samples N] [--skip-page]

1. Whole process: ``llmpara dse --model llama-3-8b --preset datacenter-gpu --samples 1000000
   --format json`` (1,000,000 random designs evaluated and reduced to the Pareto front of
   tokens/s, $/Mtok and J/token), run N times as a child process; wall time from
   ``time.perf_counter`` around the child, CPU time (user + sys) and peak memory from the
   operating system's accounting of the finished child (``os.wait4``). Target: <= 2 s wall,
   the median, on one core (run it under ``taskset -c 0`` to pin one core).
2. In process, the same million designs: sampling, evaluation and Pareto reduction timed
   separately (medians), and the time per design against the reference tool's ~1.9 ms.
3. The page: server time of one script run of the Design space page on Quick Scan, under
   ``streamlit.testing.v1.AppTest`` (a fresh session each time, module imports warm).

The machine may be shared: quote medians and look at the spread.
"""

import argparse
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


def _child(cmd: list[str]) -> tuple[float, float, int, bytes]:
    """(wall s, user + sys s, peak RSS KiB, stdout) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out = p.stdout.read()
    p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"child failed: {' '.join(cmd)}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, out


def _stats(label: str, xs: list[float], unit: str = "s") -> None:
    print(f"  {label:<28} median {statistics.median(xs):8.3f} {unit}   "
          f"min {min(xs):8.3f}   max {max(xs):8.3f}   (n={len(xs)})")


def whole_process(runs: int, samples: int) -> None:
    cmd = [sys.executable, "-m", "llmpara_core", "dse", "--model", "llama-3-8b", "--preset",
           "datacenter-gpu", "--samples", str(samples), "--format", "json"]
    print("1. whole process:", " ".join(cmd[1:]))
    _child(cmd)                                  # warm-up (file cache)
    walls, cpus, rss = [], [], []
    for _ in range(runs):
        wall, cpu, kib, out = _child(cmd)
        walls.append(wall)
        cpus.append(cpu)
        rss.append(kib / 1024)
    d = json.loads(out)
    print(f"  points_evaluated {d['points_evaluated']:,}, feasible {d['feasible']:,}, "
          f"Pareto front {d['pareto_size']} designs")
    _stats("wall", walls)
    _stats("cpu (user + sys)", cpus)
    _stats("peak memory", rss, "MiB")
    per = statistics.median(walls) / d["points_evaluated"]
    print(f"  {per * 1e6:.2f} us per design, whole process: "
          f"{REFERENCE_S_PER_POINT / per:,.0f}x faster per design than the reference")


def in_process(runs: int, samples: int) -> None:
    from llmpara_core import dse
    from llmpara_core.dse import space as dse_space
    from llmpara_core.precision import precision_preset
    from llmpara_core.presets import load_hardware, load_model
    from llmpara_core.workload import Workload
    space = dse_space.find_space("datacenter-gpu").without_axis("tdp").without_axis("price")
    ctx = dse.DesignContext(load_model("llama-3-8b"), precision_preset("FP16"), Workload(),
                            load_hardware(space.base_hardware))
    parts: dict[str, list[float]] = {"sample": [], "evaluate": [], "pareto (3 objectives)": [],
                                     "pareto (2 objectives)": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        design = dse_space.sample(space, "random", samples, 0)
        t1 = time.perf_counter()
        ev = ctx.evaluate(design)
        t2 = time.perf_counter()
        dse.pareto_front(ev, dse.DEFAULT_OBJECTIVES)
        t3 = time.perf_counter()
        dse.pareto_front(ev, ("tokens_per_s", "usd_per_mtok"))
        t4 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            parts[k].append(v)
    print(f"2. in process, {samples:,} designs:")
    for k, v in parts.items():
        _stats(k, v)


def page(runs: int) -> None:
    import logging

    from streamlit.testing.v1 import AppTest
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").disabled = True
    times = []
    for i in range(runs + 1):
        at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
        at.run()
        at.switch_page("app_pages/design_space_page.py")
        t0 = time.perf_counter()
        at.run()
        if i:                                    # the first run imports the page's modules
            times.append(time.perf_counter() - t0)
        assert not at.exception, at.exception
    print("3. Design space page, Quick Scan, one script run (AppTest, fresh session):")
    _stats("server time", times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--skip-page", action="store_true")
    args = ap.parse_args()
    whole_process(args.runs, args.samples)
    in_process(args.runs, args.samples)
    if not args.skip_page:
        page(args.runs)


if __name__ == "__main__":
    main()
