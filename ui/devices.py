"""The page-level device box (Sharding, Serving): defaults to the sidebar's hardware, follows it
when the sidebar changes, and says so in a banner naming both when it overrides it (issue 28,
item 1)."""

from __future__ import annotations

import streamlit as st

from llmpara_core.hardware import Hardware
from llmpara_core.presets import list_presets, load_hardware

from .format import escape_md
from .scenario import Scenario
from .url_widgets import url_selectbox

SIDEBAR = "sidebar"


@st.cache_data(max_entries=8, show_spinner=False)
def cluster_slugs() -> list[str]:
    """Hardware presets that are a device plus an [interconnect] (multi-device presets)."""
    return [i.slug for i in list_presets("hardware") if load_hardware(i.slug).interconnect]


def device_specs(h: Hardware) -> tuple:
    """What tells one device from another: bandwidth, capacity and 16-bit peak."""
    from llmpara_core.precision import DType
    return (h.memory_bandwidth_bytes_per_s, h.memory_capacity_bytes,
            h.peak_flops_per_s_raw(DType.FP16))


def same_device_clusters(hw: Hardware, clusters: list[str]) -> list[str]:
    """The cluster presets built of ``hw``'s device: switched fabrics before boards of direct
    links (``Interconnect.peer_bandwidth_bytes_per_s``: a pair gets only its own links), then
    fewest devices first."""
    same = [c for c in clusters if device_specs(load_hardware(c)) == device_specs(hw)]

    def order(c):
        ic = load_hardware(c).interconnect
        return ic.peer_bandwidth_bytes_per_s is not None, ic.devices
    return sorted(same, key=order)


def _sidebar_identity(scn: Scenario) -> tuple:
    return (st.session_state.get("hardware"), scn.custom_hardware, scn.hardware.name)


def device_select(scn: Scenario, key: str, label: str, clusters: list[str], default: str,
                  help: str) -> str:
    """A URL-bound select of the sidebar's hardware or a cluster preset; returns the choice.

    ``default`` is the choice for the current sidebar hardware. When the sidebar's hardware
    changes after the page made its choice (the page was opened first, or the link named a
    cluster), the box goes back to ``default``: a page never keeps a device the reader left
    in the sidebar."""
    ss = st.session_state
    memo = f"_{key}_sidebar"
    now = _sidebar_identity(scn)
    if memo in ss and ss[memo] != now:
        ss[key] = default
    ss[memo] = now
    names = {c: load_hardware(c).name for c in clusters}
    return url_selectbox(label, [SIDEBAR] + clusters, key=key, default=default,
                         format_func=lambda c: "Sidebar hardware" if c == SIDEBAR else names[c],
                         help=help)


def override_banner(scn: Scenario, hw: Hardware, choice: str, why: str = "") -> None:
    """Under the device box: a visible banner when the page runs on other devices than the
    sidebar's (naming both), a caption when it runs on a cluster of the sidebar's device."""
    if choice == SIDEBAR:
        return
    if device_specs(hw) == device_specs(scn.hardware):
        n = hw.interconnect.devices if hw.interconnect else 1
        st.caption(f"{n} × the sidebar's {escape_md(scn.hardware.name)} with the links of the "
                   f"cluster preset {escape_md(hw.name)}.")
        return
    st.info(f"This page runs on **{escape_md(hw.name)}**, not on the sidebar's "
               f"**{escape_md(scn.hardware.name)}**{escape_md(why)}. Choose *Sidebar hardware* "
               "in the box above to follow the sidebar.", icon=":material/swap_horiz:")
