"""The shared scenario: sidebar widgets, URL <-> state, and ``get_scenario()`` for every page.

Pages use::

    from ui.scenario import get_scenario, url_selectbox
    scn = get_scenario()            # .model .hardware (overrides applied) .precision .workload .query
    view = url_selectbox("View", ["a", "b"], key="myview")   # page-local, URL-bound, validated

The sidebar keys (``ui.links.SCENARIO_KEYS``) are synced to the URL by hand (read and validated
once per session, written back complete on every run), so links always carry every key and a
bad value gives a visible warning. Page-local widgets use ``bind="query-params"`` through the
``url_*`` helpers here, which warn about invalid link values before Streamlit drops them; the
number boxes (``url_number``) sync by hand too, so they paint a link's value at once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import streamlit as st

from llmpara_core.calibration import FRAMEWORKS, GENERIC, efficiency_for
from llmpara_core.errors import ConfigError, PresetNotFoundError
from llmpara_core.hardware import Hardware
from llmpara_core.model import Model, PositionKind, with_architecture
from llmpara_core.precision import PRECISION_PRESETS, DType, Precision
from llmpara_core.presets import find_preset, list_presets, load_hardware, load_model
from llmpara_core.roofline import rates
from llmpara_core.units import BYTES_PER_GB, FLOPS_PER_TFLOP, S_PER_US
from llmpara_core.workload import Workload

from . import links
from .compute import model_from_config
from .opened_design import opened_design_name
from .format import escape_md, fmt_bandwidth, fmt_bytes, fmt_flops_per_s, sig
from .links import (ARCH_CHOICES, ARCH_EDITS, ARCH_KEYS, BATCH_RANGE, BITS_RANGE, DTYPES,
                    FRAMEWORK_OPTIONS, OVERRIDES, SCENARIO_KEYS, TOKENS_RANGE, WEIGHT_COMPONENT_KEYS, Catalog,
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
    framework: str = GENERIC
    custom_hardware: bool = False

    def on(self, hardware: Hardware) -> Hardware:
        """Another device as this scenario sees it (same inference-stack profile)."""
        return with_framework(hardware, self.framework)

    @property
    def label(self) -> str:
        """One line naming the scenario (plain text)."""
        w = self.workload
        stack = "" if self.framework == GENERIC else f" · {FRAMEWORKS[self.framework][0]}"
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
    ss = st.session_state
    return {k: ss.get(k) for k in SCENARIO_KEYS}


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
    ``name`` (default: "<preset> (edited)")."""
    if not overrides:
        return hw
    o = dict(overrides)
    changes: dict[str, Any] = {}
    for d in DTYPES:
        if f"peak_{d}" in o:
            changes[f"peak_{d}_flops_per_s"] = o[f"peak_{d}"] * FLOPS_PER_TFLOP
    if "bw" in o:
        changes["memory_bandwidth_bytes_per_s"] = o["bw"] * BYTES_PER_GB
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
    """``hardware`` with the efficiency of an inference stack's profile (``GENERIC`` = the
    class's fitted values, i.e. unchanged)."""
    if framework == GENERIC:
        return hardware
    return replace(hardware, efficiency=efficiency_for(hardware, framework))


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
    fw = state.get("fw") or GENERIC
    hw = apply_overrides(with_framework(base_hw, fw), ov, design_name)
    return Scenario(model, hw, build_precision(state), wl, to_query(state), state["model"],
                    state["hardware"], state["prec"], base_hw, ov, custom is not None, fw,
                    custom_hw is not None)


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


# ---- sidebar --------------------------------------------------------------------------------

def _on_hardware_change() -> None:
    for o in OVERRIDES:
        st.session_state[o.key] = None


def _on_precision_change() -> None:
    st.session_state.update(precision_bits(st.session_state["prec"]))


def _on_wbits_change() -> None:
    v = st.session_state.get("wbits")
    if v is not None:
        for k in WEIGHT_COMPONENT_KEYS:
            st.session_state[k] = v


def _reset_overrides() -> None:
    _on_hardware_change()


def _use_config(text: bytes, name: str) -> None:
    ss = st.session_state
    try:
        ss[_CUSTOM] = model_from_config(text, name)
        ss["_custom_model_error"] = None
    except ConfigError as e:
        ss[_CUSTOM] = None
        ss["_custom_model_error"] = str(e)


