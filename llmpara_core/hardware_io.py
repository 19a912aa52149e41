"""Hardware TOML files <-> ``Hardware``.

The file format is public (PRODUCT.md §3.3): units are written into the key names (``GBps``,
``GB``, ``TFLOPS``, ``us``, ``ns``, ``pJ``) and converted to SI exactly once, here. Loading is
strict: an unknown key, a wrong type, a missing required key or an impossible value raises
``ConfigError`` naming the file (``origin``) and the key.

``hardware_to_dict`` is the inverse of ``hardware_from_dict`` (``from_dict(to_dict(hw)) == hw``),
and ``dumps_toml`` writes such a dict as TOML, so an edited device can be saved as a file.
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Any

from .errors import ConfigError, did_you_mean, short
from .hardware import (CLASS_DEFAULTS, MAX_ACT_QUANT_KERNELS, MAX_STREAM_BYTES_PER_CU_CYCLE,
                       STREAM_FIELDS, Architecture, Efficiency, Hardware, HardwareClass, Interconnect,
                       HostCpu, LinkKind, MemoryTier, MemoryType, Topology)
from .precision import DType
from .safeio import read_toml_file
from .units import (BYTES_PER_GB, BYTES_PER_GIB, BYTES_PER_MIB, FLOPS_PER_TFLOP, J_PER_PJ,
                    S_PER_NS, S_PER_US)

# Valid keys per table, in the order ``hardware_to_dict`` writes them.
TOP_KEYS = ("name", "slug", "aliases", "class", "architecture", "memory_type", "source", "notes",
            "memory_bandwidth_GBps",
            "memory_capacity_GB", "memory_capacity_GiB", "memory_capacity_MiB",
            "tdp_W", "idle_W", "price_USD", "embodied_kgCO2e",
            "process_nm", "boost_clock_MHz", "compute_units", "peak_TFLOPS", "efficiency",
            "memory_tiers", "interconnect")
PEAK_KEYS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4")   # bf16 = alias of fp16
# fp16 with FP16 accumulation where faster than fp16's FP32-accumulate spec figure (GeForce)
ACC16_KEY = "fp16_acc16"
# A stage hop (host hand-off per pipeline-stage boundary per pass) above 0.1 s is not a
# runtime's cost but a typo.
MAX_STAGE_HOP_US = 1e5
EFFICIENCY_KEYS = ("compute", "memory", "kernel_overhead_us", "kv_read", "stage_hop_us",
                   "act_quant_kernels", "quant_compute") + STREAM_FIELDS
# Efficiency fields written only where they differ from the class's (file key = field name).
_CLASS_KEPT = ("act_quant_kernels", "quant_compute") + STREAM_FIELDS
TIER_KEYS = ("name", "capacity_GB", "bandwidth_GBps", "energy_pJ_per_byte", "latency_ns")
INTERCONNECT_KEYS = ("bandwidth_GBps", "latency_us", "topology", "devices",
                     "inter_node_bandwidth_GBps", "inter_node_latency_us", "devices_per_node",
                     "peer_bandwidth_GBps", "link", "devices_per_socket", "host_cpu",
                     "socket_bandwidth_GBps")

# The main memory's capacity, in exactly one of these units (key -> bytes per unit): decimal GB
# (1e9 B, a spec sheet's figure) or the binary units a driver reports (nvidia-smi: MiB = 2^20 B;
# GiB = 2^30 B). HBM and GDDR parts sold as "80GB" hold 80 GiB, and the driver reports what
# software can use (H100 SXM: 81,559 MiB); a serving engine sizes its KV cache from that.
CAPACITY_KEYS = (("memory_capacity_GB", BYTES_PER_GB), ("memory_capacity_GiB", BYTES_PER_GIB),
                 ("memory_capacity_MiB", BYTES_PER_MIB))

# Optional plain numbers at the top level: file key -> Hardware field (no unit conversion).
_PLAIN_OPTIONAL = (("tdp_W", "tdp_w"), ("idle_W", "idle_w"), ("price_USD", "price_usd"),
                   ("embodied_kgCO2e", "embodied_kgco2e"), ("process_nm", "process_nm"),
                   ("boost_clock_MHz", "boost_clock_mhz"), ("compute_units", "compute_units"))

_SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")


# --------------------------------------------------------------------------- reading helpers

def _fail(origin: str, message: str) -> ConfigError:
    return ConfigError(f"{origin}: {message}")


def _check_keys(table: dict, allowed: tuple[str, ...], origin: str, prefix: str) -> None:
    """Reject any key not in ``allowed``, suggesting the closest valid one."""
    for key in table:
        if key in allowed:
            continue
        if len(str(key)) > 100:
            raise _fail(origin, f"unknown key {short(prefix + str(key))} (valid keys: "
                                f"{', '.join(allowed)})")
        by_lower = {a.lower(): a for a in allowed}
        best = by_lower.get(str(key).lower())
        if best is None:
            scored = [(difflib.SequenceMatcher(None, str(key).lower(), a.lower()).ratio(), a)
                      for a in allowed]
            score, best = max(scored)
        else:
            score = 1.0
        hint = f"did you mean '{prefix}{best}'?"
        if score < 0.6:
            hint += f" (valid keys: {', '.join(allowed)})"
        raise _fail(origin, f"unknown key '{prefix}{key}'; {hint}")


def _table(data: dict, key: str, origin: str, path: str, required: bool = False) -> dict | None:
    value = data.get(key)
    if value is None:
        if required:
            raise _fail(origin, f"missing required table [{path}]")
        return None
    if not isinstance(value, dict):
        raise _fail(origin, f"'{path}' must be a table, got {short(value)}")
    return value


def _number(data: dict, key: str, origin: str, path: str, *, required: bool = False,
            positive: bool = False, hi: float | None = None) -> float | None:
    """A finite real number >= 0 (> 0 if ``positive``), or None when absent and optional."""
    if key not in data:
        if required:
            raise _fail(origin, f"missing required key '{path}'")
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(origin, f"'{path}' must be a number, got {short(value)} "
                            f"({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise _fail(origin, f"'{path}' must be a finite number, got {value}")
    if value < 0 or (positive and value == 0):
        raise _fail(origin, f"'{path}' must be {'> 0' if positive else '>= 0'}, got {value:g}")
    if hi is not None and value > hi:
        raise _fail(origin, f"'{path}' must be <= {hi:g}, got {value:g}")
    return value


def _integer(data: dict, key: str, origin: str, path: str, *, required: bool = False,
             lo: int = 1) -> int | None:
    if key not in data:
        if required:
            raise _fail(origin, f"missing required key '{path}'")
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(origin, f"'{path}' must be an integer, got {short(value)}")
    if value < lo:
        raise _fail(origin, f"'{path}' must be >= {lo}, got {value}")
    return value


def _string(data: dict, key: str, origin: str, path: str, *, required: bool = False,
            allow_empty: bool = False) -> str | None:
    if key not in data:
        if required:
            raise _fail(origin, f"missing required key '{path}'")
        return None
    value = data[key]
    if not isinstance(value, str):
        raise _fail(origin, f"'{path}' must be a string, got {short(value)}")
    if not allow_empty and not value.strip():
        raise _fail(origin, f"'{path}' must not be empty")
    return value


def _choice(data: dict, key: str, enum_type, origin: str, path: str, *, required: bool):
    text = _string(data, key, origin, path, required=required)
    if text is None:
        return None
    values = [m.value for m in enum_type]
    if text not in values:
        if len(text) > 100:
            raise _fail(origin, f"'{path}' = {short(text)} is not one of {', '.join(values)}")
        hint = did_you_mean(text, values, n=1, cutoff=0.0, ignore_case=True)
        raise _fail(origin, f"'{path}' = {short(text)} is not one of {', '.join(values)}{hint}")
    return enum_type(text)


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def slugify(text: str) -> str:
    """Lower-case, hyphen-separated identifier for a display name or file stem."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower().replace("×", "x")).strip("-")


