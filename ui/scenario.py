"""The shared scenario: URL <-> state, the preset catalogue, and ``get_scenario()`` for every
page. The sidebar that edits the state is :mod:`ui.sidebar`; page-local URL-bound widgets are
in :mod:`ui.url_widgets`.

Pages use::

    from ui.scenario import get_scenario
    from ui.url_widgets import url_selectbox
    scn = get_scenario()            # .model .hardware (overrides applied) .precision .workload .query
    view = url_selectbox("View", ["a", "b"], key="myview")   # page-local, URL-bound, validated

The sidebar keys (``ui.links.SCENARIO_KEYS``) are synced to the URL by hand (read and validated
once per session, written back complete on every run), so links always carry every key and a
bad value gives a visible warning. Page-local widgets use ``bind="query-params"`` through the
``url_*`` helpers, which warn about invalid link values before Streamlit drops them; the
number boxes (``url_number``) sync by hand too, so they paint a link's value at once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import streamlit as st

from llmpara_core.calibration.stacks import DEFAULT, Stack, with_stack
from llmpara_core.errors import ConfigError, PresetNotFoundError
from llmpara_core.hardware import Hardware
from llmpara_core.model import Model, with_architecture
from llmpara_core.precision import PRECISION_PRESETS, DType, Precision
from llmpara_core.presets import find_preset, list_presets, load_hardware, load_model
from llmpara_core.units import BYTES_PER_GB, FLOPS_PER_TFLOP, S_PER_US
from llmpara_core.workload import Workload

from . import links
from .opened_design import opened_design_name
from .format import escape_md
from .links import (ARCH_CHOICES, ARCH_EDITS, ARCH_KEYS, DTYPES, OVERRIDES, SCENARIO_KEYS, Catalog,
                    format_number, parse_query, to_query)

DEFAULT_MODELS = ("llama-3-8b", "Llama-3 8B", "Llama-3.1 8B", "meta-llama-3-8b")
DEFAULT_HARDWARE = ("nvidia-h100-sxm", "NVIDIA H100 SXM", "H100 SXM")

_LOADED = "_url_loaded"
_WARNINGS = "_url_warnings"
_PAGE_LINK = "_page_link_params"
_CUSTOM = "_custom_model"
_HW_SOURCE = "_hardware_source"
_CUSTOM_HW = "_custom_hardware"
HW_PRESET, HW_FILE = "Preset", "TOML file"
_SOURCE = "_model_source"
_SHADOW = "_scenario_shadow"
_URL_NUMBERS = "_url_number_values"     # page-local number boxes: last value per key
_GOOD_NUMBERS = "_sidebar_good_numbers"     # sidebar number boxes: last accepted value per key
_REJECTED_NUMBERS = "_sidebar_rejected"     # sidebar boxes holding a rejected typed value
SOURCE_PRESET, SOURCE_CONFIG = "Preset", "config.json"
IMAGE_FORMAT = "_chart_image_format"
_SHADOWED = (*SCENARIO_KEYS, _SOURCE, _HW_SOURCE, IMAGE_FORMAT)


@dataclass(frozen=True)
class Scenario:
    """Everything a page needs to analyse the sidebar's scenario.

    ``hardware`` has the sidebar's overrides applied (``base_hardware`` is the untouched
    preset); ``query`` is the complete URL query of the scenario (``ui.links`` format)."""
    model: Model
    hardware: Hardware
    precision: Precision
    workload: Workload
    query: dict = field(compare=False, hash=False)
    model_slug: str = ""
    hardware_slug: str = ""
    precision_preset: str = "FP16"
    base_hardware: Hardware | None = field(default=None, compare=False)
    overrides: tuple[tuple[str, float], ...] = ()
    custom_model: bool = False
    framework: str = DEFAULT        # the stack asked for: "default", "generic" or a profile
    custom_hardware: bool = False
    stack: Stack | None = None      # the stack ``hardware`` runs under (``framework`` resolved)

    def on(self, hardware: Hardware) -> Hardware:
        """Another device as this scenario sees it: the same stack if one was chosen, else
        that device's class default."""
        return with_framework(hardware, self.framework)

    def stack_of(self, hardware: Hardware) -> Stack:
        """The stack ``hardware`` runs under in this scenario (see ``on``)."""
        return with_stack(hardware, self.framework)[1]

    @property
    def label(self) -> str:
        """One line naming the scenario (plain text)."""
        w = self.workload
        stack = f" · {self.stack.label}" if self.stack is not None else ""
        return (f"{self.model.name} · {self.hardware.name}{stack} · {self.precision.name} · "
                f"batch {w.batch} · prompt {w.prompt_len} · gen {w.gen_len}")


# ---- catalogue ------------------------------------------------------------------------------

