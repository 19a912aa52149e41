"""Expensive page results shared by every session of this server process.

The Serving and Design-space pages run simulations and searches that take seconds. Kept per
session, a crowd that opens the same shared link computes the same thing once per visitor; here
the result is computed once and served to all (issue 16: "a crowd asking the same thing is
served once"). Bounded (least recently used entries go first). A visitor asking for a result
another session is computing waits for it instead of computing it again. Failures (a bad input,
a time budget reached) are not stored, so the next visitor gets the same clear message.

Results must be treated as read-only by the pages (they are shared).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

MAX_ENTRIES = 16


class SharedResults:
    """A thread-safe, bounded, least-recently-used store of computed results."""

    def __init__(self, max_entries: int = MAX_ENTRIES):
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._store: OrderedDict[Hashable, Any] = OrderedDict()
        self._computing: dict[Hashable, threading.Lock] = {}
        self.computed = 0           # how many times ``compute`` ran (for tests and figures)

    def __len__(self) -> int:
        return len(self._store)

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
            with self._lock:
                self.computed += 1
                self._store[key] = value
                while len(self._store) > self.max_entries:
                    self._store.popitem(last=False)
            return value


_SHARED: dict[str, SharedResults] = {}
_SHARED_LOCK = threading.Lock()


def shared(name: str, max_entries: int = MAX_ENTRIES) -> SharedResults:
    """The process-wide store called ``name`` (one per page)."""
    with _SHARED_LOCK:
        if name not in _SHARED:
            _SHARED[name] = SharedResults(max_entries)
        return _SHARED[name]
