"""Look at dashboard pages in headless Chromium at 1440 px (light and dark), write screenshots
and report the time from a widget change to script idle.

    PYTHONPATH=$PWD python scripts/look_pages.py --out /tmp/look metrics design-space

Each page: load (timed to idle), screenshot per theme, then per ``--change`` action the
idle time after it. Uses Debian's /usr/bin/chromium; never downloads a browser.
Prints one line per measurement: ``page theme step seconds``. Also reports Plotly axes with a
log range over 12 decades or more than 30 tick labels, clipped metric values, and any request
to a host other than 127.0.0.1.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'

# page -> list of (step name, javascript-free playwright action on the page)
CHANGES = {
    "metrics": [("view Cost", lambda p: p.get_by_test_id("stMain").get_by_text("Cost & carbon", exact=True).first.click()),
                ("view Energy", lambda p: p.get_by_test_id("stMain").get_by_text("Energy", exact=True).first.click()),
                ("phase Prefill", lambda p: p.get_by_test_id("stMain").get_by_text("Prefill", exact=True).first.click())],
    "validation": [("metric TTFT", lambda p: p.get_by_test_id("stMain").get_by_text("TTFT", exact=True).first.click())],
    "speculative": [("view Batch", lambda p: p.get_by_test_id("stMain").get_by_text("Batch", exact=True).first.click())],
    "sharding": [("view Scaling", lambda p: p.get_by_test_id("stMain").get_by_text("Scaling", exact=True).first.click())],
    "design-space": [("multipliers", lambda p: p.get_by_test_id("stMain").get_by_text("× 0.25 / × 4", exact=True).first.click())],
    "memory-tiers": [("view Time", lambda p: p.get_by_test_id("stMain").get_by_text("Time per tier", exact=True).first.click()),
                     ("view Precision", lambda p: p.get_by_test_id("stMain").get_by_text("Precision sweep", exact=True).first.click())],
}

CHECK_JS = """() => {
  const out = [];
  document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot').forEach((el, i) => {
    const lay = el._fullLayout; if (!lay) return;
    Object.keys(lay).filter(k => /^[xy]axis\\d*$/.test(k)).forEach(k => {
      const ax = lay[k];
      if (ax.type === 'log' && ax.range && Math.abs(ax.range[1] - ax.range[0]) > 12)
        out.push(`chart ${i} ${k} spans ${Math.abs(ax.range[1]-ax.range[0]).toFixed(1)} decades`);
      const n = el.querySelectorAll(`g.${k.replace('axis','')}tick text`).length;
      if (n > 30) out.push(`chart ${i} ${k} has ${n} ticks`);
    });
  });
  document.querySelectorAll('[data-testid="stMetricValue"]').forEach(el => {
    const t = el.querySelector('div') || el;
    if (t.scrollWidth > t.clientWidth + 1) out.push('clipped metric: ' + el.innerText);
  });
  return out;
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# No element of the page is still a placeholder (a screenshot taken while the script was
# rerunning under load showed Streamlit's skeletons; the browser tests wait the same way).
NO_SKELETON_JS = """() => !document.querySelector('[data-testid="stSkeleton"], ' +
    '[data-testid="stAppSkeleton"], [data-testid="stSkeletonElement"]')"""


def _idle(page, t0: float) -> float:
    page.wait_for_timeout(150)
    page.wait_for_selector(IDLE, timeout=120_000)
    page.wait_for_function(NO_SKELETON_JS, timeout=120_000)
    return time.monotonic() - t0


DRAWN_JS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
    .every(c => c.querySelector('.main-svg'))"""


def _drawn(page) -> None:
    """Wait (at most 30 s) until every Plotly chart has drawn, for the screenshot."""
    try:
        page.wait_for_function(DRAWN_JS, timeout=30_000)
    except Exception:  # noqa: BLE001 - a screenshot anyway
        pass
    page.wait_for_timeout(800)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--out", default="/tmp/look")
    ap.add_argument("--query", default="")
    ap.add_argument("--themes", default="light,dark")
    ap.add_argument("--height", type=int, default=2400)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    srv = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "streamlit_app.py",
                            "--server.headless=true", "--server.address=127.0.0.1",
                            f"--server.port={port}", "--browser.gatherUsageStats=false",
                            "--server.fileWatcherType=none"], cwd=ROOT,
                           stdout=open(out / "server.log", "w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                        args=ARGS)
            for theme in a.themes.split(","):
                ctx = browser.new_context(viewport={"width": 1440, "height": a.height},
                                          color_scheme=theme)
                foreign = []
                ctx.on("request", lambda r: None if r.url.startswith(base) or
                       r.url.startswith("data:") or r.url.startswith("blob:")
                       else foreign.append(r.url))
                for name in a.pages:
                    page = ctx.new_page()
                    t0 = time.monotonic()
                    page.goto(f"{base}/{name}{a.query}")
                    page.wait_for_selector('[data-testid="stMain"] h1', timeout=120_000)
                    print(name, theme, "load", f"{_idle(page, t0):.2f}", flush=True)
                    _drawn(page)
                    page.screenshot(path=str(out / f"{name}-{theme}.png"))
                    for problem in page.evaluate(CHECK_JS):
                        print(name, theme, "PROBLEM", problem, flush=True)
                    if page.get_by_test_id("stException").count():
                        print(name, theme, "PROBLEM exception", flush=True)
                    for step, act in CHANGES.get(name, []):
                        if act is None:
                            continue
                        t0 = time.monotonic()
                        act(page)
                        print(name, theme, step, f"{_idle(page, t0):.2f}", flush=True)
                        _drawn(page)
                        tag = step.replace(" ", "_")
                        page.screenshot(path=str(out / f"{name}-{theme}-{tag}.png"))
                        for problem in page.evaluate(CHECK_JS):
                            print(name, theme, step, "PROBLEM", problem, flush=True)
                    page.close()
                if foreign:
                    print("PROBLEM foreign requests:", sorted(set(foreign))[:5], flush=True)
                ctx.close()
            browser.close()
    finally:
        srv.terminate()
        srv.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
