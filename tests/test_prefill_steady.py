"""The steady-state rule for prompt sweeps (``fitting.unsteady_prefill``): a sweep whose
tokens/s rises with its prompt length is left out of the fit, and stays in every figure."""

from dataclasses import replace

import pytest

from llmpara_core.calibration import default_table, fitting
from llmpara_core.calibration import measurements as validation


@pytest.fixture(scope="module")
def mapped():
    rows, skipped = validation.read_shipped()
    return validation.map_all(rows, skipped)[0]


def test_only_the_a100_sxm_f16_sweep_speeds_up_with_its_prompt(mapped):
    flagged = fitting.unsteady_prefill(mapped)
    assert flagged == {"D0493", "D0494"}         # A100 SXM4 notebook, Llama-3-8B F16
    used = {r.measurement.row_id for rs in fitting.class_rows(mapped).values() for r in rs}
    assert not flagged & used
    assert {"D0499", "D0500"} <= used            # the same notebook's Q4_K_M sweep is steady
    # they stay in the error figures: predicted like every other row
    preds = validation.predict_all([r for r in mapped if r.measurement.row_id in flagged],
                                   default_table())[0]
    assert len(preds) == 2 and all(p.error > 5 for p in preds)   # +600 % and more


def test_the_rule_not_the_row_ids(mapped):
    # the A100 PCIe F16 sweep (pp512 7,741, pp4096 6,138 tokens/s) is steady; flagged once its
    # longer prompt runs faster than its shorter one
    sweep = [r for r in mapped if r.measurement.row_id in ("D0467", "D0468")]
    assert len(sweep) == 2 and not fitting.unsteady_prefill(sweep)
    swapped = [replace(r, measurement=replace(r.measurement, value=8000.0))
               if r.workload.prompt_len == 4096 else r for r in sweep]
    assert fitting.unsteady_prefill(swapped) == {"D0467", "D0468"}
    # one prompt length is no sweep; decode rows are never flagged
    assert not fitting.unsteady_prefill(swapped[:1])
    decode = [r for r in mapped if r.measurement.metric == "decode_tok_s"]
    assert not fitting.unsteady_prefill(decode)
