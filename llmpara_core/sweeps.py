"""Small whole-scenario helpers the dashboard needs: the decode batch-size crossover and the
KV-cache growth curve. They only call the core (``analyze``, ``kv_cache_bytes``); no new
physics here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .analysis import analyze
from .hardware import Hardware
from .memory import kv_cache_bytes
from .model import Model
from .precision import Precision
from .workload import Workload


@dataclass(frozen=True)
class Crossover:
    """Smallest batch whose decode spends most of its estimated time in compute-bound operators
    (``None`` when no batch up to ``max_batch`` does), and every batch evaluated on the way as
    (batch, share of decode time in memory-bound operators)."""
    batch: int | None
    max_batch: int
    samples: tuple[tuple[int, float], ...]


def decode_is_compute_bound(model: Model, hardware: Hardware, precision: Precision,
                            workload: Workload) -> tuple[bool, float]:
    """(decode mostly compute-bound?, share of decode time in memory-bound operators)."""
    share = analyze(model, hardware, precision, workload).decode.memory_bound_share()
    return share < 0.5, share


def decode_crossover_batch(model: Model, hardware: Hardware, precision: Precision,
                           workload: Workload, max_batch: int = 1 << 16) -> Crossover:
    """Search batches 1, 2, 4, ... up to ``max_batch``, then bisect between the last
    memory-bound power of two and the first compute-bound one (the memory-bound share falls
    with batch as weight reads are amortised over more tokens)."""
    samples: dict[int, float] = {}

    def compute_bound(b: int) -> bool:
        bound, share = decode_is_compute_bound(model, hardware, precision,
                                               replace(workload, batch=b))
        samples[b] = share
        return bound

    lo, hi = 0, None     # lo: largest batch known memory-bound; hi: smallest known compute-bound
    b = 1
    while b <= max_batch:
        if compute_bound(b):
            hi = b
            break
        lo = b
        b *= 2
    if hi is None and lo < max_batch and b > max_batch:
        if compute_bound(max_batch):
            hi = max_batch
        else:
            lo = max_batch
    if hi is None:
        return Crossover(None, max_batch, tuple(sorted(samples.items())))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if compute_bound(mid):
            hi = mid
        else:
            lo = mid
    return Crossover(hi, max_batch, tuple(sorted(samples.items())))


def kv_cache_curve(model: Model, precision: Precision, batch: int, max_context: int,
                   points: int = 200) -> tuple[tuple[int, float], ...]:
    """(context length, KV cache bytes of ``batch`` sequences) at up to ``points`` contexts
    from 0 to ``max_context``, including every sliding-window breakpoint inside the range."""
    n = max(2, points)
    ctxs = {round(i * max_context / (n - 1)) for i in range(n)}
    if model.sliding_window and 0 < model.sliding_window < max_context:
        ctxs.add(model.sliding_window)
    return tuple((c, kv_cache_bytes(model, precision, batch, c)) for c in sorted(ctxs))
