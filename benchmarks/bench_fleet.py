"""Benchmark: the fleet planner on the example mix, and Ray's speed-up on the simulations.

    python benchmarks/bench_fleet.py [--runs 3] [--plan-runs N] [--workers 2] [--survivors N]
                                     [--skip-plan] [--skip-ray]

1. The example mix (presets/fleet/example-mix.toml) with all its candidates, planned on the
   local process pool of ``--workers`` processes: configurations before pruning, pruned by the
   closed forms, skipped by the cost bound, simulated, the pruning ratio (configurations /
   simulated) and the wall time (median of ``--runs``). Target (issue 30): >= 1,000
   configurations planned in <= 60 s on 2 cores.
2. The survivors the plan simulated (``--survivors`` of them in the plan's order,
   default all; fewer are taken evenly spread over the list), each one Ray task (``evaluate_candidate``), on a local Ray with 1 CPU and then
   with 2 CPUs: wall time of each (median of ``--runs``, Ray started and warmed up outside the
   timed region) and the speed-up. Target: >= 1.7x.

Every figure is measured on this machine when it runs; a shared machine makes wall times
noisy (the load average is printed with them).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmpara_core.fleet import (RayExecutor, evaluate_candidate, load_traffic,  # noqa: E402
                                make_executor, plan)
from llmpara_core.fleet.search import Candidate, Task  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "presets" / "fleet" / "example-mix.toml"


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def bench_plan(mix, workers: int, runs: int):
    times, result = [], None
    for i in range(1, runs + 1):
        ex = make_executor("local", workers)
        t0 = time.perf_counter()
        try:
            result = plan(mix, ex)
        finally:
            ex.close()
        times.append(time.perf_counter() - t0)
        print(f"  plan run {i + 1}: {times[-1]:.1f} s ({load()})", flush=True)
    return result, times


def bench_ray(tasks, cpus: int, runs: int) -> list[float]:
    ex = RayExecutor(cpus)
    try:
        list(ex.map_unordered(evaluate_candidate, tasks[:cpus]))        # warm the workers
        times = []
        for i in range(runs):
            t0 = time.perf_counter()
            out = list(ex.map_unordered(evaluate_candidate, tasks))
            times.append(time.perf_counter() - t0)
            assert len(out) == len(tasks)
            print(f"  Ray {cpus} CPU run {i + 1}: {times[-1]:.1f} s ({load()})", flush=True)
        return times
    finally:
        ex.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plan-runs", type=int, default=None,
                    help="timed plans (default --runs); the first plan is one of them")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--survivors", type=int, default=None,
                    help="simulate only the first N survivors in the Ray comparison")
    ap.add_argument("--skip-plan", action="store_true")
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    mix = load_traffic(EXAMPLE)
    print(f"machine: {os.cpu_count()} CPUs, {load()}")
    ex = make_executor("local", args.workers)
    t0 = time.perf_counter()
    try:
        result = plan(mix, ex)              # also the survivors for the Ray comparison
    finally:
        ex.close()
    first = time.perf_counter() - t0
    print(f"  plan run 1: {first:.1f} s ({load()})", flush=True)
    c = result.counts
    print(f"example mix: {c['configurations']} configurations before pruning; "
          f"{c['pruned_closed_form']} pruned by closed forms {dict(result.pruned_by)}; "
          f"{c['bounded']} bounded; {c['skipped_by_cost_bound']} skipped by the cost bound; "
          f"{c['simulated']} simulated; pruning ratio {c['pruning_ratio']:.1f}x "
          f"(configurations / simulated)")
    if not args.skip_plan:
        runs = args.runs if args.plan_runs is None else args.plan_runs
        _, times = bench_plan(mix, args.workers, runs - 1)
        times = [first] + times
        print(f"plan, local pool of {args.workers}: median {statistics.median(times):.1f} s "
              f"over {len(times)} runs (min {min(times):.1f}, max {max(times):.1f}); "
              f"target <= 60 s")
    if args.skip_ray:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        print("Ray is not installed: pip install 'llmpara[ray]'")
        return
    keys = [tuple(r["key"]) for r in result.simulated]
    tasks = [Task(Candidate(*k), mix.workloads[k[0]], mix.requests, mix.seed) for k in keys]
    if args.survivors and args.survivors < len(tasks):       # evenly spread over workloads
        step = len(tasks) / args.survivors
        tasks = [tasks[int(i * step)] for i in range(args.survivors)]
    print(f"Ray: {len(tasks)} survivors, one task each")
    one = bench_ray(tasks, 1, args.runs)
    two = bench_ray(tasks, 2, args.runs)
    m1, m2 = statistics.median(one), statistics.median(two)
    print(f"Ray 1 CPU: median {m1:.1f} s; Ray 2 CPUs: median {m2:.1f} s; speed-up "
          f"{m1 / m2:.2f}x (target >= 1.7x)")


if __name__ == "__main__":
    main()
