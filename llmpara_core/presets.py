"""Preset discovery and lookup: models and hardware as TOML files under ``presets/``.

A preset is found by its slug (file name), display name or any alias, case-insensitively and
ignoring punctuation ("LLaMA-3 8B" = "llama-3-8b" = "Llama 3 8B"). ``load_model`` and
``load_hardware`` also take a path to a user's file (``config.json`` or ``.toml``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, PresetNotFoundError, did_you_mean
from .hardware import Hardware
from .model import Model
from .safeio import read_limited, read_toml_file

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"


@dataclass(frozen=True)
class PresetInfo:
    slug: str
    name: str
    aliases: tuple[str, ...]
    path: Path
    category: str       # model family or hardware class
    draft: bool = False


def normalize(name: str) -> str:
    """Key used for matching names: lower case, '×' as 'x', only letters and digits."""
    return re.sub(r"[^0-9a-z]", "", str(name).lower().replace("×", "x"))


@functools.lru_cache(maxsize=None)
def _catalogue(kind: str) -> tuple[PresetInfo, ...]:
    return tuple(_info(kind, path) for path in sorted((PRESET_DIR / kind).glob("*.toml")))


@functools.lru_cache(maxsize=None)
def _info(kind: str, path: Path) -> PresetInfo:
    data = _read_toml(path)
    cat = data.get("family") if kind == "models" else data.get("class")
    return PresetInfo(path.stem, str(data.get("name", path.stem)),
                      tuple(data.get("aliases", ())), path, str(cat or ""),
                      bool(data.get("draft", False)))


@functools.lru_cache(maxsize=None)
def _stems(kind: str) -> dict[str, Path]:
    """Normalised file name -> preset file, without reading any file (a name that is a
    preset's slug is found without parsing the whole catalogue; names and aliases are
    unique across presets, tests/test_hardware_io.py and tests/test_hf_import.py)."""
    return {normalize(p.stem): p for p in sorted((PRESET_DIR / kind).glob("*.toml"))}


@functools.lru_cache(maxsize=None)
def _index(kind: str) -> dict[str, PresetInfo]:
    """Normalised slug / name / alias -> preset (built once per kind: the catalogue is cached
    too; rebuilding it on every lookup cost ~2 s when the Validation page maps 456 rows).
    Shared: callers only read it."""
    idx: dict[str, PresetInfo] = {}
    for info in _catalogue(kind):
        for key in (info.slug, info.name, *info.aliases):
            idx.setdefault(normalize(key), info)
    return idx


def list_presets(kind: str) -> tuple[PresetInfo, ...]:
    """All presets of ``kind`` ("models" or "hardware"), sorted by file name."""
    return _catalogue(kind)


def find_preset(kind: str, name: str) -> PresetInfo:
    """The preset whose slug, name or alias matches ``name``; PresetNotFoundError with close
    matches otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise PresetNotFoundError(f"empty {kind[:-1] if kind.endswith('s') else kind} name")
    path = _stems(kind).get(normalize(name))
    info = _info(kind, path) if path is not None else _index(kind).get(normalize(name))
    if info is None:
        names = [i.name for i in _catalogue(kind)]
        hint = did_you_mean(name, names, cutoff=0.4)
        label = "model" if kind == "models" else "hardware"
        raise PresetNotFoundError(f"unknown {label} {name!r}{hint} "
                                  f"(`llmpara {kind if kind == 'models' else 'hardware'}` lists them)")
    return info


def _read_toml(path: Path) -> dict:
    """A TOML file, size-checked before it is read and pre-scanned (see ``safeio``)."""
    return read_toml_file(path)


def _looks_like_path(s: str) -> bool:
    return s.endswith((".json", ".toml")) or "/" in s or "\\" in s


@functools.lru_cache(maxsize=256)
def _load_model_preset(slug: str) -> Model:
    from .model_presets import model_from_preset_dict
    path = PRESET_DIR / "models" / f"{slug}.toml"
    return model_from_preset_dict(_read_toml(path), path.name)


@functools.lru_cache(maxsize=256)
def _load_hardware_preset(slug: str) -> Hardware:
    from .hardware_io import hardware_from_dict
    path = PRESET_DIR / "hardware" / f"{slug}.toml"
    return hardware_from_dict(_read_toml(path), path.name, slug=slug)


def load_model(name_or_path: str) -> Model:
    """A model preset by name, or a Hugging Face ``config.json`` / model preset TOML by path."""
    from .hf_import import from_hf_config
    from .model_presets import model_from_preset_dict
    s = str(name_or_path).strip()
    if _looks_like_path(s) and not _index("models").get(normalize(s)):
        path = Path(s)
        if not path.is_file():
            raise ConfigError(f"model file not found: {s}")
        if path.suffix == ".toml":
            return model_from_preset_dict(_read_toml(path), path.name)
        text = read_limited(path, "config.json")
        # the config's own name (_name_or_path), else the file's: its stem, or for a file
        # called config.json (a checkpoint folder) the folder's name
        fallback = (path.resolve().parent.name if path.name == "config.json" else "") \
            or path.stem
        return from_hf_config(text, fallback_name=fallback)
    return _load_model_preset(find_preset("models", s).slug)


def load_hardware(name_or_path: str) -> Hardware:
    """A hardware preset by name, or a hardware TOML file (PRODUCT.md §3.3 format) by path."""
    from .hardware_io import hardware_from_dict
    s = str(name_or_path).strip()
    if _looks_like_path(s) and not _index("hardware").get(normalize(s)):
        path = Path(s)
        if not path.is_file():
            raise ConfigError(f"hardware file not found: {s}")
        return hardware_from_dict(_read_toml(path), path.name, slug=path.stem)
    return _load_hardware_preset(find_preset("hardware", s).slug)


def load_table(name: str) -> dict:
    """A data table from ``presets/tables/<name>.toml`` (e.g. grid carbon intensity)."""
    path = PRESET_DIR / "tables" / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"no table {name!r}")
    return _read_toml(path)