def _new_upload(label: str, ext: str, key: str, max_mb: int) -> tuple[bytes, str] | None:
    """(contents, file name) of a file uploader's file the first run after it was chosen;
    None otherwise (a file stays in the uploader across reruns and must be parsed once)."""
    up = st.file_uploader(label, type=[ext], key=key, max_upload_size=max_mb)
    if up is None:
        return None
    data = up.getvalue()
    seen = (up.file_id, len(data))
    if st.session_state.get(f"{key}_id") == seen:
        return None
    st.session_state[f"{key}_id"] = seen
    return data, up.name


def _use_hardware_file(text: bytes, origin: str) -> None:
    """Parse a hardware TOML (the presets' format); errors are kept for the sidebar."""
    from llmpara_core.hardware_io import hardware_from_dict
    from llmpara_core.safeio import parse_toml
    ss = st.session_state
    try:
        try:
            data = parse_toml(text.decode("utf-8"), origin)
        except UnicodeDecodeError:
            raise ConfigError(f"{origin}: not UTF-8 text") from None
        ss[_CUSTOM_HW] = hardware_from_dict(data, origin=origin, slug="uploaded-hardware")
        ss["_custom_hw_error"] = None
    except ConfigError as e:
        ss[_CUSTOM_HW] = None
        ss["_custom_hw_error"] = str(e)


def _hardware_file_section() -> None:
    from llmpara_core.hardware_io import dumps_toml, hardware_to_dict
    ss = st.session_state
    new = _new_upload("Upload hardware TOML", "toml", "_hw_upload", 1)
    if new is not None:
        _use_hardware_file(new[0], f"uploaded {new[1]}")
    if "_hw_text" not in ss:     # start from the preset's own file
        try:
            ss["_hw_text"] = dumps_toml(hardware_to_dict(load_hardware(ss["hardware"])))
        except ConfigError:
            ss["_hw_text"] = ""
    with st.form("_paste_hw", border=False):
        text = st.text_area("…or edit / paste one (format: README)", key="_hw_text", height=160)
        if st.form_submit_button("Use this hardware"):
            _use_hardware_file(text.encode("utf-8"), "pasted hardware")
    err = ss.get("_custom_hw_error")
    if err:
        st.error(f"Hardware file rejected: {escape_md(err)}")
    if ss.get(_CUSTOM_HW) is None:
        st.info("No hardware file loaded yet; the preset "
                f"'{escape_md(hardware_label(ss['hardware']))}' is used.")
    else:
        st.caption(f"Using **{escape_md(ss[_CUSTOM_HW].name)}** from the file.")


def _model_section() -> None:
    ss = st.session_state
    st.radio("Model source", [SOURCE_PRESET, SOURCE_CONFIG], key=_SOURCE, horizontal=True,
             help="A preset, or any Hugging Face config.json (uploaded or pasted).")
    if ss[_SOURCE] == SOURCE_PRESET:
        st.selectbox("Model preset", model_options(), key="model",
                     format_func=lambda s: name_first("models", s),
                     help="Type to search; grouped by family.", on_change=_reset_arch)
        _architecture_editor()
        return
    new = _new_upload("Upload config.json", "json", "_config_upload", 2)
    if new is not None:
        _use_config(new[0], new[1].removesuffix(".json") if new[1] != "config.json"
                    else "uploaded model")
    with st.form("_paste_config", border=False):
        text = st.text_area("…or paste config.json", key="_config_text", height=120)
        name = st.text_input("Name", key="_config_name", placeholder="my-model")
        if st.form_submit_button("Use pasted config"):
            _use_config(text.encode("utf-8"), name.strip() or "pasted model")
    err = ss.get("_custom_model_error")
    if err:
        st.error(f"config.json rejected: {escape_md(err)}")
    if ss.get(_CUSTOM) is None:
        st.info("No config loaded yet; the preset "
                f"'{escape_md(model_label(ss['model']))}' is used.")


def _number_box(where, label: str, key: str, lo, hi, **kwargs):
    """A sidebar number box (bound to ``st.session_state[key]``) whose first paint shows the
    scenario's value.

    Streamlit's number box first paints the element's *default* and applies a value set
    through ``st.session_state`` one render later (tests/test_first_paint.py records
    Batch 1, Prompt 0 for a link with batch=7, prompt=4096). On a busy machine that first paint
    lasted seconds: the load test read Batch 1 in 4 of 36 linked sessions although the session
    (and the URL) held the link's value. So the current value is also given as the box's
    default; a keyed box's identity does not depend on it, so this never resets the box.
    (A blank-by-default box that holds a value cannot be emptied then: Streamlit lets only a
    box without a default be cleared; its section's "Reset to preset" button clears it.)"""
    v = st.session_state.get(key)
    if v is not None:
        v = type(lo)(v)
    if v is None or lo <= v <= hi:      # (state is validated; out of range: Streamlit's error)
        kwargs["value"] = v
    return where.number_input(label, lo, hi, key=key, **kwargs)


