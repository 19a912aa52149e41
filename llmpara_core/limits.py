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

import contextlib
import threading
import time
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


# ---- time ----------------------------------------------------------------------------------
# CPU seconds one run of a dashboard page may spend computing (the app sets it, the CLI does
# not). Measured under AppTest on the 2-core test machine (entry run + page): every page at its
# defaults needs <= 4 s (Serving "Latency vs load" 4.0 s, NSGA-II 100 x 40 1.0 s, Validation
# 1.3 s), the heaviest legitimate link seen 15 s (Serving frontier, 20,000 requests on 8 GPUs);
# the most a link may ask for runs for minutes (Serving, 20,000 requests x 30 rates: 199 s).
# CPU time of the page's own thread, not wall time, so a crowd on the same server does not
# make a normal page time out.
PAGE_CPU_BUDGET_S = 20.0


class TimeBudgetExceeded(ConfigError):
    """A long computation stopped at its time budget (a clear message instead of a result)."""


_BUDGET = threading.local()


@contextlib.contextmanager
def time_budget(seconds: float, advice: str = ""):
    """Inside the block, :func:`check_time_budget` (called in the long loops of the serving
    simulation, the design-space search, NSGA-II and the parallel-plan search) raises
    :class:`TimeBudgetExceeded` once this thread has spent ``seconds`` of CPU time in the
    block; ``advice`` ends the message. Nested budgets never extend an outer one."""
    outer = getattr(_BUDGET, "state", None)
    deadline = time.thread_time() + seconds
    if outer is not None and outer[0] < deadline:
        deadline, seconds = outer[0], outer[1]
    _BUDGET.state = (deadline, seconds, advice)
    try:
        yield
    finally:
        _BUDGET.state = outer


def check_time_budget() -> None:
    """Raise TimeBudgetExceeded if this thread's time budget is spent (no budget: no-op)."""
    state = getattr(_BUDGET, "state", None)
    if state is not None and time.thread_time() > state[0]:
        _, seconds, advice = state
        raise TimeBudgetExceeded(
            f"stopped after {seconds:g} s of computation, the time budget of one page on this "
            f"shared server{': ' + advice if advice else ''}")


def _find(name: str) -> Bound:
    for table in (MODEL_INT, WORKLOAD_INT, HARDWARE, OTHER):
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
