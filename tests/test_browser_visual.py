"""The dashboard as a reader sees it: every page in the navigation (read from the entrypoint's
PAGES, so new pages are covered without editing this file), light and dark, at 1440×900 and
390×844, with the default scenario and with one shared link, in a real headless Chromium
against one `streamlit run`. Every check waits until the page has settled as a reader sees it
(browser_util.settle: script stopped, no skeleton, no "Running" status, charts drawn; a
timeout fails the test) — never for a fixed time.

On every page: no exception; no snake_case column header; no markdown escape (a backslash
before punctuation) in rendered text; every Plotly chart's log axes span at most 12 decades,
no axis carries more than 30 tick labels, horizontal tick labels do not overlap and no legend
scrolls; no metric value or label is cut off (scrollWidth > clientWidth); no table cell or
metric shows None/nan/inf/null and no traceback text appears; no chart library warns about
its data in the console; no request leaves 127.0.0.1. At 1440×900: the sidebar's Model and
Hardware boxes in the first screen, no table of at most four rows and ten columns scrolls
sideways, and the Compare page's charts span at least 90 % of the content width. On a phone
(390 px): no table
of at most three columns or of at most two rows scrolls sideways, figures that belong
together follow each other ("X · estimated" then "X · ideal", the parameter, FLOP and KV
pairs), and Serving shows its answer before its inputs, which sit in an expander.
Screenshots go to tests/out/visual/ (gitignored); idle times after a widget change go to
tests/out/visual/idle_times.json. Skipped, with the reason, where Chromium is absent."""

from __future__ import annotations

import json
import os
import time
from urllib.parse import urlencode, urlparse

import pytest
from browser_util import (CHROMIUM, OUT, app_pages, chromium, open_page, settle,
                          streamlit_server)

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")

SHOTS = OUT / "visual"
WIDTH, HEIGHT = 1440, 900
MAX_DECADES = 12
MAX_TICKS = 30
LINK = {"v": "1", "model": "mixtral-8x7b", "hardware": "nvidia-a100-sxm-80gb", "prec": "W4A16",
        "batch": "4", "prompt": "1024", "gen": "128"}
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

# Reads every Plotly chart of the page: log-axis spans (decades), tick labels per axis, and
# overlapping horizontal tick labels. Runs in the browser.
CHART_JS = r"""
() => {
  const out = [];
  document.querySelectorAll('.js-plotly-plot').forEach((el, i) => {
    const fl = el._fullLayout; if (!fl) return;
    const lt = el.layout && el.layout.title;
    const title = (lt && (lt.text || (typeof lt === 'string' ? lt : ''))) || ('chart ' + i);
    for (const name of Object.keys(fl)) {
      if (!/^[xy]axis\d*$/.test(name)) continue;
      const ax = fl[name]; if (!ax || ax.visible === false) continue;
      const id = ax._id;
      const ticks = Array.from(el.querySelectorAll('g.' + id + 'tick text'))
        .filter(t => (t.textContent || '').trim() !== '');
      const boxes = ticks.map(t => ({r: t.getBoundingClientRect(),
                                     rot: /rotate\((?!0)/.test(t.getAttribute('transform') || '')}));
      let overlaps = 0;
      if (id[0] === 'x') {
        const flat = boxes.filter(b => !b.rot && b.r.width > 0)
                          .map(b => b.r).sort((a, b) => a.left - b.left);
        for (let k = 1; k < flat.length; k++)
          if (flat[k].left < flat[k - 1].right - 1) overlaps++;
      }
      out.push({title, axis: name, type: ax.type, range: ax.range,
                ticks: ticks.length, overlaps,
                labels: ticks.slice(0, 40).map(t => t.textContent)});
    }
  });
  return out;
}
"""

