"""Page-local widgets bound to the URL (``url_selectbox``, ``url_segmented``, ``url_multiselect``,
``url_number``, ``url_toggle``): an invalid link value gives a warning (``ui.scenario``'s
link warnings) and the widget's default, and every value goes into the 'Copy link' URL
(``register_link_param``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import streamlit as st

from . import links
from .links import format_number
from .number_widgets import box_range, in_range, reject
from .scenario import _PAGE_LINK, _URL_NUMBERS, add_warning


# ---- page-local, URL-bound widgets ----------------------------------------------------------

def register_link_param(key: str, value: str | list[str]) -> None:
    """Add a page-local setting to the 'Copy link' URL."""
    st.session_state.setdefault(_PAGE_LINK, {})[key] = value


def _check_url(key: str, ok: Callable[[list[str]], bool], expected: str,
               multi: bool = False) -> None:
    raws = st.query_params.get_all(key)
    if not multi and (w := links.repeat_warning(key, raws)):
        add_warning(w)
    if raws and not ok(raws):
        shown = links.show_value(raws[-1])
        add_warning(f"Link parameter `{key}`: '{shown}' is not {expected}; using the default.")


def url_selectbox(label: str, options: Sequence, key: str, default=None,
                  format_func: Callable[[Any], str] = str,
                  retired: dict[str, str] | None = None, **kwargs):
    """A selectbox bound to the URL parameter ``key`` (the URL holds ``format_func(option)``);
    an invalid link value falls back to ``default`` with a warning. ``retired`` maps values
    that older links may carry to why they no longer exist and what replaced them: such a link
    gets that reason instead of the generic warning (still the default, never a guess)."""
    opts = list(options)
    labels = [format_func(o) for o in opts]
    raws = st.query_params.get_all(key)
    if retired and raws and raws[-1] in retired and raws[-1] not in labels:
        add_warning(f"Link parameter `{key}`: '{links.show_value(raws[-1])}' is retired: "
                    f"{retired[raws[-1]]}. Using the default, "
                    f"'{format_func(default if default in opts else opts[0])}'.")
    else:
        _check_url(key, lambda raws: raws[-1] in labels, "one of the options")
    index = opts.index(default) if default in opts else 0
    value = st.selectbox(label, opts, index=index, key=key, format_func=format_func,
                         bind="query-params", **kwargs)
    register_link_param(key, format_func(value))
    return value


def url_segmented(label: str, options: Sequence, key: str, default,
                  format_func: Callable[[Any], str] = str, **kwargs):
    """A segmented control (single choice, never empty) bound to the URL parameter ``key``."""
    opts = list(options)
    labels = [format_func(o) for o in opts]
    _check_url(key, lambda raws: raws[-1] in labels, "one of the options")
    value = st.segmented_control(label, opts, default=default, key=key, format_func=format_func,
                                 bind="query-params", required=True, **kwargs)
    if value is None:
        value = default
    register_link_param(key, format_func(value))
    return value


def url_multiselect(label: str, options: Sequence, key: str, default: Sequence = (),
                    format_func: Callable[[Any], str] = str, **kwargs) -> list:
    opts = list(options)
    labels = set(format_func(o) for o in opts)
    raws = st.query_params.get_all(key)
    unknown = [r for r in raws if r not in labels]
    if unknown:         # keep the known values, name the dropped ones
        shown = ", ".join(f"'{links.show_value(r)}'" for r in unknown[:5])
        more = f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        add_warning(f"Link parameter `{key}`: dropped {len(unknown):,} unknown "
                    f"value{'s' if len(unknown) > 1 else ''} ({shown}{more}); "
                    f"kept {len(raws) - len(unknown):,} known.")
        known = list(dict.fromkeys(r for r in raws if r in labels))
        if known:
            st.query_params[key] = known
        else:
            del st.query_params[key]
    value = st.multiselect(label, opts, default=list(default), key=key, format_func=format_func,
                           bind="query-params", **kwargs)
    register_link_param(key, [format_func(v) for v in value])
    return value


def _link_number(key: str, lo, hi, is_int: bool):
    """The URL's value of ``key`` if it is a number in [lo, hi] (an integer for an integer
    box), else None."""
    raws = st.query_params.get_all(key)
    if not raws:
        return None
    return links.parse_int(raws[-1], lo, hi) if is_int else links.parse_float(raws[-1], lo, hi)


def url_number(label: str, key: str, min_value, max_value, value, **kwargs):
    """A number input bound to the URL parameter ``key`` (written while it differs from the
    default ``value``); an invalid or out-of-range link value gives a warning and the default.

    Not ``bind="query-params"``: Streamlit's number box first paints its *default* and a bound
    link's value one render later (tests/test_first_paint.py read TP 8 for a link with
    sh_tp=2), and a bound box whose default equals its value drops the parameter from the URL.
    As for the sidebar (``_number_box``), the value lives in session state (from the link,
    after a page switch the last value) and is given as the default too.

    The range is the box's entry in ``ui.number_widgets`` (the bounds table), narrowed by
    ``min_value``/``max_value``. The box is drawn without Streamlit's own min/max so a typed
    value outside the range reaches the page: a warning under the box names it and the value
    the results use (the last accepted one)."""
    min_value, max_value = box_range(key, min_value, max_value)
    is_int = isinstance(value, int)
    _check_url(key, lambda raws: _link_number(key, min_value, max_value, is_int) is not None,
               f"a number in [{min_value}, {max_value}]")
    ss = st.session_state
    kept = ss.setdefault(_URL_NUMBERS, {})
    cur = ss.get(key)       # the box's own state (a rejected typed value stays shown)
    if cur is None:
        cur = kept.get(key)
        if cur is None:
            cur = _link_number(key, min_value, max_value, is_int)
        cur = value if cur is None or not min_value <= cur <= max_value else type(value)(cur)
        ss[key] = cur
    v = st.number_input(label, value=cur, key=key, **kwargs)
    if not in_range(v, min_value, max_value):
        good = kept.get(key)
        good = value if good is None or not in_range(good, min_value, max_value) else good
        reject(st, label, v, min_value, max_value, good)
        v = good
    kept[key] = v
    write_url(key, None if v == value else format_number(v))
    register_link_param(key, format_number(v))
    return v


def write_url(key: str, text: str | None) -> None:
    """Put ``key=text`` into the URL (remove ``key`` for None), only if it changes."""
    qp = st.query_params
    if text is None:
        if key in qp:
            del qp[key]
    elif qp.get_all(key) != [text]:
        qp[key] = text


def url_toggle(label: str, key: str, value: bool = False, **kwargs) -> bool:
    _check_url(key, lambda raws: raws[-1] in ("true", "false"), "true or false")
    v = st.toggle(label, value=value, key=key, bind="query-params", **kwargs)
    register_link_param(key, "true" if v else "false")
    return v
