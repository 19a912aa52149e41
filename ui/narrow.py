"""Phone layouts (issue 28, item 10). The server cannot know the screen's width, so what
changes on a narrow screen is chosen by CSS media queries in the browser, at Streamlit's own
breakpoint (below it, columns stack):

* ``first_on_narrow(key, rank)``: a keyed container moved up the page (CSS ``order``);
* ``wide_only(key)`` / ``narrow_only(key)``: two renderings of the same thing, one shown per
  width (a one-row table on a wide screen, the same figures as a two-column table on a phone,
  where a wide grid would hide its last columns behind a horizontal scroll);
* ``record_table``: that two-column table for one row of figures.

Every rule names keyed containers (Streamlit gives them the class ``st-key-<key>``) and their
layout wrapper, so a hidden container leaves no gap."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from .format import sig
from .tables import KINDS, MISSING

NARROW_PX = 640                     # Streamlit stacks columns below this width


def _both(key: str) -> str:
    return (f".st-key-{key}, [data-testid='stLayoutWrapper']:has(> .st-key-{key}), "
            f"[data-testid='stElementContainer']:has(> .st-key-{key})")


def css(rules: str, narrow: bool = True) -> None:
    """``rules`` (CSS) applied only below (``narrow``) or from ``NARROW_PX`` up."""
    query = f"(max-width: {NARROW_PX}px)" if narrow else f"(min-width: {NARROW_PX + 1}px)"
    st.html(f"<style>@media {query} {{ {rules} }}</style>")


def first_on_narrow(keys: list[str]) -> None:
    """On a narrow screen the containers ``keys`` come first, in that order (the others keep
    theirs, after them)."""
    css(" ".join(f"{_both(k)} {{ order: {i - len(keys)}; }}" for i, k in enumerate(keys)))


def wide_only(key: str):
    """A keyed container shown only on a wide screen."""
    css(f"{_both(key)} {{ display: none !important; }}")
    return st.container(key=key)


def narrow_only(key: str):
    """A keyed container shown only on a narrow screen."""
    css(f"{_both(key)} {{ display: none !important; }}", narrow=False)
    return st.container(key=key)


def _fmt(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return MISSING
    if kind in ("text", "bool"):
        return ("yes" if value else "no") if kind == "bool" else str(value)
    scale, fmt = KINDS[kind]
    v = float(value) * scale
    if fmt == "dollar":
        return f"${v:,.2f}"
    if fmt == "%.3g":                   # as the grid would, without its exponent (3e+04)
        return sig(v)
    return fmt % (round(v) if fmt == "%d" else v)


def record_table(row: dict, columns: dict[str, tuple[str, str]], **kwargs):
    """One row of figures as a two-column table (label with its unit | value), in ``columns``'
    order and formats (as ``tables.people_table`` shows them), "—" for a missing value."""
    recs = [{"quantity": label, "value": _fmt(row.get(col), kind)}
            for col, (label, kind) in columns.items() if col in row]
    kwargs.setdefault("hide_index", True)
    return st.dataframe(pd.DataFrame(recs), column_config={
        "quantity": st.column_config.TextColumn("quantity"),
        "value": st.column_config.TextColumn("value")}, **kwargs)


def by_rows_on_narrow(df: pd.DataFrame, key: str, first: str, **kwargs) -> None:
    """A short table of text cells (one row per ``first``, e.g. per memory tier) as it is on a
    wide screen, and turned on a phone: one row per column, one column per ``first`` value
    (a few rows of many columns hid their last columns there). The turned copy is left out
    where the ``first`` values repeat (they would be its headers)."""
    kwargs.setdefault("hide_index", True)
    if df[first].duplicated().any():
        st.dataframe(df, **kwargs)
        return
    with wide_only(f"{key}_wide"):
        st.dataframe(df, **kwargs)
    with narrow_only(f"{key}_narrow"):
        turned = df.set_index(first).T
        turned.insert(0, "quantity", turned.index)
        st.dataframe(turned.astype(str), **kwargs)
