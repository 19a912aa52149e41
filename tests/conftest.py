"""Shared pytest setup. Keep each block small; other suites may add theirs below."""

import logging

# AppTest logs a harmless "missing ScriptRunContext ... bare mode" warning per instance;
# Streamlit resets logger levels, so the logger is disabled instead (STREAMLIT.md §3.1).
logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").disabled = True

# AppTest must still see page exceptions that ui/guard.py would turn into an st.error line.
import os  # noqa: E402

os.environ.setdefault("LLMPARA_RAISE_PAGE_ERRORS", "1")

# The CLI's wall-clock budget (llmpara_core/budget.py, default 20 s) is generous here so a
# slow, shared CI machine does not trip it; the tiny-budget tests set their own.
os.environ.setdefault("LLMPARA_TIME_BUDGET_S", "600")
