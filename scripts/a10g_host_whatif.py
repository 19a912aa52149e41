"""NCCL's P2P level by host CPU on the A10G's multi-GPU rows: shipped with the host, and without.

    python scripts/a10g_host_whatif.py            # the A10G fold, held out (~1 min)

The A10G's batch-1 rows (mlc-ai/llm-perf-bench@d401356, Llama-2-70B on 2 / 4 / 8 GPUs) ran on
AWS g5 instances, whose host is a second-generation AMD EPYC ("These instances feature up to 8
NVIDIA A10G GPUs, second generation AMD EPYC processors", AWS EC2 documentation,
docs.aws.amazon.com/AWSEC2/latest/WindowsGuide/accelerated-computing-instances.html, "G5
instances"). On an AMD host NCCL's default P2P level keeps a ring of more than two GPUs off
P2P, through host memory (``parallel.collectives.nccl_ring_uses_shm``, NCCL 2.23 and later;
the rows are of 2023, before that rule, so this is an upper bound of its effect). Only MLC's
rows time their all-reduces by NCCL's model (``Efficiency.nccl_all_reduce``), and NCCL's
model gives a host-memory path the same latencies as P2P (NVIDIA/nccl src/graph/tuning.cc:
``intraHw = typeIntra == LINK_NVL ? NCCL_HW_NVLINK : NCCL_HW_PCI``, so only the bus bandwidth
changes, x ``NCCL_SHM_SHARE``): at batch 1 the 16 kB all-reduces of a 70B model are
latency-bound.

The shipped mapping states the host (``measurement_mapping.toml`` [host_for]: the rows' link
gets ``Interconnect.host_cpu`` = amd); the script prints the A10G fold held out with it and
without it. Measured (issue 27, branch multigpu29): without the host 7.2 % (MLC TP8 F16 +6.6 %,
TP2 / TP4 / TP8 q4f16_1 +7.8 / +2.6 / +4.0 %), with it 6.7 % (+5.6 %; +7.8 / +1.4 / +2.0 %);
llama.cpp's row split (+10.4 %) and vLLM-legacy (-14.7 %) do not call NCCL's model and do not
move. The rule is applied to the 2023 rows as to every release (``collectives``' comment: the
reason 2.23 switched, not a measured rate).
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmpara_core.calibration import default_table, fitting  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402
from llmpara_core.hardware import HostCpu  # noqa: E402

DEVICE = "nvidia-a10g"


def fold(amd_host: bool) -> list:
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    host = HostCpu.AMD if amd_host else None
    mapped = [replace(r, hardware=replace(r.hardware, interconnect=replace(
        r.hardware.interconnect, host_cpu=host)))
              if r.hardware.slug == DEVICE and r.hardware.interconnect is not None else r
              for r in mapped]
    return [p for p in fitting.leave_one_device_out(mapped, default_table(), [DEVICE])
            if validation.regime(p.row) == "batch-1"]


def main() -> int:
    for label, amd in (("no host", False), ("AMD host", True)):
        preds = fold(amd)
        med = statistics.median(abs(p.error) for p in preds)
        print(f"{label:9s} A10G fold held out {med:.1%}: " + ", ".join(
            f"{p.row.measurement.row_id} {validation.row_stack(p.row)} "
            f"TP{p.row.tp} {p.error:+.1%}" for p in preds), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
