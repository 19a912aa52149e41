"""Peak memory of the Design space page's 10^6-design run, measured in-process.

    PYTHONPATH=$PWD python scripts/measure_dse_memory.py [--designs 1000000] [--method lhs]

Runs the real page under streamlit.testing.v1.AppTest (same code path as the browser: the
entrypoint, the sidebar, the page's cached run and its charts), first with a small sample
(the app and its libraries loaded: the baseline), then with ``--designs``. Prints the
process's peak resident set size (VmHWM from /proc/self/status, Linux) after each run and the
difference, plus the wall time of the big run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _vm(field: str) -> float:
    """A /proc/self/status field in MB (10^6 bytes)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"{field} not in /proc/self/status")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--designs", type=int, default=1_000_000)
    ap.add_argument("--method", default="Latin hypercube", choices=["Random", "Latin hypercube"])
    a = ap.parse_args()
    from apptest_util import open_page
    page = "app_pages/design_space_page.py"
    at = open_page(page, timeout=3600, ds_method=a.method, ds_n="1000")
    assert not at.exception, at.exception
    base_hwm, base_rss = _vm("VmHWM"), _vm("VmRSS")
    print(f"baseline (app loaded, 1,000 designs): peak RSS {base_hwm:.0f} MB, RSS {base_rss:.0f} MB")
    t0 = time.monotonic()
    at = open_page(page, timeout=3600, ds_method=a.method, ds_n=str(a.designs))
    dt = time.monotonic() - t0
    assert not at.exception, at.exception
    shown = next(m.value for m in at.metric if m.label == "Designs evaluated")
    hwm, rss = _vm("VmHWM"), _vm("VmRSS")
    print(f"{a.designs:,} designs ({a.method}, 'Designs evaluated' shows {shown}): peak RSS "
          f"{hwm:.0f} MB (+{hwm - base_hwm:.0f} MB over the baseline), RSS after the run "
          f"{rss:.0f} MB; {dt:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