# Every metric value and label whose text is wider than its box (cut off or ellipsed), and
# every segmented-control button that runs past its control's box (it is then hidden under the
# next column: "NSG…").
CLIPPED_JS = r"""
() => {
  const bad = [];
  const sel = '[data-testid="stMetricValue"], [data-testid="stMetricValue"] *, ' +
              '[data-testid="stMetricLabel"] p, [data-testid="stMetricLabel"] div';
  document.querySelectorAll(sel).forEach(e => {
    if (e.offsetParent === null) return;
    if (e.scrollWidth > e.clientWidth + 1)
      bad.push((e.textContent || '').trim().slice(0, 80));
  });
  document.querySelectorAll('[data-testid="stButtonGroup"]').forEach(g => {
    if (g.offsetParent === null) return;
    const right = g.getBoundingClientRect().right;
    g.querySelectorAll('button').forEach(b => {
      if (b.getBoundingClientRect().right > right + 1)
        bad.push('control ' + (b.innerText || '').trim().slice(0, 80));
    });
  });
  return Array.from(new Set(bad));
}
"""


# Every Plotly chart whose legend scrolls (taller than the plot: the entries below the fold
# are hidden unless the reader finds the scrollbar).
LEGEND_JS = r"""
() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => {
  const sb = el.querySelector('.legend .scrollbar');
  return sb && sb.getBoundingClientRect().height > 0;
}).map((el, i) => {
  const lt = el.layout && el.layout.title;
  return (lt && (lt.text || (typeof lt === 'string' ? lt : ''))) || 'a chart';
})
"""


# Table cells (the data grids' accessible tables and st.table) and metric values that show a
# missing value as Python or JavaScript spells it, and raw traceback text anywhere in the page.
BAD_TEXT_JS = r"""
() => {
  const bad = new Set(['None', 'nan', 'NaN', 'inf', '-inf', 'null', 'undefined']);
  const sel = '[data-testid="stDataFrame"] td, [data-testid="stDataFrame"] th, ' +
              '[data-testid="stTable"] td, [data-testid="stTable"] th, ' +
              '[data-testid="stMetricValue"]';
  const out = Array.from(document.querySelectorAll(sel))
    .map(e => (e.textContent || '').trim()).filter(t => bad.has(t));
  const main = document.querySelector('[data-testid="stMain"]');
  if (main && /Traceback \(most recent call last\)/.test(main.innerText)) out.push('Traceback');
  return Array.from(new Set(out));
}
"""


# Charts that leave much of the page's width unused: per row of charts (vertically
# overlapping), the share of the main column's content width their union spans.
WIDTH_JS = r"""
() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  if (!main) return [];
  const cs = getComputedStyle(main);
  const inner = main.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const boxes = Array.from(main.querySelectorAll('.js-plotly-plot, [data-testid="stVegaLiteChart"]'))
    .filter(e => e.offsetParent !== null).map(e => e.getBoundingClientRect())
    .filter(r => r.width > 0).sort((a, b) => a.top - b.top);
  const rows = [];
  for (const r of boxes) {
    const row = rows.find(x => r.top < x.bottom && r.bottom > x.top);
    if (row) { row.left = Math.min(row.left, r.left); row.right = Math.max(row.right, r.right);
               row.bottom = Math.max(row.bottom, r.bottom); }
    else rows.push({top: r.top, bottom: r.bottom, left: r.left, right: r.right});
  }
  return rows.map(x => (x.right - x.left) / inner);
}
"""
# The pages whose charts must span (nearly) the whole width at WIDTH px, sidebar open.
FULL_WIDTH_PAGES = {"compare": 0.9}


def width_problems(page, slug: str) -> list[str]:
    least = FULL_WIDTH_PAGES.get(slug)
    if least is None:
        return []
    return [f"a chart row spans {share:.0%} of the width (want >= {least:.0%})"
            for share in page.evaluate(WIDTH_JS) if share < least]


def chart_problems(page) -> list[str]:
    problems = [f"{title!r}: the legend scrolls (entries hidden)"
                for title in page.evaluate(LEGEND_JS)]
    for ax in page.evaluate(CHART_JS):
        where = f"{ax['title']!r} {ax['axis']}"
        if ax["type"] == "log" and ax["range"] and len(ax["range"]) == 2:
            span = abs(float(ax["range"][1]) - float(ax["range"][0]))
            if span > MAX_DECADES:
                problems.append(f"{where}: log axis spans {span:.0f} decades")
        if ax["ticks"] > MAX_TICKS:
            problems.append(f"{where}: {ax['ticks']} tick labels")
        if ax["overlaps"]:
            problems.append(f"{where}: {ax['overlaps']} overlapping tick labels {ax['labels']}")
    return problems