# --------------------------------------------------------------------------- dict -> Hardware

def _peaks(data: dict, origin: str) -> dict[str, float]:
    table = _table(data, "peak_TFLOPS", origin, "peak_TFLOPS", required=True)
    _check_keys(table, PEAK_KEYS + (ACC16_KEY,), origin, "peak_TFLOPS.")
    tflops = {k: _number(table, k, origin, f"peak_TFLOPS.{k}", positive=True)
              for k in PEAK_KEYS}
    acc16 = _number(table, ACC16_KEY, origin, f"peak_TFLOPS.{ACC16_KEY}", positive=True)
    fp16, bf16 = tflops.pop("fp16"), tflops.pop("bf16")
    if fp16 is not None and bf16 is not None and fp16 != bf16:
        raise _fail(origin, f"'peak_TFLOPS.bf16' ({bf16:g}) must equal 'peak_TFLOPS.fp16' "
                            f"({fp16:g}); bf16 is an alias of fp16")
    tflops["fp16"] = fp16 if fp16 is not None else bf16
    if all(v is None for v in tflops.values()):
        raise _fail(origin, f"[peak_TFLOPS] needs at least one of {', '.join(PEAK_KEYS)}")
    return {f"peak_{d.value}_flops_per_s": _scaled(tflops[d.value], FLOPS_PER_TFLOP)
            for d in DType} | {"peak_fp16_acc16_flops_per_s": _scaled(acc16, FLOPS_PER_TFLOP)}


