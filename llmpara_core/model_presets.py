"""Model presets (``presets/models/*.toml``): a Hugging Face ``config.json`` kept verbatim under
``[config]`` plus descriptive keys (name, aliases, source, ...), validated strictly and turned
into a :class:`~llmpara_core.model.Model` by :func:`~llmpara_core.hf_import.from_hf_config`."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from .errors import ConfigError, short
from .hf_import import from_hf_config
from .model import Model

__all__ = ["model_from_preset_dict", "model_preset_info", "ModelPresetInfo", "PRESET_KEYS"]

PRESET_KEYS = ("name", "aliases", "hf_repo_id", "family", "source", "draft", "notes",
               "config_nulls", "config")
"""Top-level keys of a model preset file. ``config`` holds verbatim ``config.json`` fields;
TOML has no null, so ``config_nulls`` lists the fields that are JSON null in the original."""


@dataclass(frozen=True)
class ModelPresetInfo:
    """The descriptive part of a model preset (everything but the config)."""
    name: str
    source: str
    aliases: tuple[str, ...] = ()
    hf_repo_id: str | None = None
    family: str | None = None
    draft: bool = False
    notes: str | None = None


def _preset_str(data: dict, key: str, origin: str, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{origin}: missing required key '{key}'")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{origin}: '{key}' must be a non-empty string, got {short(value)}")
    return value


def _preset_str_list(data: dict, key: str, origin: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{origin}: '{key}' must be a list of non-empty strings, "
                          f"got {short(value)}")
    return tuple(value)


def model_preset_info(data: dict, origin: str) -> ModelPresetInfo:
    """Validate a preset's top level (strict: unknown keys are errors) and return its
    descriptive fields. ``origin`` (usually the file path) prefixes every error message."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: a model preset must be a table, got {type(data).__name__}")
    for key in data:
        if key not in PRESET_KEYS:
            close = difflib.get_close_matches(str(key), PRESET_KEYS, n=1, cutoff=0.0)
            raise ConfigError(f"{origin}: unknown key '{key}' (did you mean '{close[0]}'?)")
    draft = data.get("draft", False)
    if not isinstance(draft, bool):
        raise ConfigError(f"{origin}: 'draft' must be true or false, got {short(draft)}")
    if not isinstance(data.get("config"), dict):
        raise ConfigError(f"{origin}: missing [config] table (the config.json fields)")
    return ModelPresetInfo(
        name=_preset_str(data, "name", origin, required=True),
        source=_preset_str(data, "source", origin, required=True),
        aliases=_preset_str_list(data, "aliases", origin),
        hf_repo_id=_preset_str(data, "hf_repo_id", origin),
        family=_preset_str(data, "family", origin), draft=draft,
        notes=_preset_str(data, "notes", origin))


def model_from_preset_dict(data: dict, origin: str) -> Model:
    """Build the :class:`Model` of a parsed model preset (see ``PRESET_KEYS``)."""
    info = model_preset_info(data, origin)
    config = dict(data["config"])
    for key in _preset_str_list(data, "config_nulls", origin):
        config[key] = None
    try:
        model = from_hf_config(config, name=info.name)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from exc
    return replace(model, source=info.source)
