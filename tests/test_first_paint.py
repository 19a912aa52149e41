"""The sidebar's number boxes, and a page's own URL-bound number boxes (``ui.url_widgets.url_number``),
paint a shared link's values from their very first paint (issue 16: under load a linked session
showed Batch 1 although it held batch=N).

Streamlit's number box first paints the element's default and applies a value set through
``st.session_state`` one render later; ``ui.sidebar._number_box`` gives the session's value as
the default (and ``url_number`` gives the link's value). A MutationObserver installed before the
page loads records the first value each box ever shows, so the check does not depend on timing. Real headless Chromium against
`streamlit run` (skipped without Chromium).

Also: the blank-by-default boxes (``ui.page_inputs.optional_number``: Sharding's link bandwidth
and latency, Metrics' embodied carbon) paint a link's value first and can still be emptied, and
the URL-bound select boxes, toggles and segmented controls (``bind="query-params"``) paint a
link's choice first (they did already; the test keeps it so).
"""

from urllib.parse import urlencode

import pytest
from browser_util import CHROMIUM, IDLE, chromium, streamlit_server

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")

# The first value every labelled <input> shows, recorded at DOM insertion (before any React
# effect of the same render can change it): sidebar boxes in __firstValues, the page's own
# boxes (main area) in __firstMain.
RECORD_FIRST_VALUES = """
window.__firstValues = {};
window.__firstMain = {};
new MutationObserver(() => {
  for (const label of document.querySelectorAll('label')) {
    const seen = label.closest('[data-testid=stSidebar]') ? window.__firstValues
                                                          : window.__firstMain;
    const name = label.textContent.trim();
    const input = label.htmlFor && document.getElementById(label.htmlFor);
    if (!(name in seen) && input && input.tagName === 'INPUT') {
      seen[name] = input.value;
    }
  }
}).observe(document, {subtree: true, childList: true});
"""

# The first state of every labelled widget of the main area (number and text boxes: the value;
# select boxes: the shown option; multiselects: the chosen options; toggles: checked; segmented
# controls: the active option),
# recorded when it first appears, keyed by label.
RECORD_FIRST_STATES = """
window.__firstStates = {};
window.__widgetState = function (c) {
  const lab = c.querySelector('[data-testid="stWidgetLabel"]');
  const name = lab ? lab.innerText.trim() : '';
  if (!name || c.closest('[data-testid=stSidebar]')) return null;
  if (c.querySelector('[data-testid="stMultiSelect"]'))
    return [name, Array.from(c.querySelectorAll('[data-tag]'))
      .map(t => t.getAttribute('aria-label')).join('|')];
  const check = c.querySelector('input[type=checkbox]');
  const group = c.querySelector('[data-testid="stButtonGroup"]');
  const input = c.querySelector('input');
  if (check) return [name, check.checked ? 'on' : 'off'];
  if (group && !group.querySelector('button')) return null;    // buttons not drawn yet
  if (group) return [name, Array.from(group.querySelectorAll('button'))
    .filter(b => b.getAttribute('aria-checked') === 'true')
    .map(b => b.innerText.trim()).join('|')];
  if (input) return [name, input.value];
  return null;
};
new MutationObserver(() => {
  for (const c of document.querySelectorAll('[data-testid="stElementContainer"]')) {
    const s = window.__widgetState(c);
    if (s && !(s[0] in window.__firstStates)) window.__firstStates[s[0]] = s[1];
  }
}).observe(document, {subtree: true, childList: true});
"""

LINK = {"model": "llama-3-8b", "batch": "7", "prompt": "4096", "gen": "100", "kvbits": "8",
        "a_layers": "12", "bw": "1234"}
FIRST_SHOWN = {"Batch": "7", "Prompt": "4096", "Output": "100", "KV bits": "8",
               "Layers": "12", "Memory bandwidth (GB/s)": "1234"}


# The Sharding page's own boxes (ui.url_widgets.url_number), none at its default.
PAGE_LINK = {"model": "llama-3-8b", "batch": "4", "sh_tp": "2", "sh_pp": "2", "sh_dp": "2",
             "sh_mb": "3", "sh_overlap": "0.5"}