def _efficiency(data: dict, hw_class: HardwareClass, origin: str) -> Efficiency | None:
    table = _table(data, "efficiency", origin, "efficiency")
    if table is None:
        return None
    _check_keys(table, EFFICIENCY_KEYS, origin, "efficiency.")
    default = CLASS_DEFAULTS[hw_class].efficiency     # keys left out keep the class default
    compute = _number(table, "compute", origin, "efficiency.compute", positive=True, hi=1.0)
    memory = _number(table, "memory", origin, "efficiency.memory", positive=True, hi=1.0)
    overhead = _scaled(_number(table, "kernel_overhead_us", origin,
                               "efficiency.kernel_overhead_us"), S_PER_US)
    kv_read = _number(table, "kv_read", origin, "efficiency.kv_read", positive=True, hi=1.0)
    hop = _scaled(_number(table, "stage_hop_us", origin, "efficiency.stage_hop_us",
                          hi=MAX_STAGE_HOP_US), S_PER_US)
    aq = _number(table, "act_quant_kernels", origin, "efficiency.act_quant_kernels",
                 hi=MAX_ACT_QUANT_KERNELS)
    qc = _number(table, "quant_compute", origin, "efficiency.quant_compute", positive=True,
                 hi=1.0)
    stream = {k: _number(table, k, origin, f"efficiency.{k}", hi=MAX_STREAM_BYTES_PER_CU_CYCLE)
              for k in STREAM_FIELDS}
    return Efficiency(compute=default.compute if compute is None else compute,
                      memory=default.memory if memory is None else memory,
                      kernel_overhead_s=default.kernel_overhead_s if overhead is None
                      else overhead,
                      kv_read=default.kv_read if kv_read is None else kv_read,
                      kv_reread=default.kv_reread,      # the reference stack's (not a key)
                      stage_hop_s=default.stage_hop_s if hop is None else hop,
                      act_quant_kernels=default.act_quant_kernels if aq is None else aq,
                      quant_compute=default.quant_compute if qc is None else qc,
                      gemm_fp16_acc16=default.gemm_fp16_acc16,       # the stack's, not keys
                      quant_gemm_int8=default.quant_gemm_int8,
                      **{k: getattr(default, k) if v is None else v for k, v in stream.items()})


