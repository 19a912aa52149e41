"""LLM-Para dashboard entrypoint: page config, the shared scenario sidebar, navigation.

To add a page: create ``app_pages/<name>_page.py`` (collect -> call one core function ->
render; get the scenario with ``ui.scenario.get_scenario()``) and add one line to ``PAGES``.
The URL path is the title in lower case with hyphens ("Memory tiers" -> /memory-tiers).

The page folder is deliberately not called ``pages/``: when a ``pages/`` folder sits next to
the entrypoint, the first script run of every server process goes through Streamlit's legacy
multipage mode, which does not know the ``st.navigation`` URL paths and shows "Page not found"
to whoever opens a deep link first (e.g. a shared link to a woken-up Community Cloud app).
"""

import re
from pathlib import Path

import streamlit as st

from ui.guard import run_page
from ui.scenario import open_warning_slot, render_link_warnings
from ui.sidebar import render_share_link, render_sidebar

# (section, file, title, icon). The first page is the default one.
PAGES = [
    ("Analysis", "app_pages/overview_page.py", "Overview", ":material/dashboard:"),
    ("Analysis", "app_pages/roofline_page.py", "Roofline", ":material/show_chart:"),
    ("Analysis", "app_pages/operators_page.py", "Operators", ":material/table_chart:"),
    ("Analysis", "app_pages/memory_page.py", "Memory", ":material/memory:"),
    ("Analysis", "app_pages/metrics_page.py", "Metrics", ":material/bolt:"),
    ("Extended", "app_pages/sharding_page.py", "Sharding", ":material/hub:"),
    ("Extended", "app_pages/design_space_page.py", "Design space", ":material/scatter_plot:"),
    ("Extended", "app_pages/memory_tiers_page.py", "Memory tiers", ":material/stacks:"),
    ("Extended", "app_pages/speculative_page.py", "Speculative", ":material/fast_forward:"),
    ("Extended", "app_pages/validation_page.py", "Validation", ":material/fact_check:"),
    ("Deployment", "app_pages/serving_page.py", "Serving", ":material/dns:"),
    ("Deployment", "app_pages/fleet_page.py", "Fleet", ":material/lan:"),
    ("Compare", "app_pages/compare_page.py", "Compare", ":material/compare_arrows:"),
]


def _url_path(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


# A local image: a ":material/..." page icon is fetched from a font server, and nothing may
# leave the machine (the app works offline).
ICON = Path(__file__).resolve().parent / "ui" / "assets" / "icon.png"
st.set_page_config(page_title="LLM-Para", page_icon=str(ICON), layout="wide")
st.logo(str(ICON), size="large")

sections: dict[str, list] = {}
for i, (section, path, title, icon) in enumerate(PAGES):
    sections.setdefault(section, []).append(
        st.Page(path, title=title, icon=icon, default=i == 0,
                url_path=_url_path(title) + ("-default" if i == 0 else "")))
# The default page lives at "/" (Streamlit ignores its url_path); its own path ("/overview",
# which people type or bookmark) runs the same page through a hidden alias instead of
# Streamlit's "Page not found" dialog.
_first = PAGES[0]
sections[_first[0]].append(st.Page(_first[1], title=_first[2], icon=_first[3],
                                   url_path=_url_path(_first[2]), visibility="hidden"))
page = st.navigation(sections, position="top")

share_slot = render_sidebar()
# Link warnings and "Copy link" are drawn before the page runs (and warnings a page adds, at
# once), then again after it: a page that stops (st.stop) or fails keeps both on screen.
open_warning_slot()
render_share_link(share_slot)
try:
    run_page(page)          # an unexpected exception: one st.error line, no traceback
finally:
    render_link_warnings()
    render_share_link(share_slot)
