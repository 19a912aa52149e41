"""The fit with the reference stack's build rules on (``fitting.BUILD_RULES``): only the class
GEMM fractions are refitted with them, and every stack but llama.cpp applies its profile to the
GEMM fractions fitted without them (``EfficiencyTable.stack_classes``, ``[stack_class.*]``)."""

from __future__ import annotations

import tomllib
from dataclasses import fields, replace

import pytest

from llmpara_core import calibration, efficiency_table
from llmpara_core.calibration import default_table, fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.errors import ConfigError
from llmpara_core.calibration.efficiency import FRAMEWORKS, GENERIC, REFERENCE_STACK
from llmpara_core.hardware import HardwareClass
from llmpara_core.parallel import evaluation
from llmpara_core.presets import load_hardware

GEMM = efficiency_table.STACK_CLASS_KEYS


@pytest.fixture(scope="module")
def rows():
    measured, skipped = validation.read_shipped()
    return validation.map_all(measured, skipped)[0]


@pytest.fixture(scope="module")
def table():
    return default_table()


def test_both_rules_are_on_in_the_shipped_model(rows):
    assert validation.PROMPT_GEMM_WAVES is True and evaluation.PROMPT_PIPELINE is True
    assert any(validation.tiled_prompt_gemms(r) for r in rows)
    with validation.prompt_gemm_waves(False):
        assert not any(validation.tiled_prompt_gemms(r) for r in rows)
    assert validation.PROMPT_GEMM_WAVES is True


def test_the_shipped_stack_classes_differ_only_in_gemm_fractions(table):
    # the GPU classes have rows the wave rule times (the May 2024 notebooks); nothing else
    assert set(table.stack_classes) == {HardwareClass.CONSUMER_GPU, HardwareClass.DATACENTER_GPU}
    for cls, e in table.stack_classes.items():
        own = table.classes[cls]
        for f in fields(e):
            if f.name not in GEMM:
                assert getattr(e, f.name) == getattr(own, f.name), (cls, f.name)
        assert e.compute != own.compute


@pytest.mark.parametrize("slug", ["nvidia-a100-sxm-80gb", "nvidia-h100-sxm", "nvidia-rtx-4090",
                                  "apple-m2-ultra"])
def test_every_stack_but_the_reference_applies_to_the_stack_classes(table, slug):
    hw = load_hardware(slug)
    # the same table with the stack classes as its classes
    theirs = replace(table, classes={**table.classes, **table.stack_classes}, stack_classes={})
    for name in FRAMEWORKS:
        if name == REFERENCE_STACK:
            assert table.efficiency_for(hw, name) != theirs.efficiency_for(hw, name) \
                or not table.stack_classes.get(hw.hw_class)
        else:
            assert table.efficiency_for(hw, name) == theirs.efficiency_for(hw, name), name
    assert table.efficiency_for(hw, GENERIC) == table.efficiency_for(hw) \
        == table.class_efficiency(hw)


def test_stack_classes_survive_the_file(table):
    text = calibration.table_to_toml(table)
    assert "[stack_class.datacenter-gpu]" in text
    back = calibration.table_from_dict(tomllib.loads(text))
    assert back.stack_classes == table.stack_classes
    # a malformed value is a clear error, not a traceback
    bad = text.replace("[stack_class.datacenter-gpu]\ncompute = ",
                       "[stack_class.datacenter-gpu]\ncompute = -")
    with pytest.raises(ConfigError, match="stack_class"):
        calibration.table_from_dict(tomllib.loads(bad))


def test_the_gemm_refit_holds_every_other_value(rows, table):
    cls = HardwareClass.CONSUMER_GPU
    rs = fitting.class_rows(rows)[cls]
    # the two notebook devices with the most prompt rows the wave rule times
    n = {}
    for r in rs:
        if validation.tiled_prompt_gemms(r) and r.measurement.metric == "prefill_tok_s":
            n[r.hardware.slug] = n.get(r.hardware.slug, 0) + 1
    keep = sorted(n, key=lambda s: (-n[s], s))[:2]
    sub = [r for r in rs if r.hardware.slug in keep]
    base = table.stack_classes[cls]
    new = fitting.fit_gemm_fractions([fitting.features(r) for r in sub], base)
    for f in fields(new):
        if f.name not in GEMM:
            assert getattr(new, f.name) == getattr(base, f.name), f.name
    assert new.compute != base.compute
