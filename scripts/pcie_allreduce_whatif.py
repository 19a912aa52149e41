"""What-if of the tensor-parallel all-reduce on PCIe boards (issue 31), on the TensorRT-LLM
max-load rows: the recorded passes of ``scripts/tp8_whatif.py`` (same cache) re-timed with each
variant of its ``VARIANTS`` table, with the figures split by GPU and TP degree (in sample at the
shipped duty and release factors, and leave-one-GPU-out with both refitted, as tp8_whatif).

    python scripts/pcie_allreduce_whatif.py --cache FILE.pkl --variants pcie-as-nvlink,base

Measured on the 1,794 rows (reserve 4 GiB; in sample / held out, held-out TP8):
pcie-as-nvlink (NCCL's NVLink model on the PCIe boards, the model before) 10.7 / 12.8 %, 25.1 %;
pcie-no-socket (PCI latencies, no LL128, NCCL's PCIe bandwidth) 10.5 / 12.4 %, 22.4 %;
base (and rings over two sockets at NCCL's 15 GB/s) 8.9 / 10.1 %, 11.0 % (signed +2.6 %).
Sensitivity to the unstated host, measured with a bound on the bus set directly: 16 GB/s
9.1 / 10.9 %, TP8 11.3 %; 10 GB/s (an Intel Skylake-Ice Lake host, SKL_QPI_BW) 10.0 / 11.9 %,
TP8 18.8 %, signed -2.2 %; before the socket bound, every PCIe ring at half NCCL's PCIe
bandwidth (a scale, pcie-bus0.5) 9.5 / 11.8 %, TP4 10.6 %, TP8 14.7 %, signed -5.4 %.

NCCL's default P2P level on the preset's AMD host (issue 31, TP4; ``[interconnect] host_cpu``,
``parallel.collectives.nccl_ring_uses_shm``: rings of more than two GPUs through host memory at
NCCL_SHM_SHARE of NCCL's PCIe bandwidth), 1,794 rows, reserve 4 GiB, in sample / held out:
pcie-p2p (rule off, P2P everywhere: the model before) 8.9 / 9.9 %, TP1/2/4/8 held out 8.2 / 7.4 /
13.1 / 11.3 %, signed +0.6 %; base (rule on, share 0.67) 7.9 / 8.4 %, TP 9.0 / 6.6 / 7.7 /
10.2 %, signed -0.0 % (held out, signed: A100 PCIe TP4 +13.5 -> -4.1 %, L40S TP4 +21.8 -> -2.1 %;
L40S TP2, two rows on P2P, +36.0 % unchanged; NVLink groups move only through the refitted duty
and release factors); over the cited
range of the share (24-42 % SHM loss): pcie-shm0.58 9.0 / 10.4 %, TP 10.6 / 9.3 / 9.6 / 11.8 %,
signed -3.7 %; pcie-shm0.76 8.0 / 9.3 %, TP 9.4 / 7.9 / 9.0 / 10.6 %, signed -0.9 %.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import tp8_whatif as W  # noqa: E402

from llmpara_core.serving import validation as sv  # noqa: E402


def by_group(errs) -> str:
    """'GPU TPn median |e| (signed)' for every (GPU, TP) group."""
    g = defaultdict(list)
    for r, e in errs:
        g[(r.hardware.replace("NVIDIA ", ""), r.tp)].append(e)
    return "; ".join(f"{h} TP{t} {median(map(abs, v)):.1%} ({median(v):+.1%}, n={len(v)})"
                     for (h, t), v in sorted(g.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache")
    ap.add_argument("--sample", type=int, default=1)
    ap.add_argument("--variants", default="pcie-as-nvlink,base")
    a = ap.parse_args()
    names = a.variants.split(",")
    bad = [v for v in names if v not in W.VARIANTS]
    if bad or a.sample < 1:
        print(f"unknown variant(s) {bad}; choose from {', '.join(W.VARIANTS)}" if bad else
              "--sample must be >= 1", file=sys.stderr)
        return 2
    runs, pairs = W.cached_record(a.cache, lambda: sv.load_rows(sv.SHIPPED_MAX_LOAD)[::a.sample],
                                  sv.MAX_LOAD_REQUESTS)
    for v in names:
        pk = W.run_parts(runs, W.VARIANTS[v])
        ins, held, duties = W.figures(pairs, pk)
        print(f"{v}: in sample {W.summary(ins)}; held out {W.summary(held)}; duties "
              + ", ".join(f"{g.replace('NVIDIA ', '')} {d:g}" for g, d in duties.items()))
        print(f"  in sample by GPU x TP: {by_group(ins)}")
        print(f"  held out by GPU x TP: {by_group(held)}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