def _tiers(data: dict, origin: str) -> tuple[MemoryTier, ...]:
    if "memory_tiers" not in data:
        return ()
    raw = data["memory_tiers"]
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise _fail(origin, "'memory_tiers' must be an array of tables ([[memory_tiers]])")
    tiers, names = [], set()
    for i, table in enumerate(raw):
        p = f"memory_tiers[{i}]."
        _check_keys(table, TIER_KEYS, origin, p)
        name = _string(table, "name", origin, p + "name", required=True)
        if name in names:
            raise _fail(origin, f"'{p}name' = {short(name)} repeats an earlier tier name")
        names.add(name)
        tiers.append(MemoryTier(
            name=name,
            capacity_bytes=_scaled(_number(table, "capacity_GB", origin, p + "capacity_GB",
                                           required=True, positive=True), BYTES_PER_GB),
            bandwidth_bytes_per_s=_scaled(_number(table, "bandwidth_GBps", origin,
                                                  p + "bandwidth_GBps", required=True,
                                                  positive=True), BYTES_PER_GB),
            energy_j_per_byte=_scaled(_number(table, "energy_pJ_per_byte", origin,
                                              p + "energy_pJ_per_byte"), J_PER_PJ),
            latency_s=_scaled(_number(table, "latency_ns", origin, p + "latency_ns"), S_PER_NS)))
    return tuple(tiers)


def _interconnect(data: dict, origin: str) -> Interconnect | None:
    table = _table(data, "interconnect", origin, "interconnect")
    if table is None:
        return None
    _check_keys(table, INTERCONNECT_KEYS, origin, "interconnect.")
    p = "interconnect."
    devices = _integer(table, "devices", origin, p + "devices", required=True)
    per_node = _integer(table, "devices_per_node", origin, p + "devices_per_node")
    inter_bw = _number(table, "inter_node_bandwidth_GBps", origin,
                       p + "inter_node_bandwidth_GBps", positive=True)
    inter_lat = _number(table, "inter_node_latency_us", origin, p + "inter_node_latency_us")
    peer_bw = _number(table, "peer_bandwidth_GBps", origin, p + "peer_bandwidth_GBps",
                      positive=True)
    per_socket = _integer(table, "devices_per_socket", origin, p + "devices_per_socket")
    socket_bw = _number(table, "socket_bandwidth_GBps", origin, p + "socket_bandwidth_GBps",
                        positive=True)
    if (per_socket is None) != (socket_bw is None):
        raise _fail(origin, f"'{p}devices_per_socket' and '{p}socket_bandwidth_GBps' go "
                            f"together (a PCIe board over several CPU sockets)")
    if per_node is not None and devices % per_node:
        raise _fail(origin, f"'{p}devices' ({devices}) must be a multiple of "
                            f"'{p}devices_per_node' ({per_node})")
    multi_node = per_node is not None and per_node < devices
    if (inter_bw is not None or inter_lat is not None) and not multi_node:
        raise _fail(origin, f"'{p}inter_node_*' keys need '{p}devices_per_node' < "
                            f"'{p}devices' (several nodes)")
    if multi_node and (inter_bw is None or inter_lat is None):
        raise _fail(origin, f"several nodes ('{p}devices_per_node' < '{p}devices') need "
                            f"'{p}inter_node_bandwidth_GBps' and '{p}inter_node_latency_us'")
    return Interconnect(
        bandwidth_bytes_per_s=_scaled(_number(table, "bandwidth_GBps", origin,
                                              p + "bandwidth_GBps", required=True,
                                              positive=True), BYTES_PER_GB),
        latency_s=_scaled(_number(table, "latency_us", origin, p + "latency_us",
                                  required=True), S_PER_US),
        topology=_choice(table, "topology", Topology, origin, p + "topology", required=True),
        devices=devices,
        inter_node_bandwidth_bytes_per_s=_scaled(inter_bw, BYTES_PER_GB),
        inter_node_latency_s=_scaled(inter_lat, S_PER_US),
        devices_per_node=per_node,
        peer_bandwidth_bytes_per_s=_scaled(peer_bw, BYTES_PER_GB),
        link=_choice(table, "link", LinkKind, origin, p + "link", required=False),
        devices_per_socket=per_socket,
        socket_bandwidth_bytes_per_s=_scaled(socket_bw, BYTES_PER_GB),
        host_cpu=_choice(table, "host_cpu", HostCpu, origin, p + "host_cpu", required=False))


