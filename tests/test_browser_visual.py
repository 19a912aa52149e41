"""The dashboard as a reader sees it: every page in the navigation (found in the sidebar, so new
pages are covered without editing this file), light and dark, at 1440 px, with the default
scenario and with one shared link, in a real headless Chromium against one `streamlit run`.

On every page: no exception; every Plotly chart's log axes span at most 12 decades, no axis
carries more than 30 tick labels, horizontal tick labels do not overlap and no legend scrolls;
no metric value or label is cut off (scrollWidth > clientWidth); the Compare page's charts span at
least 90 % of the content width; no table cell or metric shows
None/nan/inf/null and no traceback text appears; no request leaves 127.0.0.1. Screenshots go to
tests/out/visual/ (gitignored); idle times after a widget change go to
tests/out/visual/idle_times.json. Skipped, with the reason, where Chromium is absent."""

from __future__ import annotations

import json
import os
import time
from urllib.parse import urlencode, urlparse

import pytest
from browser_util import CHROMIUM, IDLE, OUT, chromium, streamlit_server

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api")

SHOTS = OUT / "visual"
WIDTH, HEIGHT = 1440, 1000
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


def nav_pages(page) -> list[tuple[str, str]]:
    """(title, path) of every page in the sidebar navigation."""
    links = page.get_by_test_id("stSidebarNavLink")
    out = []
    for i in range(links.count()):
        link = links.nth(i)
        title = link.inner_text().strip().splitlines()[-1].strip()   # after the icon's name
        out.append((title, urlparse(link.get_attribute("href")).path))
    return out


def shoot(page, path) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its own container, so the
    viewport is stretched to the content's height (at most 7000 px) for the picture."""
    height = page.evaluate("""() => Math.max(...Array.from(document.querySelectorAll(
        '[data-testid="stMain"], [data-testid="stAppViewContainer"], section, div'))
        .map(e => e.scrollHeight || 0).filter(h => h < 20000))""")
    page.set_viewport_size({"width": WIDTH, "height": int(min(max(height, HEIGHT), 7000))})
    page.wait_for_timeout(250)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})


def open_from_nav(page, title: str, path: str) -> None:
    page.get_by_test_id("stSidebarNavLink").filter(has_text=title).first.click()
    page.wait_for_url(lambda u: urlparse(u).path == path, timeout=60_000)
    try:
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="running"]',
                               timeout=2_000)
    except Exception:                      # the run may already be over
        pass
    settle(page)


def settle(page, timeout_ms: int = 120_000) -> None:
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(300)            # charts draw after the script stops
    page.wait_for_selector(IDLE, timeout=timeout_ms)


def goto(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector('[data-testid="stSidebarNavLink"]', timeout=120_000)
    settle(page)


@pytest.fixture(scope="module")
def app_url():
    with streamlit_server("streamlit-visual.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _visit_all(browser, base: str, query: dict, theme: str, tag: str) -> list[str]:
    """Open every navigation page with ``query`` in ``theme``; returns the problems found."""
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, color_scheme=theme)
    foreign: list[str] = []
    ctx.on("request", lambda r: foreign.append(r.url) if urlparse(r.url).scheme in (
        "http", "https", "ws", "wss") and urlparse(r.url).hostname not in LOCAL_HOSTS else None)
    page = ctx.new_page()
    problems: list[str] = []
    qs = ("?" + urlencode(query)) if query else ""
    goto(page, f"{base}/{qs}")
    pages = nav_pages(page)
    assert len(pages) >= 5, pages
    only = os.environ.get("VISUAL_PAGES")          # development: VISUAL_PAGES=overview,memory
    if only:
        pages = [p for p in pages if (p[1].strip("/") or "overview") in only.split(",")]
    for i, (title, path) in enumerate(pages):
        if i == 0:
            goto(page, f"{base}{path}{qs}")
        else:          # in-app navigation, as a reader would (the scenario stays in the URL)
            open_from_nav(page, title, path)
        where = f"[{tag} {theme}] {title}"
        if page.get_by_test_id("stException").count():
            problems.append(f"{where}: exception "
                            f"{page.get_by_test_id('stException').first.inner_text()[:300]}")
        problems += [f"{where}: {p}" for p in chart_problems(page)]
        problems += [f"{where}: cut off: {t!r}" for t in page.evaluate(CLIPPED_JS)]
        problems += [f"{where}: shows {t!r}" for t in page.evaluate(BAD_TEXT_JS)]
        slug = path.strip("/") or "overview"
        problems += [f"{where}: {p}" for p in width_problems(page, slug)]
        shot = SHOTS / f"{slug}-{tag}-{theme}.png"
        if tag == "default":
            shoot(page, shot)             # the whole page
        else:
            page.screenshot(path=str(shot))   # the first screen (keeps the run short)
    problems += [f"[{tag} {theme}] request to another host: {u}" for u in sorted(set(foreign))]
    ctx.close()
    return problems


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_page_reads_well(app_url, browser, theme):
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = _visit_all(browser, app_url, {}, theme, "default")
    problems += _visit_all(browser, app_url, LINK, theme, "link")
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


def test_idle_after_a_widget_change(app_url, browser):
    """Per page: seconds from changing the sidebar batch to the script idle again (the larger
    of 2 changes, from the page's own state transitions; written to idle_times.json; the bound
    is loose because this machine is shared)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = ctx.new_page()
    goto(page, app_url + "/")
    times = {}
    for i, (title, path) in enumerate(nav_pages(page)):
        if i:
            open_from_nav(page, title, path)
        runs = []
        for batch in ("3", "2"):
            box = page.get_by_test_id("stSidebar").get_by_label("Batch", exact=True)
            box.fill(batch)
            page.evaluate(WATCH_JS)
            box.press("Enter")
            page.wait_for_function(DONE_JS, timeout=120_000)
            runs.append(page.evaluate(DONE_JS))
            settle(page)
        times[title] = max(runs)
    ctx.close()
    (SHOTS / "idle_times.json").write_text(json.dumps(times, indent=2))
    assert all(t < 30 for t in times.values()), times
