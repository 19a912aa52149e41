"""Request-length distributions: each request's (input, output) tokens drawn from a table of
real requests -- a named data set shipped in ``presets/tables/lengths/`` (MLPerf's OpenOrca and
DeepSeek-R1 sets), a user's CSV of ``input_length,output_length`` -- or, where only summary
figures are known, from a lognormal with a given mean and median clipped at a maximum.

A draw picks whole rows (input and output of the same request together, so their correlation
is kept), uniformly with replacement, seeded by the request stream's generator.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..units import MAX_SIZE

LENGTHS_DIR = Path(__file__).resolve().parent.parent.parent / "presets" / "tables" / "lengths"
MAX_LENGTH_ROWS = 1_000_000
MAX_LENGTH_CSV_BYTES = 20_000_000
FALLBACK_SAMPLES = 4096
_SOURCE = ("MLPerf Inference data set lengths, copied from the shared validation data "
           "(extracted from the MLCommons data set files by github openshift-psap/"
           "performance-dashboard@71007029fb5b:mlperf-data/summaries/)")


@dataclass(frozen=True)
class LengthStats:
    """Mean, median and max of one length [tokens]."""
    mean: float
    median: float
    max: int

    def __post_init__(self):
        for k in ("mean", "median"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) \
                    or not 1 <= v <= MAX_SIZE:
                raise ConfigError(f"length {k} must be a number in [1, {MAX_SIZE:,}], got {v!r}")
        if not isinstance(self.max, int) or isinstance(self.max, bool) \
                or not 1 <= self.max <= MAX_SIZE:
            raise ConfigError(f"length max must be an integer in [1, {MAX_SIZE:,}], got "
                              f"{self.max!r}")
        if not self.median <= self.max or not self.mean <= self.max:
            raise ConfigError("length mean and median must not exceed the max")

    def quantiles(self, n: int) -> np.ndarray:
        """``n`` lengths at the mid-quantiles of a lognormal with this median (mu = ln median)
        and this mean (sigma^2 = 2 ln(mean / median); 0 when the mean is not above the
        median), rounded and clipped to [1, max]. Deterministic."""
        mu = math.log(self.median)
        s2 = 2.0 * math.log(self.mean / self.median) if self.mean > self.median else 0.0
        from statistics import NormalDist
        z = np.array([NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)])
        x = np.exp(mu + math.sqrt(s2) * z)
        return np.clip(np.rint(x), 1, self.max).astype(np.int64)


@dataclass(frozen=True, eq=False)
class LengthTable:
    """Per-request (input, output) lengths [tokens]; equal (and hashed) by content."""
    name: str
    source: str
    isl: np.ndarray
    osl: np.ndarray

    def __post_init__(self):
        if len(self.isl) != len(self.osl) or not len(self.isl):
            raise ConfigError(f"{self.name}: a length table needs at least one row of "
                              "input and output lengths")

    @property
    def digest(self) -> str:
        h = hashlib.sha1(np.ascontiguousarray(self.isl, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(self.osl, dtype=np.int64).tobytes())
        return h.hexdigest()[:16]

    def __eq__(self, other) -> bool:
        return isinstance(other, LengthTable) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __len__(self) -> int:
        return len(self.isl)

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` requests' (input, output) lengths: whole rows, uniformly with replacement."""
        if len(self.isl) == 1:
            return (np.full(n, self.isl[0], dtype=np.int64),
                    np.full(n, self.osl[0], dtype=np.int64))
        idx = rng.integers(0, len(self.isl), n)
        return self.isl[idx], self.osl[idx]

    def summary(self) -> dict:
        """JSON-ready description: name, source, rows and mean / median / max of each side."""
        def st(a):
            return {"mean": float(a.mean()), "median": float(np.median(a)), "max": int(a.max())}
        return {"name": self.name, "source": self.source, "rows": len(self.isl),
                "input": st(self.isl), "output": st(self.osl)}

    @property
    def mean_isl(self) -> int:
        return max(1, round(float(self.isl.mean())))

    @property
    def mean_osl(self) -> int:
        return max(1, round(float(self.osl.mean())))


# Named data sets: file in LENGTHS_DIR and the summary figures of the fallback (measured on the
# files themselves: input, output).
NAMED: dict[str, tuple[str, LengthStats, LengthStats, str]] = {
    "openorca": ("openorca.csv", LengthStats(222.33, 152, 1021), LengthStats(218.89, 190, 1016),
                 "MLPerf llama2-70b (OpenOrca, 24,576 requests, Llama-2 tokenizer); " + _SOURCE),
    "deepseek-r1": ("deepseek-r1.csv", LengthStats(803.79, 901.5, 3140),
                    LengthStats(4043.45, 2194, 32768),
                    "MLPerf DeepSeek-R1 (4,388 requests, long reasoning outputs); " + _SOURCE),
}
BASIC = ("fixed", "uniform", "lognormal")