def _capacity(data: dict, origin: str) -> float:
    """Main-memory capacity [B] from the one capacity key the file gives (``CAPACITY_KEYS``)."""
    given = [(k, scale) for k, scale in CAPACITY_KEYS if k in data]
    names = ", ".join(f"'{k}'" for k, _ in CAPACITY_KEYS)
    if not given:
        raise _fail(origin, f"missing required key 'memory_capacity_GB' (or give the capacity "
                            f"in binary units: 'memory_capacity_GiB' = 2^30 B, "
                            f"'memory_capacity_MiB' = 2^20 B as nvidia-smi reports it)")
    if len(given) > 1:
        both = " and ".join(f"'{k}'" for k, _ in given)
        raise _fail(origin, f"give the memory capacity once: {both} are set together (use "
                            f"one of {names}; GB = 1e9 B, GiB = 2^30 B, MiB = 2^20 B)")
    key, scale = given[0]
    return _scaled(_number(data, key, origin, key, positive=True), scale)


def capacity_key(capacity_bytes: float) -> tuple[str, float]:
    """(file key, bytes per unit) ``hardware_to_dict`` writes a capacity in: GB where the value
    is a short decimal number of GB (a spec sheet's figure), else GiB or MiB where it is a whole
    number of them (what a driver reports), else GB."""
    gb = capacity_bytes / BYTES_PER_GB
    if round(gb, 6) * BYTES_PER_GB == capacity_bytes:
        return CAPACITY_KEYS[0]
    for key, scale in (CAPACITY_KEYS[1], CAPACITY_KEYS[2]):
        if float(capacity_bytes / scale).is_integer():
            return key, scale
    return CAPACITY_KEYS[0]


def _aliases(data: dict, origin: str) -> tuple[str, ...]:
    raw = data.get("aliases", [])
    if not isinstance(raw, list) or not all(isinstance(a, str) and a.strip() for a in raw):
        raise _fail(origin, f"'aliases' must be a list of non-empty strings, got {short(raw)}")
    if len(set(raw)) != len(raw):
        raise _fail(origin, f"'aliases' has repeated entries: {short(raw)}")
    return tuple(raw)


def hardware_from_dict(data: dict, origin: str, slug: str | None = None) -> Hardware:
    """Build a ``Hardware`` from a parsed hardware TOML dict (format: PRODUCT.md §3.3).

    ``origin`` names the source (file path, "uploaded file", ...) in every error message.
    ``slug`` is the default identifier when the dict has no ``slug`` key (callers pass the
    file stem); without either, it is derived from ``name``.
    Raises ``ConfigError`` on unknown keys, wrong types, missing required keys and
    impossible values.
    """
    if not isinstance(data, dict):
        raise _fail(origin, f"a hardware description must be a table, got {type(data).__name__}")
    _check_keys(data, TOP_KEYS, origin, "")
    name = _string(data, "name", origin, "name", required=True)
    hw_class = _choice(data, "class", HardwareClass, origin, "class", required=True)
    file_slug = _string(data, "slug", origin, "slug")
    if file_slug is not None and not _SLUG_RE.match(file_slug):
        raise _fail(origin, f"'slug' = {short(file_slug)} must be lower-case letters, digits and "
                            f"single hyphens (e.g. {short(slugify(file_slug))})")
    plain = {field: _number(data, key, origin, key) for key, field in _PLAIN_OPTIONAL}
    try:
        return Hardware(
            name=name,
            hw_class=hw_class,
            memory_bandwidth_bytes_per_s=_scaled(_number(
                data, "memory_bandwidth_GBps", origin, "memory_bandwidth_GBps", required=True,
                positive=True), BYTES_PER_GB),
            memory_capacity_bytes=_capacity(data, origin),
            **_peaks(data, origin),
            **plain,
            memory_tiers=_tiers(data, origin),
            interconnect=_interconnect(data, origin),
            efficiency=_efficiency(data, hw_class, origin),
            source=_string(data, "source", origin, "source", required=True),
            notes=_string(data, "notes", origin, "notes", allow_empty=True) or "",
            slug=file_slug or slugify(slug if slug else name),
            aliases=_aliases(data, origin),
            memory_type=_choice(data, "memory_type", MemoryType, origin, "memory_type",
                                required=False),
            architecture=_choice(data, "architecture", Architecture, origin, "architecture",
                                 required=False))
    except ConfigError as exc:
        if str(exc).startswith(f"{origin}: "):
            raise
        raise _fail(origin, str(exc)) from None