# Column headers still spelled as code (``tpot_p50_s``): data grids' header cells and
# st.table headers.
SNAKE_JS = r"""
() => {
  const sel = '[data-testid="stDataFrame"] th, [data-testid="stTable"] th, ' +
              '[data-testid="stDataFrameResizable"] [role="columnheader"]';
  return Array.from(new Set(Array.from(document.querySelectorAll(sel))
    .map(e => (e.textContent || '').trim())
    .filter(t => /^[a-z0-9]+(_[a-z0-9]+)+$/.test(t))));
}
"""

# Markdown escapes that reached the reader (``nvidia\.github\.io``): a backslash before
# punctuation in the rendered text of the page and the sidebar (code blocks and inputs, which
# show text verbatim, are left out).
BACKSLASH_JS = r"""
() => {
  const out = [];
  for (const root of document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]')) {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let n;
    while ((n = walk.nextNode())) {
      const p = n.parentElement;
      if (!p || p.closest('pre, code, textarea, input, [data-testid="stCode"]')) continue;
      const m = (n.textContent || '').match(/.{0,30}\\[!-\/:-@\[-`{-~].{0,30}/);
      if (m) out.push(m[0]);
    }
  }
  return Array.from(new Set(out)).slice(0, 10);
}
"""

# The sidebar's model and hardware boxes: in the first screen, without scrolling.
FOLD_JS = r"""
() => {
  const side = document.querySelector('[data-testid="stSidebar"]');
  if (!side) return ['no sidebar'];
  const out = [];
  for (const want of ['Model', 'Hardware']) {
    const box = Array.from(side.querySelectorAll('[data-testid="stSelectbox"]')).find(
      b => ((b.querySelector('label') || {}).innerText || '').trim() === want);
    if (!box) { out.push(want + ': no select box'); continue; }
    const r = box.getBoundingClientRect();
    if (r.top < 0 || r.bottom > window.innerHeight || r.width === 0)
      out.push(`${want}: at y ${Math.round(r.top)}-${Math.round(r.bottom)} of ${window.innerHeight}`);
  }
  return out;
}
"""


# On a phone: tables that scroll sideways, i.e. hide their last columns, although they are
# small (at most three columns) or a record (one or two rows, such as Serving's capacity and
# cost, whose $ / M tokens was off-screen). A larger table scrolls, its first column in view.
NARROW_GRID_JS = r"""
() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
  .filter(e => e.offsetParent !== null).map(e => {
    const s = e.querySelector('.dvn-scroller');
    const g = e.querySelector('[aria-colcount]');
    const cols = g ? parseInt(g.getAttribute('aria-colcount')) : 0;
    const rows = g ? parseInt(g.getAttribute('aria-rowcount')) - 1 : 0;
    const heads = Array.from(e.querySelectorAll('th')).map(t => t.textContent.trim());
    return {cols, rows, over: s ? s.scrollWidth - s.clientWidth : 0, heads: heads.join(' | ')};
  }).filter(g => g.cols > 0 && (g.cols <= 3 || g.rows <= 2) && g.over > 1)
"""


# On a wide screen: short tables (at most eight rows of at most ten columns) that scroll
# sideways (their last columns hidden; Compare's "max batch" was, and the Fleet traffic
# editor's SLO columns by 165 px). Wider data tables (the design front's 17 columns) scroll,
# objectives first.
WIDE_GRID_JS = NARROW_GRID_JS.replace("(g.cols <= 3 || g.rows <= 2)",
                                      "g.rows <= 8 && g.cols <= 10")


# On a phone the metrics read top to bottom, and figures that belong together must follow each
# other there: "<quantity> · estimated" then its "<quantity> · ideal", and these pairs (a grid
# stacked column by column had put other figures between them).
PAIRS = [["Parameters (total)", "Parameters (active per token)"],
         ["Prefill FLOPs", "Decode FLOPs"], ["KV cache per token", "KV cache at full context"],
         ["Memory needed", "Device capacity"],
         ["Largest batch that fits", "Largest context that fits"]]