def _resolver(kind: str) -> Callable[[str], str | None]:
    def resolve(name: str) -> str | None:
        try:
            return find_preset(kind, name).slug
        except (PresetNotFoundError, ConfigError):
            return None
    return resolve


def _resolve_precision(name: str) -> str | None:
    for key in PRECISION_PRESETS:
        if key.lower() == str(name).strip().lower():
            return key
    return None


def precision_bits(name: str) -> dict:
    """The sidebar's bit fields for a precision preset (``wbits`` = the FFN weights' bits)."""
    p = PRECISION_PRESETS[name]
    return {"wbits": p.weight_ffn_bits, "wattn": p.weight_attn_bits, "wffn": p.weight_ffn_bits,
            "wemb": p.weight_embed_bits, "abits": p.activation_bits, "kvbits": p.kv_bits,
            "dtype": p.compute_dtype.value}


def _first_found(kind: str, candidates: Sequence[str]) -> str:
    resolve = _resolver(kind)
    for c in candidates:
        slug = resolve(c)
        if slug:
            return slug
    infos = [i for i in list_presets(kind) if not i.draft] or list(list_presets(kind))
    if not infos:
        raise ConfigError(f"no {kind} presets found in presets/{kind}/")
    return infos[0].slug


def catalog() -> Catalog:
    return Catalog(resolve_model=_resolver("models"), resolve_hardware=_resolver("hardware"),
                   resolve_precision=_resolve_precision, precision_bits=precision_bits,
                   default_model=_first_found("models", DEFAULT_MODELS),
                   default_hardware=_first_found("hardware", DEFAULT_HARDWARE))


def model_options() -> list[str]:
    """Model preset slugs, grouped by family (the label starts with it), then by name."""
    infos = sorted(list_presets("models"), key=lambda i: (i.category.lower(), i.name.lower()))
    return [i.slug for i in infos]


def hardware_options() -> list[str]:
    infos = sorted(list_presets("hardware"), key=lambda i: (i.category, i.name.lower()))
    return [i.slug for i in infos]


@functools.lru_cache(maxsize=4096)
def preset_label(kind: str, slug: str) -> str:
    """'family · name' (models) or 'class · name' (hardware) for selectboxes; search matches
    both parts. Page-local link values use this text: keep it stable."""
    for i in list_presets(kind):
        if i.slug == slug:
            group = i.category or "other"
            return f"{group} · {i.name}"
    return slug


@functools.lru_cache(maxsize=4096)
def preset_name(kind: str, slug: str) -> str:
    """The preset's display name ('NVIDIA H100 SXM5 80GB')."""
    return preset_label(kind, slug).split(" · ", 1)[-1]


_VENDOR_WORDS = ("NVIDIA", "GeForce", "AMD", "Instinct", "Apple", "Intel", "Google",
                 "Qualcomm")


def name_first(kind: str, slug: str) -> str:
    """The preset's name for the sidebar's selectboxes (their values are slugs, so this text
    never enters a link), vendor words moved to the end ('2x RTX 4090 (PCIe) · NVIDIA
    GeForce'): the sidebar cuts the end of a long label, so the model number stays visible
    and the vendor is still searchable."""
    words = preset_name(kind, slug).split(" ")
    vendor = [w for w in words if w in _VENDOR_WORDS]
    rest = [w for w in words if w not in _VENDOR_WORDS]
    return " ".join(rest) + (" · " + " ".join(vendor) if vendor and rest else "")


def model_label(slug: str) -> str:
    return preset_label("models", slug)


def hardware_label(slug: str) -> str:
    return preset_label("hardware", slug)


# ---- state <-> URL --------------------------------------------------------------------------

def ensure_state() -> None:
    """Read and validate the URL once per session into ``st.session_state``."""
    ss = st.session_state
    if ss.get(_LOADED):
        return
    try:
        cat = catalog()
    except ConfigError as e:
        st.error(f"Presets could not be loaded: {escape_md(e)}")
        st.stop()
    raw = {k: st.query_params.get_all(k) for k in st.query_params}
    state, warnings = parse_query(raw, cat)
    for k, v in state.items():
        ss[k] = v
    warnings = list(warnings) + _drop_invalid_arch_edits()
    ss[_WARNINGS] = list(warnings)
    ss.setdefault(_SOURCE, SOURCE_PRESET)
    ss.setdefault(_HW_SOURCE, HW_PRESET)
    ss.setdefault(IMAGE_FORMAT, "png")
    ss[_LOADED] = True
    _save_shadow()


