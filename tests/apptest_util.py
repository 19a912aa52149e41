"""Shared AppTest plumbing for the page tests: open the app on a page with a link's query."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")


def open_page(page: str | None = None, timeout: float = 120, **params) -> AppTest:
    """Run the entrypoint with ``params`` as the URL query, then switch to ``page`` (a file
    under app_pages/) as the sidebar navigation would; ``page`` None stays on the default."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    return at


def metric(at: AppTest, label: str) -> str:
    """The shown value of the metric labelled ``label``."""
    return next(m.value for m in at.metric if m.label == label)
