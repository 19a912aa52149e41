"""ui.shared_results: one computation for a crowd asking the same thing, bounded, failures not
kept (issue 16)."""

from __future__ import annotations

import threading
import time

import pytest

from ui.shared_results import SharedResults


def test_same_key_computed_once_and_bounded():
    store = SharedResults(max_entries=2)
    assert store.get("a", lambda: 1) == 1
    assert store.get("a", lambda: 2) == 1          # served, not recomputed
    store.get("b", lambda: 3)
    store.get("a", lambda: 4)                      # a is now the most recently used
    store.get("c", lambda: 5)                      # evicts b, the least recently used
    assert len(store) == 2 and store.computed == 3
    assert store.get("b", lambda: 6) == 6


def test_concurrent_callers_wait_for_one_computation():
    store = SharedResults()
    started, calls = threading.Event(), []

    def slow():
        calls.append(1)
        started.set()
        time.sleep(0.2)
        return "result"

    out: list[str] = []
    threads = [threading.Thread(target=lambda: out.append(store.get("k", slow)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert out == ["result"] * 8 and len(calls) == 1


def test_failure_is_not_stored():
    store = SharedResults()

    def bad():
        raise ValueError("budget")

    with pytest.raises(ValueError):
        store.get("k", bad)
    assert len(store) == 0 and store.get("k", lambda: 7) == 7


def test_rejects_empty_store():
    with pytest.raises(ValueError):
        SharedResults(0)


def test_store_is_bounded_by_bytes_too():
    """Issue 29 (load): a store bounded by count alone kept large results after every session
    closed. Entries past ``max_bytes`` (estimated) go first; one larger than it is not kept."""
    import numpy as np
    from ui.shared_results import SharedResults, size_bytes
    arr = np.zeros(1_000_000)                                   # 8 MB
    assert 8_000_000 <= size_bytes({"log": [arr, arr], "x": arr}) < 8_100_000   # shared: once
    s = SharedResults(max_entries=16, max_bytes=20_000_000)
    for k in range(5):
        s.get(k, lambda: np.zeros(1_000_000))
    assert len(s) == 2 and s.bytes <= 20_000_000
    s.get("big", lambda: np.zeros(3_000_000))                  # 24 MB: returned, not stored
    assert "big" not in s._store and len(s) == 2
    s.clear()
    assert len(s) == 0 and s.bytes == 0