def _drop_invalid_arch_edits() -> list[str]:
    """Architecture edits from a link that make the model invalid (each value in range, the
    combination not: 7 heads for hidden size 4096) are dropped with a warning naming them."""
    ss = st.session_state
    edited = [k for k in ARCH_KEYS if ss.get(k) is not None]
    if not edited:
        return []
    try:
        _build(tuple(current_state().items()), None)
        return []
    except ConfigError as e:
        keys = ", ".join(f"`{k}={ss[k] if isinstance(ss[k], str) else format_number(ss[k])}`"
                         for k in edited)
        for k in edited:
            ss[k] = None
        return [f"Link architecture edits {keys} dropped: {escape_md(e)}; using the preset's "
                "dimensions."]


def _save_shadow() -> None:
    ss = st.session_state
    ss[_SHADOW] = {k: ss.get(k) for k in _SHADOWED}


def restore_state() -> None:
    """Streamlit drops the state of a widget it did not draw in the previous run: the preset
    picker while a config.json is used, and every sidebar widget after ``st.switch_page``.
    The scenario keys are mirrored in a plain (non-widget) key and put back before the
    widgets are drawn."""
    ss = st.session_state
    for k, v in ss.get(_SHADOW, {}).items():
        if k not in ss:
            ss[k] = v


def current_state() -> dict:
    """The scenario keys' values; a sidebar box holding a rejected typed value counts as its
    last accepted value (the box shows the rejection, ``ui.sidebar._number_box``)."""
    ss = st.session_state
    state = {k: ss.get(k) for k in SCENARIO_KEYS}
    for k, good in ss.get(_REJECTED_NUMBERS, {}).items():
        if k in state:
            state[k] = good
    return state


def sync_url() -> None:
    """Write the complete scenario query into the URL (only the keys that changed)."""
    want = to_query(current_state())
    qp = st.query_params
    changes = {k: v for k, v in want.items() if qp.get_all(k) != [v]}
    if changes:
        qp.update(changes)
    for k in links.OPTIONAL_KEYS:
        if k not in want and k in qp:
            del qp[k]


_WARNING_SLOT = "_link_warning_slot"


def add_warning(message: str) -> None:
    """A link problem shown at the top of the page until dismissed (markdown-safe text). It is
    drawn at once, so it stays visible even if the page stops right after (``st.stop``)."""
    lst = st.session_state.setdefault(_WARNINGS, [])
    if message not in lst:
        lst.append(message)
        _draw_warnings(final=False)


def link_warnings() -> list[str]:
    return list(st.session_state.get(_WARNINGS, []))


def _dismiss_warnings() -> None:
    st.session_state[_WARNINGS] = []


def _draw_warnings(final: bool) -> None:
    """(Re)draw the link warnings into this run's slot; the dismiss button only in the final
    drawing (a widget may be drawn once per run)."""
    slot = st.session_state.get(_WARNING_SLOT)
    if slot is None:
        return
    msgs = link_warnings()
    if not msgs:
        slot.empty()
        return
    with slot.container():
        for m in msgs:
            st.warning(m, icon=":material/link_off:")
        if final:
            st.button("Dismiss link warnings", key="_dismiss_link_warnings",
                      on_click=_dismiss_warnings)


def open_warning_slot() -> None:
    """Reserve the place of the link warnings (top of the page) and draw the ones known before
    the page runs; warnings a page adds later appear there at once."""
    st.session_state[_WARNING_SLOT] = st.empty()
    _draw_warnings(final=False)


def render_link_warnings() -> None:
    """The final drawing of the link warnings (with the dismiss button), after the page ran."""
    if st.session_state.get(_WARNING_SLOT) is None:
        open_warning_slot()
    _draw_warnings(final=True)
    st.session_state.pop(_WARNING_SLOT, None)


# ---- building the scenario ------------------------------------------------------------------

def _overrides(state: dict) -> tuple[tuple[str, float], ...]:
    return tuple((o.key, float(state[o.key])) for o in OVERRIDES if state.get(o.key) is not None)


