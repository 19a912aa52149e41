"""Request streams for the serving simulator: arrival times and lengths, seeded.

Arrivals: ``poisson`` (exponential gaps at ``rate``), ``gamma`` (gaps drawn from a gamma
distribution of shape ``burstiness`` and mean 1 / rate -- the burstiness knob of vLLM's
``benchmark_serving.py``: 1 = Poisson, < 1 burstier), or ``max-load`` (every request queued at
t = 0, as trtllm-bench's throughput benchmark does).

Lengths: ``fixed`` (every request ISL / OSL, the synthetic datasets of the TensorRT-LLM
performance tables), ``uniform`` (uniform on [(1 - spread) L, (1 + spread) L]) or ``lognormal``
(mean L, log-space sigma ``spread``; heavy-tailed like chat traces such as ShareGPT -- the sigma
is an assumption of this tool, not a fitted value). Drawn lengths are rounded and clipped to
[1, 8 L]. ``table``: whole requests drawn from a :class:`.lengths.LengthTable` (a named data set
such as MLPerf's OpenOrca, a user's CSV, or a lognormal from mean / median / max); ISL / OSL are
then unused by the draw.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError, require_float, require_int
from ..units import MAX_SIZE
from .lengths import LengthTable

ARRIVALS = ("poisson", "gamma", "max-load")
LENGTHS = ("fixed", "uniform", "lognormal")
TABLE = "table"
MAX_REQUESTS = 1_000_000


@dataclass(frozen=True)
class RequestSpec:
    """How requests arrive and how long they are. ``rate`` in requests/s (unused for
    max-load)."""
    isl: int = 512
    osl: int = 256
    arrival: str = "max-load"
    rate: float | None = None
    burstiness: float = 1.0
    requests: int = 1000
    lengths: str = "fixed"
    spread: float = 0.5
    seed: int = 0
    table: LengthTable | None = None

    def __post_init__(self):
        require_int("ISL", self.isl, 1, MAX_SIZE)
        require_int("OSL", self.osl, 1, MAX_SIZE)
        require_int("requests", self.requests, 1, MAX_REQUESTS)
        require_int("seed", self.seed, 0, 2**63 - 1)
        if self.arrival not in ARRIVALS:
            raise ConfigError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        if self.table is not None and not isinstance(self.table, LengthTable):
            raise ConfigError("a length table must be a LengthTable")
        if self.table is not None:       # ISL / OSL = the table's means (disaggregation,
            object.__setattr__(self, "lengths", TABLE)      # reports and captions read them)
            object.__setattr__(self, "isl", self.table.mean_isl)
            object.__setattr__(self, "osl", self.table.mean_osl)
        elif self.lengths == TABLE:
            raise ConfigError("lengths 'table' needs a length table (a named set or a CSV)")
        if self.lengths not in LENGTHS + (TABLE,):
            raise ConfigError(f"lengths must be one of {', '.join(LENGTHS)}, got {self.lengths!r}")
        if self.arrival != "max-load":
            if self.rate is None:
                raise ConfigError(f"{self.arrival} arrivals need a request rate (requests/s)")
            require_float("rate", self.rate, lo=0, hi=1e9, lo_open=True)
        require_float("burstiness", self.burstiness, lo=0, hi=1e3, lo_open=True)
        require_float("spread", self.spread, lo=0, hi=5)
        if self.lengths == "uniform" and self.spread > 1:
            raise ConfigError("uniform lengths need spread <= 1")

    def with_rate(self, rate: float, arrival: str | None = None) -> "RequestSpec":
        a = arrival or (self.arrival if self.arrival != "max-load" else "poisson")
        return replace(self, rate=rate, arrival=a)

    def to_dict(self) -> dict:
        """JSON-ready fields (the length table as its summary)."""
        from dataclasses import fields
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "table"}
        out["length_table"] = None if self.table is None else self.table.summary()
        return out


def draw(spec: RequestSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival times [s] sorted, input lengths, output lengths) of ``spec.requests`` requests;
    the same seed gives the same stream."""
    rng = np.random.default_rng(spec.seed)
    n = spec.requests
    if spec.arrival == "max-load":
        t = np.zeros(n)
    elif spec.arrival == "poisson":
        t = np.cumsum(rng.exponential(1.0 / spec.rate, n))
    else:
        k = spec.burstiness
        t = np.cumsum(rng.gamma(k, 1.0 / (spec.rate * k), n))
    if spec.table is not None:
        return (t, *spec.table.draw(rng, n))
    return t, _lengths(rng, spec, spec.isl, n), _lengths(rng, spec, spec.osl, n)


def _lengths(rng, spec: RequestSpec, mean: int, n: int) -> np.ndarray:
    if spec.lengths == "fixed" or spec.spread == 0:
        return np.full(n, mean, dtype=np.int64)
    if spec.lengths == "uniform":
        x = rng.uniform((1 - spec.spread) * mean, (1 + spec.spread) * mean, n)
    else:
        s = spec.spread
        x = rng.lognormal(np.log(mean) - s * s / 2, s, n)
    return np.clip(np.rint(x), 1, 8 * mean).astype(np.int64)
