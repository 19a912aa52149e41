"""CLI for energy, cost and carbon.

* ``llmpara analyze ... --format json`` gains ``energy_j_per_token``,
  ``cost_usd_per_million_tokens``, ``co2e_g_per_million_tokens`` (and related keys) with the
  assumptions echoed under ``metrics_assumptions``; options ``--region``, ``--pue``,
  ``--usd-per-kwh``, ``--lifetime-years``, ``--utilisation``, ``--price-usd``,
  ``--energy-model``, ``--alpha``, ``--no-idle-energy``.
* ``llmpara metrics --model M (--hardware H [H ...] | --hardware-all)`` runs the same scenario on
  several devices (J/token, $/Mtok, gCO2e/Mtok, tokens/s; devices where the model does not fit
  are kept and marked); ``llmpara metrics --list-regions`` lists the grid regions.
"""

from __future__ import annotations

import argparse

from .types import bounded
from . import base as cli
from ..errors import ConfigError


def add_metrics_args(p: argparse.ArgumentParser) -> None:
    """Options of the money and carbon assumptions (defaults: presets/tables/energy.toml)."""
    g = p.add_argument_group("energy, cost and carbon")
    g.add_argument("--region", default="world",
                   help="grid region for CO2e (key, name or the reference's names such as "
                        "Global_Average; `llmpara metrics --list-regions`)")
    g.add_argument("--pue", type=bounded("pue", "PUE"), help="facility PUE (>= 1)")
    g.add_argument("--usd-per-kwh", type=bounded("usd_per_kwh", "USD per kWh"),
                   help="electricity price [USD/kWh]")
    g.add_argument("--lifetime-years", type=bounded("lifetime_years"), help="service life [years]")
    g.add_argument("--utilisation", type=bounded("utilisation"), help="busy fraction of the life (0, 1]")
    g.add_argument("--price-usd", type=bounded("price_usd", "price"),
                   help="device price override [USD]")
    g.add_argument("--energy-model", choices=("auto", "power", "components", "tdp-fraction"),
                   default="auto",
                   help="power: busy/host power fitted on the published batched ML.ENERGY "
                        "rows (presets/tables/energy_power.toml); components: static + "
                        "pJ/FLOP + pJ/byte; tdp-fraction: the reference tool's TDP x "
                        "power-fraction model; auto (default): power where the device has a "
                        "TDP and an idle power, else components")
    g.add_argument("--alpha", type=bounded("alpha"),
                   help="compute power fraction of the tdp-fraction model")
    g.add_argument("--no-idle-energy", action="store_true",
                   help="do not charge idle hours (1 - utilisation) to the tokens")


def settings_from_args(args):
    from ..metrics.cost import MetricsSettings
    return MetricsSettings(region=args.region, pue=args.pue, usd_per_kwh=args.usd_per_kwh,
                           lifetime_years=args.lifetime_years, utilisation=args.utilisation,
                           include_idle=not args.no_idle_energy, energy_model=args.energy_model,
                           alpha=args.alpha, price_usd=args.price_usd)


_EMPTY_KEYS = ("energy_j_per_token", "energy_decode_j_per_token", "energy_j_per_request",
               "energy_prefill_j", "energy_total_j", "tokens_per_j", "avg_power_w",
               "output_tokens_per_s", "cost_usd_per_million_tokens",
               "cost_electricity_usd_per_million_tokens", "cost_usd_per_hour",
               "co2e_g_per_million_tokens", "co2e_operational_g_per_million_tokens",
               "co2e_embodied_g_per_million_tokens")


def analyze_hook(report, args) -> dict:
    """Keys added to ``analyze`` output (ANALYZE_HOOKS)."""
    from ..metrics.cost import metrics_to_dict, scenario_metrics
    settings = settings_from_args(args)
    if report.workload.gen_len == 0:
        out = {k: None for k in _EMPTY_KEYS}
        out["metrics_assumptions"] = {"notes": ["gen_len is 0: no output tokens"]}
        return out
    return metrics_to_dict(scenario_metrics(report, settings))


def _cmd_metrics(args) -> None:
    from dataclasses import asdict

    from ..metrics.carbon import grid_regions
    from ..metrics.cost import compare_hardware
    from ..presets import list_presets, load_hardware, load_model
    if args.list_regions:
        cli.emit([{"key": r.key, "name": r.name, "type": r.region_type,
                   "gco2e_per_kwh": r.gco2e_per_kwh, "year": r.year,
                   "aliases": ",".join(r.aliases)} for r in grid_regions()], args.format)
        return
    if not args.model:
        raise ConfigError("--model is required (or --list-regions)")
    if args.hardware_all == bool(args.hardware):
        raise ConfigError("give --hardware NAME [NAME ...] or --hardware-all")
    slugs = ([i.slug for i in list_presets("hardware")] if args.hardware_all
             else list(args.hardware))
    model = load_model(args.model)
    hws, stacks = zip(*(cli.with_framework(load_hardware(s), args.framework) for s in slugs))
    rows = compare_hardware(model, hws, cli.precision_from_args(args),
                            cli.workload_from_args(args), settings_from_args(args))
    out = [{**asdict(r), "stack": s.to_dict()} for r, s in zip(rows, stacks)]
    if args.format == "json":
        cli.emit({"model": model.name, "devices": out}, "json")
    elif args.format == "table":
        keys = ("slug", "fits", "output_tokens_per_s", "j_per_token", "usd_per_million_tokens",
                "co2e_g_per_million_tokens", "avg_power_w", "error")
        cli.print_stack(*stacks)
        cli.emit(None, "table", [{**{k: r[k] for k in keys[:2]}, "stack": r["stack"]["name"],
                                  **{k: r[k] for k in keys[2:]}} for r in out])
    else:
        cli.emit(None, "csv", [{**r, "stack": r["stack"]["name"]} for r in out])


def register(subparsers) -> None:
    """Add ``metrics`` and the ``analyze`` hooks (idempotent)."""
    p = subparsers.add_parser("metrics", help="energy, $/Mtok and CO2e across hardware")
    p.add_argument("--model", help="model preset name or path to a config.json")
    p.add_argument("--hardware", nargs="+", help="hardware preset names or TOML paths")
    p.add_argument("--hardware-all", action="store_true", help="every hardware preset")
    p.add_argument("--list-regions", action="store_true", help="list the grid regions")
    cli.add_framework_arg(p)
    cli.add_workload_args(p)
    cli.add_precision_args(p)
    add_metrics_args(p)
    cli.add_output_args(p)
    p.set_defaults(func=_cmd_metrics)
    if analyze_hook not in cli.ANALYZE_HOOKS:
        cli.ANALYZE_HOOKS.append(analyze_hook)
    if add_metrics_args not in cli.ANALYZE_ARG_HOOKS:
        cli.ANALYZE_ARG_HOOKS.append(add_metrics_args)