PAGE_FIRST_SHOWN = {"TP": "2", "PP": "2", "DP": "2", "Microbatches": "3", "Comm. overlap": "0.50"}


@pytest.fixture(scope="module")
def server():
    with streamlit_server("streamlit-first-paint.log") as url, chromium() as browser:
        yield url, browser


def _open(server, path: str, query, ready: str):
    url, browser = server
    p = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
    p.add_init_script(RECORD_FIRST_VALUES)
    p.add_init_script(RECORD_FIRST_STATES)
    p.goto(f"{url}{path}?{urlencode(query)}")
    p.wait_for_selector(ready, timeout=90_000)
    p.wait_for_selector(IDLE, timeout=90_000)
    return p


@pytest.fixture(scope="module")
def page(server):
    p = _open(server, "/", LINK, '[data-testid="stMetricValue"]')
    yield p
    p.context.close()


@pytest.fixture(scope="module")
def sharding(server):
    p = _open(server, "/sharding", PAGE_LINK, '[data-testid="stMain"] [data-testid="stButtonGroup"]')
    yield p
    p.context.close()


def test_linked_values_are_shown_from_the_first_paint(page):
    first = page.evaluate("window.__firstValues")
    assert {k: first.get(k) for k in FIRST_SHOWN} == FIRST_SHOWN


def _caption(page) -> str:
    return " ".join(page.get_by_test_id("stCaptionContainer").all_inner_texts())


def _enter(page, box, text: str, condition: str):
    """Type ``text`` into ``box``, then wait until the JS ``condition`` holds and the page is
    idle; returns the box."""
    box.fill(text)
    box.press("Enter")
    page.wait_for_function(f"() => {condition}", timeout=90_000)
    page.wait_for_selector(IDLE, timeout=90_000)
    return box


def test_an_edit_sticks_across_later_reruns(page):
    """The default follows the session's value, so it must never reset a user's edit."""
    side = page.get_by_test_id("stSidebar")
    box = _enter(page, side.get_by_label("Batch", exact=True), "5",
                 "document.body.innerText.includes('batch 5 ·')")
    _enter(page, side.get_by_label("Prompt", exact=True), "512",
           "document.body.innerText.includes('prompt 512 ·')")
    assert box.input_value() == "5"
    assert "batch 5 · prompt 512" in _caption(page)
    assert "batch=5" in page.url and "prompt=512" in page.url


def _first_shown(page, record: str, expected: dict) -> dict:
    """The first value the recorder ``window.<record>`` saw for each of ``expected``'s labels.
    Under load a page's columns can reach the DOM after the script went idle; the recorder
    keeps each element's first value whenever it comes, so wait for all of them."""
    page.wait_for_function(f"names => names.every(n => n in window.{record})",
                           arg=list(expected), timeout=90_000)
    first = page.evaluate(f"window.{record}")
    return {k: first.get(k) for k in expected}


def test_page_local_boxes_show_the_link_from_the_first_paint(sharding):
    assert _first_shown(sharding, "__firstMain", PAGE_FIRST_SHOWN) == PAGE_FIRST_SHOWN


def test_a_page_local_edit_sticks_across_later_reruns(sharding):
    """Edits of a page's own boxes survive reruns caused by other widgets, in the box and in
    the URL."""
    main = sharding.get_by_test_id("stMain")
    pp = _enter(sharding, main.get_by_label("PP", exact=True), "4",
                "location.search.includes('sh_pp=4')")
    mb = _enter(sharding, main.get_by_label("Microbatches", exact=True), "5",
                "location.search.includes('sh_mb=5')")
    _enter(sharding, sharding.get_by_test_id("stSidebar").get_by_label("Batch", exact=True), "8",
           "location.search.includes('batch=8')")
    assert pp.input_value() == "4" and mb.input_value() == "5"
    assert "sh_pp=4" in sharding.url and "sh_mb=5" in sharding.url


