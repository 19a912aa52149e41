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
