"""One table of bounds for every number a user can give (link, file, flag, widget), and the
limits on the size and shape of text the package parses.

The bounds are physically plausible ranges chosen so the largest real models and devices fit
with room to spare (largest in shared/data/model_configs.csv and the presets: 126
layers, hidden 16,384, FFN 53,248, vocabulary 262,208, 256 experts, 8 experts per token,
context 163,840; devices from 14 GB/s to 8 TB/s, 8 GB to 4 TB, 0.15 to 4,500 TFLOP/s).
Anything outside is not a model or a device but a request to make the analysis huge (a
1e8-layer config, a 1e-300 GB/s bandwidth); it is refused with a message naming the field,
the value and the range, so no analysis ever scales past these sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError, require_float, require_int, short


@dataclass(frozen=True)
class Bound:
    """Inclusive range [lo, hi] of one quantity, in the unit of the field it checks."""
    lo: float
    hi: float
    unit: str = ""


# ---- model shape (element counts) -----------------------------------------------------------
# Integer bounds of Model / MoE / MLA fields and of the link keys and flags that set them.
MODEL_INT: dict[str, Bound] = {
    "hidden_size": Bound(1, 262_144),
    "num_hidden_layers": Bound(1, 1_024),
    "num_attention_heads": Bound(1, 4_096),
    "num_key_value_heads": Bound(1, 4_096),
    "intermediate_size": Bound(1, 1_048_576),
    "vocab_size": Bound(1, 4_194_304),
    "head_dim": Bound(1, 8_192),
    "max_position_embeddings": Bound(1, 100_000_000),
    "sliding_window": Bound(1, 100_000_000),
    "num_experts": Bound(1, 16_384),
    "experts_per_token": Bound(1, 1_024),
    "expert_intermediate_size": Bound(1, 1_048_576),
    "shared_intermediate_size": Bound(0, 16_777_216),
    "first_dense_layers": Bound(0, 1_024),
    "kv_lora_rank": Bound(1, 262_144),
    "q_lora_rank": Bound(1, 262_144),
    "qk_nope_head_dim": Bound(1, 8_192),
    "qk_rope_head_dim": Bound(0, 8_192),
    "v_head_dim": Bound(1, 8_192),
}

# ---- workload --------------------------------------------------------------------------------
WORKLOAD_INT: dict[str, Bound] = {
    "batch": Bound(1, 100_000),
    "prompt_len": Bound(0, 100_000_000),
    "gen_len": Bound(0, 100_000_000),
}

# ---- hardware (SI units) ---------------------------------------------------------------------
# Bandwidths from 1 MB/s (a microcontroller's flash) to 100 PB/s; capacities from 1 kB of SRAM
# to 1 EB; peaks from 1 MFLOP/s to 1 EFLOP/s per device; latencies up to 10 s per access.
HARDWARE: dict[str, Bound] = {
    "bandwidth_bytes_per_s": Bound(1e6, 1e17, "B/s"),
    "capacity_bytes": Bound(1e3, 1e18, "B"),
    "peak_flops_per_s": Bound(1e6, 1e18, "FLOP/s"),
    "power_w": Bound(0.0, 1e7, "W"),
    "price_usd": Bound(0.0, 1e10, "USD"),
    "embodied_kgco2e": Bound(0.0, 1e7, "kgCO2e"),
    "process_nm": Bound(0.0, 1e4, "nm"),
    # boost clock: a microcontroller's 10 MHz to 20 GHz
    "clock_mhz": Bound(10.0, 20_000.0, "MHz"),
    # compute units (SMs, CUs, Xe cores): one to a 100,000-unit wafer
    "compute_units": Bound(1.0, 100_000.0, "units"),
    "latency_s": Bound(0.0, 10.0, "s"),
    "energy_j_per_byte": Bound(0.0, 1e-6, "J/B"),
    "energy_j_per_flop": Bound(0.0, 1e-6, "J/FLOP"),
    # Devices of a cluster: at most the largest parallel degree a plan models
    # (parallel.plan.MAX_DEGREE; a 65,536-device search takes ~1 s).
    "devices": Bound(1, 65_536),
}

# ---- economics and speculation ----------------------------------------------------------------
OTHER: dict[str, Bound] = {
    "lifetime_years": Bound(0.1, 50.0, "years"),
    "utilisation": Bound(0.001, 1.0),                # busy fraction of the service life
    "gamma": Bound(1, 64),                         # draft tokens per speculative step
    "head_params": Bound(1.0, 1e13, "parameters"),  # a speculative head's own parameters
    "expected_tokens": Bound(1.0, 65.0, "tokens"),  # tokens per target pass: at most gamma + 1
    "expert_zipf_s": Bound(0.0, 10.0),
}

# ---- text and files -------------------------------------------------------------------------
MAX_FILE_BYTES = 2_000_000        # a config.json, hardware TOML or ranges file larger is not one
MAX_NESTING = 16                  # [ / { depth in a TOML or JSON document
MAX_KEY_PARTS = 8                 # parts of a dotted TOML key (a.b.c = 3 parts)
MAX_TOML_VALUES = 20_000          # '=' and ',' in a TOML document (tomllib: ~20 us per value;
                                  # the largest shipped table has 1,817)
MAX_NAME_CHARS = 200              # a model or hardware name, a tier name
MAX_CSV_FIELD_CHARS = 10_000      # one cell of an uploaded CSV
MAX_TIER_ITEMS = 100_000          # placeable items of a memory-tier analysis


# ---- precision, fractions, serving, metrics ------------------------------------------------
# Bits per stored value: from sub-1-bit weight codes (0.5; BitNet's 1.58 and 1-bit binary
# weights fit) to FP64. 1e-300 bits gave an 8B model 0.5 MB of weights (issue 29).
PRECISION: dict[str, Bound] = {
    "bits": Bound(0.5, 64.0, "bits"),
}

# Achieved fractions of a peak (efficiency profiles of hardware files, links, DSE axes). A
# fraction must be in (0, 1]; below 0.1 % of peak a device is not doing the work at all (the
# lowest fitted fraction of the shipped profiles is above 1 %), and 1e-300 gave a TTFT of
# 3e298 s (issue 29), so the floor is 1e-3.
FRACTION: dict[str, Bound] = {
    "efficiency_fraction": Bound(1e-3, 1.0),
    "unit_fraction": Bound(0.0, 1.0),               # overlap, length spread share, alpha ...
}

# Serving: a simulated run is requests arriving at ``rate``; its arrival span requests / rate
# must stay under MAX_ARRIVAL_SPAN_S (a rate of 1e-12 req/s ran a 1e15-s makespan).
SERVING: dict[str, Bound] = {
    "rate_per_s": Bound(1e-6, 1e9, "req/s"),
    "requests": Bound(1, 1_000_000, "requests"),
    "burstiness": Bound(0.01, 1000.0),
    "tokens_per_request": Bound(1, 10_000_000, "tokens"),
    "slo_ms": Bound(1e-3, 1e9, "ms"),
    "percentile": Bound(1.0, 100.0, "%"),
}
MAX_ARRIVAL_SPAN_S = 30 * 86_400.0      # 30 days of simulated arrivals

# Metrics (energy, cost, carbon) settings.
METRICS: dict[str, Bound] = {
    "alpha": Bound(0.0, 1.0),                        # TDP-fraction model's compute share
    "pue": Bound(1.0, 10.0),
    "usd_per_kwh": Bound(0.0, 100.0, "USD/kWh"),
    "tdp_w": Bound(0.01, 1e7, "W"),                  # a device drawing no power is not one
}

# Parallel plans.
PARALLEL: dict[str, Bound] = {
    "degree": Bound(1, 65_536),
    "microbatches": Bound(1, 100_000),
}

# NSGA-II settings.
SEARCH: dict[str, Bound] = {
    "population": Bound(8, 5_000),
    "generations": Bound(1, 2_000),
    "samples": Bound(1, 10_000_000),
}

# ---- sizes of work, checked before it starts (issue 29: each ran past 60 s) ----------------
MAX_REQUEST_EVENTS = 4_000_000    # requests simulated over all runs of one command or page
MAX_NSGA_EVALUATIONS = 200_000    # population x generations (100 x 40 = 4,000 by default)
MAX_PLANS = 5_000                 # parallel plans to enumerate and evaluate in one search
MAX_VALIDATE_ROWS = 5_000         # rows of a `validate --data` file
MAX_REFIT_ROWS = 2_000            # ... when the file is refitted (--refit) too


def check_size(what: str, n: float, cap: float, advice: str) -> None:
    """ConfigError before the work starts when its size ``n`` passes ``cap``."""
    if n > cap:
        raise ConfigError(f"{what}: {n:,.0f} is more than the cap of {cap:,.0f}; {advice}")


# ---- time (the budgets themselves are in budget.py) -----------------------------------------
from .budget import (PAGE_CPU_BUDGET_S, PAGE_WALL_BUDGET_S, TimeBudgetExceeded,  # noqa: E402,F401
                     check_time_budget, time_budget)


_TABLES = ("MODEL_INT", "WORKLOAD_INT", "HARDWARE", "OTHER", "PRECISION", "FRACTION", "SERVING",
           "METRICS", "PARALLEL", "SEARCH")


def all_bounds() -> dict[str, Bound]:
    """Every named quantity with its bound (for the hostile-input suite and the docs)."""
    out: dict[str, Bound] = {}
    for t in _TABLES:
        out.update(globals()[t])
    return out


def is_int_quantity(name: str) -> bool:
    """Whether ``name`` counts things (an integer bound)."""
    return (name in MODEL_INT or name in WORKLOAD_INT or name in PARALLEL or name in SEARCH
            or name in ("devices", "gamma", "requests", "tokens_per_request"))


def check_bound(name: str, value, field: str | None = None):
    """``value`` checked against the bound of quantity ``name``: an int for counting
    quantities, else a finite float; ConfigError naming ``field`` (default ``name``), the value
    and the range. The one check every entry (flag, file, link, widget, DSE axis) uses."""
    if is_int_quantity(name):
        return check_int(name, value, field)
    return check_float(name, value, field)


# ---- cross-field rules ----------------------------------------------------------------------

def check_idle_le_tdp(idle_w, tdp_w, where: str = "") -> None:
    """Idle power cannot exceed the TDP (idle 5,000 W on a 700 W card gave 5,134 W average)."""
    if idle_w is not None and tdp_w is not None and idle_w > tdp_w:
        raise ConfigError(f"{where}idle_W ({idle_w:g} W) is above tdp_W ({tdp_w:g} W); idle "
                          "power must be at most the TDP")


def check_arrival_span(requests: int, rate_per_s: float | None) -> None:
    """``requests`` arriving at ``rate_per_s`` must arrive within MAX_ARRIVAL_SPAN_S."""
    if rate_per_s is None:
        return
    span = requests / rate_per_s
    if not span <= MAX_ARRIVAL_SPAN_S:
        raise ConfigError(
            f"{requests:,} requests at {rate_per_s:g} req/s arrive over {span:.3g} s, more than "
            f"the cap of {MAX_ARRIVAL_SPAN_S:,.0f} s (30 days); raise the rate to at least "
            f"{requests / MAX_ARRIVAL_SPAN_S:.3g} req/s or simulate fewer requests")


def _find(name: str) -> Bound:
    for t in _TABLES:
        table = globals()[t]
        if name in table:
            return table[name]
    raise KeyError(name)


def bound(name: str) -> Bound:
    """The bound of quantity ``name`` (a key of one of the tables above)."""
    return _find(name)


def check_int(name: str, value, field: str | None = None) -> int:
    """``value`` as an integer within the bound of ``name``; ConfigError naming ``field``."""
    b = _find(name)
    return require_int(field or name, value, int(b.lo), int(b.hi))


def check_float(name: str, value, field: str | None = None, lo_open: bool = False,
                allow_none: bool = False):
    """``value`` as a finite float within the bound of ``name`` ((lo, hi] with ``lo_open``)."""
    b = _find(name)
    return require_float(field or name, value, lo=b.lo, hi=b.hi, lo_open=lo_open,
                         allow_none=allow_none)


def check_name(field: str, value) -> str:
    """A non-empty string of at most MAX_NAME_CHARS characters."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{field} must be a non-empty string, got {short(value)}")
    if len(value) > MAX_NAME_CHARS:
        raise ConfigError(f"{field} is {len(value)} characters long; at most "
                          f"{MAX_NAME_CHARS} are allowed")
    return value
