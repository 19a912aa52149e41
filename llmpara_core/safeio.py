"""Reading and parsing untrusted text safely: files are size-checked before they are read (and
read at most up to the limit), TOML and JSON are pre-scanned for nesting depth and dotted-key
length before the standard parsers see them, and every failure is a ``ConfigError`` naming the
origin. (``tomllib`` and ``json`` recurse once per nesting level and ``tomllib`` builds one
table per key part: 200 kB of ``[[[...`` or ``a.a.a...`` would otherwise end in a
RecursionError or gigabytes of memory.)
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigError
from .limits import MAX_FILE_BYTES, MAX_KEY_PARTS, MAX_NESTING, MAX_TOML_VALUES

# Strings and comments, replaced before counting brackets and key parts. Possessive quantifiers
# and an unterminated string running to the end of its line (or the text) keep this linear.
_TOML_STRINGS = re.compile(
    r'"""(?:[^"\\]++|\\.?|"(?!""))*+(?:"""|\Z)|\'\'\'(?:[^\']++|\'(?!\'\'))*+(?:\'\'\'|\Z)'
    r'|"(?:[^"\\\n]++|\\.?)*+(?:"|\n|\Z)|\'[^\'\n]*+(?:\'|\n|\Z)|#[^\n]*+', re.DOTALL)
_JSON_STRINGS = re.compile(r'"(?:[^"\\]++|\\.?)*+(?:"|\Z)', re.DOTALL)
_KEYISH = re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]++(?:[ \t]*+\.[ \t]*+[A-Za-z0-9_\-]++)++")


def read_limited(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` bytes: the size is checked
    before reading and at most ``max_bytes`` + 1 bytes are ever read."""
    path = Path(path)
    try:
        if not path.exists():
            raise ConfigError(f"{path}: cannot read {what} (no such file)")
        if not path.is_file():
            raise ConfigError(f"{path}: cannot read {what} (not a regular file)")
        size = path.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"{path}: file too large for a {what} ({size:,} bytes; at most "
                              f"{max_bytes:,})")
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    if len(raw) > max_bytes:
        raise ConfigError(f"{path}: file too large for a {what} (more than {max_bytes:,} bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def _max_depth(text: str) -> int:
    """Deepest nesting of [ and { in ``text`` (strings and comments already removed)."""
    b = np.frombuffer(text.encode("utf-8", "replace"), dtype=np.uint8)
    step = (np.isin(b, (ord("["), ord("{"))).astype(np.int32)
            - np.isin(b, (ord("]"), ord("}"))).astype(np.int32))
    return int(np.cumsum(step).max(initial=0))


def prescan(text: str, origin: str, kind: str) -> None:
    """Refuse ``text`` (``kind`` "TOML" or "JSON") longer than MAX_FILE_BYTES, nested deeper
    than MAX_NESTING or (TOML) with more than MAX_TOML_VALUES values or a dotted key of more
    than MAX_KEY_PARTS parts."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"{origin}: too large for a {kind} document ({len(text):,} characters; "
                          f"at most {MAX_FILE_BYTES:,})")
    bare = (_TOML_STRINGS if kind == "TOML" else _JSON_STRINGS).sub("s", text)
    depth = _max_depth(bare)
    if depth > MAX_NESTING:
        raise ConfigError(f"{origin}: {kind} nested {depth} levels deep; at most {MAX_NESTING} "
                          f"are allowed")
    if kind == "TOML":
        values = bare.count("=") + bare.count(",")
        if values > MAX_TOML_VALUES:
            raise ConfigError(f"{origin}: TOML with {values:,} keys and array items; at most "
                              f"{MAX_TOML_VALUES:,} are allowed")
        parts = max((m.group().count(".") + 1 for m in _KEYISH.finditer(bare)), default=0)
        if parts > MAX_KEY_PARTS:
            raise ConfigError(f"{origin}: a dotted key (or value) has {parts} parts; at most "
                              f"{MAX_KEY_PARTS} are allowed")


def _parse(text: str, origin: str, kind: str, loads, decode_error) -> Any:
    """``loads(text)`` after :func:`prescan`; any parse failure is a one-line ConfigError."""
    prescan(text, origin, kind)
    try:
        return loads(text)
    except decode_error as e:
        raise ConfigError(f"{origin}: not valid {kind} ({e})") from None
    except (RecursionError, MemoryError, ValueError) as e:
        raise ConfigError(f"{origin}: {kind} too complex to read ({type(e).__name__})") from None


def parse_toml(text: str, origin: str) -> dict:
    """``tomllib.loads`` after :func:`prescan` (ConfigError on any failure)."""
    return _parse(text, origin, "TOML", tomllib.loads, tomllib.TOMLDecodeError)


def parse_json(text: str, origin: str) -> Any:
    """``json.loads`` after :func:`prescan` (ConfigError on any failure)."""
    return _parse(text, origin, "JSON", json.loads, json.JSONDecodeError)


def read_toml_file(path: str | Path, what: str = "TOML file") -> dict:
    """A TOML file, size-checked, pre-scanned and parsed (ConfigError on any problem)."""
    return parse_toml(read_limited(path, what), str(path))