def _reset_arch() -> None:
    for k in ARCH_KEYS:
        st.session_state[k] = None


_MOE_FIELDS = ("num_experts", "experts_per_token", "expert_intermediate_size",
               "shared_intermediate_size")


def _preset_value(base: Model, field: str):
    """The preset's value of an editable field (None where the model lacks the feature)."""
    if field in _MOE_FIELDS:
        return getattr(base.moe, field) if base.moe is not None else None
    if field in ("kv_lora_rank", "q_lora_rank"):
        return getattr(base.mla, field) if base.mla is not None else None
    value = getattr(base, field)
    return value.value if hasattr(value, "value") else value


def _architecture_editor() -> None:
    """Blank = the preset's value; edits travel in the link (a_* keys). MoE fields on a dense
    preset make it MoE; MLA ranks show for MLA models, RoPE fields for RoPE models."""
    ss = st.session_state
    try:
        base = load_model(ss["model"])
    except ConfigError as e:
        st.error(escape_md(e))
        return
    n_edit = sum(ss.get(k) is not None for k in ARCH_KEYS)
    with st.expander("Edit architecture" + (f" ({n_edit} edited)" if n_edit else "")):
        st.caption("Blank = the preset's value. Any other field: use a config.json.")
        for a in ARCH_EDITS:
            pv = _preset_value(base, a.field)
            if a.field in ("kv_lora_rank", "q_lora_rank") and base.mla is None:
                continue
            if a.field == "shared_intermediate_size" and base.moe is None:
                continue
            shown = pv if pv is not None else ("dense" if a.field in _MOE_FIELDS else "none")
            _number_box(st, a.label, a.key, *a.range, step=1, placeholder=f"preset: {shown}")
        for c in ARCH_CHOICES:
            pv = _preset_value(base, c.field)
            if c.field.startswith("rope") and base.position is not PositionKind.ROPE:
                continue
            if c.options:
                st.selectbox(c.label, [None, *c.options], key=c.key,
                             format_func=lambda o, pv=pv: f"preset: {pv}" if o is None else o)
            else:
                _number_box(st, c.label, c.key, c.lo + 1e-9, c.hi, format="%g", step=None,
                            placeholder=f"preset: {pv:g}" if pv else "preset")
        if n_edit:
            st.button("Reset to preset", key="_reset_arch", on_click=_reset_arch)


def _model_details(model: Model, custom: bool) -> None:
    feats = [k for k, v in model.features.items() if v]
    st.caption("Detected: " + (escape_md(", ".join(feats)) if feats else "dense MHA"))
    if model.warnings:
        if custom:
            for w in model.warnings:
                st.warning(escape_md(w))
        else:
            with st.expander(f"Preset notes ({len(model.warnings)})"):
                for w in model.warnings:
                    st.caption(escape_md(w))


