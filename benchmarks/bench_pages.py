"""Benchmark: server time of one page rerun, per page, under streamlit.testing.v1.AppTest.

    python benchmarks/bench_pages.py [--repeats N] [--pages overview roofline ...]

For every registered page: the first run (imports, presets, cold caches) once, then the median
and spread of (a) a plain rerun (every cache warm) and (b) a rerun after the sidebar batch
changed to a value not seen before (the page's analyses recomputed). Times are the wall time of
``AppTest.run()``, i.e. the whole script of the entrypoint and the page on the server; the
browser's drawing is not included. Target (issue: Streamlit app): well under 0.5 s per rerun.
"""

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").disabled = True

from streamlit.testing.v1 import AppTest  # noqa: E402


def registered_pages() -> list[str]:
    """Page files in the entrypoint's PAGES list (read as text: importing it runs Streamlit)."""
    import re
    text = (ROOT / "streamlit_app.py").read_text()
    return re.findall(r'"(app_pages/[a-z0-9_]+\.py)"', text)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench(page: str, repeats: int) -> dict:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=120)
    at.run()
    at.switch_page(page)
    first = _timed(at.run)
    if at.exception:
        raise SystemExit(f"{page}: exception {at.exception[0].value}")
    warm = [_timed(at.run) for _ in range(repeats)]
    changed = []
    for i in range(repeats):
        at.sidebar.number_input(key="batch").set_value(2 + i)
        changed.append(_timed(at.run))
    return {"page": page, "first_s": first, "warm": warm, "changed": changed}


def _fmt(xs: list[float]) -> str:
    return (f"median {statistics.median(xs) * 1e3:6.0f} ms (min {min(xs) * 1e3:.0f}, "
            f"max {max(xs) * 1e3:.0f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pages", nargs="*", help="page names (e.g. overview roofline)")
    args = ap.parse_args()
    pages = registered_pages()
    if args.pages:
        pages = [p for p in pages if any(n in p for n in args.pages)]
    for page in pages:
        r = bench(page, args.repeats)
        print(f"{Path(page).stem:24s} first {r['first_s'] * 1e3:6.0f} ms | rerun {_fmt(r['warm'])}"
              f" | new batch {_fmt(r['changed'])}")


if __name__ == "__main__":
    main()
