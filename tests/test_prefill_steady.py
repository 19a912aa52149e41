"""The steady-state check of prompt sweeps (``measurements.unsteady_prefill``): a sweep whose
tokens/s rises with its prompt length was not a steady run, and the validation says so."""

from dataclasses import replace

import pytest

from llmpara_core.calibration import default_table, fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.calibration import summary


@pytest.fixture(scope="module")
def mapped():
    rows, skipped = validation.read_shipped()
    return validation.map_all(rows, skipped)[0]


def test_only_the_a100_sxm_f16_sweep_speeds_up_with_its_prompt(mapped):
    assert validation.unsteady_prefill(mapped) == {"D0493", "D0494"}   # A100 SXM4, 8B F16
    # a diagnostic only: the rows are fitted and scored like every other
    used = {r.measurement.row_id for rs in fitting.class_rows(mapped).values() for r in rs}
    assert {"D0493", "D0494"} <= used


def test_the_rule_not_the_row_ids(mapped):
    # the A100 PCIe F16 sweep (pp512 7,741, pp4096 6,138 tokens/s) is steady; flagged once its
    # longer prompt runs faster than its shorter one
    sweep = [r for r in mapped if r.measurement.row_id in ("D0467", "D0468")]
    assert len(sweep) == 2 and not validation.unsteady_prefill(sweep)
    swapped = [replace(r, measurement=replace(r.measurement, value=8000.0))
               if r.workload.prompt_len == 4096 else r for r in sweep]
    assert validation.unsteady_prefill(swapped) == {"D0467", "D0468"}
    # one prompt length is no sweep; decode rows are never flagged
    assert not validation.unsteady_prefill(swapped[:1])
    decode = [r for r in mapped if r.measurement.metric == "decode_tok_s"]
    assert not validation.unsteady_prefill(decode)


def test_the_validation_names_it_for_the_worst_rows(mapped):
    preds = validation.predict_all(mapped, default_table())[0]
    worst = {w.prediction.row.measurement.row_id: w.reasons
             for w in summary.summarize(preds, worst=12).worst}
    assert "D0493" in worst                       # +1,400 %: the worst row of all
    assert any("not a steady run" in r for r in worst["D0493"])
    assert not any("not a steady run" in r for k, v in worst.items() if k != "D0493"
                   and k != "D0494" for r in v)


def _script():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "scripts" / "prefill_class_loo.py"
    spec = importlib.util.spec_from_file_location("prefill_class_loo", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_prefill_class_loo_compares_two_files(tmp_path, capsys):
    mod = _script()
    head = ",".join(mod.COLUMNS)
    a, b, bad = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "bad.csv"
    a.write_text(f"{head}\nD1,x,consumer-gpu,1,F16,512,100,110,0.1\n"
                 f"D2,y,datacenter-gpu,1,F16,512,100,150,0.5\n", encoding="utf-8")
    b.write_text(f"{head}\nD1,x,consumer-gpu,1,F16,512,100,111,0.11\n"
                 f"D2,y,datacenter-gpu,1,F16,512,100,120,0.2\n", encoding="utf-8")
    assert mod.main(["--from", str(a), "--against", str(b)]) == 0
    out = capsys.readouterr().out
    assert "datacenter-gpu 50.0%" in out and "datacenter-gpu 20.0%" in out
    assert "D2 y" in out and "D1 x" not in out         # only rows that moved > 3 points
    bad.write_text("row_id,error\nD1,0.1\n", encoding="utf-8")
    assert mod.main(["--from", str(bad)]) == 2
    assert mod.main(["--from", str(tmp_path / "missing.csv")]) == 2
    assert "prefill_class_loo:" in capsys.readouterr().err
