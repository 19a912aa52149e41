"""Expensive page results shared by every session of this server process.

The Serving and Design-space pages run simulations and searches that take seconds. Kept per
session, a crowd that opens the same shared link computes the same thing once per visitor; here
the result is computed once and served to all (issue 16: "a crowd asking the same thing is
served once"). Bounded by count and by bytes (least recently used entries go first): a count
alone let 16 serving studies of 20,000 requests (their per-step logs) hold hundreds of MB after
every session had closed (issue 29's load test); ``MAX_BYTES`` caps each store's estimated size. A visitor asking for a result
another session is computing waits for it instead of computing it again. Failures (a bad input,
a time budget reached) are not stored, so the next visitor gets the same clear message.

Results must be treated as read-only by the pages (they are shared).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

MAX_ENTRIES = 16
MAX_BYTES = 64_000_000          # estimated bytes one store may hold (``size_bytes``)


def size_bytes(obj, _depth: int = 0, _seen: set | None = None) -> int:
    """Estimated memory of a result: numpy arrays by their buffers, containers and dataclasses
    by their items (shared objects counted once; deeper than 12 levels not counted)."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen or _depth > 12:
        return 0
    seen.add(id(obj))
    nbytes = getattr(obj, "nbytes", None)
    if isinstance(nbytes, int) and hasattr(obj, "dtype"):
        return nbytes + 112
    n = sys.getsizeof(obj, 64)
    if isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return n
    if isinstance(obj, dict):
        return n + sum(size_bytes(k, _depth + 1, seen) + size_bytes(v, _depth + 1, seen)
                       for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return n + sum(size_bytes(v, _depth + 1, seen) for v in obj)
    if dataclasses.is_dataclass(obj):
        return n + sum(size_bytes(getattr(obj, f.name, None), _depth + 1, seen)
                       for f in dataclasses.fields(obj))
    if hasattr(obj, "__dict__"):
        return n + size_bytes(vars(obj), _depth + 1, seen)
    return n


class SharedResults:
    """A thread-safe, bounded, least-recently-used store of computed results."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES):
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be >= 1")
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._lock = threading.Lock()
        self._store: OrderedDict[Hashable, Any] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self.bytes = 0              # estimated bytes held
        self._computing: dict[Hashable, threading.Lock] = {}
        self.computed = 0           # how many times ``compute`` ran (for tests and figures)

    def __len__(self) -> int:
        return len(self._store)

    def clear(self) -> None:
        with self._lock:
            self._store.clear()
            self._sizes.clear()
            self.bytes = 0

    def _lookup(self, key: Hashable) -> tuple[bool, Any]:
        if key in self._store:
            self._store.move_to_end(key)
            return True, self._store[key]
        return False, None

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The stored result for ``key``, or ``compute()`` run once (concurrent callers with the
        same key wait for it) and stored."""
        with self._lock:
            hit, value = self._lookup(key)
            if hit:
                return value
            key_lock = self._computing.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                hit, value = self._lookup(key)
            if hit:
                return value
            try:
                value = compute()
            finally:
                with self._lock:
                    self._computing.pop(key, None)
            size = size_bytes(value)
            with self._lock:
                self.computed += 1
                if size > self.max_bytes:       # too large to keep: served to this caller only
                    return value
                self._store[key] = value
                self._sizes[key] = size
                self.bytes += size
                while len(self._store) > self.max_entries or self.bytes > self.max_bytes:
                    old, _ = self._store.popitem(last=False)
                    self.bytes -= self._sizes.pop(old)
            return value


_SHARED: dict[str, SharedResults] = {}
_SHARED_LOCK = threading.Lock()


def shared(name: str, max_entries: int = MAX_ENTRIES) -> SharedResults:
    """The process-wide store called ``name`` (one per page)."""
    with _SHARED_LOCK:
        if name not in _SHARED:
            _SHARED[name] = SharedResults(max_entries)
        return _SHARED[name]