# Blank-by-default boxes (ui.page_inputs.optional_number) and URL-bound select boxes, toggles
# and segmented controls of the Sharding page, none at its default. The links expander opens
# because the link edits the links.
OPTIONAL_LINK = {"model": "llama-3-8b", "sh_linkbw": "123", "sh_linklat": "7", "sh_topo": "ring",
                 "sh_vocab": "false", "sh_view": "Scaling"}
OPTIONAL_FIRST_SHOWN = {"Link bandwidth (GB/s per device and direction)": "123.00",
                        "Link latency (µs)": "7.00", "Topology": "ring",
                        "Vocabulary-parallel embedding and LM head": "off", "View": "Scaling"}


@pytest.fixture(scope="module")
def optional(server):
    p = _open(server, "/sharding", OPTIONAL_LINK,
              '[data-testid="stMain"] [data-testid="stButtonGroup"]')
    yield p
    p.context.close()


def test_optional_boxes_and_choices_show_the_link_from_the_first_paint(optional):
    assert _first_shown(optional, "__firstStates", OPTIONAL_FIRST_SHOWN) == OPTIONAL_FIRST_SHOWN


def test_a_linked_optional_box_can_be_cleared_and_stays_clear(optional):
    """The link's value is the box's default only on its first draw: after a rerun the user can
    empty the box (back to the preset's value), it stays empty across later reruns, and the
    reset button empties the boxes at any time."""
    main = optional.get_by_test_id("stMain")
    bw = main.get_by_label("Link bandwidth (GB/s per device and direction)", exact=True)
    _enter(optional, main.get_by_label("Microbatches", exact=True), "3",
           "location.search.includes('sh_mb=3')")
    assert bw.input_value() == "123.00"          # a rerun keeps the shown value
    _enter(optional, bw, "", "!location.search.includes('sh_linkbw')")
    assert bw.input_value() == ""
    _enter(optional, main.get_by_label("Microbatches", exact=True), "4",
           "location.search.includes('sh_mb=4')")
    assert bw.input_value() == ""
    assert "sh_linkbw" not in optional.url and "sh_linklat=7" in optional.url
    # the expander stayed open (its label changes no more here: the latency is still edited)
    assert bw.is_visible()
    _enter(optional, bw, "50", "location.search.includes('sh_linkbw=50')")
    assert "50.0 GB/s per device and direction" in main.inner_text()
    main.get_by_role("button", name="Reset bandwidth and latency to the preset").click()
    optional.wait_for_function("() => !/sh_link(bw|lat)/.test(location.search)", timeout=90_000)
    optional.wait_for_selector(IDLE, timeout=90_000)
    assert bw.input_value() == ""
    assert main.get_by_label("Link latency (µs)", exact=True).input_value() == ""


def test_an_optional_box_in_a_collapsed_expander_shows_and_clears(server):
    """Metrics' embodied-carbon box sits in a collapsed expander: opened after a later rerun
    (which sends the box with an empty default) it shows the link's value from its first
    paint, and it can be emptied."""
    p = _open(server, "/metrics", {"model": "llama-3-8b", "m_emb": "555"},
              '[data-testid="stMetricValue"]')
    try:
        main = p.get_by_test_id("stMain")
        _enter(p, p.get_by_test_id("stSidebar").get_by_label("Output", exact=True), "64",
               "location.search.includes('gen=64')")
        main.get_by_text("Assumptions (energy model, grid, TCO)").click()
        label = "Embodied carbon (kgCO2e)"
        p.wait_for_function("n => n in window.__firstStates", arg=label, timeout=90_000)
        assert p.evaluate("window.__firstStates")[label] == "555.00"
        box = main.get_by_label(label, exact=True)
        _enter(p, box, "", "!location.search.includes('m_emb')")
        assert box.input_value() == ""
    finally:
        p.context.close()


def test_a_linked_multiselect_shows_its_choices_from_the_first_paint(server):
    p = _open(server, "/operators", [("model", "llama-3-8b"), ("okind", "norm"),
                                     ("okind", "qkv"), ("ophase", "Decode")],
              '[data-testid="stDataFrame"]')
    try:
        first = p.evaluate("window.__firstStates")
        assert first.get("Categories") == "norm|qkv" and first.get("Phase") == "Decode"
    finally:
        p.context.close()
