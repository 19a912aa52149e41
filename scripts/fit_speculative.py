"""Fit the speculation costs on the published batch sweeps and rewrite their table.

    python scripts/fit_speculative.py              # fit, print, rewrite the table
    python scripts/fit_speculative.py --dry-run    # fit and print, write nothing

Reads ``presets/tables/speculative_measurements.csv`` (the sweeps: rows of one published
series at several batch sizes), fits the two constants of ``llmpara_core.speculative.costs`` on
a grid (alpha fitted on each sweep's smallest batch), checks them leave-one-sweep-out and writes
``presets/tables/speculative_costs.toml`` with the figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.speculative.fit import fit_costs   # noqa: E402
from llmpara_core.units import S_PER_US               # noqa: E402

OUT = ROOT / "presets" / "tables" / "speculative_costs.toml"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    f = fit_costs()
    c = f.costs
    lines = []
    for s, held in f.held_out:
        errs = ", ".join(f"{e:+.1%}" for e in s.errors)
        lines.append(f"#   {s.method} ({s.profile}): fitted without it draft_seq_share "
                     f"{held.draft_seq_share:g}, iteration_seq_us "
                     f"{held.iteration_seq_s / S_PER_US:g}; errors {errs}")
    text = "\n".join([
        "# Costs of speculative decoding outside any pass's operators "
        "(llmpara_core.speculative.costs).",
        "# Written by scripts/fit_speculative.py: fitted on the published batch sweeps of",
        "# speculative_measurements.csv (alpha fitted on each sweep's smallest batch, both "
        "constants",
        "# shared by every sweep; grid in llmpara_core.speculative.fit). Do not edit by hand.",
        f"# In-sample median |error| {f.in_sample_median_abs_error:.1%}; leave-one-sweep-out "
        f"{f.held_out_median_abs_error:.1%}",
        f"# over {len(f.held_out_errors)} predicted rows of {len(f.held_out)} sweeps:",
        *lines,
        'source = "fit on presets/tables/speculative_measurements.csv batch sweeps '
        '(S0062-S0064, S0089-S0104)"',
        "",
        "# leave-one-sweep-out median |error| (fraction), as llmpara validate --regime "
        "speculative --loo",
        "[fit]",
        f"held_out = {f.held_out_median_abs_error:.4f}",
        f"in_sample = {f.in_sample_median_abs_error:.4f}",
        f"rows = {len(f.held_out_errors)}",
        f"sweeps = {len(f.held_out)}",
        "",
        "[costs]",
        f"draft_seq_share = {c.draft_seq_share:g}",
        f"iteration_seq_us = {c.iteration_seq_s / S_PER_US:g}",
        ""])
    print(text)
    if not args.dry_run:
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
