"""The honest name of a Design-space design opened in the Overview.

"Open this design in the Overview" (app_pages/design_space_page.py) sets the sidebar hardware
to the design's base preset with the design's peak, bandwidth, capacity, TDP and price as
overrides, and records ``{"name", "hardware", "overrides"}`` under ``OPENED``. While the sidebar
still holds exactly that, the scenario can be labelled "Design #k (from <base>)" instead of
"<base> (edited)"; any other edit makes it an ordinary edited preset again.
"""

from __future__ import annotations

from typing import Mapping

OPENED = "_ds_opened_design"


def opened_design_name(state: Mapping, hardware_slug: str,
                       overrides: tuple[tuple[str, float], ...]) -> str | None:
    """The opened design's name if ``hardware_slug`` and ``overrides`` (the sidebar's active
    overrides, ``(key, value)`` pairs) are exactly the design's, else None."""
    d = state.get(OPENED)
    if not isinstance(d, Mapping) or d.get("hardware") != hardware_slug:
        return None
    want = {k: float(v) for k, v in (d.get("overrides") or {}).items() if v is not None}
    have = {k: float(v) for k, v in overrides}
    return str(d.get("name")) if want and have == want else None
