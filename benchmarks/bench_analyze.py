"""Benchmark: one full analysis (prefill + exact decode integration + memory) per preset model.

    python benchmarks/bench_analyze.py [--repeats N]

Prints the median and spread of in-process wall time per `analyze` call (presets loaded once,
outside the timed region). Target (issue: core engine): DeepSeek-V3, prompt 4096 + 256
generated tokens, under 5 ms median.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmpara_core.analysis import analyze  # noqa: E402
from llmpara_core.precision import Precision  # noqa: E402
from llmpara_core.presets import load_hardware, load_model  # noqa: E402
from llmpara_core.workload import Workload  # noqa: E402


def bench(model_name: str, hw_name: str, repeats: int) -> list[float]:
    model, hw = load_model(model_name), load_hardware(hw_name)
    wl, prec = Workload(1, 4096, 256), Precision()
    analyze(model, hw, prec, wl)   # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        analyze(model, hw, prec, wl)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    for name in ("DeepSeek-V3", "Llama-3 8B", "Mixtral 8x7B", "Gemma-2 9B"):
        t = sorted(bench(name, "NVIDIA H100 SXM", args.repeats))
        q = lambda f: t[int(f * (len(t) - 1))] * 1e3  # noqa: E731
        print(f"{name:14s} prompt 4096 + 256 gen: median {statistics.median(t) * 1e3:.2f} ms "
              f"(p10 {q(0.1):.2f}, p90 {q(0.9):.2f}, n={len(t)})")


if __name__ == "__main__":
    main()