def parse_csv(data: bytes | str, name: str = "lengths CSV", source: str = "user file"
              ) -> LengthTable:
    """A length table from CSV text with the header ``input_length,output_length`` (extra
    columns ignored); every value a whole number of tokens in [1, 10^9]."""
    if isinstance(data, bytes):
        if len(data) > MAX_LENGTH_CSV_BYTES:
            raise ConfigError(f"{name}: too large for a lengths CSV (at most "
                              f"{MAX_LENGTH_CSV_BYTES:,} bytes)")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(f"{name}: not UTF-8 text") from None
    reader = csv.reader(io.StringIO(data))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise ConfigError(f"{name}: empty file") from None
    except csv.Error as e:
        raise ConfigError(f"{name}: not a CSV file ({e})") from None
    try:
        ci, co = header.index("input_length"), header.index("output_length")
    except ValueError:
        raise ConfigError(f"{name}: needs the columns input_length,output_length (got "
                          f"{','.join(header)[:80]})") from None
    isl, osl = [], []
    try:
        for n, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(isl) >= MAX_LENGTH_ROWS:
                raise ConfigError(f"{name}: more than {MAX_LENGTH_ROWS:,} rows")
            try:
                a, b = _tokens(row[ci]), _tokens(row[co])
            except (IndexError, ValueError):
                raise ConfigError(f"{name}, line {n}: input and output lengths must be whole "
                                  f"numbers of tokens in [1, {MAX_SIZE:,}]") from None
            isl.append(a)
            osl.append(b)
    except csv.Error as e:
        raise ConfigError(f"{name}: not a CSV file ({e})") from None
    if not isl:
        raise ConfigError(f"{name}: no rows of lengths")
    return LengthTable(name, source, np.array(isl, dtype=np.int64), np.array(osl, dtype=np.int64))


def _tokens(text: str) -> int:
    v = float(text.strip())
    if not math.isfinite(v) or v != int(v) or not 1 <= v <= MAX_SIZE:
        raise ValueError(text)
    return int(v)


def from_stats(isl: LengthStats, osl: LengthStats, name: str = "lognormal",
               source: str = "lognormal from mean / median / max",
               n: int = FALLBACK_SAMPLES) -> LengthTable:
    """A table of ``n`` requests at matching quantiles of the two lognormals (input and output
    fully correlated: the shortest prompts with the shortest answers; state your own CSV when
    the correlation matters)."""
    return LengthTable(name, source, isl.quantiles(n), osl.quantiles(n))


def named(name: str) -> LengthTable:
    """A shipped data set; its lognormal fallback (with a note in the source) when the file
    is missing."""
    if name not in NAMED:
        raise ConfigError(f"unknown length data set {name!r}; named sets: "
                          f"{', '.join(NAMED)}")
    fname, si, so, src = NAMED[name]
    path = LENGTHS_DIR / fname
    if not path.is_file():
        return from_stats(si, so, name, f"{src} -- file missing: lognormal fallback from its "
                                        f"mean / median / max")
    from ..safeio import read_limited
    return parse_csv(read_limited(path, "lengths CSV", MAX_LENGTH_CSV_BYTES), name, src)


def parse_stats(text: str) -> LengthTable:
    """``stats:IN_MEAN/IN_MEDIAN/IN_MAX:OUT_MEAN/OUT_MEDIAN/OUT_MAX`` -> lognormal table."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] != "stats":
        raise ConfigError("length statistics read stats:IN_MEAN/IN_MEDIAN/IN_MAX:"
                          "OUT_MEAN/OUT_MEDIAN/OUT_MAX (tokens)")
    out = []
    for side in parts[1:]:
        v = side.split("/")
        if len(v) != 3:
            raise ConfigError("each side of stats: needs mean/median/max")
        try:
            mean, med, mx = float(v[0]), float(v[1]), float(v[2])
        except ValueError:
            raise ConfigError(f"length statistics must be numbers, got {side!r}") from None
        if not math.isfinite(mx) or mx != int(mx):
            raise ConfigError(f"length max must be a whole number, got {v[2]!r}")
        out.append(LengthStats(mean, med, int(mx)))
    return from_stats(out[0], out[1], text, "lognormal from the given mean / median / max")


def resolve(arg: str) -> LengthTable | None:
    """What ``--lengths`` names: None for fixed / uniform / lognormal (drawn around ISL/OSL),
    else a named set, ``stats:...`` or a CSV file path."""
    if arg in BASIC:
        return None
    if arg in NAMED:
        return named(arg)
    if arg.startswith("stats:"):
        return parse_stats(arg)
    p = Path(arg)
    if p.suffix.lower() == ".csv" or p.exists():
        from ..safeio import read_limited
        return parse_csv(read_limited(p, "lengths CSV", MAX_LENGTH_CSV_BYTES), p.name,
                         f"file {p.name}")
    raise ConfigError(f"--lengths takes {', '.join(BASIC)}, a named set ({', '.join(NAMED)}), "
                      f"stats:IN_MEAN/IN_MEDIAN/IN_MAX:OUT_MEAN/OUT_MEDIAN/OUT_MAX or a CSV file "
                      f"of input_length,output_length; got {arg!r}")
