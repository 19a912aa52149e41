"""The fit's timing of a row on several devices is the full core's, bit for bit: the speed-ups
of the fit (``measurements.estimated_timing`` through ``parallel.shard_timings``, the cached
passes of ``forward.forward_ops``) must never change what it fits."""

from llmpara_core import calibration
from llmpara_core.calibration import measurements as v
from llmpara_core.calibration.stack_fit import predictor


def test_fit_predictor_of_sharded_rows_is_the_full_core():
    rows, skipped = v.read_shipped()
    mapped, _ = v.map_all(rows, skipped)
    table = calibration.default_table()
    multi = [r for r in mapped if r.devices > 1]
    picked = {}
    for r in multi:                       # one row per (stack, TP, PP): layer and row splits
        picked.setdefault((r.framework, r.tp, r.pp), r)
    assert len(picked) >= 5
    for r in picked.values():
        for stack in (r.framework, None):
            eff = table.efficiency_for(r.hardware, stack)
            full = v.metric_value(r.measurement.metric, v.timings(r, eff)[1], r.workload)
            assert predictor(r)(eff) == full, (r.measurement.row_id, stack)