PAIRS_JS = r"""
(pairs) => {
  const labels = Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid="stMetricLabel"]'))
    .filter(e => e.offsetParent !== null)
    .map(e => ({t: (e.innerText || '').trim(), y: e.getBoundingClientRect().top}))
    .sort((a, b) => a.y - b.y).map(x => x.t);
  const all = pairs.slice();
  labels.forEach(t => { const m = t.match(/^(.*) · estimated$/);
                        if (m) all.push([t, m[1] + ' · ideal']); });
  return all.filter(([a, b]) => labels.includes(a) && labels.includes(b)
                                && labels[labels.indexOf(a) + 1] !== b)
            .map(([a, b]) => a + ' then ' + labels[labels.indexOf(a) + 1] + ', not ' + b);
}
"""


def page_problems(page, slug: str, wide: bool) -> list[str]:
    """Every check of one settled page; ``wide``: the 1440 px layout (sidebar open)."""
    problems = []
    if page.get_by_test_id("stException").count():
        problems.append(f"exception {page.get_by_test_id('stException').first.inner_text()[:300]}")
    problems += chart_problems(page)
    problems += [f"cut off: {t!r}" for t in page.evaluate(CLIPPED_JS)]
    problems += [f"shows {t!r}" for t in page.evaluate(BAD_TEXT_JS)]
    problems += [f"snake_case column header {t!r}" for t in page.evaluate(SNAKE_JS)]
    problems += [f"escaped text {t!r}" for t in page.evaluate(BACKSLASH_JS)]
    if slug == "serving" and not wide:           # a phone: the answer before the ~15 inputs
        order = page.evaluate("""() => {
          const top = s => { const e = document.querySelector(s);
                             return e ? e.getBoundingClientRect().top : null; };
          return [top('[data-testid="stMain"] [data-testid="stMetric"]'),
                  top('.st-key-sv_inputs'), top('[data-testid="stMain"] h1')]; }""")
        if None in order or not order[2] < order[0] < order[1]:
            problems.append(f"on a phone the answer does not come first (title, first metric, "
                            f"inputs at y = {order[2]}, {order[0]}, {order[1]})")
        if not page.locator('.st-key-sv_inputs [data-testid="stExpander"] '
                            '.st-key-sv_cluster').count():     # the Devices box folds away
            problems.append("on a phone the inputs are not in an expander")
    if not wide:
        problems += [f"on a phone a {g['cols']}-column table scrolls sideways by {g['over']} px "
                     f"({g['heads']})" for g in page.evaluate(NARROW_GRID_JS)]
        problems += [f"on a phone a pair of metrics is split: {t}"
                     for t in page.evaluate(PAIRS_JS, PAIRS)]
    if wide:
        problems += [f"a table of {g['rows']} rows scrolls sideways by {g['over']} px "
                     f"({g['heads']})" for g in page.evaluate(WIDE_GRID_JS)]
        problems += width_problems(page, slug)
        problems += [f"sidebar below the fold: {t}" for t in page.evaluate(FOLD_JS)]
    return problems


def shoot(page, path, width: int, height: int) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its own container, so the
    viewport is stretched to the content's height (at most 7000 px) for the picture."""
    full = page.evaluate("""() => Math.max(...Array.from(document.querySelectorAll(
        '[data-testid="stMain"], [data-testid="stAppViewContainer"], section, div'))
        .map(e => e.scrollHeight || 0).filter(h => h < 20000))""")
    page.set_viewport_size({"width": width, "height": int(min(max(full, height), 7000))})
    page.wait_for_timeout(250)            # a resize redraws the charts (layout, not the script)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": width, "height": height})


