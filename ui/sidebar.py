"""The sidebar: model (preset, config.json or an edited architecture), hardware (preset or a
TOML file, with overrides and a download), precision, workload and inference stack, and the
'Copy link' box. ``render_sidebar()`` runs on every page (``streamlit_app.py``); the state it
edits and the scenario built from it live in :mod:`ui.scenario`."""

from __future__ import annotations

import streamlit as st

from llmpara_core.calibration import FRAMEWORKS, GENERIC
from llmpara_core.calibration.stacks import DEFAULT, GENERIC_LABEL, default_stack, resolve_stack
from llmpara_core.errors import ConfigError
from llmpara_core.hardware import Hardware
from llmpara_core.model import Model, PositionKind
from llmpara_core.precision import PRECISION_PRESETS, DType
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.roofline import rates

from . import links
from .compute import model_from_config
from .format import escape_md, fmt_bandwidth, fmt_bytes, fmt_flops_per_s, fmt_gib, sig
from .links import (ARCH_CHOICES, ARCH_EDITS, ARCH_KEYS, BATCH_RANGE, BITS_RANGE, DTYPES,
                    FRAMEWORK_OPTIONS, OVERRIDES, TOKENS_RANGE, WEIGHT_COMPONENT_KEYS,
                    format_number, share_query)
from .number_widgets import in_range, reject
from .scenario import (HW_FILE, HW_PRESET, IMAGE_FORMAT, SOURCE_CONFIG, SOURCE_PRESET, Scenario,
                       _GOOD_NUMBERS, _REJECTED_NUMBERS, _CUSTOM, _CUSTOM_HW, _HW_SOURCE, _PAGE_LINK, _SOURCE, _custom_hardware,
                       _save_shadow, current_state, ensure_state, hardware_label, hardware_options,
                       model_label, model_options, name_first, precision_bits, restore_state,
                       sync_url, try_scenario, with_framework)


# A select box in the sidebar shows about this many characters before it cuts the label.
_SELECT_CHARS = 26

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
    if _source_status("_custom_hw_error", "Hardware file", _CUSTOM_HW, "hardware file",
                      hardware_label(ss["hardware"])):
        st.caption(f"Using **{escape_md(ss[_CUSTOM_HW].name)}** from the file.")


def _source_status(error_key: str, what: str, loaded_key: str, noun: str,
                   preset: str) -> bool:
    """Under an upload/paste form: the last rejection (``error_key``) as an error, and while
    nothing is loaded (``loaded_key``) which preset is used instead. True if one is loaded."""
    ss = st.session_state
    err = ss.get(error_key)
    if err:
        st.error(f"{what} rejected: {escape_md(err)}")
    if ss.get(loaded_key) is None:
        st.info(f"No {noun} loaded yet; the preset '{escape_md(preset)}' is used.")
        return False
    return True


def _model_pick():
    """The top of the sidebar: the model preset, or (config.json source) an empty slot that
    :func:`_fill_source_slots` fills once the upload/paste forms below have been read."""
    ss = st.session_state
    if ss[_SOURCE] == SOURCE_PRESET:
        st.selectbox("Model", model_options(), key="model",
                     format_func=lambda s: name_first("models", s),
                     help="Type to search; grouped by family. A Hugging Face config.json: "
                          "*Model details* below.", on_change=_reset_arch)
        return None
    return st.empty()


def _fill_source_slots(model_slot, hw_slot) -> None:
    """The loaded config's / hardware file's name (or the preset used meanwhile) at the top."""
    ss = st.session_state
    if model_slot is not None:
        custom = ss.get(_CUSTOM)
        model_slot.markdown("**Model:** " + (
            escape_md(custom.name) + " (config.json)" if custom
            else f"{escape_md(model_label(ss['model']))} (preset; no config loaded yet)"))
    if hw_slot is not None:
        custom = ss.get(_CUSTOM_HW)
        hw_slot.markdown("**Hardware:** " + (
            escape_md(custom.name) + " (TOML file)" if custom
            else f"{escape_md(hardware_label(ss['hardware']))} (preset; no file loaded yet)"))


