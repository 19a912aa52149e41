"""The sidebar's number boxes paint a shared link's values from their very first paint
(issue 16: under load a linked session showed Batch 1 although it held batch=N).

Streamlit's number box first paints the element's default and applies a value set through
``st.session_state`` one render later; ``ui.scenario._number_box`` gives the session's value as
the default. A MutationObserver installed before the page loads records the first value each
sidebar box ever shows, so the check does not depend on timing. Real headless Chromium against
`streamlit run` (skipped without Chromium).
"""

from urllib.parse import urlencode

import pytest
from browser_util import CHROMIUM, IDLE, chromium, streamlit_server

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")

# The first value every labelled sidebar <input> shows, recorded at DOM insertion (before any
# React effect of the same render can change it).
RECORD_FIRST_VALUES = """
window.__firstValues = {};
new MutationObserver(() => {
  for (const label of document.querySelectorAll('[data-testid=stSidebar] label')) {
    const name = label.textContent.trim();
    const input = label.htmlFor && document.getElementById(label.htmlFor);
    if (!(name in window.__firstValues) && input && input.tagName === 'INPUT') {
      window.__firstValues[name] = input.value;
    }
  }
}).observe(document, {subtree: true, childList: true});
"""

LINK = {"model": "llama-3-8b", "batch": "7", "prompt": "4096", "gen": "100", "kvbits": "8",
        "a_layers": "12", "bw": "1234"}
FIRST_SHOWN = {"Batch": "7", "Prompt": "4096", "Generate": "100", "KV bits": "8",
               "Layers": "12", "Memory bandwidth (GB/s)": "1234"}


@pytest.fixture(scope="module")
def page():
    with streamlit_server("streamlit-first-paint.log") as url, chromium() as browser:
        p = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
        p.add_init_script(RECORD_FIRST_VALUES)
        p.goto(f"{url}/?{urlencode(LINK)}")
        p.wait_for_selector('[data-testid="stMetricValue"]', timeout=90_000)
        p.wait_for_selector(IDLE, timeout=90_000)
        yield p


def test_linked_values_are_shown_from_the_first_paint(page):
    first = page.evaluate("window.__firstValues")
    assert {k: first.get(k) for k in FIRST_SHOWN} == FIRST_SHOWN


def _caption(page) -> str:
    return " ".join(page.get_by_test_id("stCaptionContainer").all_inner_texts())


def test_an_edit_sticks_across_later_reruns(page):
    """The default follows the session's value, so it must never reset a user's edit."""
    side = page.get_by_test_id("stSidebar")
    box = side.get_by_label("Batch", exact=True)
    box.fill("5")
    box.press("Enter")
    page.wait_for_function("() => document.body.innerText.includes('batch 5 ·')",
                           timeout=90_000)
    page.wait_for_selector(IDLE, timeout=90_000)
    prompt = side.get_by_label("Prompt", exact=True)
    prompt.fill("512")
    prompt.press("Enter")
    page.wait_for_function("() => document.body.innerText.includes('prompt 512 ·')",
                           timeout=90_000)
    page.wait_for_selector(IDLE, timeout=90_000)
    assert box.input_value() == "5"
    assert "batch 5 · prompt 512" in _caption(page)
    assert "batch=5" in page.url and "prompt=512" in page.url
