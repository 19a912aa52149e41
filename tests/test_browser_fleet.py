"""The Fleet page in a real headless Chromium (Debian's, driven by Playwright) against
`streamlit run`: a link opens its traffic table, a run shows the plan, the cost chart and the
front, with no exception. Screenshot: tests/out/fleet.png. Skipped where Chromium is absent."""

from urllib.parse import urlencode

import pytest
from browser_util import CHROMIUM, IDLE, OUT, chromium, streamlit_server

from llmpara_core.presets import load_hardware

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")

LINK = [("fl_w", "tiny~Qwen2.5-0.5B~8.0~256~64~fixed~0.5~400.0~40.0~90.0"),
        ("fl_hw", load_hardware("8x-nvidia-l40s-pcie").name), ("fl_prec", "FP8"),
        ("fl_fw", "vllm"), ("fl_tp", "1"), ("fl_pp", "1"), ("fl_req", "40")]


def test_fleet_page_plans_from_a_link():
    with streamlit_server("streamlit-fleet.log") as url, chromium() as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
        page.goto(f"{url}/fleet?{urlencode(LINK)}")
        page.get_by_role("button", name="Plan the fleet").wait_for(timeout=90_000)
        page.wait_for_selector(IDLE, timeout=90_000)
        assert "Fleet" in page.get_by_role("heading", level=1).first.inner_text()
        assert "--executor ray" in page.content()
        page.get_by_role("button", name="Plan the fleet").click()
        metric = page.get_by_test_id("stMetric").filter(has_text="GPUs").first
        metric.wait_for(timeout=120_000)
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
        page.wait_for_selector(IDLE, timeout=90_000)
        assert page.get_by_test_id("stException").count() == 0
        assert int(metric.get_by_test_id("stMetricValue").inner_text()) >= 1
        assert page.locator('[data-testid="stPlotlyChart"]').count() == 2
        page.screenshot(path=str(OUT / "fleet.png"), full_page=True)
