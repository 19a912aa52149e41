"""The fleet planner's input: a traffic mix (one ``[[workload]]`` per model served), the
candidates to search over and the constraints, read from a TOML file or a plain dict.

Every field is checked here (type, range, preset names, stack names, unknown keys), so a bad
file gets one line naming the field before any search starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError, require_float, require_int, short
from ..safeio import parse_toml, read_limited
from ..serving.requests import LENGTHS, MAX_REQUESTS

# The candidates searched when the file names none: the five GPUs of the issue, the three
# precisions and the three serving engines; TP x PP up to one 8-GPU node.
DEFAULT_HARDWARE = ("8x-nvidia-h100-sxm-nvlink", "8x-nvidia-h200-sxm-nvlink",
                    "8x-nvidia-b200-nvlink", "8x-amd-mi300x-infinity-fabric",
                    "8x-nvidia-l40s-pcie")
DEFAULT_PRECISIONS = ("FP16", "FP8", "NVFP4")
DEFAULT_FRAMEWORKS = ("vllm", "tensorrt-llm", "sglang")
DEFAULT_DEGREES = (1, 2, 4, 8)
DEFAULT_REQUESTS = 400
MAX_WORKLOADS = 64
MAX_CHOICES = 32
RUNNERS_UP = 3

_TOP_KEYS = {"seed", "requests", "runners_up", "candidates", "constraints", "prices",
             "workload", "name", "notes", "source"}
_WORKLOAD_KEYS = {"name", "model", "rate_rps", "isl", "osl", "lengths", "spread",
                  "ttft_slo_ms", "tpot_slo_ms", "slo_percentile", "precisions", "source"}
_CANDIDATE_KEYS = {"hardware", "precisions", "frameworks", "tp", "pp"}
_CONSTRAINT_KEYS = {"max_gpus_per_replica", "gpu_budget", "power_cap_kW"}


@dataclass(frozen=True)
class Demand:
    """One workload of the mix: a model at a request rate [requests/s] with request lengths
    [tokens] and a latency objective (TTFT and TPOT [s] at a percentile)."""
    name: str
    model: str
    rate_rps: float
    isl: int
    osl: int
    ttft_slo_s: float
    tpot_slo_s: float
    slo_percentile: float = 90.0
    lengths: str = "fixed"
    spread: float = 0.5
    precisions: tuple[str, ...] = ()       # empty = the mix's candidate precisions


@dataclass(frozen=True)
class Candidates:
    """What the search may choose: hardware (presets or files), precisions, serving stacks
    and the TP / PP degrees of one replica."""
    hardware: tuple[str, ...] = DEFAULT_HARDWARE
    precisions: tuple[str, ...] = DEFAULT_PRECISIONS
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS
    tp: tuple[int, ...] = DEFAULT_DEGREES
    pp: tuple[int, ...] = DEFAULT_DEGREES


@dataclass(frozen=True)
class Constraints:
    """Limits on a plan: GPUs of one replica, GPUs of the whole fleet, fleet power [W]
    (at the GPUs' TDP). None = no limit."""
    max_gpus_per_replica: int | None = None
    gpu_budget: int | None = None
    power_cap_w: float | None = None


@dataclass(frozen=True)
class TrafficMix:
    """A traffic mix with its candidates, constraints, prices [USD per GPU-hour] by hardware
    name (overriding the table), simulation size and seed."""
    workloads: tuple[Demand, ...]
    candidates: Candidates = field(default_factory=Candidates)
    constraints: Constraints = field(default_factory=Constraints)
    prices: tuple[tuple[str, float], ...] = ()
    seed: int = 0
    requests: int = DEFAULT_REQUESTS
    runners_up: int = RUNNERS_UP


def _strict(d, allowed: set[str], where: str) -> dict:
    if not isinstance(d, dict):
        raise ConfigError(f"{where} must be a table, got {short(d)}")
    extra = sorted(set(d) - allowed)
    if extra:
        raise ConfigError(f"{where}: unknown key {extra[0]!r} (known: {', '.join(sorted(allowed))})")
    return d


def _names(v, where: str) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [s for s in v.split(",")]
    if not isinstance(v, (list, tuple)) or not v:
        raise ConfigError(f"{where} must be a non-empty list of names, got {short(v)}")
    if len(v) > MAX_CHOICES:
        raise ConfigError(f"{where}: at most {MAX_CHOICES} entries, got {len(v)}")
    out = []
    for s in v:
        if not isinstance(s, str) or not s.strip() or len(s) > 300:
            raise ConfigError(f"{where}: every entry must be a name, got {short(s)}")
        if s.strip() not in out:
            out.append(s.strip())
    return tuple(out)


def _degrees(v, where: str) -> tuple[int, ...]:
    if not isinstance(v, (list, tuple)) or not v or len(v) > MAX_CHOICES:
        raise ConfigError(f"{where} must be a non-empty list of integers, got {short(v)}")
    return tuple(sorted({require_int(where, x, 1, 1024) for x in v}))


def check_precisions(names) -> tuple[str, ...]:
    from ..precision import precision_preset
    for n in names:
        precision_preset(n)          # ConfigError naming the known presets
    return tuple(names)


def check_frameworks(names) -> tuple[str, ...]:
    from ..calibration.stacks import stack_name
    return tuple(dict.fromkeys(stack_name(n) for n in names))


def check_hardware(names) -> tuple[str, ...]:
    from ..presets import load_hardware
    for n in names:
        load_hardware(n)
    return tuple(names)


def demand_from_dict(d, i: int) -> Demand:
    """One ``[[workload]]`` table (field names as in the file) as a Demand."""
    where = f"workload {i + 1}"
    d = _strict(d, _WORKLOAD_KEYS, where)
    for k in ("model", "rate_rps", "isl", "osl", "ttft_slo_ms", "tpot_slo_ms"):
        if k not in d:
            raise ConfigError(f"{where}: missing {k!r}")
    model = d["model"]
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{where}: model must be a preset name or a file, got {short(model)}")
    from ..presets import load_model
    load_model(model)
    name = d.get("name", model)
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise ConfigError(f"{where}: name must be a short text, got {short(name)}")
    lengths = d.get("lengths", "fixed")
    if lengths not in LENGTHS:
        raise ConfigError(f"{where}: lengths must be one of {', '.join(LENGTHS)}, got "
                          f"{short(lengths)}")
    spread = require_float(f"{where}: spread", d.get("spread", 0.5), lo=0, hi=5)
    if lengths == "uniform" and spread > 1:
        raise ConfigError(f"{where}: uniform lengths need spread <= 1")
    precisions = ()
    if "precisions" in d:
        precisions = check_precisions(_names(d["precisions"], f"{where}: precisions"))
    try:
        return Demand(
            name=name.strip(), model=model.strip(),
            rate_rps=require_float(f"{where}: rate_rps", d["rate_rps"], lo=0, hi=1e6, lo_open=True),
            isl=require_int(f"{where}: isl", d["isl"], 1, 1_000_000),
            osl=require_int(f"{where}: osl", d["osl"], 1, 1_000_000),
            ttft_slo_s=require_float(f"{where}: ttft_slo_ms", d["ttft_slo_ms"], lo=0, hi=1e7,
                                     lo_open=True) / 1e3,
            tpot_slo_s=require_float(f"{where}: tpot_slo_ms", d["tpot_slo_ms"], lo=0, hi=1e7,
                                     lo_open=True) / 1e3,
            slo_percentile=require_float(f"{where}: slo_percentile",
                                         d.get("slo_percentile", 90.0), lo=0, hi=100,
                                         lo_open=True),
            lengths=lengths, spread=spread, precisions=precisions)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def mix_from_dict(data) -> TrafficMix:
    """A TrafficMix from the parsed file (ConfigError naming the field on any problem)."""
    data = _strict(data, _TOP_KEYS, "traffic file")
    rows = data.get("workload")
    if not isinstance(rows, list) or not rows:
        raise ConfigError("traffic file: no [[workload]] table (one per model served)")
    if len(rows) > MAX_WORKLOADS:
        raise ConfigError(f"traffic file: at most {MAX_WORKLOADS} workloads, got {len(rows)}")
    workloads = tuple(demand_from_dict(r, i) for i, r in enumerate(rows))
    names = [w.name for w in workloads]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ConfigError(f"traffic file: two workloads are named {dup!r}; give each a name")
    c = _strict(data.get("candidates", {}), _CANDIDATE_KEYS, "[candidates]")
    cand = Candidates(
        hardware=check_hardware(_names(c["hardware"], "[candidates] hardware"))
        if "hardware" in c else DEFAULT_HARDWARE,
        precisions=check_precisions(_names(c["precisions"], "[candidates] precisions"))
        if "precisions" in c else DEFAULT_PRECISIONS,
        frameworks=check_frameworks(_names(c["frameworks"], "[candidates] frameworks"))
        if "frameworks" in c else DEFAULT_FRAMEWORKS,
        tp=_degrees(c["tp"], "[candidates] tp") if "tp" in c else DEFAULT_DEGREES,
        pp=_degrees(c["pp"], "[candidates] pp") if "pp" in c else DEFAULT_DEGREES)
    k = _strict(data.get("constraints", {}), _CONSTRAINT_KEYS, "[constraints]")
    cons = Constraints(
        max_gpus_per_replica=require_int("[constraints] max_gpus_per_replica",
                                         k["max_gpus_per_replica"], 1, 65536)
        if "max_gpus_per_replica" in k else None,
        gpu_budget=require_int("[constraints] gpu_budget", k["gpu_budget"], 1, 10**7)
        if "gpu_budget" in k else None,
        power_cap_w=require_float("[constraints] power_cap_kW", k["power_cap_kW"], lo=0,
                                  hi=1e7, lo_open=True) * 1e3
        if "power_cap_kW" in k else None)
    prices = data.get("prices", {})
    if not isinstance(prices, dict) or len(prices) > 256:
        raise ConfigError(f"[prices] must be a table of hardware name = USD per GPU-hour, got "
                          f"{short(prices)}")
    price_rows = tuple((str(h), require_float(f"[prices] {h}", v, lo=0, hi=1e5, lo_open=True))
                       for h, v in prices.items())
    return TrafficMix(
        workloads, cand, cons, price_rows,
        seed=require_int("seed", data.get("seed", 0), 0, 2**63 - 1),
        requests=require_int("requests", data.get("requests", DEFAULT_REQUESTS), 20,
                             min(MAX_REQUESTS, 20_000)),
        runners_up=require_int("runners_up", data.get("runners_up", RUNNERS_UP), 0, 20))


def parse_traffic(text: str, origin: str = "traffic file") -> TrafficMix:
    """A traffic mix from TOML text."""
    return mix_from_dict(parse_toml(text, origin))


def load_traffic(path) -> TrafficMix:
    """A traffic mix from a TOML file (size-checked before it is read)."""
    return parse_traffic(read_limited(path, "traffic file"), str(path))


def mix_to_dict(mix: TrafficMix) -> dict:
    """The mix as the file's fields (for JSON exports and the page's table)."""
    return {
        "seed": mix.seed, "requests": mix.requests, "runners_up": mix.runners_up,
        "candidates": {"hardware": list(mix.candidates.hardware),
                       "precisions": list(mix.candidates.precisions),
                       "frameworks": list(mix.candidates.frameworks),
                       "tp": list(mix.candidates.tp), "pp": list(mix.candidates.pp)},
        "constraints": {k: v for k, v in (
            ("max_gpus_per_replica", mix.constraints.max_gpus_per_replica),
            ("gpu_budget", mix.constraints.gpu_budget),
            ("power_cap_kW", None if mix.constraints.power_cap_w is None
             else mix.constraints.power_cap_w / 1e3)) if v is not None},
        "prices": dict(mix.prices),
        "workload": [workload_row(w) for w in mix.workloads],
    }


def workload_row(w: Demand) -> dict:
    """One workload as the file's fields."""
    row = {"name": w.name, "model": w.model, "rate_rps": w.rate_rps, "isl": w.isl,
           "osl": w.osl, "lengths": w.lengths, "spread": w.spread,
           "ttft_slo_ms": w.ttft_slo_s * 1e3, "tpot_slo_ms": w.tpot_slo_s * 1e3,
           "slo_percentile": w.slo_percentile}
    if w.precisions:
        row["precisions"] = list(w.precisions)
    return row
