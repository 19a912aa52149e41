"""Benchmark: the server's resident memory (RSS) after one session and after a crowd of
sessions has closed (issue 29: 20 sessions took a server from 70 MB to 340 MB and it stayed at
~320 MB after they closed).

    python benchmarks/bench_memory.py [--sessions 20] [--concurrent 5]

One `streamlit run` and Debian's headless Chromium (tests/browser_util.py). Opens one session
(the Overview with a shared link, waits until it is idle, closes it) and reads the server's
VmRSS; then ``sessions`` sessions, ``concurrent`` at a time, each with its own batch and each
visiting the Overview, Roofline and Serving pages; closes them all, waits the disconnected-
session TTL (.streamlit/config.toml) plus 5 s, opens one more session (which lets Streamlit
drop the expired ones), waits one trim period (ui/memory.py) plus 5 s, and reads VmRSS again.
Prints the levels; the "Done when" of issue 29 is: after the sessions close, within 50 MB of
the level after one session.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from browser_util import CHROME_ARGS, CHROMIUM, IDLE, server_pid, streamlit_server  # noqa: E402

SESSION_TTL_S = 30      # .streamlit/config.toml server.disconnectedSessionTTL
TRIM_EVERY_S = 15       # ui/memory.py
TIMEOUT_MS = 240_000


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024 * 1.048576      # kB -> MB (1e6 B)
    return 0.0


async def _session(browser, url: str, batch: int, pages: tuple[str, ...]) -> float:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await ctx.new_page()
    t0 = time.perf_counter()
    try:
        for p in pages:
            await page.goto(f"{url}/{p}?{urlencode({'model': 'llama-3-8b', 'batch': batch})}",
                            timeout=TIMEOUT_MS)
            await page.wait_for_selector('[data-testid="stMain"]', timeout=TIMEOUT_MS)
            await page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
        return time.perf_counter() - t0
    finally:
        await ctx.close()


async def _run(url: str, pid: int, sessions: int, concurrent: int) -> dict:
    from playwright.async_api import async_playwright
    out = {"start": _rss_mb(pid)}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                          args=CHROME_ARGS)
        await _session(browser, url, 3, ("",))
        await asyncio.sleep(2)
        out["one"] = _rss_mb(pid)
        peak, done, failed = out["one"], 0, 0
        for start in range(0, sessions, concurrent):
            res = await asyncio.gather(*[
                _session(browser, url, 10 + start + i, ("", "roofline", "serving"))
                for i in range(min(concurrent, sessions - start))], return_exceptions=True)
            done += sum(not isinstance(r, BaseException) for r in res)
            failed += sum(isinstance(r, BaseException) for r in res)
            peak = max(peak, _rss_mb(pid))
        out.update(peak=peak, done=done, failed=failed, closed=_rss_mb(pid))
        await asyncio.sleep(SESSION_TTL_S + 5)
        await _session(browser, url, 4, ("",))
        await asyncio.sleep(TRIM_EVERY_S + 5)
        out["after"] = _rss_mb(pid)
        await browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--concurrent", type=int, default=5)
    a = ap.parse_args()
    if CHROMIUM is None:
        sys.exit("Debian's chromium is not installed")
    with streamlit_server("streamlit-bench-memory.log") as url:
        pid = server_pid(url.rsplit(":", 1)[1])
        out = asyncio.run(_run(url, pid, a.sessions, a.concurrent))
    print(f"server RSS: start {out['start']:.0f} MB; after one session {out['one']:.0f} MB; "
          f"peak with {a.sessions} sessions ({a.concurrent} at a time, 3 pages each; "
          f"{out['done']} completed, {out['failed']} failed) {out['peak']:.0f} MB; right after "
          f"they closed {out['closed']:.0f} MB; after the TTL, one more session and a trim "
          f"{out['after']:.0f} MB ({out['after'] - out['one']:+.0f} MB vs one session)")


if __name__ == "__main__":
    main()
