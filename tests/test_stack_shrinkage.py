"""Stack profiles fitted on few devices shrink towards the reference stack's values, with a
strength chosen by leave-one-device-out over the stack's own devices (issue 27)."""

from dataclasses import replace

import pytest

from llmpara_core import calibration
from llmpara_core.calibration import measurements as validation
from llmpara_core.calibration.efficiency import FrameworkProfile
from llmpara_core.calibration.fastpath import features
from llmpara_core.calibration.stack_fit import SHRINK_GRID, choose_shrink, fit_framework


@pytest.fixture(scope="module")
def exl():
    rows, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(rows, skipped)
    rs = [r for r in mapped if r.framework == "exllamav2" and r.devices == 1
          and validation.regime(r) == "batch-1"]
    assert len({r.hardware.slug for r in rs}) == 2
    return rs, calibration.default_table()


def _made(rows, table, scale_of):
    """The rows remade by the core under a profile whose bandwidth scale depends on the device."""
    out = []
    for r in rows:
        prof = FrameworkProfile("exllamav2", "ExLlamaV2", memory_scale=scale_of(r.hardware.slug))
        t = replace(table, frameworks={**table.frameworks, "exllamav2": prof})
        value = features(r).predict(t.efficiency_for(r.hardware, "exllamav2"))
        out.append(replace(r, measurement=replace(r.measurement, value=value)))
    return out


def test_one_device_is_not_shrunk(exl):
    rows, table = exl
    one = [r for r in rows if r.hardware.slug == rows[0].hardware.slug]
    assert choose_shrink("exllamav2", one, table) == 0.0


def test_devices_that_disagree_are_shrunk_and_agreeing_ones_are_not(exl):
    rows, table = exl
    first = sorted({r.hardware.slug for r in rows})[0]
    # each device predicted from the other is far off (scale 1.05 vs 0.5; above about 1.1 the
    # bandwidth fraction reaches its cap of 1); the reference value (1) lies between them, so
    # the strongest shrinkage predicts each best
    apart = _made(rows, table, lambda s: 1.05 if s == first else 0.5)
    assert choose_shrink("exllamav2", apart, table) == max(SHRINK_GRID)
    # both at 0.7: the other device predicts each (nearly: the fit's fast path vs the full
    # core) without shrinkage, so at most a weak one is chosen
    same = _made(rows, table, lambda s: 0.7)
    assert choose_shrink("exllamav2", same, table) <= 0.01
    got = fit_framework("exllamav2", same, table, shrink=max(SHRINK_GRID))
    assert 0.7 < got.memory_scale < 1.0          # pulled towards the reference, not to it
    assert fit_framework("exllamav2", same, table).memory_scale == pytest.approx(0.7, rel=0.02)


def test_the_strength_is_chosen_inside_each_fold(monkeypatch):
    """Leave-one-device-out chooses a stack's shrinkage on the fold's training rows only: the
    held-out device's rows never reach ``choose_shrink`` (the MI250X GCD's fold: gpt-fast only,
    no reference rows, so only the stack is refitted)."""
    from llmpara_core.calibration import fitting
    rows, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(rows, skipped)
    seen = []

    def spy(name, rs, table, quant_form=None):
        seen.append((name, {r.hardware.slug for r in rs}))
        return choose_shrink(name, rs, table, quant_form)
    monkeypatch.setattr(fitting, "choose_shrink", spy)
    preds = fitting.leave_one_device_out(mapped, calibration.default_table(),
                                         ["amd-mi250x-gcd"])
    assert {p.row.hardware.slug for p in preds} == {"amd-mi250x-gcd"}
    assert ("gpt-fast", {"nvidia-a100-sxm-80gb-330w"}) in seen
    assert all("amd-mi250x-gcd" not in slugs for _, slugs in seen)
    # one device left in the fold: no strength can be chosen, the stack is not shrunk
    assert choose_shrink("gpt-fast", [r for r in mapped if r.framework == "gpt-fast"
                                      and r.hardware.slug != "amd-mi250x-gcd"],
                         calibration.default_table()) == 0.0
