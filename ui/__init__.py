"""Streamlit helpers shared by the pages: the scenario sidebar and links (``scenario``,
``links``), cached core calls (``compute``), charts, tables and unit formatting."""