@pytest.fixture()
def app_url(request):
    """A server per test (~5 s to start): in one module-wide server, the runs after the first
    timed out waiting for a page to settle (seen three times here, never with a fresh
    server; cause not found)."""
    with streamlit_server(f"streamlit-visual-{request.node.name[-40:]}.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _visit_all(browser, base: str, query: dict, theme: str, tag: str,
               size: tuple[int, int], whole: bool) -> list[str]:
    """Open every navigation page with ``query`` in ``theme`` at ``size`` (one browser session,
    in-app navigation); returns the problems found."""
    width, height = size
    ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=theme)
    foreign: list[str] = []
    ctx.on("request", lambda r: foreign.append(r.url) if urlparse(r.url).scheme in (
        "http", "https", "ws", "wss") and urlparse(r.url).hostname not in LOCAL_HOSTS else None)
    page = ctx.new_page()
    console: list[str] = []            # chart libraries' warnings about the data they got
    page.on("console", lambda m: console.append(m.text) if "Infinite extent" in m.text
            or m.text.startswith("WARN ") else None)
    problems: list[str] = []
    qs = ("?" + urlencode(query)) if query else ""
    pages = app_pages()
    assert len(pages) >= 5, pages
    only = os.environ.get("VISUAL_PAGES")          # development: VISUAL_PAGES=overview,memory
    if only:
        pages = [p for p in pages if (p[2].strip("/") or "overview") in only.split(",")]
    for i, (section, title, path) in enumerate(pages):
        if i == 0:
            page.goto(f"{base}{path}{qs}")
            settle(page)
        else:          # in-app navigation, as a reader would (the scenario stays in the URL)
            open_page(page, section, title, path)
        slug = path.strip("/") or "overview"
        where = f"[{tag} {theme} {width}x{height}] {title}"
        problems += [f"{where}: {p}" for p in page_problems(page, slug, width >= 1000)]
        problems += [f"{where}: console: {m}" for m in sorted(set(console))]
        console.clear()
        shot = SHOTS / f"{slug}-{tag}-{theme}-{width}.png"
        if whole:
            shoot(page, shot, width, height)
        else:
            page.screenshot(path=str(shot))   # the first screen (keeps the run short)
    problems += [f"[{tag} {theme}] request to another host: {u}" for u in sorted(set(foreign))]
    ctx.close()
    return problems


# Both themes at both sizes, the default scenario and a shared link each twice: four browser
# sessions of one visit per page (the suite's wall time grows with the visits, not the checks).
# On a phone the navigation is the sidebar's folded list ("View 3 more" hides the last pages:
# browser_util.open_page unfolds it; the runs had timed out looking for the Serving link).
RUNS = [("light", "default", (1440, 900), True), ("dark", "link", (1440, 900), False),
        ("light", "link", (390, 844), False), ("dark", "default", (390, 844), True)]


@pytest.mark.parametrize("theme,tag,size,whole", RUNS,
                         ids=["light-default-1440", "dark-link-1440", "light-link-390",
                              "dark-default-390"])
def test_every_page_reads_well(app_url, browser, theme, tag, size, whole):
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = _visit_all(browser, app_url, LINK if tag == "link" else {}, theme, tag, size,
                          whole)
    assert not problems, "\n".join(problems)


# Records the script state's transitions from the moment it is installed (page clock, ms), so
# a rerun that finishes before Python could look is still timed from its own transitions.
WATCH_JS = r"""
() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (window.__watch) window.__watch.disconnect();
  window.__states = [];
  window.__t0 = performance.now();
  window.__watch = new MutationObserver(() => window.__states.push(
      [app.getAttribute('data-test-script-state'), performance.now() - window.__t0]));
  window.__watch.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}
"""
DONE_JS = r"""
() => {
  const s = window.__states || [];
  const ran = s.findIndex(x => x[0] === 'running');
  if (ran < 0) return null;
  const idle = s.slice(ran).find(x => x[0] === 'notRunning');
  return idle ? idle[1] / 1000 : null;
}
"""


def test_every_page_settles_after_a_widget_change(app_url, browser):
    """Per page: a sidebar change (the batch) reruns the page (a running → not-running
    transition is seen) and the page settles again with no exception. The seconds it took go
    to idle_times.json for reading; wall-time figures come from benchmarks/bench_pages.py
    --browser (median of runs), not from a bound here: this machine is shared."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = ctx.new_page()
    page.goto(app_url + "/")
    settle(page)
    times, problems = {}, []
    for i, (section, title, path) in enumerate(app_pages()):
        if i:
            open_page(page, section, title, path)
        box = page.get_by_test_id("stSidebar").get_by_label("Batch", exact=True)
        box.fill(str(2 + i % 2))
        page.evaluate(WATCH_JS)
        box.press("Enter")
        page.wait_for_function(DONE_JS, timeout=300_000)
        times[title] = page.evaluate(DONE_JS)
        settle(page)
        if page.get_by_test_id("stException").count():
            problems.append(f"{title}: exception after the change")
    ctx.close()
    (SHOTS / "idle_times.json").write_text(json.dumps(times, indent=2))
    assert not problems and len(times) == len(app_pages()), (problems, times)