def apply_overrides(hw: Hardware, overrides: tuple[tuple[str, float], ...],
                    name: str | None = None) -> Hardware:
    """The preset with the sidebar's edits (unit conversion only; the core validates), named
    ``name`` (default: "<preset> (edited)"). An edited bandwidth or peak drops the preset's
    ``compute_units`` (a design point, as in the Design space)."""
    if not overrides:
        return hw
    o = dict(overrides)
    changes: dict[str, Any] = {}
    for d in DTYPES:
        if f"peak_{d}" in o:
            changes[f"peak_{d}_flops_per_s"] = o[f"peak_{d}"] * FLOPS_PER_TFLOP
    acc16, fp16 = hw.peak_fp16_acc16_flops_per_s, hw.peak_fp16_flops_per_s
    if "peak_fp16" in o and acc16 and fp16:
        # the edited card keeps its FP16-accumulate mode at the preset's ratio (GeForce: 2x)
        changes["peak_fp16_acc16_flops_per_s"] = changes["peak_fp16_flops_per_s"] * acc16 / fp16
    if "bw" in o:
        changes["memory_bandwidth_bytes_per_s"] = o["bw"] * BYTES_PER_GB
    if "bw" in o or any(f"peak_{d}" in o for d in DTYPES):
        # a device with another bandwidth or peak is a design point, as in the Design space:
        # its compute units are not known, so the preset's weight-streaming bound per unit
        # (roofline.weight_stream_limits) is not carried over (the result says so)
        changes["compute_units"] = None
    if "cap" in o:
        changes["memory_capacity_bytes"] = o["cap"] * BYTES_PER_GB
    if "tdp" in o:
        changes["tdp_w"] = o["tdp"]
    if "price" in o:
        changes["price_usd"] = o["price"]
    if {"eff_compute", "eff_memory", "overhead_us"} & o.keys():
        eff = hw.effective_efficiency
        changes["efficiency"] = replace(   # keeps the fields the sidebar does not edit
            eff, compute=o.get("eff_compute", eff.compute), memory=o.get("eff_memory", eff.memory),
            kernel_overhead_s=o["overhead_us"] * S_PER_US if "overhead_us" in o
            else eff.kernel_overhead_s)
    return replace(hw, name=name or f"{hw.name} (edited)", **changes)


def build_precision(state: dict) -> Precision:
    base = PRECISION_PRESETS[state["prec"]]
    p = replace(base, weight_attn_bits=float(state["wattn"]),
                weight_ffn_bits=float(state["wffn"]), weight_embed_bits=float(state["wemb"]),
                activation_bits=float(state["abits"]), kv_bits=float(state["kvbits"]),
                compute_dtype=DType(state["dtype"]))
    return p if p == base else replace(p, name="custom")


def arch_edits(state: dict) -> dict:
    """The edited architecture of a state (``with_architecture`` field -> value)."""
    out: dict = {a.field: int(state[a.key]) for a in ARCH_EDITS if state.get(a.key) is not None}
    out.update({c.field: state[c.key] for c in ARCH_CHOICES if state.get(c.key) is not None})
    return out


def with_framework(hardware: Hardware, framework: str) -> Hardware:
    """``hardware`` under the inference stack ``framework`` ("default" = its class's
    default stack, "generic" = the class's fitted values, i.e. unchanged; see
    ``llmpara_core.calibration.stacks``)."""
    return with_stack(hardware, framework)[0]


@functools.lru_cache(maxsize=128)
def _build(items: tuple, custom: Model | None, custom_hw: Hardware | None = None,
           design_name: str | None = None) -> Scenario:
    state = dict(items)
    model = custom if custom is not None else with_architecture(load_model(state["model"]),
                                                                **arch_edits(state))
    base_hw = custom_hw if custom_hw is not None else load_hardware(state["hardware"])
    ov = _overrides(state)
    wl = Workload(batch=int(state["batch"]), prompt_len=int(state["prompt"]),
                  gen_len=int(state["gen"]), flash_attention=bool(state["flash"]))
    fw = state.get("fw") or DEFAULT
    stack_hw, stack = with_stack(base_hw, fw)
    hw = apply_overrides(stack_hw, ov, design_name)
    return Scenario(model, hw, build_precision(state), wl, to_query(state), state["model"],
                    state["hardware"], state["prec"], base_hw, ov, custom is not None, fw,
                    custom_hw is not None, stack)


def _custom_model() -> Model | None:
    ss = st.session_state
    return ss.get(_CUSTOM) if ss.get(_SOURCE) == SOURCE_CONFIG else None


def _custom_hardware() -> Hardware | None:
    ss = st.session_state
    return ss.get(_CUSTOM_HW) if ss.get(_HW_SOURCE) == HW_FILE else None


def try_scenario() -> tuple[Scenario | None, str | None]:
    """(scenario, None) or (None, error message) for the current state."""
    ensure_state()
    state = current_state()
    try:
        items = tuple(state.items())
        name = (None if _custom_hardware() is not None else
                opened_design_name(st.session_state, state["hardware"], _overrides(state)))
        return _build(items, _custom_model(), _custom_hardware(), name), None
    except ConfigError as e:
        return None, str(e)


def get_scenario() -> Scenario:
    """The sidebar's scenario. On an invalid scenario it shows the core's message and stops
    the page (never a traceback)."""
    scn, err = try_scenario()
    if scn is None:
        st.error(f"This scenario cannot be analysed: {escape_md(err)}")
        st.stop()
    return scn


def chart_config(filename: str) -> dict:
    """Plotly config for st.plotly_chart: the camera button downloads PNG or SVG (sidebar
    'Display' setting)."""
    fmt = st.session_state.get(IMAGE_FORMAT, "png")
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": filename, "scale": 2}}
