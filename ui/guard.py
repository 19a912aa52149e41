"""The app's last line of defence: an exception a page did not expect becomes one st.error
line (its type and a message with server paths removed), never a traceback, and the full
traceback goes to the server log only.

It also gives the page's long computations a time budget (CPU seconds of the page's thread,
and wall seconds so a saturated host cannot hold a page for minutes):
past it they stop with a message saying so instead of holding the session; and it shortens the
interpreter's thread switch interval so a computing page does not hold up the server.

Tests set ``LLMPARA_RAISE_PAGE_ERRORS=1`` (tests/conftest.py) so AppTest still sees the
exception; the hostile-input suite turns it off to check what a visitor sees.
"""

from __future__ import annotations

import logging
import os
import re
import sys

import streamlit as st

from llmpara_core.budget import (PAGE_CPU_BUDGET_S, PAGE_WALL_BUDGET_S, TimeBudgetExceeded,
                                 time_budget)

from .format import escape_md
from .memory import start_trimmer

_LOG = logging.getLogger("llmpara.app")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-]+){2,}")
MAX_SHOWN_CHARS = 300


def public_message(exc: BaseException) -> str:
    """``Type: first line of the message`` with file-system paths replaced by '<path>' and cut
    to MAX_SHOWN_CHARS."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    text = f"{type(exc).__name__}: {_PATH.sub('<path>', first)}".rstrip(": ")
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS - 3] + "..."


# Pages run in script threads that share the interpreter lock with the server's event loop
# (health checks, other users' messages). At Python's default 5 ms switch interval a
# computing page kept the health check waiting up to 1.07 s in the load test (5 worst links
# and a user on 2 cores); at 1 ms its max was 0.07-0.34 s in 5 runs (tests/test_load.py,
# phase a).
SWITCH_INTERVAL_S = 0.001

BUDGET_ADVICE = ("ask for less (fewer requests, rates, designs or generations) or run it "
                 "with the command-line tool, which has no time budget")


def run_page(page, budget_s: float | None = None, wall_s: float | None = None) -> None:
    """``page.run()`` with a time budget of ``budget_s`` CPU seconds (default
    PAGE_CPU_BUDGET_S) and ``wall_s`` wall seconds (default PAGE_WALL_BUDGET_S) for its long
    computations (``llmpara_core.budget.time_budget``); a
    computation that hits it, or an unexpected exception, is shown as one error line (the
    latter also logged with its traceback)."""
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
    start_trimmer()
    try:
        with time_budget(PAGE_CPU_BUDGET_S if budget_s is None else budget_s, BUDGET_ADVICE,
                         wall_s=PAGE_WALL_BUDGET_S if wall_s is None else wall_s):
            page.run()
    except TimeBudgetExceeded as exc:     # a page that does not catch ConfigError itself
        st.error(f"Stopped: {escape_md(exc)}.", icon=":material/timer_off:")
    except Exception as exc:        # noqa: BLE001 - Streamlit's rerun/stop are BaseExceptions
        _LOG.exception("page %s failed", getattr(page, "url_path", "?"))
        if os.environ.get("LLMPARA_RAISE_PAGE_ERRORS") == "1":
            raise
        st.error("This page could not finish for these settings ("
                 f"{escape_md(public_message(exc))}). Change the settings or reload the page.",
                 icon=":material/error:")