def _hardware_section(scn: Scenario | None) -> None:
    ss = st.session_state
    st.radio("Hardware source", [HW_PRESET, HW_FILE], key=_HW_SOURCE, horizontal=True,
             help="A preset, or your own device in the presets' TOML format.")
    if ss[_HW_SOURCE] == HW_FILE:
        _hardware_file_section()
    else:
        st.selectbox("Hardware preset", hardware_options(), key="hardware",
                     format_func=lambda s: name_first("hardware", s),
                     on_change=_on_hardware_change,
                     help="Type to search; grouped by class.")
    st.selectbox("Inference stack", FRAMEWORK_OPTIONS, key="fw",
                 format_func=lambda f: ("generic (class fit)" if f == GENERIC
                                        else FRAMEWORKS[f][0]),
                 help="Efficiency profile of the serving software, fitted on published "
                      "measurements (Validation page). Generic = the hardware class's fitted "
                      "values (llama.cpp is the reference stack of the fit).")
    try:
        base = _custom_hardware() or load_hardware(ss["hardware"])
    except ConfigError as e:
        st.error(escape_md(e))
        return
    hw = scn.hardware if scn is not None else base
    if scn is not None:
        r = rates(hw, scn.precision.compute_dtype, estimated=False)
        st.caption(f"{r.dtype_used.value} peak {fmt_flops_per_s(r.flops_per_s)} · "
                   f"{fmt_bandwidth(hw.memory_bandwidth_bytes_per_s)} · "
                   f"{fmt_bytes(hw.memory_capacity_bytes)} (GB = 10⁹ B) · "
                   f"ridge at peak rates {sig(r.ridge_flops_per_byte)} FLOP/B"
                   + (f" · {hw.interconnect.devices} devices" if hw.interconnect
                      and hw.interconnect.devices > 1 else ""))
    n_over = sum(ss.get(o.key) is not None for o in OVERRIDES)
    if n_over:
        st.caption(f"✎ {n_over} hardware override{'s' if n_over > 1 else ''} active")
    with st.expander("Edit hardware"):
        st.caption("Blank = the preset's value (shown greyed). Overrides drive every page.")
        eff = with_framework(base, ss.get("fw") or GENERIC).effective_efficiency
        preset_vals = {f"peak_{d}": base.peak_flops_per_s_raw(DType(d)) for d in DTYPES}
        preset_vals.update(bw=base.memory_bandwidth_bytes_per_s, cap=base.memory_capacity_bytes,
                           tdp=base.tdp_w, price=base.price_usd, eff_compute=eff.compute,
                           eff_memory=eff.memory, overhead_us=eff.kernel_overhead_s)
        for o in OVERRIDES:
            pv = preset_vals[o.key]
            shown = "none" if pv is None else format_number(
                float(f"{pv / o.to_si:.6g}"))
            _number_box(st, o.label, o.key, o.lo + (1e-9 if o.lo_open else 0.0), o.hi,
                        format="%g", placeholder=f"preset: {shown}", step=None)
        if n_over:
            st.button("Reset to preset", key="_reset_hw", on_click=_reset_overrides)
        _hardware_download(hw)
        if base.memory_tiers:
            st.caption("This device has memory tiers; the tier pages edit those.")


def _hardware_download(hw: Hardware) -> None:
    """This device (with the edits) as a hardware TOML: the start of a user's own file."""
    from llmpara_core.hardware_io import dumps_toml, hardware_to_dict
    try:
        text = dumps_toml(hardware_to_dict(hw))
    except ConfigError as e:
        st.caption(f"Cannot write this device as TOML: {escape_md(e)}")
        return
    st.download_button("Download as TOML", text.encode("utf-8"),
                       f"{hw.slug or 'hardware'}.toml", "application/toml", key="_dl_hw_toml",
                       icon=":material/download:", on_click="ignore",
                       help="The presets' file format; edit it and load it back with "
                            "Hardware source = TOML file.")


def _precision_section() -> None:
    lo, hi = BITS_RANGE
    st.selectbox("Precision preset", list(PRECISION_PRESETS), key="prec",
                 on_change=_on_precision_change,
                 help="Fills the bit fields below; edit them to go custom.")
    c1, c2, c3 = st.columns(3)
    _number_box(c1, "Weight bits", "wbits", lo, hi, step=0.5, format="%g",
                on_change=_on_wbits_change, help="Sets every weight component below.")
    _number_box(c2, "Act. bits", "abits", lo, hi, step=0.5, format="%g", help="Activation bits")
    _number_box(c3, "KV bits", "kvbits", lo, hi, step=0.5, format="%g", help="KV cache bits")
    with st.expander("Per-component weights & compute type"):
        _number_box(st, "Attention weights (bits)", "wattn", lo, hi, step=0.5, format="%g")
        _number_box(st, "FFN / expert weights (bits)", "wffn", lo, hi, step=0.5, format="%g")
        _number_box(st, "Embedding / LM head (bits)", "wemb", lo, hi, step=0.5, format="%g")
        st.selectbox("Compute data type", list(DTYPES), key="dtype",
                     help="Selects the hardware peak the matmuls run at (bf16 = fp16).")


def _workload_section() -> None:
    c1, c2, c3 = st.columns(3)
    _number_box(c1, "Batch", "batch", *BATCH_RANGE, step=1)
    _number_box(c2, "Prompt", "prompt", *TOKENS_RANGE, step=256, help="Prompt tokens")
    _number_box(c3, "Generate", "gen", *TOKENS_RANGE, step=64, help="Generated tokens")
    st.toggle("FlashAttention (fused)", key="flash")


