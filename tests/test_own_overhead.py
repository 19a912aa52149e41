"""The datacenter class's own per-kernel cost (fitting.OWN_OVERHEAD, a what-if, off): with the
switch off the class is held at its donor's fitted value; on, it fits its own where its rows
span enough physical devices (presets of one chip count once)."""

from types import SimpleNamespace

import pytest

from llmpara_core.calibration import fitting
from llmpara_core.hardware import PROVISIONAL_EFFICIENCY, HardwareClass
from llmpara_core.presets import load_hardware

DC, CONSUMER = HardwareClass.DATACENTER_GPU, HardwareClass.CONSUMER_GPU


def rows(*presets):
    return [SimpleNamespace(hardware=load_hardware(p)) for p in presets]


@pytest.fixture
def switch(monkeypatch):
    def set_(on, n=1):
        monkeypatch.setattr(fitting, "OWN_OVERHEAD", on)
        monkeypatch.setattr(fitting, "OWN_OVERHEAD_MIN_DEVICES", n)
    return set_


def test_off_is_the_shipped_rule(switch):
    assert fitting.OWN_OVERHEAD is False          # shipped off: it did not help held out
    classes = {CONSUMER: PROVISIONAL_EFFICIENCY[CONSUMER]}
    donor = classes[CONSUMER].kernel_overhead_s
    rs = rows("nvidia-a100-pcie-80gb", "nvidia-a100-sxm-80gb")
    assert fitting._shared_overhead(DC, classes, {CONSUMER: 10}, rs) == donor
    # a donor not fitted (no rows): the class fits its own
    assert fitting._shared_overhead(DC, classes, {CONSUMER: 0}, rs) is None


def test_on_counts_physical_devices(switch):
    classes = {CONSUMER: PROVISIONAL_EFFICIENCY[CONSUMER]}
    donor = classes[CONSUMER].kernel_overhead_s
    switch(True, 2)
    two = rows("nvidia-a100-pcie-80gb", "nvidia-a100-sxm-80gb")
    # the 330 W gpt-fast box is the SXM4 80GB chip: one device with it
    twins = rows("nvidia-a100-sxm-80gb", "nvidia-a100-sxm-80gb-330w")
    assert fitting._shared_overhead(DC, classes, {CONSUMER: 10}, two) is None
    assert fitting._shared_overhead(DC, classes, {CONSUMER: 10}, twins) == donor
    switch(True, 1)
    assert fitting._shared_overhead(DC, classes, {CONSUMER: 10}, twins) is None
