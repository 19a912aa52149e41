"""Fit of the power model's four constants (``energy_validation.PowerConstants``) on the
batched ML.ENERGY rows, and its leave-one-device-out check.

The fit minimises the mean |log(predicted / measured)| J per token over the batched rows on a
grid of the four shares (vectorised: the rows' modelled work is computed once). Leave one
device out: every row of a device (a hardware preset, whatever the GPU count) is predicted with
the constants fitted on the other devices' rows alone. Batch-1 rows are never fitted: they are
predicted with the constants fitted on all batched rows, so they are held out as a whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .energy_validation import (ENERGY_TOLERANCE_MEDIAN, EnergyPrediction, PowerConstants,
                                RowWork, energy_rows, group_of, j_per_token, median_abs)

# The grid: shares of the idle-to-TDP range (running kernels; added at full tensor-core
# utilisation; added at full memory streaming; waiting for the host).
ACTIVE = np.round(np.arange(0.0, 1.001, 0.04), 4)
COMPUTE = np.round(np.arange(0.0, 3.001, 0.1), 4)
MEMORY = np.round(np.arange(0.0, 3.001, 0.1), 4)
HOST = np.round(np.arange(0.0, 1.001, 0.04), 4)


def _arrays(rows: list[RowWork]) -> dict[str, np.ndarray]:
    f = lambda attr: np.array([getattr(w, attr) for w in rows], float)   # noqa: E731
    return {"wc": f("compute_s"), "wm": f("memory_s"), "tb": f("busy_s"), "th": f("host_s"),
            "idle": f("idle_w"), "tdp": f("tdp_w"), "n": f("devices"),
            "tok": f("output_tokens"),
            "meas": np.array([w.measurement.measured_j_per_token for w in rows], float)}


def _loss_grid(rows: list[RowWork], host: float) -> np.ndarray:
    """Mean |log(pred / measured)| over ``rows`` for every (active, compute, memory) at one
    host share (``energy_validation.device_energy_j``, vectorised)."""
    a = _arrays(rows)
    r = a["tdp"] - a["idle"]
    busy_j = (a["idle"] + r * ACTIVE[:, None, None, None]) * a["tb"] + r * (
        COMPUTE[None, :, None, None] * a["wc"] + MEMORY[None, None, :, None] * a["wm"])
    e = a["n"] * (busy_j + (a["idle"] + r * host) * a["th"]) / a["tok"]
    return np.abs(np.log(e / a["meas"])).mean(axis=-1)


def fit_constants(rows: list[RowWork]) -> PowerConstants:
    """The grid point with the smallest mean |log error| on ``rows`` (ties: the smaller
    shares, in grid order)."""
    if not rows:
        raise ConfigError("no batched energy rows to fit the power model on")
    best = (math.inf, None)
    for h in HOST:
        loss = _loss_grid(rows, float(h))
        i = int(np.argmin(loss))
        if loss.flat[i] < best[0] - 1e-12:
            best = (float(loss.flat[i]), (np.unravel_index(i, loss.shape), float(h)))
    (i, j, k), h = best[1]
    return PowerConstants(float(ACTIVE[i]), float(COMPUTE[j]), float(MEMORY[k]), h)


@dataclass(frozen=True)
class EnergyFit:
    constants: PowerConstants                          # fitted on every batched row
    by_device: tuple[tuple[str, PowerConstants], ...]  # fitted without that device
    held_out: tuple[EnergyPrediction, ...]             # every row, predicted held out
    in_sample: tuple[EnergyPrediction, ...]

    def median(self, group: str | None = None, held_out: bool = True) -> float | None:
        preds = self.held_out if held_out else self.in_sample
        return median_abs([p for p in preds if group is None and p.work.batched
                           or group is not None and group_of(p.work) == group])

    @property
    def batched_median(self) -> float | None:
        """Issue 27's figure: batched rows, leave-one-device-out, median |error|."""
        return self.median()

    @property
    def passes(self) -> bool:
        m = self.batched_median
        return m is not None and m <= ENERGY_TOLERANCE_MEDIAN


def fit_energy(rows=None) -> EnergyFit:
    """Fit on all batched rows, then hold each device out in turn (needs >= 2 devices)."""
    rows = list(energy_rows() if rows is None else rows)
    batched = [w for w in rows if w.batched]
    devices = sorted({w.measurement.hardware_preset for w in batched})
    if len(devices) < 2:
        raise ConfigError("leave-one-device-out needs batched rows on at least two devices")
    full = fit_constants(batched)
    by_dev = {d: fit_constants([w for w in batched if w.measurement.hardware_preset != d])
              for d in devices}
    held = []
    for w in rows:
        c = by_dev[w.measurement.hardware_preset] if w.batched else full
        held.append(EnergyPrediction(w, j_per_token(w, c), True))
    ins = tuple(EnergyPrediction(w, j_per_token(w, full), False) for w in rows)
    return EnergyFit(full, tuple(sorted(by_dev.items())), tuple(held), ins)


def mean_abs_log(preds) -> float:
    return sum(abs(math.log1p(p.error)) for p in preds) / len(preds) if preds else math.nan