def _model_section() -> None:
    ss = st.session_state
    st.radio("Model source", [SOURCE_PRESET, SOURCE_CONFIG], key=_SOURCE, horizontal=True,
             help="A preset, or any Hugging Face config.json (uploaded or pasted).")
    if ss[_SOURCE] == SOURCE_PRESET:
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
    _source_status("_custom_model_error", "config.json", _CUSTOM, "config",
                   model_label(ss["model"]))


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
    box without a default be cleared; its section's "Reset to preset" button clears it.)

    Drawn without Streamlit's min/max, so a typed value outside [lo, hi] reaches here: a
    warning under the box names it, and the scenario (``ui.scenario.current_state``) uses the
    last accepted value instead (issue 28, item 5)."""
    ss = st.session_state
    v = ss.get(key)
    if v is None or in_range(v, lo, hi):    # (a rejected value stays in the box's state)
        kwargs["value"] = None if v is None else type(lo)(v)
    shown = where.number_input(label, key=key, **kwargs)
    good = ss.setdefault(_GOOD_NUMBERS, {})
    rejected = ss.setdefault(_REJECTED_NUMBERS, {})
    if shown is None or in_range(shown, lo, hi):
        good[key] = shown
        rejected.pop(key, None)
        return shown
    # typed outside the range: the scenario keeps the last accepted value, and says so
    using = good.get(key)
    rejected[key] = using
    reject(where, label, shown, lo, hi, using)
    return using


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


def stack_option_label(option: str, hardware: Hardware | None) -> str:
    """The Inference stack select's text of ``option``, short enough for the box at 1440 px:
    the default names the stack it gives on ``hardware`` ("vLLM (default)")."""
    if option == DEFAULT:
        return (f"{default_stack(hardware).label} (default)" if hardware is not None
                else "default of the hardware class")
    if option == GENERIC:
        return GENERIC_LABEL
    return FRAMEWORKS[option][0]


def stack_reason_line(option: str, hardware: Hardware | None) -> str | None:
    """The line written under the select for the default and the generic choice, which say
    why: "vLLM — default for datacenter GPUs"; None for a stack the user named."""
    if option in (DEFAULT, GENERIC) and hardware is not None:
        return resolve_stack(hardware, option).caption
    return None


def _base_hardware():
    """(the chosen device before overrides, or None; the error loading it, or None)."""
    try:
        return _custom_hardware() or load_hardware(st.session_state["hardware"]), None
    except ConfigError as e:
        return None, e


def _hardware_pick():
    """The top of the sidebar: the hardware preset (or, TOML-file source, a slot for the
    file's device: :func:`_fill_source_slots`) and the inference stack it runs under."""
    ss = st.session_state
    slot = None
    if ss[_HW_SOURCE] == HW_FILE:
        slot = st.empty()
    else:
        st.selectbox("Hardware", hardware_options(), key="hardware",
                     format_func=lambda s: name_first("hardware", s),
                     on_change=_on_hardware_change,
                     help="Type to search; grouped by class. Your own device (TOML): "
                          "*Hardware details* below.")
        label = name_first("hardware", ss["hardware"])
        if len(label) > _SELECT_CHARS:          # the box cuts it: the whole name below
            st.caption(escape_md(label))
    base, _ = _base_hardware()
    st.selectbox("Inference stack", FRAMEWORK_OPTIONS, key="fw",
                 format_func=lambda f: stack_option_label(f, base),
                 help="Efficiency profile of the serving software, fitted on published "
                      "measurements (Validation page). The default follows the hardware: the "
                      "stack people run on its class (vLLM on datacenter GPUs; llama.cpp on "
                      "consumer GPUs, unified-memory SoCs and CPUs; no profile on NPUs, PIM, "
                      "chiplets and ASICs). Generic = the class's fitted values without a "
                      "stack profile: stack-agnostic, with a wider error.")
    reason = stack_reason_line(ss["fw"], base)
    if reason:
        st.caption(escape_md(reason))
    n_over = sum(ss.get(o.key) is not None for o in OVERRIDES)
    if n_over:
        st.caption(f"✎ {n_over} hardware override{'s' if n_over > 1 else ''} active "
                   "(*Hardware details*)")
    return slot


def _hardware_section(scn: Scenario | None) -> None:
    ss = st.session_state
    st.radio("Hardware source", [HW_PRESET, HW_FILE], key=_HW_SOURCE, horizontal=True,
             help="A preset, or your own device in the presets' TOML format.")
    if ss[_HW_SOURCE] == HW_FILE:
        _hardware_file_section()
    base, error = _base_hardware()
    if base is None:
        st.error(escape_md(error))
        return
    hw = scn.hardware if scn is not None else base
    if scn is not None:
        r = rates(hw, scn.precision.compute_dtype, estimated=False)
        st.caption(f"{r.dtype_used.value} peak {fmt_flops_per_s(r.flops_per_s)} · "
                   f"{fmt_bandwidth(hw.memory_bandwidth_bytes_per_s)} · "
                   f"{fmt_bytes(hw.memory_capacity_bytes)} = "
                   f"{fmt_gib(hw.memory_capacity_bytes)} (GB = 10⁹ B, GiB = 2³⁰ B) · "
                   f"ridge at peak rates {sig(r.ridge_flops_per_byte)} FLOP/B"
                   + (f" · boost {hw.boost_clock_mhz:,.0f} MHz" if hw.boost_clock_mhz else "")
                   + (f" · {hw.compute_units:,.0f} compute units" if hw.compute_units else "")
                   + (f" · {hw.interconnect.devices} devices" if hw.interconnect
                      and hw.interconnect.devices > 1 else ""))
    n_over = sum(ss.get(o.key) is not None for o in OVERRIDES)
    with st.expander("Edit hardware"):
        st.caption("Blank = the preset's value (shown greyed). Overrides drive every page.")
        eff = with_framework(base, ss.get("fw") or DEFAULT).effective_efficiency
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
    st.selectbox("Precision", list(PRECISION_PRESETS), key="prec",
                 on_change=_on_precision_change,
                 help="Fills the bit fields below; edit them to go custom.")
    c1, c2, c3 = st.columns(3)
    # Short labels: a label with its help icon wider than a third of the sidebar wraps and
    # pushes its box below the others (issue 28, item 9).
    _number_box(c1, "W bits", "wbits", lo, hi, step=0.5, format="%g",
                on_change=_on_wbits_change,
                help="Weight bits; sets every weight component (*Precision details*).")
    _number_box(c2, "A bits", "abits", lo, hi, step=0.5, format="%g", help="Activation bits")
    _number_box(c3, "KV bits", "kvbits", lo, hi, step=0.5, format="%g", help="KV cache bits")


def _precision_details() -> None:
    lo, hi = BITS_RANGE
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
    _number_box(c3, "Output", "gen", *TOKENS_RANGE, step=64, help="Generated (output) tokens")


def render_sidebar() -> st.delta_generator.DeltaGenerator:
    """The shared scenario widgets. Returns an empty sidebar container that the entrypoint
    fills with the share link after the page ran (so it includes the page's own keys).

    The five choices every page depends on (model, hardware, inference stack, precision,
    workload) come first, above the fold at 1440×900 (the page navigation is in the top bar);
    sources, uploads, edits and details follow under their headings."""
    ensure_state()
    restore_state()
    st.session_state[_PAGE_LINK] = {}
    with st.sidebar:
        model_slot = _model_pick()
        hw_slot = _hardware_pick()
        _precision_section()
        _workload_section()
        share = st.empty()
        st.subheader("Model details", divider="gray")
        _model_section()
        scn, err = try_scenario()          # after a pasted/uploaded config was read
        if scn is not None:
            _model_details(scn.model, scn.custom_model)
        st.subheader("Hardware details", divider="gray")
        _hardware_section(scn)
        st.subheader("Precision & workload details", divider="gray")
        _precision_details()
        st.toggle("FlashAttention (fused)", key="flash")
        with st.expander("Display"):
            st.radio("Chart download format", ["png", "svg"], key=IMAGE_FORMAT,
                     horizontal=True, help="Format of the camera button on every chart.")
            st.caption(":material/contrast: **Light or dark theme:** the ⋮ menu at the top "
                       "right → *Settings* → *Theme* (System, Light, Dark). The app follows "
                       "your system's setting until you choose.")
    _fill_source_slots(model_slot, hw_slot)
    sync_url()
    _save_shadow()
    return share


def render_share_link(container) -> None:
    """'Copy link' into ``container`` (an ``st.empty``; drawn before the page runs and again
    after, so it survives a page that stops): the current page's URL with every scenario key
    spelled out (v=1) plus the page's own settings."""
    scn, _ = try_scenario()
    pairs = list(share_query(current_state(), scn.stack.name if scn is not None and scn.stack
                             else None).items())
    for k, v in st.session_state.get(_PAGE_LINK, {}).items():
        for item in (v if isinstance(v, list) else [v]):
            pairs.append((k, item))
    base = st.context.url or ""
    link = f"{base}?{links.query_string(pairs)}"
    with container.container():
        with st.expander("Copy link", expanded=False, icon=":material/link:"):
            st.code(link, language=None, wrap_lines=True)
            st.caption("Every parameter is spelled out (link format v=1), the inference stack "
                       "as the one the default gave, so the link keeps its meaning when "
                       "defaults change.")
            if scn is not None and scn.custom_hardware:
                st.warning("The link names the preset "
                           f"'{escape_md(hardware_label(st.session_state['hardware']))}'; an "
                           "uploaded hardware file cannot travel in a link.")
            if scn is not None and scn.custom_model:
                st.warning("The link names the preset "
                           f"'{escape_md(model_label(st.session_state['model']))}'; an uploaded "
                           "config.json cannot travel in a link.")
