"""The output envelope: the one place that says how large a time, an energy or a cost the
package will report. A result outside it is not an answer but the sign of an input the bounds
let through in combination (a slow device, a huge context and a tiny fraction together); it is
refused with a message naming the quantity instead of printing 1e300.

    time    at most MAX_TIME_S       = 1 year   (3.156e7 s)
    energy  at most MAX_ENERGY_J     = 1 GWh    (3.6e12 J)
    cost    at most MAX_COST_USD     = 1e12 USD
    and every number finite.

Faces apply it: the CLI to everything it prints (:func:`check_mapping` over the JSON / rows,
keys named by unit suffix), the app to the reports it renders (``ui.compute``).
"""

from __future__ import annotations

import math

from .errors import ConfigError

MAX_TIME_S = 365.25 * 86_400.0
MAX_ENERGY_J = 3.6e12
MAX_COST_USD = 1e12
ENVELOPE_TEXT = "times up to 1 year, energies up to 1 GWh, costs up to 1e12 USD"


class OutsideEnvelope(ConfigError):
    """A result outside the output envelope (a refusal, like a bad input)."""


def _kind(key: str) -> str | None:
    """'time', 'energy' or 'cost' for a result key named by its unit, else None."""
    parts = key.lower().split("_")
    if "per" in parts:
        unit = parts[:parts.index("per")]        # "j_per_token": energy per token
        rate_of_time = parts[parts.index("per") + 1:] == ["s"]
        if rate_of_time:
            return None                          # tokens_per_s, flops_per_s: rates
        parts = unit
    if not parts:
        return None
    if parts[-1] in ("s", "ms", "us") and len(parts) > 1:
        return "time"
    if any(p in ("j", "wh", "kwh", "mwh", "joules") for p in parts):
        return "energy"
    if "usd" in parts:
        return "cost"
    return None


_CAPS = {"time": (MAX_TIME_S, "s"), "energy": (MAX_ENERGY_J, "J"), "cost": (MAX_COST_USD, "USD")}
_SCALE = {"ms": 1e-3, "us": 1e-6, "kwh": 3.6e6, "wh": 3600.0, "mwh": 3.6e9}


def check_value(name: str, value, kind: str) -> None:
    """OutsideEnvelope if ``value`` (a time in s, energy in J or cost in USD) is not finite or
    leaves the envelope."""
    cap, unit = _CAPS[kind]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value) or abs(value) > cap:
        raise OutsideEnvelope(
            f"the result {name} = {value:.3g} {unit} is outside what this model reports "
            f"({ENVELOPE_TEXT}): the inputs together describe no real deployment; check the "
            "smallest rates, fractions and bits given")


def check_mapping(obj, path: str = "", depth: int = 0) -> None:
    """Walk a JSON-like result (dicts, lists, dataclass-free) and check every number whose key
    names a time (``*_s``, ``*_ms``), an energy (``*_j``, ``*_kwh``) or a cost (``*_usd``)."""
    if depth > 12:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = str(k)
            if isinstance(v, (dict, list, tuple)):
                check_mapping(v, key, depth + 1)
                continue
            kind = _kind(key)
            if kind is None or not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            last = key.lower().split("_per_")[0].split("_")[-1]
            check_value(key, v * _SCALE.get(last, 1.0), kind)
    elif isinstance(obj, (list, tuple)):
        for v in obj[:100_000]:
            if isinstance(v, (dict, list, tuple)):
                check_mapping(v, path, depth + 1)


def check_report(report) -> None:
    """OutsideEnvelope if a kernel ``Report``'s estimated or ideal times leave the envelope
    (the dashboard's check of every scenario it renders)."""
    for which in ("estimated", "ideal"):
        t = getattr(report, which, None)
        if t is None:
            continue
        for f in ("ttft_s", "tpot_s", "e2e_latency_s"):
            check_value(f"{which} {f.removesuffix('_s').replace('_', ' ').upper()} [s]",
                        getattr(t, f), "time")
