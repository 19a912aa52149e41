"""llama.cpp's tensor split is a row split (issue 13): each split matmul's input is copied to,
and its output back from, every other device of the TP group -- 2 (TP - 1) host-driven copies
per matmul (``Efficiency.tp_row_copy_s``) in place of Megatron-style per-block all-reduces;
the copy cost is fitted on the stack's tensor-split rows (``fitting.fit_row_copy``)."""

import tomllib
from dataclasses import replace

import pytest

from llmpara_core import calibration
from llmpara_core.calibration import fitting
from llmpara_core.calibration import measurements as validation
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Efficiency, Interconnect, Topology
from llmpara_core.parallel import ParallelPlan, shard_analyze
from llmpara_core.parallel.evaluation import ROW_SPLIT_KINDS
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.units import BYTES_PER_GB, S_PER_US
from llmpara_core.workload import Workload

FP16 = precision_preset("FP16")
BASE = Efficiency(compute=0.5, memory=0.7, kv_read=0.8, kernel_overhead_s=4e-6)
IC = Interconnect(31 * BYTES_PER_GB, 1 * S_PER_US, Topology.RING, 8)


def _report(copy_s: float, tp: int, model="llama-3-8b", wl=Workload(1, 16, 32)):
    hw = replace(load_hardware("nvidia-a100-sxm-80gb"), interconnect=IC,
                 efficiency=replace(BASE, tp_row_copy_s=copy_s))
    return shard_analyze(load_model(model), hw, FP16, wl, ParallelPlan(tp=tp))


def test_the_field_is_validated():
    assert Efficiency(tp_row_copy_s=7e-6).tp_row_copy_s == 7e-6
    for bad in (-1e-6, 2.0):
        with pytest.raises(ConfigError, match="tp_row_copy_s"):
            Efficiency(tp_row_copy_s=bad)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_row_split_copies_every_matmul_instead_of_all_reducing(tp):
    r = _report(7e-6, tp)
    names = {c.name for c in r.collectives}
    assert names == {"tp_row_split_copy"}
    # the matmuls one device runs per decode step: q/k/v, o and the FFN of every layer + LM head
    model = load_model("llama-3-8b")
    copies = sum(c.count for c in r.collectives if c.phase == "decode")
    ops = [o for o in r.decode[0].rows if o.kind in ROW_SPLIT_KINDS]
    assert copies == 2 * (tp - 1) * sum(o.count for o in ops)
    assert copies >= 2 * (tp - 1) * model.num_hidden_layers * 3   # at least qkv, o, ffn
    # Megatron-style TP (no copy cost): two all-reduces per layer, no copies
    m = _report(0.0, tp)
    assert {c.name for c in m.collectives} >= {"tp_all_reduce_attn", "tp_all_reduce_ffn"}
    assert "tp_row_split_copy" not in {c.name for c in m.collectives}


def test_each_copy_pays_the_cost_beyond_the_link():
    a, b = _report(5e-6, 4), _report(10e-6, 4)
    copies = sum(c.count for c in a.collectives if c.phase == "decode")
    assert b.estimated.tpot_s - a.estimated.tpot_s == pytest.approx(copies * 5e-6, rel=1e-6)
    # ideal (peak-rate) figures see the link's time only
    assert a.ideal.tpot_s == b.ideal.tpot_s
    # one device: nothing to copy
    assert _report(7e-6, 1).estimated.tpot_s == _report(0.0, 1).estimated.tpot_s


def test_more_devices_cost_more_at_batch_1():
    """The copies grow with TP - 1 while each device streams 1 / TP of the weights: at batch 1
    over PCIe a row split of Llama-2-70B gains little from 4 to 8 devices, as measured (11.07
    vs 9.37 tok/s on A100s, llm-perf-bench)."""
    wl = Workload(1, 8, 64)
    t4 = _report(7e-6, 4, "llama-2-70b", wl).estimated.tpot_s
    t8 = _report(7e-6, 8, "llama-2-70b", wl).estimated.tpot_s
    assert t8 > 0.8 * t4
    assert _report(0.0, 8, "llama-2-70b", wl).estimated.tpot_s < 0.7 * \
        _report(0.0, 4, "llama-2-70b", wl).estimated.tpot_s


def _rows():
    return [r for r in validation.map_all(*validation.read_shipped())[0]
            if r.measurement.row_id in ("D0659", "D0662", "D0665")]


def test_the_fit_is_the_median_of_each_rows_implied_cost():
    rows = _rows()
    assert len(rows) == 3 and all(r.tp > 1 and r.framework == "llama.cpp" for r in rows)
    t = calibration.default_table()
    c = fitting.fit_row_copy(rows, t)
    implied = sorted(fitting.fit_row_copy([r], t) for r in rows)
    assert c == pytest.approx(implied[1])
    # each implied value reproduces its row
    for r in rows:
        v = fitting.fit_row_copy([r], t)
        eff = replace(t.efficiency_for(r.hardware, "llama.cpp"), tp_row_copy_s=v)
        pred = validation.metric_value(r.measurement.metric, validation.timings(r, eff)[1],
                                       r.workload)
        assert pred == pytest.approx(r.measurement.value, rel=1e-4)
    # no tensor-split rows: no value
    assert fitting.fit_row_copy([], t) is None


def test_shipped_table_carries_the_copy_cost_for_llama_cpp_only():
    t = calibration.default_table()
    c = t.profile("llama.cpp").absolute.get("tp_row_copy_s")
    assert c is not None and 1e-6 < c < 5e-5
    for name in ("vllm", "tensorrt-llm", "gpt-fast", "mlc"):
        assert t.efficiency_for(load_hardware("nvidia-a100-sxm-80gb"), name).tp_row_copy_s == 0
    again = calibration.table_from_dict(tomllib.loads(calibration.table_to_toml(t)))
    assert again.profile("llama.cpp").absolute["tp_row_copy_s"] == pytest.approx(c, rel=1e-3)
    # the three rows are now predicted within a factor of 1.5 (Megatron-style: 2.2-4.4x fast)
    for r in _rows():
        p = validation.predict(r, t)
        assert 1 / 1.5 < p.estimated / p.measured < 1.5, r.measurement.row_id


def test_implied_cost_bisects_a_growing_time():
    from llmpara_core.calibration.fastpath import implied_cost
    time_at = lambda c: 2.0 + 3.0 * c          # noqa: E731  (a time that grows with the cost)
    assert implied_cost(time_at, 2.6, 1.0) == pytest.approx(0.2, abs=1e-9)
    assert implied_cost(time_at, 1.5, 1.0) == 0.0        # already slower with no cost
    assert implied_cost(time_at, 9.0, 1.0) is None       # beyond the ceiling: not such a cost
