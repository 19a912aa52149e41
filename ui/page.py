"""The common head of a scenario page (title, scenario line, report)."""

from __future__ import annotations

import streamlit as st

from llmpara_core.errors import ConfigError

from .compute import scenario_report
from .format import escape_md
from .scenario import get_scenario


def page_report(title: str, note: str = ""):
    """The common head of a scenario page: title, the scenario line (+ ``note``, markdown-safe
    text) and the scenario's report; an invalid scenario shows the core's message and stops."""
    scn = get_scenario()
    st.title(title)
    st.caption(escape_md(scn.label) + note)
    try:
        return scn, scenario_report(scn)
    except ConfigError as e:
        st.error(f"Cannot analyse this scenario: {escape_md(e)}")
        st.stop()
