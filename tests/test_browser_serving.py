"""The Serving page's streaming select and runtime-reserve box in a real headless Chromium
(Debian's /usr/bin/chromium, driven by Playwright) at 1440 px: the stack default shows in the
empty box, a choice goes into the page's URL (the select is bound to it, the box writes it),
the engine and memory lines follow, the tooltip says what streaming costs, and nothing in the
engine inputs overflows its column. Screenshots go to tests/out/. Skipped without Chromium."""

from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from browser_util import CHROMIUM, OUT, chromium, settle, streamlit_server, wait_idle

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")

QUERY = dict(model="llama-3.1-8b", hardware="nvidia-h100-sxm", fw="tensorrt-llm",
             prompt="512", gen="128", sv_requests="100", sv_search="false")
OVERFLOW_JS = """() => {
  const box = document.querySelector('.st-key-sv_inputs');
  const out = [];
  box.querySelectorAll('[data-testid="stWidgetLabel"], [data-testid="stNumberInput"], '
                       + '[data-testid="stSelectbox"]').forEach(el => {
    if (el.scrollWidth > el.clientWidth + 1) out.push(el.innerText.slice(0, 60));
  });
  if (document.documentElement.scrollWidth > window.innerWidth) out.push('page scrolls sideways');
  return out;
}"""


def _captions(page) -> str:
    return " ".join(page.get_by_test_id("stCaptionContainer").all_inner_texts())


def test_streaming_and_reserve_controls_in_a_browser():
    OUT.mkdir(parents=True, exist_ok=True)
    with streamlit_server("streamlit-serving-engine.log") as url, chromium() as browser:
        page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
        page.goto(f"{url}/serving?{urlencode(QUERY)}")
        settle(page)
        assert page.get_by_test_id("stException").count() == 0
        engine = page.locator('.st-key-sv_inputs [data-testid="stExpander"]').filter(
            has_text="Engine (defaults")
        engine.locator("summary").last.click()
        reserve = page.locator(".st-key-sv_reserve input")
        reserve.wait_for(timeout=30_000)
        assert reserve.get_attribute("placeholder") == "stack default: 4 GiB"
        text = _captions(page)
        assert "runtime reserve 4 GiB (the stack default)" in text
        assert "Memory per device" in text and "79.6 GiB" in text
        assert not page.evaluate(OVERFLOW_JS)
        # the tooltip says what streaming costs
        page.locator(".st-key-sv_stream").get_by_test_id("stTooltipHoverTarget").first.hover()
        tip = page.get_by_test_id("stTooltipContent")
        tip.wait_for(timeout=10_000)
        assert "per-sequence host time" in tip.inner_text()
        # choices go into the URL and the results
        page.locator(".st-key-sv_stream").get_by_test_id("stSelectbox").click()
        page.get_by_role("option", name="on", exact=True).click()
        wait_idle(page)
        reserve.fill("3")
        reserve.press("Enter")
        page.wait_for_function("() => location.search.includes('sv_reserve=3')",
                               timeout=60_000)
        settle(page)
        q = parse_qs(urlparse(page.url).query)
        assert q["sv_stream"] == ["on"] and q["sv_reserve"] == ["3"]
        text = _captions(page)
        assert "runtime reserve 3 GiB," in text and "streaming on (chosen;" in text
        assert "reserve 3 GiB" in text
        assert page.get_by_test_id("stException").count() == 0
        page.screenshot(path=str(OUT / "serving-engine-controls.png"))
