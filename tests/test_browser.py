"""A real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright) against
`streamlit run` on 127.0.0.1: a shared link reopens its scenario, the numbers follow the link's
batch, a hostile query string shows warnings and no exception, and the Roofline page draws.
Screenshots go to tests/out/. Skipped, with the reason, where Chromium is absent."""

from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from browser_util import CHROMIUM, IDLE, OUT, chromium, streamlit_server

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _open(browser, url: str):
    page = browser.new_context(viewport={"width": 1400, "height": 1300}).new_page()
    page.goto(url)
    page.wait_for_selector('[data-testid="stMetricValue"], [data-testid="stPlotlyChart"]',
                           timeout=90_000)
    page.wait_for_selector(IDLE, timeout=90_000)
    return page


def _metric(page, label: str) -> str:
    metric = page.get_by_test_id("stMetric").filter(has_text=label).first
    return metric.get_by_test_id("stMetricValue").inner_text()


LINK = {"v": "1", "model": "mixtral-8x7b", "hardware": "nvidia-a100-sxm-80gb", "prec": "W4A16",
        "batch": "2", "prompt": "1024", "gen": "128"}


def test_deep_link_on_a_fresh_server_opens_its_page(server, browser):
    """The module's first page load: a cold server process must route /roofline straight to
    the Roofline page (no "Page not found" from Streamlit's legacy pages/ mode)."""
    page = _open(browser, f"{server}/roofline?{urlencode(LINK)}")
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    assert page.get_by_test_id("stException").count() == 0
    assert "Page not found" not in page.content()
    assert "Roofline" in page.get_by_role("heading", level=1).first.inner_text()
    page.screenshot(path=str(OUT / "roofline.png"))


def test_default_page_by_its_own_path(server, browser):
    """/overview (typed or bookmarked; the default page itself lives at "/") opens the Overview
    with the link's scenario, not Streamlit's "Page not found" dialog."""
    page = _open(browser, f"{server}/overview?{urlencode(LINK)}")
    assert "Page not found" not in page.content()
    assert page.get_by_test_id("stException").count() == 0
    assert "Overview" in page.get_by_role("heading", level=1).first.inner_text()
    assert _metric(page, "Parameters (total)") != ""
    assert parse_qs(urlparse(page.url).query)["model"] == ["mixtral-8x7b"]


def test_shared_link_reopens_scenario_and_follows_batch(server, browser):
    page = _open(browser, f"{server}/?{urlencode(LINK)}")
    # under load the sidebar's select boxes can reach the DOM after the script is idle:
    # wait for all three (model, hardware, stack) before reading them
    page.wait_for_function(
        "document.querySelectorAll('[data-testid=\"stSidebar\"] "
        "[data-testid=\"stSelectbox\"]').length >= 3", timeout=60_000)
    boxes = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox")
    shown = " ".join(boxes.nth(i).inner_text() + " " + (boxes.nth(i).locator("input").first
                                                         .get_attribute("value") or "")
                     for i in range(boxes.count()))
    assert "Mixtral 8x7B" in shown, shown
    assert "A100" in shown, shown
    assert page.get_by_test_id("stException").count() == 0
    agg_2 = _metric(page, "Decode tok/s aggregate · estimated")
    q = parse_qs(urlparse(page.url).query)
    assert q["model"] == ["mixtral-8x7b"] and q["batch"] == ["2"]
    page.screenshot(path=str(OUT / "overview-link.png"))

    other = _open(browser, f"{server}/?{urlencode({**LINK, 'batch': '32'})}")
    agg_32 = _metric(other, "Decode tok/s aggregate · estimated")
    assert agg_32 != agg_2
    assert float(agg_32.split()[0].replace(",", "")) > float(agg_2.split()[0].replace(",", ""))


def test_hostile_query_string_is_harmless(server, browser):
    page = _open(browser, f"{server}/?model=%00<script>window.__pwned=1</script>"
                          "&batch=-7&prompt=1e999")
    assert page.get_by_test_id("stException").count() == 0
    warnings = page.get_by_test_id("stAlertContentWarning").all_inner_texts()
    text = " ".join(warnings)
    for key in ("model", "batch", "prompt"):
        assert key in text, key
    assert page.evaluate("window.__pwned === undefined")
    page.screenshot(path=str(OUT / "hostile-link.png"))