def render_sidebar() -> st.delta_generator.DeltaGenerator:
    """The shared scenario widgets. Returns an empty sidebar container that the entrypoint
    fills with the share link after the page ran (so it includes the page's own keys)."""
    ensure_state()
    restore_state()
    st.session_state[_PAGE_LINK] = {}
    with st.sidebar:
        share = st.empty()
        st.subheader("Model", divider="gray")
        _model_section()
        scn, err = try_scenario()
        if scn is not None:
            _model_details(scn.model, scn.custom_model)
        st.subheader("Hardware", divider="gray")
        _hardware_section(scn)
        st.subheader("Precision", divider="gray")
        _precision_section()
        st.subheader("Workload", divider="gray")
        _workload_section()
        with st.expander("Display"):
            st.radio("Chart download format", ["png", "svg"], key=IMAGE_FORMAT,
                     horizontal=True, help="Format of the camera button on every chart.")
            st.caption(":material/contrast: **Light or dark theme:** the ⋮ menu at the top "
                       "right → *Settings* → *Theme* (System, Light, Dark). The app follows "
                       "your system's setting until you choose.")
    sync_url()
    _save_shadow()
    return share


def render_share_link(container) -> None:
    """'Copy link' into ``container`` (an ``st.empty``; drawn before the page runs and again
    after, so it survives a page that stops): the current page's URL with every scenario key
    spelled out (v=1) plus the page's own settings."""
    scn, _ = try_scenario()
    pairs = list(to_query(current_state()).items())
    for k, v in st.session_state.get(_PAGE_LINK, {}).items():
        for item in (v if isinstance(v, list) else [v]):
            pairs.append((k, item))
    base = st.context.url or ""
    link = f"{base}?{links.query_string(pairs)}"
    with container.container():
        with st.expander("Copy link", expanded=False, icon=":material/link:"):
            st.code(link, language=None, wrap_lines=True)
            st.caption("Every parameter is spelled out (link format v=1), so the link keeps its "
                       "meaning when defaults change.")
            if scn is not None and scn.custom_hardware:
                st.warning("The link names the preset "
                           f"'{escape_md(hardware_label(st.session_state['hardware']))}'; an "
                           "uploaded hardware file cannot travel in a link.")
            if scn is not None and scn.custom_model:
                st.warning("The link names the preset "
                           f"'{escape_md(model_label(st.session_state['model']))}'; an uploaded "
                           "config.json cannot travel in a link.")


# ---- page-local, URL-bound widgets ----------------------------------------------------------

def register_link_param(key: str, value: str | list[str]) -> None:
    """Add a page-local setting to the 'Copy link' URL."""
    st.session_state.setdefault(_PAGE_LINK, {})[key] = value


def _check_url(key: str, ok: Callable[[list[str]], bool], expected: str) -> None:
    raws = st.query_params.get_all(key)
    if raws and not ok(raws):
        shown = links.show_value(raws[-1])
        add_warning(f"Link parameter `{key}`: '{shown}' is not {expected}; using the default.")


def url_selectbox(label: str, options: Sequence, key: str, default=None,
                  format_func: Callable[[Any], str] = str, **kwargs):
    """A selectbox bound to the URL parameter ``key`` (the URL holds ``format_func(option)``);
    an invalid link value falls back to ``default`` with a warning."""
    opts = list(options)
    labels = [format_func(o) for o in opts]
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
    _check_url(key, lambda raws: all(r in labels for r in raws), "a list of known options")
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
    after a page switch the last value) and is given as the default too."""
    is_int = isinstance(value, int)
    _check_url(key, lambda raws: _link_number(key, min_value, max_value, is_int) is not None,
               f"a number in [{min_value}, {max_value}]")
    ss = st.session_state
    kept = ss.setdefault(_URL_NUMBERS, {})
    cur = ss.get(key)
    if cur is None:
        cur = kept.get(key)
        if cur is None:
            cur = _link_number(key, min_value, max_value, is_int)
    cur = value if cur is None or not min_value <= cur <= max_value else type(value)(cur)
    if ss.get(key) != cur:
        ss[key] = cur
    v = st.number_input(label, min_value, max_value, cur, key=key, **kwargs)
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


def chart_config(filename: str) -> dict:
    """Plotly config for st.plotly_chart: the camera button downloads PNG or SVG (sidebar
    'Display' setting)."""
    fmt = st.session_state.get(IMAGE_FORMAT, "png")
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": filename, "scale": 2}}
