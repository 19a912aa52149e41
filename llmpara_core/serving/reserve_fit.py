"""Fit and leave-one-GPU-out check of TensorRT-LLM's runtime reserve
(``config.TRTLLM_RUNTIME_RESERVE_GIB``) on the max-load rows (``validation``).

The reserve is device memory the stack holds outside the weights, the pass's activations and
the KV cache, per device: what ``EngineConfig.runtime_reserve_bytes`` takes off before the KV
cache gets its fraction of the rest. Rows whose weights nearly fill the device (a 70B model in
FP8 on one 80 GB GPU, in 16 bits on two) are the ones it moves, by up to a third of their
throughput.

Each reserve of the grid changes which requests fit, so each is simulated once
(``duty_fit.record``); the power wall's duty and the release factors are then fitted on top of
each, as ``llmpara validate --regime serving-maxload`` fits them. The reserve kept is the
grid's with the lowest median |error| after those fits; leave-one-GPU-out picks it, the duty
and the factors on the other GPUs' rows and scores the held-out GPU's rows with them.
"""

from __future__ import annotations

from statistics import median

from . import duty_fit, stack_version
from . import validation as sv
from ..units import BYTES_PER_GIB

RESERVES_GIB = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)


def record_all(rows, reserves_gib=RESERVES_GIB,
               requests: int = sv.MAX_LOAD_REQUESTS) -> dict[float, list[tuple]]:
    """{reserve [GiB]: ``duty_fit.record`` of the rows simulated with it}."""
    return {g: duty_fit.record(rows, requests, g * BYTES_PER_GIB) for g in reserves_gib}


def _fitted(records, keep) -> tuple[float, dict, float]:
    """(duty, release factors, median |error| over the kept rows) fitted on the kept rows."""
    kept = [(r, p) for r, p in records if keep(r)]
    duty = duty_fit.fit(kept)
    table = stack_version.fit(kept, duty)
    errs = stack_version.errors(kept, duty, table)
    return duty, table, median(abs(e) for _, e in errs)


def fit(by_reserve: dict[float, list[tuple]]) -> float:
    """The grid's reserve [GiB] with the lowest in-sample median |error| (duty and release
    factors refitted for each)."""
    return min(by_reserve, key=lambda g: (_fitted(by_reserve[g], lambda r: True)[2], g))


def leave_one_gpu_out(by_reserve: dict[float, list[tuple]]) -> tuple[list[tuple], dict]:
    """([(row, held-out error)], {gpu: (reserve [GiB], duty) chosen without it})."""
    gpus = sorted({r.hardware for recs in by_reserve.values() for r, _ in recs})
    held, chosen = [], {}
    for g in gpus:
        others = lambda r, g=g: r.hardware != g             # noqa: E731
        fits = {res: _fitted(recs, others) for res, recs in by_reserve.items()}
        best = min(fits, key=lambda res: (fits[res][2], res))
        duty, table, _ = fits[best]
        chosen[g] = (best, duty)
        held += stack_version.errors([(r, p) for r, p in by_reserve[best] if r.hardware == g],
                                     duty, table)
    return held, chosen