def read_hardware_file(path: str | Path) -> Hardware:
    """Parse one hardware TOML file; its stem is the default slug."""
    path = Path(path)
    data = read_toml_file(path, "hardware file")
    return hardware_from_dict(data, origin=str(path), slug=path.stem)


# --------------------------------------------------------------------------- Hardware -> dict

def _file_number(si: float, scale: float) -> float | int:
    """The shortest decimal ``v`` with ``v * scale == si`` (so loading it gives ``si`` back).

    Every value that came from a file has such a ``v``. A few SI values set directly (about 4 %
    of arbitrary floats) are not a product ``v * scale`` of any float; those come back 1 ulp off.
    """
    approx = si / scale
    candidate = approx
    for digits in range(1, 18):
        v = float(f"{approx:.{digits}g}")
        if v * scale == si:
            candidate = v
            break
    else:    # not reachable from any short decimal: try the floats next to si / scale
        neighbours = [approx]
        for direction in (math.inf, -math.inf):
            v = approx
            for _ in range(4):
                v = math.nextafter(v, direction)
                neighbours.append(v)
        candidate = next((v for v in neighbours if v * scale == si), approx)
    if candidate.is_integer() and abs(candidate) < 2**53:
        return int(candidate)
    return candidate


def _put(out: dict, key: str, si: float | None, scale: float = 1.0) -> None:
    if si is not None:
        out[key] = _file_number(si, scale)


