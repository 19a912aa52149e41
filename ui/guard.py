"""The app's last line of defence: an exception a page did not expect becomes one st.error
line (its type and a message with server paths removed), never a traceback, and the full
traceback goes to the server log only.

Tests set ``LLMPARA_RAISE_PAGE_ERRORS=1`` (tests/conftest.py) so AppTest still sees the
exception; the hostile-input suite turns it off to check what a visitor sees.
"""

from __future__ import annotations

import logging
import os
import re

import streamlit as st

from .format import escape_md

_LOG = logging.getLogger("llmpara.app")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-]+){2,}")
MAX_SHOWN_CHARS = 300


def public_message(exc: BaseException) -> str:
    """``Type: first line of the message`` with file-system paths replaced by '<path>' and cut
    to MAX_SHOWN_CHARS."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    text = f"{type(exc).__name__}: {_PATH.sub('<path>', first)}".rstrip(": ")
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS - 3] + "..."


def run_page(page) -> None:
    """``page.run()``; an unexpected exception is logged and shown as one error line."""
    try:
        page.run()
    except Exception as exc:        # noqa: BLE001 - Streamlit's rerun/stop are BaseExceptions
        _LOG.exception("page %s failed", getattr(page, "url_path", "?"))
        if os.environ.get("LLMPARA_RAISE_PAGE_ERRORS") == "1":
            raise
        st.error("This page could not finish for these settings ("
                 f"{escape_md(public_message(exc))}). Change the settings or reload the page.",
                 icon=":material/error:")
