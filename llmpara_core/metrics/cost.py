"""Total cost of ownership per hour and per million output tokens, and the one-call metrics of
a scenario (energy + TCO + CO2e) used by the CLI, the Metrics page and the hardware comparison.

TCO of one device, amortised over its service life H (hours) at utilisation u::

    capex per busy hour       = price / (H u)
    electricity per busy hour = usd_per_kWh * PUE * (P_avg + P_idle (1 - u) / u) / 1000
    $ per million tokens      = (capex + electricity per busy hour) / (tokens/s * 3600) * 1e6

P_avg is the scenario's average power (energy / time of the run) and tokens/s its output
throughput with the batch (batch * gen_len / end-to-end time, prefill included), so doubling the
throughput at equal power halves $/Mtok. Reference defect fixed (reference-tool §10 item 17):
the reference priced a peak FLOP; here the workload, its batch and its real time enter.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..analysis import Report, analyze
from .carbon import (CarbonResult, carbon_per_million_tokens, check_lifetime_utilisation,
                     grid_region)
from .energy import (MODEL_CHOICES, EnergyReport, class_entry, device_entry, energy_report,
                     energy_roofline, energy_table, estimated_rates, params_for_report)
from ..budget import TimeBudgetExceeded
from ..errors import ConfigError, LLMParaError, require_float
from ..limits import check_float
from ..hardware import Hardware
from ..model import Model
from ..precision import Precision
from ..units import (FLOPS_PER_EFLOP, FLOPS_PER_GFLOP, HOURS_PER_YEAR, J_PER_KWH, S_PER_HOUR,
                     TOKENS_PER_MILLION)
from ..workload import Workload


@dataclass(frozen=True)
class TCOResult:
    """Cost of one device in USD. None = unknown (no price)."""
    price_usd: float | None
    lifetime_years: float
    utilisation: float
    usd_per_kwh: float
    pue: float
    avg_power_w: float
    idle_w: float | None
    tokens_per_s: float
    capex_usd_per_busy_hour: float | None
    electricity_usd_per_busy_hour: float

    @property
    def lifetime_hours(self) -> float:
        return self.lifetime_years * HOURS_PER_YEAR

    @property
    def capex_usd_per_hour(self) -> float | None:
        """Wall-clock amortisation (busy or not)."""
        return None if self.price_usd is None else self.price_usd / self.lifetime_hours

    @property
    def electricity_usd_per_hour(self) -> float:
        """Wall-clock average electricity cost (busy share at P_avg, idle share at P_idle)."""
        return self.electricity_usd_per_busy_hour * self.utilisation

    @property
    def usd_per_hour(self) -> float | None:
        c = self.capex_usd_per_hour
        return None if c is None else c + self.electricity_usd_per_hour

    @property
    def tokens_per_busy_hour(self) -> float:
        return self.tokens_per_s * S_PER_HOUR

    @property
    def electricity_usd_per_million_tokens(self) -> float | None:
        t = self.tokens_per_busy_hour
        return self.electricity_usd_per_busy_hour / t * TOKENS_PER_MILLION if t > 0 else None

    @property
    def capex_usd_per_million_tokens(self) -> float | None:
        t = self.tokens_per_busy_hour
        if self.capex_usd_per_busy_hour is None or t <= 0:
            return None
        return self.capex_usd_per_busy_hour / t * TOKENS_PER_MILLION

    @property
    def usd_per_million_tokens(self) -> float | None:
        c, e = self.capex_usd_per_million_tokens, self.electricity_usd_per_million_tokens
        return None if c is None or e is None else c + e

    @property
    def lifetime_tco_usd(self) -> float | None:
        p = self.price_usd
        return None if p is None else p + self.electricity_usd_per_hour * self.lifetime_hours

    @property
    def energy_fraction(self) -> float | None:
        t = self.lifetime_tco_usd
        return None if not t else self.electricity_usd_per_hour * self.lifetime_hours / t


def tco(price_usd: float | None, avg_power_w: float, idle_w: float | None, tokens_per_s: float,
        lifetime_years: float, utilisation: float, usd_per_kwh: float, pue: float,
        include_idle: bool = True) -> TCOResult:
    """TCO of one device serving at ``tokens_per_s`` with average power ``avg_power_w`` [W]
    while busy (formulas in the module docstring)."""
    require_float("price_usd", price_usd, lo=0, allow_none=True)
    require_float("average power", avg_power_w, lo=0)
    require_float("tokens_per_s", tokens_per_s, lo=0)
    require_float("usd_per_kwh", usd_per_kwh, lo=0, hi=100)
    require_float("PUE", pue, lo=1, hi=10)
    check_lifetime_utilisation(lifetime_years, utilisation)
    hours = lifetime_years * HOURS_PER_YEAR
    idle = (idle_w or 0.0) * (1 - utilisation) / utilisation if include_idle else 0.0
    elec = usd_per_kwh * pue * (avg_power_w + idle) / 1000.0
    capex = None if price_usd is None else price_usd / (hours * utilisation)
    return TCOResult(price_usd, lifetime_years, utilisation, usd_per_kwh, pue, avg_power_w,
                     idle_w, tokens_per_s, capex, elec)


# ------------------------------------------------------------------------------ scenario metrics

@dataclass(frozen=True)
class MetricsSettings:
    """Assumptions of the money and carbon figures; None = the default of energy.toml [tco]."""
    region: str = "world"
    pue: float | None = None
    usd_per_kwh: float | None = None
    lifetime_years: float | None = None
    utilisation: float | None = None
    include_idle: bool = True
    energy_model: str = "auto"          # metrics.energy.MODEL_CHOICES
    alpha: float | None = None            # TDP-fraction model only
    price_usd: float | None = None        # override of the device price
    embodied_kgco2e: float | None = None  # override of the device's embodied carbon

    def __post_init__(self):
        if self.energy_model not in MODEL_CHOICES:
            raise ConfigError(f"energy model must be one of {', '.join(MODEL_CHOICES)}, "
                              f"got {self.energy_model!r}")
        require_float("pue", self.pue, lo=1, hi=10, allow_none=True)
        require_float("usd_per_kwh", self.usd_per_kwh, lo=0, hi=100, allow_none=True)
        check_float("lifetime_years", self.lifetime_years, allow_none=True)
        check_float("utilisation", self.utilisation, allow_none=True)
        require_float("alpha", self.alpha, lo=0, hi=1, allow_none=True)
        require_float("price_usd", self.price_usd, lo=0, allow_none=True)
        require_float("embodied_kgco2e", self.embodied_kgco2e, lo=0, allow_none=True)
        grid_region(self.region)   # validates the name

    def resolved(self) -> "MetricsSettings":
        """A copy with every None default filled from energy.toml [tco]."""
        d = energy_table()["tco"]
        return replace(self, pue=d["pue"] if self.pue is None else self.pue,
                       usd_per_kwh=d["usd_per_kWh"] if self.usd_per_kwh is None else self.usd_per_kwh,
                       lifetime_years=(d["lifetime_years"] if self.lifetime_years is None
                                       else self.lifetime_years),
                       utilisation=d["utilisation"] if self.utilisation is None else self.utilisation)


@dataclass(frozen=True)
class ScenarioMetrics:
    """Energy, cost and carbon of one scenario. Per-token figures are per output token."""
    energy: EnergyReport
    tco: TCOResult
    carbon: CarbonResult
    settings: MetricsSettings
    fits: bool
    assumptions: tuple[str, ...] = field(default=())

    @property
    def tokens_per_s(self) -> float:
        return self.tco.tokens_per_s


def embodied_kgco2e(hardware: Hardware, notes: list[str] | None = None) -> float | None:
    """Embodied carbon of one device: preset > hardware_power.toml > class default > None."""
    notes = [] if notes is None else notes
    if hardware.embodied_kgco2e is not None:
        return hardware.embodied_kgco2e
    dev = device_entry(hardware)
    if "embodied_kgCO2e" in dev:
        notes.append(f"embodied carbon from hardware_power.toml ({dev.get('source', '')})")
        return float(dev["embodied_kgCO2e"])
    cls = class_entry(hardware)
    if "embodied_kgCO2e" in cls:
        notes.append(f"embodied carbon: {hardware.hw_class.value} class default "
                     f"{cls['embodied_kgCO2e']:g} kg (no figure for {hardware.name})")
        return float(cls["embodied_kgCO2e"])
    notes.append(f"embodied carbon unknown for {hardware.name}: CO2e is operational only")
    return None


def scenario_metrics(report: Report, settings: MetricsSettings | None = None,
                     params=None) -> ScenarioMetrics:
    """Energy (component or TDP-fraction model), TCO and CO2e per million output tokens of the
    scenario of ``report``. ``params`` overrides the energy constants (``EnergyParams``)."""
    s = (settings or MetricsSettings()).resolved()
    hw = report.hardware
    e = energy_report(report, params or params_for_report(report), s.energy_model, s.alpha)
    notes = list(e.assumptions)
    if e.output_tokens == 0:
        raise ConfigError("gen_len is 0: no output tokens, so no per-token energy, cost or "
                          "carbon")
    tokens_per_s = e.output_tokens / e.total_time_s
    price = hw.price_usd if s.price_usd is None else s.price_usd
    if price is None:
        notes.append(f"no price for {hw.name}: capex and $/Mtok unknown (set a price)")
    elif s.price_usd is not None:
        notes.append(f"price {price:g} USD (user)")
    emb = embodied_kgco2e(hw, notes) if s.embodied_kgco2e is None else s.embodied_kgco2e
    idle = e.params.idle_w
    t = tco(price, e.avg_power_w or 0.0, idle, tokens_per_s, s.lifetime_years, s.utilisation,
            s.usd_per_kwh, s.pue, s.include_idle)
    reg = grid_region(s.region)
    c = carbon_per_million_tokens(e.j_per_output_token, e.seconds_per_output_token,
                                  reg.gco2e_per_kwh, s.pue, s.lifetime_years, s.utilisation,
                                  emb, idle, s.include_idle, reg)
    notes.append(f"grid {reg.name} {reg.gco2e_per_kwh:g} gCO2e/kWh ({reg.year}, {reg.basis})")
    notes.append(f"throughput {tokens_per_s:.4g} output tokens/s = batch x gen_len / end-to-end "
                 f"time (prefill included)")
    if s.include_idle:
        notes.append(f"idle hours ({1 - s.utilisation:.0%} of the life) charged at "
                     f"{idle or 0:g} W to the tokens served")
    if not report.memory.fits:
        notes.append(f"the scenario does not fit in {hw.name}'s memory "
                     f"({report.memory.total_bytes / 1e9:.1f} GB needed)")
    return ScenarioMetrics(e, t, c, s, report.memory.fits, tuple(notes))


@dataclass(frozen=True)
class CostEfficiency:
    """Figures beside $/Mtok (the reference tool's TCO cards), for the scenario's workload.

    ``kwh_per_million_tokens``: facility energy (device energy x PUE) per million output
    tokens [kWh]. ``usd_per_eflop``: TCO per busy hour / FLOPs executed per busy hour x 10^18
    [USD per 10^18 FLOPs of this workload] (the reference priced a *peak* EFLOP; here the
    workload's achieved FLOP/s enters). ``gflops_per_usd_peak``: peak GFLOP/s of the scenario's
    compute type per USD of device price; ``..._achieved``: the run's average GFLOP/s per USD.
    None = unknown (no price, no output tokens)."""
    kwh_per_million_tokens: float | None
    achieved_flops_per_s: float
    usd_per_eflop: float | None
    gflops_per_usd_peak: float | None
    gflops_per_usd_achieved: float | None


def cost_efficiency(report: Report, m: ScenarioMetrics) -> CostEfficiency:
    """:class:`CostEfficiency` of a scenario from its report and :func:`scenario_metrics`."""
    e, t = m.energy, m.tco
    run_flops = (sum(o.flops for o in e.prefill)
                 + e.decode_steps * sum(o.flops for o in e.decode))
    achieved = run_flops / e.total_time_s if e.total_time_s > 0 else 0.0
    j_tok = e.j_per_output_token
    kwh = None if j_tok is None else j_tok * m.settings.pue * TOKENS_PER_MILLION / J_PER_KWH
    busy = (None if t.capex_usd_per_busy_hour is None
            else t.capex_usd_per_busy_hour + t.electricity_usd_per_busy_hour)
    per_eflop = (None if busy is None or achieved <= 0
                 else busy / (achieved * S_PER_HOUR) * FLOPS_PER_EFLOP)
    price = t.price_usd
    peak_g = report.peak_flops_per_s / FLOPS_PER_GFLOP
    return CostEfficiency(kwh, achieved, per_eflop,
                          None if not price else peak_g / price,
                          None if not price else achieved / FLOPS_PER_GFLOP / price)


def metrics_to_dict(m: ScenarioMetrics) -> dict:
    """Flat JSON-ready keys (SI, USD, grams) plus the assumptions, for ``analyze --format json``."""
    e, t, c, s = m.energy, m.tco, m.carbon, m.settings
    return {
        "energy_j_per_token": e.j_per_output_token,
        "energy_decode_j_per_token": e.decode_j_per_token,
        "energy_j_per_request": e.request_j,
        "energy_prefill_j": e.prefill_j,
        "energy_total_j": e.total_j,
        "tokens_per_j": e.tokens_per_j,
        "avg_power_w": e.avg_power_w,
        "output_tokens_per_s": m.tokens_per_s,
        "cost_usd_per_million_tokens": t.usd_per_million_tokens,
        "cost_electricity_usd_per_million_tokens": t.electricity_usd_per_million_tokens,
        "cost_usd_per_hour": t.usd_per_hour,
        "co2e_g_per_million_tokens": c.total_g_per_million_tokens,
        "co2e_operational_g_per_million_tokens": c.operational_g_per_million_tokens,
        "co2e_embodied_g_per_million_tokens": c.embodied_g_per_million_tokens,
        "metrics_assumptions": {
            "energy_model": e.model,
            "alpha": e.alpha,
            "static_w": e.params.static_w,
            "idle_w": e.params.idle_w,
            "flop_j": e.params.flop_j,
            "memory_j_per_byte": e.params.weight_j_per_byte,
            "region": c.region.key if c.region else None,
            "gco2e_per_kwh": c.gco2e_per_kwh,
            "pue": s.pue,
            "usd_per_kwh": s.usd_per_kwh,
            "lifetime_years": s.lifetime_years,
            "utilisation": s.utilisation,
            "include_idle": s.include_idle,
            "price_usd": t.price_usd,
            "embodied_kgco2e": c.embodied_kgco2e,
            "notes": list(m.assumptions),
        },
    }


# ------------------------------------------------------------------------------ across hardware

@dataclass(frozen=True)
class HardwareComparison:
    """One device running the same scenario. Metric fields are None when they could not be
    computed (``error`` says why); ``fits`` is False when the scenario overflows memory."""
    slug: str
    name: str
    hw_class: str
    fits: bool | None
    memory_needed_bytes: float | None
    capacity_bytes: float
    output_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    j_per_token: float | None = None
    tokens_per_j: float | None = None
    usd_per_million_tokens: float | None = None
    co2e_g_per_million_tokens: float | None = None
    avg_power_w: float | None = None
    peak_flops_per_s: float | None = None
    price_usd: float | None = None
    usd_per_gflops: float | None = None
    ceiling_flops_per_j: float | None = None
    static_known: bool = True
    embodied_known: bool = True
    error: str | None = None
    energy_model: str | None = None     # the model that priced j_per_token ("auto" resolved)


def compare_one(model: Model, hardware: Hardware, precision: Precision, workload: Workload,
                settings: MetricsSettings | None = None) -> HardwareComparison:
    """The comparison row of one device (never raises for a scenario that cannot run)."""
    base = dict(slug=hardware.slug, name=hardware.name, hw_class=hardware.hw_class.value,
                capacity_bytes=hardware.memory_capacity_bytes)
    try:
        report = analyze(model, hardware, precision, workload)
    except TimeBudgetExceeded:
        raise
    except LLMParaError as exc:
        return HardwareComparison(fits=None, memory_needed_bytes=None, error=str(exc), **base)
    base.update(fits=report.memory.fits, memory_needed_bytes=report.memory.total_bytes,
                peak_flops_per_s=report.peak_flops_per_s,
                decode_tokens_per_s=report.estimated.throughput_tokens_per_s)
    try:
        m = scenario_metrics(report, settings)
    except TimeBudgetExceeded:
        raise
    except LLMParaError as exc:
        return HardwareComparison(error=str(exc), **base)
    price = m.tco.price_usd
    curve = energy_roofline(m.energy.params, estimated_rates(report), [1.0])
    return HardwareComparison(
        output_tokens_per_s=m.tokens_per_s, j_per_token=m.energy.j_per_output_token,
        tokens_per_j=m.energy.tokens_per_j, usd_per_million_tokens=m.tco.usd_per_million_tokens,
        co2e_g_per_million_tokens=m.carbon.total_g_per_million_tokens,
        avg_power_w=m.energy.avg_power_w, price_usd=price,
        usd_per_gflops=(None if price is None
                        else price / (report.peak_flops_per_s / FLOPS_PER_GFLOP)),
        ceiling_flops_per_j=curve.ceiling_flops_per_j,
        static_known=m.energy.params.idle_w is not None,
        embodied_known=m.carbon.embodied_known, energy_model=m.energy.model, **base)


def compare_hardware(model: Model, hardwares, precision: Precision, workload: Workload,
                     settings: MetricsSettings | None = None) -> tuple[HardwareComparison, ...]:
    """The same scenario on every device of ``hardwares``; devices where the model does not
    fit are kept (``fits=False``), errors are reported per row, never raised."""
    return tuple(compare_one(model, hw, precision, workload, settings) for hw in hardwares)
