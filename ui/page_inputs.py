"""Small input helpers shared by the analysis pages (Metrics, Sharding): URL-bound widgets the
``ui.scenario`` helpers do not cover."""

from __future__ import annotations

import streamlit as st

from . import links
from .scenario import add_warning, register_link_param


def optional_number(label: str, key: str, lo: float, hi: float, placeholder: str, **kw):
    """An empty-by-default number input bound to the URL (empty = the default named in
    ``placeholder``); an invalid link value warns, names the key, and falls back to empty."""
    raws = st.query_params.get_all(key)
    if raws and links.parse_float(raws[-1], lo, hi) is None:
        add_warning(f"Link parameter `{key}`: '{links.show_value(raws[-1])}' is not a number "
                    f"in [{lo}, {hi}]; using the default.")
    v = st.number_input(label, lo, hi, value=None, key=key, bind="query-params",
                        placeholder=placeholder, **kw)
    if v is not None:
        register_link_param(key, links.format_number(v))
    return v
