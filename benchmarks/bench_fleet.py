"""Benchmark: the fleet planner on the example mix, and Ray's speed-up on the simulations.

    python benchmarks/bench_fleet.py [--runs 3] [--plan-runs N] [--workers 2] [--survivors N]
                                     [--skip-plan] [--skip-ray]

1. The example mix (presets/fleet/example-mix.toml) with all its candidates, planned on the
   local process pool of ``--workers`` processes: configurations before pruning, pruned by the
   closed forms, skipped by the cost bound, simulated (and of those, stopped early by the cost
   of the plans found), the pruning ratio (configurations / simulated), the wall time and the
   CPU time of the process tree (user + sys of this process and its pool workers), median of
   ``--plan-runs`` (default ``--runs``). Target (issue 30): >= 1,000 configurations planned in
   <= 60 s on 2 cores. On a shared machine the wall time depends on the load; CPU-s / workers
   is what the plan takes on as many idle cores.
2. The survivors the plan simulated (``--survivors`` of them, default all; fewer are taken
   evenly spread over the list), each one Ray task (``evaluate_candidate`` with the plan's own
   replica cap), on a local Ray with 1 CPU and with 2 CPUs, the runs interleaved (1, 2, 1, 2,
   ...) so that a change of the machine's load falls on both: wall time of each (median of
   ``--runs``, Ray started and warmed up outside the timed region), the CPU time the tasks
   took (summed inside the workers) and the speed-up. Target: >= 1.7x.

Every figure is printed with the load average (1, 5, 15 min) at its start and end.
"""

import argparse
import os
import resource
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


def tree_cpu_s() -> float:
    """User + sys CPU seconds of this process and its reaped children (the pool workers)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def one_plan(mix, workers: int, label: str):
    before = load()
    ex = make_executor("local", workers)
    c0, t0 = tree_cpu_s(), time.perf_counter()
    try:
        result = plan(mix, ex)
    finally:
        ex.close()                           # joins the workers: their CPU time is counted
    wall, cpu = time.perf_counter() - t0, tree_cpu_s() - c0
    print(f"  plan {label}: {wall:.1f} s wall, {cpu:.1f} CPU-s ({before} -> {load()})",
          flush=True)
    return result, wall, cpu


def timed_evaluate(task):
    """``evaluate_candidate`` and the CPU seconds it took in its worker."""
    c0 = time.process_time()
    out = evaluate_candidate(task)
    return time.process_time() - c0, out


def bench_ray(tasks, cpus: int, run: int) -> float:
    """One timed pass of ``tasks`` on a local Ray of ``cpus`` CPUs (started and warmed up
    outside the timed region, shut down after)."""
    ex = RayExecutor(cpus)
    try:
        list(ex.map_unordered(timed_evaluate, tasks[:cpus]))        # warm the workers
        before = load()
        t0 = time.perf_counter()
        out = list(ex.map_unordered(timed_evaluate, tasks))
        wall = time.perf_counter() - t0
        assert len(out) == len(tasks)
        print(f"  Ray {cpus} CPU run {run}: {wall:.1f} s wall, "
              f"{sum(c for c, _ in out):.1f} CPU-s in the tasks ({before} -> {load()})",
              flush=True)
        return wall
    finally:
        ex.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plan-runs", type=int, default=None,
                    help="timed plans (default --runs); the first plan is one of them")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--survivors", type=int, default=None,
                    help="simulate only N of the survivors in the Ray comparison")
    ap.add_argument("--skip-plan", action="store_true")
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    mix = load_traffic(EXAMPLE)
    print(f"machine: {os.cpu_count()} CPUs, {load()}")
    result, wall, cpu = one_plan(mix, args.workers, "run 1")
    c = result.counts
    print(f"example mix: {c['configurations']} configurations before pruning; "
          f"{c['pruned_closed_form']} pruned by closed forms {dict(result.pruned_by)}; "
          f"{c['bounded']} bounded; {c['skipped_by_cost_bound']} skipped by the cost bound; "
          f"{c['simulated']} simulated ({c['stopped_by_cost']} of them stopped early by the "
          f"cost of the plans found); pruning ratio {c['pruning_ratio']:.1f}x "
          f"(configurations / simulated)")
    for r in result.chosen:
        print(f"  chosen: {r.workload}: {r.hardware} TP{r.tp}xPP{r.pp} {r.precision} "
              f"{r.framework} x{r.replicas} = {r.gpus} GPUs, ${r.usd_per_hour:.2f}/h")
    if not args.skip_plan:
        runs = args.runs if args.plan_runs is None else args.plan_runs
        walls, cpus = [wall], [cpu]
        for i in range(2, runs + 1):
            _, w, cp = one_plan(mix, args.workers, f"run {i}")
            walls.append(w)
            cpus.append(cp)
        print(f"plan, local pool of {args.workers}: median {statistics.median(walls):.1f} s wall "
              f"(min {min(walls):.1f}, max {max(walls):.1f}) and "
              f"{statistics.median(cpus):.1f} CPU-s (min {min(cpus):.1f}, max {max(cpus):.1f}) "
              f"over {len(walls)} runs; CPU-s / {args.workers} = "
              f"{statistics.median(cpus) / args.workers:.1f} s; target <= 60 s")
    if args.skip_ray:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        print("Ray is not installed: pip install 'llmpara[ray]'")
        return
    tasks = [Task(Candidate(*r["key"]), mix.workloads[r["key"][0]], mix.requests, mix.seed,
                  r.get("max_replicas")) for r in result.simulated]
    if args.survivors and args.survivors < len(tasks):       # evenly spread over workloads
        step = len(tasks) / args.survivors
        tasks = [tasks[int(i * step)] for i in range(args.survivors)]
    print(f"Ray: {len(tasks)} survivors, one task each")
    one, two = [], []
    for i in range(1, args.runs + 1):        # interleaved: a load change hits both alike
        one.append(bench_ray(tasks, 1, i))
        two.append(bench_ray(tasks, 2, i))
    m1, m2 = statistics.median(one), statistics.median(two)
    print(f"Ray 1 CPU: median {m1:.1f} s; Ray 2 CPUs: median {m2:.1f} s; speed-up "
          f"{m1 / m2:.2f}x (target >= 1.7x)")


if __name__ == "__main__":
    main()