def hardware_to_dict(hw: Hardware) -> dict[str, Any]:
    """The TOML-shaped dict of ``hw`` (file units); ``hardware_from_dict`` inverts it exactly
    for any ``Hardware`` loaded from a file (see ``_file_number`` for values set in SI)."""
    out: dict[str, Any] = {"name": hw.name}
    if hw.slug:
        out["slug"] = hw.slug
    if hw.aliases:
        out["aliases"] = list(hw.aliases)
    out["class"] = hw.hw_class.value
    if hw.architecture is not None:
        out["architecture"] = hw.architecture.value
    if hw.memory_type is not None:
        out["memory_type"] = hw.memory_type.value
    out["source"] = hw.source
    if hw.notes:
        out["notes"] = hw.notes
    _put(out, "memory_bandwidth_GBps", hw.memory_bandwidth_bytes_per_s, BYTES_PER_GB)
    cap_key, cap_scale = capacity_key(hw.memory_capacity_bytes)
    _put(out, cap_key, hw.memory_capacity_bytes, cap_scale)
    for key, field in _PLAIN_OPTIONAL:
        _put(out, key, getattr(hw, field))
    peaks: dict[str, Any] = {}
    for d in DType:
        _put(peaks, d.value, hw.peak_flops_per_s_raw(d), FLOPS_PER_TFLOP)
    _put(peaks, ACC16_KEY, hw.peak_fp16_acc16_flops_per_s, FLOPS_PER_TFLOP)
    out["peak_TFLOPS"] = peaks
    if hw.efficiency is not None:
        eff: dict[str, Any] = {}
        _put(eff, "compute", hw.efficiency.compute)
        _put(eff, "memory", hw.efficiency.memory)
        _put(eff, "kernel_overhead_us", hw.efficiency.kernel_overhead_s, S_PER_US)
        _put(eff, "kv_read", hw.efficiency.kv_read)
        if hw.efficiency.stage_hop_s:
            _put(eff, "stage_hop_us", hw.efficiency.stage_hop_s, S_PER_US)
        for key in _CLASS_KEPT:                    # written only where not the class's
            value = getattr(hw.efficiency, key)
            if value != getattr(CLASS_DEFAULTS[hw.hw_class].efficiency, key):
                _put(eff, key, value)
        out["efficiency"] = eff
    if hw.memory_tiers:
        tiers = []
        for t in hw.memory_tiers:
            tier: dict[str, Any] = {"name": t.name}
            _put(tier, "capacity_GB", t.capacity_bytes, BYTES_PER_GB)
            _put(tier, "bandwidth_GBps", t.bandwidth_bytes_per_s, BYTES_PER_GB)
            _put(tier, "energy_pJ_per_byte", t.energy_j_per_byte, J_PER_PJ)
            _put(tier, "latency_ns", t.latency_s, S_PER_NS)
            tiers.append(tier)
        out["memory_tiers"] = tiers
    ic = hw.interconnect
    if ic is not None:
        link: dict[str, Any] = {}
        _put(link, "bandwidth_GBps", ic.bandwidth_bytes_per_s, BYTES_PER_GB)
        _put(link, "latency_us", ic.latency_s, S_PER_US)
        link["topology"] = ic.topology.value
        link["devices"] = ic.devices
        _put(link, "inter_node_bandwidth_GBps", ic.inter_node_bandwidth_bytes_per_s,
             BYTES_PER_GB)
        _put(link, "inter_node_latency_us", ic.inter_node_latency_s, S_PER_US)
        if ic.devices_per_node is not None:
            link["devices_per_node"] = ic.devices_per_node
        _put(link, "peer_bandwidth_GBps", ic.peer_bandwidth_bytes_per_s, BYTES_PER_GB)
        if ic.link is not None:
            link["link"] = ic.link.value
        if ic.devices_per_socket is not None:
            link["devices_per_socket"] = ic.devices_per_socket
        _put(link, "socket_bandwidth_GBps", ic.socket_bandwidth_bytes_per_s, BYTES_PER_GB)
        if ic.host_cpu is not None:
            link["host_cpu"] = ic.host_cpu.value
        out["interconnect"] = link
    return out


# --------------------------------------------------------------------------- TOML writer

def _toml_key(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    escapes = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
               "\r": "\\r"}
    out = []
    for ch in text:
        if ch in escapes:
            out.append(escapes[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} value {value!r} as TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _write_table(lines: list[str], path: list[str], table: dict, header: str | None) -> None:
    if header is not None:
        if lines:
            lines.append("")
        lines.append(header)
    for key, value in table.items():
        if isinstance(value, dict) or _is_table_array(value):
            continue
        if isinstance(value, list) and any(isinstance(v, dict) for v in value):
            raise TypeError(f"list {'.'.join(path + [key])} mixes tables and values")
        lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in table.items():
        sub = path + [key]
        dotted = ".".join(_toml_key(k) for k in sub)
        if isinstance(value, dict):
            _write_table(lines, sub, value, f"[{dotted}]")
        elif _is_table_array(value):
            for item in value:
                _write_table(lines, sub, item, f"[[{dotted}]]")


def dumps_toml(data: dict) -> str:
    """Write a dict of scalars, strings, lists of scalars, tables and arrays of tables as TOML.

    ``tomllib.loads(dumps_toml(d)) == d`` for such dicts (no None, no datetimes).
    """
    lines: list[str] = []
    _write_table(lines, [], data, None)
    return "\n".join(lines) + "\n"
