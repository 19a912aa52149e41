"""Shared helpers of the browser tests: one `streamlit run` server on 127.0.0.1 and Debian's
headless Chromium driven by Playwright (never `playwright install`). Importing this module from
a test file that has already skipped itself (no Chromium) is safe: nothing runs at import."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "out"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium")
                                        else None)
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(log_name: str = "streamlit-server.log", timeout_s: float = 60):
    """`streamlit run streamlit_app.py` on a free local port; yields its base URL and stops the
    process (by its own PID) afterwards."""
    port = free_port()
    OUT.mkdir(parents=True, exist_ok=True)
    log = open(OUT / log_name, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.headless=true",
         "--server.address=127.0.0.1", f"--server.port={port}",
         "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError(f"streamlit did not become healthy in {timeout_s:.0f} s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextlib.contextmanager
def chromium():
    from playwright import sync_api
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROME_ARGS)
        try:
            yield b
        finally:
            b.close()


def wait_idle(page, timeout_ms: int = 90_000) -> None:
    """Wait until the script has run and stopped (a rerun may start right after a widget
    change, so the 'running' state is awaited briefly first)."""
    page.wait_for_selector(IDLE, timeout=timeout_ms)


# What a reader sees as "done": the script stopped, no grey skeleton, no "Running…" status, no
# faded element left from the previous run, a page title drawn and every visible Plotly chart
# drawn — and all of that on several polls in a row (a rerun can start right after one ends).
SETTLED_JS = r"""
() => {
  const ok = (() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector('[data-testid="stSkeleton"], [data-testid="stAppSkeleton"], ' +
        '[data-testid="stSkeletonElement"]')) return false;
    if (document.querySelector('[data-testid="stStatusWidgetRunningIcon"], ' +
        '[data-testid="stStatusWidgetRunningManIcon"]')) return false;
    const sw = document.querySelector('[data-testid="stStatusWidget"]');
    if (sw && /Running/i.test(sw.innerText || '')) return false;
    if (document.querySelector('[data-stale="true"]')) return false;
    if (!document.querySelector('[data-testid="stMain"] h1')) return false;
    for (const c of document.querySelectorAll('[data-testid="stPlotlyChart"]'))
      if (c.offsetParent !== null && !c.querySelector('.main-svg')) return false;
    return true;
  })();
  window.__settled = ok ? (window.__settled || 0) + 1 : 0;
  return window.__settled >= 3;
}
"""


UNSETTLED_JS = r"""
() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return {script: app && app.getAttribute('data-test-script-state'),
          skeletons: document.querySelectorAll('[data-testid="stSkeleton"], ' +
            '[data-testid="stAppSkeleton"], [data-testid="stSkeletonElement"]').length,
          running: !!document.querySelector('[data-testid="stStatusWidgetRunningIcon"], ' +
            '[data-testid="stStatusWidgetRunningManIcon"]'),
          stale: Array.from(document.querySelectorAll('[data-stale="true"]')).map(
            e => (e.getAttribute('data-testid') || e.tagName) + ': ' +
                 (e.innerText || '').slice(0, 60)).slice(0, 5),
          title: !!document.querySelector('[data-testid="stMain"] h1'),
          undrawn_charts: Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'))
            .filter(c => c.offsetParent !== null && !c.querySelector('.main-svg')).length};
}
"""


def settle(page, timeout_ms: int = 300_000) -> None:
    """Wait for the state a reader sees as finished (``SETTLED_JS``), polling every 200 ms;
    raises (the test fails) if it is not reached within ``timeout_ms``. The timeout is a
    ceiling for a saturated shared machine, not a pause: a quiet machine settles in ~1 s."""
    page.evaluate("() => { window.__settled = 0; }")
    try:
        page.wait_for_function(SETTLED_JS, polling=200, timeout=timeout_ms)
    except Exception as e:               # say which part of "settled" never came
        raise AssertionError(f"{page.url}: not settled after {timeout_ms / 1e3:.0f} s: "
                             f"{page.evaluate(UNSETTLED_JS)}") from e


def app_pages() -> list[tuple[str, str, str]]:
    """(section, title, URL path) of every page in the entrypoint's navigation, read from
    ``streamlit_app.py``'s PAGES (as text: importing it runs Streamlit)."""
    import re
    text = (ROOT / "streamlit_app.py").read_text()
    rows = re.findall(r'\("([^"]+)", "app_pages/[a-z0-9_]+\.py", "([^"]+)"', text)
    out = []
    for i, (section, title) in enumerate(rows):
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        out.append((section, title, "/" if i == 0 else f"/{slug}"))
    return out


def open_page(page, section: str, title: str, path: str, timeout_ms: int = 300_000) -> None:
    """In-app navigation, as a reader does it (the scenario stays in the URL): the top bar's
    section menu (wide screens) or the sidebar's list (narrow screens: the sidebar is opened
    first, and its folded list unfolded with "View n more"); then waits until the page has
    settled."""
    from urllib.parse import urlparse
    direct = page.get_by_test_id("stTopNavLink").filter(has_text=title)
    top = page.get_by_test_id("stTopNavSection").filter(has_text=section)
    if direct.count() and direct.first.is_visible():
        direct.first.click()
    elif top.count() and top.first.is_visible():
        top.first.click()
        page.get_by_test_id("stTopNavDropdownLink").filter(has_text=title).first.click()
    else:
        link = page.get_by_test_id("stSidebarNavLink").filter(has_text=title).first
        shown = """() => { const s = document.querySelector('[data-testid="stSidebar"]');
            const r = s && s.getBoundingClientRect(); return !!s && r.left >= 0 && r.width > 0; }"""
        if not page.evaluate(shown):          # a phone: the sidebar is shut (off-screen)
            page.get_by_test_id("stExpandSidebarButton").click()
            page.wait_for_function(shown, timeout=timeout_ms)
        if not link.is_visible():             # the folded list: "View 3 more" hides the rest
            page.get_by_test_id("stSidebarNavViewButton").click()
            link.wait_for(state="visible", timeout=10_000)
        link.click()
        if page.evaluate(shown):              # shut it again, as a reader would, to see the page
            page.get_by_test_id("stSidebarCollapseButton").click(force=True)
            page.wait_for_function(f"() => !({shown})()", timeout=timeout_ms)
    page.wait_for_url(lambda u: urlparse(u).path == path, timeout=timeout_ms)
    settle(page, timeout_ms)


def server_pid(url_or_port: str) -> int | None:
    """The pid of the Streamlit server listening on this port (a URL or a bare port), from
    /proc; None if there is none."""
    port = str(url_or_port).rsplit(":", 1)[-1]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = cmdline.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "streamlit" in cmd and f"--server.port={port}" in cmd:
            return int(cmdline.parent.name)
    return None
