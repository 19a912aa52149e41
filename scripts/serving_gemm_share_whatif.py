"""What-if (not adopted): the serving simulator's GEMM/attention rate scaled by one
device-independent share ``s`` on the TensorRT-LLM max-load rows, with a leave-one-GPU-out
figure: for each GPU, ``s`` is chosen on the other GPUs' rows (lowest median |error|) and that
GPU's rows are scored with it.

    python scripts/serving_gemm_share_whatif.py [--step N] [--requests N] [--shares 0.8,0.9,1]

``--step N`` takes every N-th shipped row (3 in the README's figures). A share below 1 is a
knob without a mechanism (the compute rate of the analysis paths stays as fitted), so the
model does not use it; the script measures how much of the prompt-heavy over-prediction such
a knob would remove and whether it holds out of sample.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import validation as sv  # noqa: E402
from llmpara_core.serving.cost import IterationCost  # noqa: E402


def errors_at(rows, share: float, requests: int) -> dict:
    """{row_id: (gpu, tp, error)} with every iteration's FLOP rate times ``share``."""
    orig = IterationCost.rates_for

    def scaled(self, tokens, batch):
        f, p = orig(self, tokens, batch)
        return f * share, p
    IterationCost.rates_for = scaled
    sv.predict.cache_clear()
    try:
        return {c.row.row_id: (c.row.hardware, c.row.tp, c.error)
                for c in sv.compare(rows, requests) if c.error is not None}
    finally:
        IterationCost.rates_for = orig
        sv.predict.cache_clear()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", type=int, default=3)
    ap.add_argument("--requests", type=int, default=sv.MAX_LOAD_REQUESTS)
    ap.add_argument("--shares", default="0.8,0.85,0.9,0.95,1.0")
    a = ap.parse_args()
    shares = [float(x) for x in a.shares.split(",")]
    if a.step < 1 or a.requests < 1 or not shares or min(shares) <= 0:
        print("step and requests must be >= 1 and shares > 0", file=sys.stderr)
        return 2
    rows = sv.load_rows(sv.SHIPPED_MAX_LOAD)[::a.step]
    res = {s: errors_at(rows, s, a.requests) for s in shares}
    for s, r in res.items():
        e = [x[2] for x in r.values()]
        by_tp = defaultdict(list)
        for _, tp, x in r.values():
            by_tp[tp].append(abs(x))
        print(f"share {s:.2f}: {len(e)} rows, median |err| {median(map(abs, e)):.1%}, signed "
              f"{median(e):+.1%}; " + ", ".join(f"TP{k} {median(v):.1%}"
                                                 for k, v in sorted(by_tp.items())))
    gpus = sorted({g for r in res.values() for g, _, _ in r.values()})
    held = []
    for g in gpus:
        def score(s, keep):
            return median(abs(x) for gg, _, x in res[s].values() if keep(gg))
        best = min(shares, key=lambda s: score(s, lambda gg: gg != g))
        out = [x for gg, _, x in res[best].values() if gg == g]
        held += out
        print(f"leave out {g}: share fitted on the others {best:.2f}; {g} median |err| "
              f"{median(map(abs, out)):.1%} (at 1.00: {score(1.0, lambda gg: gg == g):.1%})"
              if 1.0 in res else f"leave out {g}: {best:.2f}, {median(map(abs, out)):.1%}")
    print(f"leave-one-GPU-out, all rows: median |err| {median(map(abs, held)):.1%}, signed "
          f"{median(held):+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
