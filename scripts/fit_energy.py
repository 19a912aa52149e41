"""Fit the batched power model on the published ML.ENERGY rows and rewrite its table.

    python scripts/fit_energy.py              # fit, print the figures, rewrite the table
    python scripts/fit_energy.py --dry-run    # fit and print, write nothing

Reads ``presets/tables/energy_measurements.csv`` (ML.ENERGY v1/v2 rows, single-GPU and
tensor-parallel), models each row's run under the stack it measured
(``llmpara_core.metrics.energy_validation``), fits the four power constants on the batched rows
(``llmpara_core.metrics.energy_fit``), checks them leave-one-device-out and writes
``presets/tables/energy_power.toml`` with the figures in its header.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.metrics.energy_fit import fit_energy           # noqa: E402
from llmpara_core.metrics.energy_validation import group_of      # noqa: E402

OUT = ROOT / "presets" / "tables" / "energy_power.toml"
GROUPS = (None, "batched, 1 GPU", "batched, tensor parallel", "batch 1")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    f = fit_energy()
    c = f.constants

    def n(g):
        return sum(1 for p in f.held_out if (p.work.batched if g is None
                                             else group_of(p.work) == g))
    figs = [f"#   {g or 'batched, all'}: {n(g)} rows, held out {f.median(g):.1%}, in sample "
            f"{f.median(g, held_out=False):.1%}" for g in GROUPS]
    held = [f"#   without {d}: active {k.active:g}, compute {k.compute:g}, memory {k.memory:g}, "
            f"host {k.host:g}" for d, k in f.by_device]
    text = "\n".join([
        "# Power of a device under load (llmpara_core.metrics.energy_validation): shares of its",
        "# idle-to-TDP range while running kernels (active, + compute x tensor-core utilisation,",
        "# + memory x memory-streaming utilisation) and while waiting for the host (host).",
        "# Written by scripts/fit_energy.py: fitted on the batched ML.ENERGY rows of",
        "# energy_measurements.csv (grid in llmpara_core.metrics.energy_fit). Do not edit by hand.",
        "# Median |predicted / measured - 1| of J per output token (held out = leave one device",
        "# out for batched rows; batch-1 rows are never fitted):",
        *figs,
        "# Constants fitted without each device:",
        *held,
        'source = "fit on presets/tables/energy_measurements.csv (ML.ENERGY Leaderboard v2, '
        'batched rows E0219-E0272)"',
        "",
        "# leave-one-device-out medians (fractions), as llmpara validate --regime energy --loo",
        "[fit]",
        *[f"{k} = {v:.4f}" for k, v in (
            ("batched", f.median()), ("batched_1gpu", f.median("batched, 1 GPU")),
            ("batched_tp", f.median("batched, tensor parallel")),
            ("batch_1", f.median("batch 1")))],
        f"rows_batched = {n(None)}",
        f"rows_batch_1 = {n('batch 1')}",
        "",
        "[power]",
        f"active = {c.active:g}",
        f"compute = {c.compute:g}",
        f"memory = {c.memory:g}",
        f"host = {c.host:g}",
        ""])
    print(text)
    if not args.dry_run:
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
