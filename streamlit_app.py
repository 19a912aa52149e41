"""LLM-Para dashboard entrypoint: page config, the shared scenario sidebar, navigation.

To add a page: create ``pages/<name>_page.py`` (collect -> call one core function -> render; get
the scenario with ``ui.scenario.get_scenario()``) and add one line to ``PAGES``. The URL path is
the title in lower case with hyphens ("Memory tiers" -> /memory-tiers).

A page file must not be named like its URL path (hence ``_page``): on the first run of a
server process, and on every ``AppTest`` run, Streamlit still treats ``pages/`` as a legacy
multipage folder and would run ``pages/roofline.py`` for ``/roofline`` *without* this
entrypoint (no sidebar, no shared scenario).
"""

import re
from pathlib import Path

import streamlit as st

from ui.scenario import render_link_warnings, render_share_link, render_sidebar

# (section, file, title, icon). The first page is the default one.
PAGES = [
    ("Analysis", "pages/overview_page.py", "Overview", ":material/dashboard:"),
    ("Analysis", "pages/roofline_page.py", "Roofline", ":material/show_chart:"),
    ("Analysis", "pages/operators_page.py", "Operators", ":material/table_chart:"),
    ("Analysis", "pages/memory_page.py", "Memory", ":material/memory:"),
    ("Extended", "pages/sharding_page.py", "Sharding", ":material/hub:"),
    ("Extended", "pages/design_space_page.py", "Design space", ":material/scatter_plot:"),
    ("Extended", "pages/memory_tiers_page.py", "Memory tiers", ":material/stacks:"),
    ("Extended", "pages/speculative_page.py", "Speculative", ":material/fast_forward:"),
    ("Extended", "pages/validation_page.py", "Validation", ":material/fact_check:"),
    ("Analysis", "pages/metrics_page.py", "Metrics", ":material/bolt:"),
    ("Compare", "pages/compare_page.py", "Compare", ":material/compare_arrows:"),
]


def _url_path(path: str, title: str) -> str:
    url = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    if url == Path(path).stem:
        raise ValueError(f"{path}: rename the file (e.g. {url}_page.py); a page file named "
                         f"like its URL path /{url} breaks deep links (see module docstring)")
    return url


st.set_page_config(page_title="LLM-Para", page_icon=":material/speed:", layout="wide")

sections: dict[str, list] = {}
for i, (section, path, title, icon) in enumerate(PAGES):
    sections.setdefault(section, []).append(
        st.Page(path, title=title, icon=icon, default=i == 0, url_path=_url_path(path, title)))
page = st.navigation(sections)

share_slot = render_sidebar()
warning_slot = st.container()
try:
    page.run()
finally:
    with warning_slot:
        render_link_warnings()
    render_share_link(share_slot)
