"""Load test (issue 16): SESSIONS concurrent headless-Chromium sessions against one
`streamlit run` on 127.0.0.1, each opening a shared link with its own batch, while the worst
hostile links of the issue are open in other tabs and the health endpoint is polled.

Marked ``slow`` (excluded from the default run by pyproject's addopts; run it with
``python -m pytest -m slow tests/test_load.py -s``). It prints one line of figures: sessions,
page renders (p50/p90 seconds to an idle page with its metrics), failures (timeouts,
exceptions, a Batch box not showing the link's value once the page is idle), health latency
(max) and the server's resident memory before and after.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from browser_util import CHROME_ARGS, CHROMIUM, IDLE, streamlit_server

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
async_api = pytest.importorskip("playwright.async_api")


@pytest.fixture(scope="module")
def server():
    with streamlit_server("streamlit-load.log") as url:
        yield url

SESSIONS = 12
ROUNDS = 3
PAGE_TIMEOUT_MS = 120_000
WORST_LINKS = (
    "/memory-tiers?" + urlencode({"mt_pins": "layers:0-99999999999999999999=SRAM"}),
    "/memory-tiers?" + urlencode({"model": "qwen3-30b-a3b", "a_experts": "1000000",
                                  "mt_zipf": "10", "mt_strategy": "hot-first"}),
    "/memory-tiers?a_layers=10000000",
    "/design-space?" + urlencode({"ds_edit": "true",
                                  "ds_ranges": "bw = " + "[" * 1800 + "]" * 1800}),
)


def _server_rss_bytes(url: str) -> int:
    """Resident memory of the process listening on the server's port (Linux /proc)."""
    port = url.rsplit(":", 1)[1]
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = status.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "streamlit" in cmd and f"--server.port={port}" in cmd:
            for line in (status.parent / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    return 0


async def _session(browser, url: str, batch: int, results: list, failures: list) -> None:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1100})
    page = await ctx.new_page()
    t0 = time.perf_counter()
    try:
        await page.goto(f"{url}/?{urlencode({'model': 'llama-3-8b', 'batch': batch})}",
                        timeout=PAGE_TIMEOUT_MS)
        await page.wait_for_selector('[data-testid="stMetricValue"]', timeout=PAGE_TIMEOUT_MS)
        await page.wait_for_selector(IDLE, timeout=PAGE_TIMEOUT_MS)
        results.append(time.perf_counter() - t0)
        if await page.get_by_test_id("stException").count():
            failures.append(f"batch {batch}: exception shown")
        box = page.get_by_test_id("stSidebar").get_by_label("Batch", exact=True).first
        shown = await box.input_value()
        if shown != str(batch):
            batch_in_url = parse_qs(urlparse(page.url).query).get("batch")
            failures.append(f"batch {batch}: Batch box shows {shown}; URL batch={batch_in_url}")
    except Exception as e:         # noqa: BLE001 - a failed session is a counted failure
        failures.append(f"batch {batch}: {type(e).__name__}: {str(e)[:80]}")
    finally:
        await ctx.close()


async def _worst(browser, url: str, path: str, failures: list) -> None:
    ctx = await browser.new_context()
    page = await ctx.new_page()
    try:
        await page.goto(url + path, timeout=PAGE_TIMEOUT_MS)
        await page.wait_for_selector(IDLE, timeout=PAGE_TIMEOUT_MS)
        if await page.get_by_test_id("stException").count():
            failures.append(f"{path[:40]}: exception shown")
    except Exception as e:         # noqa: BLE001
        failures.append(f"{path[:40]}: {type(e).__name__}")
    finally:
        await ctx.close()


async def _health(url: str, stop: asyncio.Event, latencies: list) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            await loop.run_in_executor(None, lambda: urllib.request.urlopen(
                f"{url}/_stcore/health", timeout=10).read())
            latencies.append(time.perf_counter() - t0)
        except OSError:
            latencies.append(float("inf"))
        await asyncio.sleep(0.5)


async def _run(url: str) -> dict:
    rss: list[int] = []
    results: list[float] = []
    failures: list[str] = []
    latencies: list[float] = []
    async with async_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                          args=CHROME_ARGS)
        stop = asyncio.Event()
        health = asyncio.create_task(_health(url, stop, latencies))
        for r in range(ROUNDS):
            jobs = [_session(browser, url, 1 + r * SESSIONS + i, results, failures)
                    for i in range(SESSIONS)]
            if r == 0:
                jobs += [_worst(browser, url, w, failures) for w in WORST_LINKS]
            await asyncio.gather(*jobs)
            rss.append(_server_rss_bytes(url))
        stop.set()
        await health
        await browser.close()
    return {"results": results, "failures": failures, "health": latencies, "rss": rss}


def test_concurrent_sessions_with_hostile_links_open(server):  # noqa: F811 - fixture
    rss_before = _server_rss_bytes(server)
    out = asyncio.run(_run(server))
    rss_after = _server_rss_bytes(server)
    res, fails, health = out["results"], out["failures"], out["health"]
    q = statistics.quantiles(res, n=10) if len(res) >= 2 else [float("nan")] * 9
    print(f"\n[load] sessions={SESSIONS}x{ROUNDS} (+{len(WORST_LINKS)} hostile links) "
          f"renders={len(res)} p50={statistics.median(res):.1f}s p90={q[8]:.1f}s "
          f"failures={len(fails)} health_max={max(health):.2f}s "
          f"health_p90={statistics.quantiles(health, n=10)[8]:.2f}s "
          f"rss_before={rss_before / 1e6:.0f}MB rss_after={rss_after / 1e6:.0f}MB "
          f"rss_per_round={[round(r / 1e6) for r in out['rss']]}MB")
    for f in fails:
        print("  failure:", f)
    assert len(res) >= 0.9 * SESSIONS * ROUNDS, fails
    assert max(health) < 5.0
