"""Small input helpers shared by the analysis pages (Metrics, Sharding): URL-bound widgets the
``ui.scenario`` helpers do not cover."""

from __future__ import annotations

from typing import Sequence

import streamlit as st

from . import links
from .scenario import add_warning
from .number_widgets import box_range, in_range, reject
from .url_widgets import register_link_param, write_url

_OPTIONAL = "_optional_number_values"   # last value per key (None = emptied by the user)


def optional_value(key: str, lo: float, hi: float) -> float | None:
    """The value an ``optional_number`` box holds (or will hold when drawn): the box's state,
    else its last value in this session (kept across page switches; None if the user emptied
    it), else the link's valid value. Lets a page decide before the box is drawn, e.g. whether
    the expander holding it opens."""
    ss = st.session_state
    if key in ss:
        return ss[key]
    kept = ss.get(_OPTIONAL, {})
    if key in kept:
        return kept[key]
    raws = st.query_params.get_all(key)
    return links.parse_float(raws[-1], lo, hi) if raws else None


def optional_number(label: str, key: str, lo: float, hi: float, placeholder: str, **kw):
    """An empty-by-default number input bound to the URL (empty = the default named in
    ``placeholder``); an invalid link value warns, names the key, and falls back to empty.

    Not ``bind="query-params"``: Streamlit's number box first paints its *default* (here:
    empty) and a link's value one render later (tests/test_first_paint.py). So where the box is
    drawn fresh (a session's first run, or after a page switch) its value is given as its
    default, which the first paint shows. The browser lets only a box without a default be
    emptied, so on later runs the default is None again (the browser keeps the shown value);
    ``reset_button`` empties boxes at any time."""
    lo, hi = box_range(key, lo, hi)
    raws = st.query_params.get_all(key)
    if raws and links.parse_float(raws[-1], lo, hi) is None:
        add_warning(f"Link parameter `{key}`: '{links.show_value(raws[-1])}' is not a number "
                    f"in [{lo:g}, {hi:g}]; using the default.")
    ss = st.session_state
    cur = optional_value(key, lo, hi) if key not in ss else None
    if cur is not None and not lo <= cur <= hi:
        cur = None
    v = st.number_input(label, value=cur, key=key, placeholder=placeholder, **kw)
    if v is not None and not in_range(v, lo, hi):     # typed outside: say so, keep the last
        good = ss.get(_OPTIONAL, {}).get(key)
        good = good if good is None or in_range(good, lo, hi) else None
        reject(st, label, v, lo, hi, good)
        v = good
    ss.setdefault(_OPTIONAL, {})[key] = v
    text = None if v is None else links.format_number(v)
    write_url(key, text)
    if text is not None:
        register_link_param(key, text)
    return v


def _empty(keys: Sequence[str]) -> None:
    ss = st.session_state
    for k in keys:
        ss[k] = None
        ss.setdefault(_OPTIONAL, {})[k] = None


def reset_button(keys: Sequence[str], key: str, label: str = "Reset to preset") -> None:
    """A button that empties the ``optional_number`` boxes ``keys`` (drawn while one holds a
    value; the same as the sidebar's reset buttons)."""
    if any(st.session_state.get(k) is not None for k in keys):
        st.button(label, key=key, on_click=_empty, args=(tuple(keys),))
