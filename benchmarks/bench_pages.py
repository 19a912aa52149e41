"""Benchmark: server time of one page rerun, per page, under streamlit.testing.v1.AppTest;
with --browser, click-to-idle per page in a real headless Chromium.

    python benchmarks/bench_pages.py [--repeats N] [--pages overview roofline ...]
    python benchmarks/bench_pages.py --browser [--repeats 3] [--pages ...]

--browser: one `streamlit run` and Debian's Chromium at 1440×900 (tests/browser_util.py). Per
page, ``repeats`` times: open another page and let it settle, then click the page in the
navigation and time, on the page's own clock, from the click to the moment the page is settled
as a reader sees it (its title drawn, script stopped, no skeleton, no "Running", no stale
element, every visible chart drawn) and stays so for 600 ms (the 600 ms are not counted).
Prints the median and the spread per page.

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


# Started right before the click: the first moment the target page is settled and stays so for
# 600 ms, in ms after the click (null until then).
CLICK_WATCH_JS = r"""
(title) => {
  window.__done = null;
  const t0 = performance.now();
  let since = null;
  const settled = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    const h1 = document.querySelector('[data-testid="stMain"] h1');
    if (!h1 || !h1.innerText.trim().toLowerCase().startsWith(title.toLowerCase())) return false;
    if (document.querySelector('[data-testid="stSkeleton"], [data-testid="stAppSkeleton"], ' +
        '[data-stale="true"], [data-testid="stStatusWidgetRunningIcon"], ' +
        '[data-testid="stStatusWidgetRunningManIcon"]')) return false;
    for (const c of document.querySelectorAll('[data-testid="stPlotlyChart"]'))
      if (c.offsetParent !== null && !c.querySelector('.main-svg')) return false;
    return true;
  };
  const timer = setInterval(() => {
    const now = performance.now();
    if (!settled()) { since = null; return; }
    if (since === null) since = now;
    if (now - since >= 600) { window.__done = since - t0; clearInterval(timer); }
  }, 20);
}
"""


def bench_browser(pages: list[str], repeats: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from browser_util import app_pages, chromium, open_page, settle, streamlit_server
    nav = app_pages()
    wanted = [p for p in nav if not pages or any(n in p[2] or (n == "overview" and p[2] == "/")
                                                for n in pages)]
    with streamlit_server("bench-pages.log") as url, chromium() as browser:
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        page.goto(url + "/")
        settle(page)
        for section, title, path in wanted:
            other = nav[1] if path == "/" else nav[0]
            runs = []
            for _ in range(repeats):
                open_page(page, *other)
                page.evaluate(CLICK_WATCH_JS, title.split()[0])
                open_page(page, section, title, path)
                page.wait_for_function("() => window.__done !== null", timeout=300_000)
                runs.append(page.evaluate("window.__done") / 1e3)
            print(f"{title:14s} click-to-idle {_fmt(runs)}  runs "
                  + " ".join(f"{r * 1e3:.0f}" for r in runs), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pages", nargs="*", help="page names (e.g. overview roofline)")
    ap.add_argument("--browser", action="store_true",
                    help="click-to-idle per page in headless Chromium (default repeats: 3)")
    args = ap.parse_args()
    if args.browser:
        bench_browser(args.pages or [], args.repeats if args.repeats != 5 else 3)
        return
    pages = registered_pages()
    if args.pages:
        pages = [p for p in pages if any(n in p for n in args.pages)]
    for page in pages:
        r = bench(page, args.repeats)
        print(f"{Path(page).stem:24s} first {r['first_s'] * 1e3:6.0f} ms | rerun {_fmt(r['warm'])}"
              f" | new batch {_fmt(r['changed'])}")


if __name__ == "__main__":
    main()
