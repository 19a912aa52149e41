"""The prompt what-if of issue 27 (``scripts/prompt_wave_whatif.py``, not in the shipped model):
tile and wave quantisation of llama.cpp's prompt GEMMs over the SMs, which builds it applies
to, and the layer split's prompt pipeline. Exact arithmetic, and importing the script leaves
the shipped fast path alone."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from llmpara_core.calibration import fastpath
from llmpara_core.calibration import measurements as validation


def _script():
    path = Path(__file__).resolve().parent.parent / "scripts" / "prompt_wave_whatif.py"
    spec = importlib.util.spec_from_file_location("prompt_wave_whatif", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rows():
    measured, skipped = validation.read_shipped()
    return {r.measurement.row_id: r for r in validation.map_all(measured, skipped)[0]}


def test_importing_the_script_patches_nothing():
    shipped = fastpath.features
    _script()
    assert fastpath.features is shipped


def test_wave_quantisation_of_llama3_8b_on_an_a100(rows):
    mod = _script()
    row = rows["D0467"]                       # A100 PCIe (108 SMs), Llama-3-8B F16, pp512
    names = fastpath.features(row).prefill.names
    q = dict(zip(names, mod.op_quantisation(row, names, (128, 128))))
    # 512 x 4096: 4 x 32 = 128 tiles in 2 waves of 108; 512 x 1024: 32 tiles in one wave;
    # 512 x 14336: 448 tiles in 5 waves
    assert q["q_proj"] == pytest.approx(128 / 216)
    assert q["o_proj"] == pytest.approx(128 / 216) and q["ffn_down"] == pytest.approx(128 / 216)
    assert q["k_proj"] == pytest.approx(32 / 108) and q["v_proj"] == pytest.approx(32 / 108)
    assert q["ffn_gate_up"] == pytest.approx(448 / 540)
    assert q["flash_attention"] == 1.0 and q["rope"] == 1.0 and q["lm_head"] == 1.0
    w, share = mod.flops_weighted(row, (128, 128))
    assert 1.0 / w == pytest.approx(0.6699, abs=1e-4)
    assert 0.95 < share < 1.0
    # the least wasteful of several tiles is never below one of them
    best = mod.op_quantisation(row, names, ((128, 128), (256, 128), (64, 64)))
    assert np.all(best >= mod.op_quantisation(row, names, (128, 128)) - 1e-12)


def test_more_sms_is_not_always_better(rows):
    mod = _script()
    a100, rtx4080 = rows["D0467"], rows["D0289"]   # 108 and 76 SMs, the same 8B F16 pp512
    assert mod.flops_weighted(rtx4080, (128, 128))[0] < mod.flops_weighted(a100, (128, 128))[0]


def test_which_rows_it_applies_to(rows):
    mod = _script()
    notebook, scoreboard = rows["D0467"], rows["D0172"]   # May 2024 cuBLAS build, 2025 MMQ
    assert mod.applies(notebook, True) and mod.applies(notebook, False)
    assert not mod.applies(scoreboard, True) and mod.applies(scoreboard, False)
    decode = next(r for r in rows.values() if r.measurement.metric == "decode_tok_s"
                  and r.framework == "llama.cpp")
    assert not mod.applies(decode, False)


def test_pipeline_speedup(rows):
    mod = _script()
    split4 = rows["D0479"]                     # A100 SXM4 x4, layer split, pp1024
    assert split4.pp == 4 and split4.workload.prompt_len == 1024
    assert mod.pipeline_speedup(split4) == pytest.approx(2 / (1 + 1 / 4))
    assert mod.pipeline_speedup(rows["D0467"]) == 1.0           # one device
    short = replace(split4, workload=replace(split4.workload, prompt_len=512))
    assert mod.pipeline_speedup(short) == 1.0                  # one micro-batch
    long_ = replace(split4, workload=replace(split4.workload, prompt_len=4096))
    n = math.ceil(4096 / 512)                                  # 8 micro-batches on 4 stages
    assert mod.pipeline_speedup(long_) == pytest.approx(n / (1 + (n - 1) / 4))
    assert mod.pipeline_speedup(long_) == pytest.approx(2.909, abs=1e-3)


def test_summary_of_a_written_file(tmp_path, capsys):
    mod = _script()
    head = ",".join(mod.COLUMNS)
    a = tmp_path / "a.csv"
    a.write_text(f"{head}\nD1,x,consumer-gpu,1,F16,512,100,110,0.1,1\n"
                 f"D2,y,datacenter-gpu,4,F16,1024,100,150,0.5,1.2\n", encoding="utf-8")
    assert mod.main(["--from", str(a)]) == 0
    out = capsys.readouterr().out
    assert "datacenter-gpu, several devices: 1 rows, median |error| 50.0%" in out
    assert "consumer-gpu, single device: 1 rows, median |error| 10.0%" in out
    bad = tmp_path / "bad.csv"
    bad.write_text("row_id,error\nD1,0.1\n", encoding="utf-8")
    assert mod.main(["--from", str(bad)]) == 2
    assert mod.main(["--from", str(tmp_path / "missing.csv")]) == 2
    assert "prompt_wave_whatif:" in capsys.readouterr().err
