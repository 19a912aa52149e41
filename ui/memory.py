"""Give freed memory back to the operating system while the server runs.

The load test (issue 29) saw the server's resident memory stay ~250 MB above its level once a
crowd of sessions had closed. Two things held it: Streamlit keeps a disconnected session (its
widget state and messages) for ``server.disconnectedSessionTTL`` seconds and drops it only
when the session store is next touched (.streamlit/config.toml sets 30 s instead of 120 s), and
glibc's allocator keeps freed small blocks in its heap instead of returning them. A daemon
thread started once per process collects garbage and calls ``malloc_trim(0)`` every
``TRIM_EVERY_S`` seconds (a few ms each; nothing on a platform without glibc).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
import time

TRIM_EVERY_S = 15.0

_STARTED = False
_LOCK = threading.Lock()


def _libc_trim():
    """``malloc_trim`` of glibc, or None."""
    try:
        name = ctypes.util.find_library("c")
        libc = ctypes.CDLL(name) if name else None
        return getattr(libc, "malloc_trim", None)
    except OSError:
        return None


def trim_once() -> None:
    """One full garbage collection, then the allocator's free memory back to the system."""
    gc.collect()
    trim = _libc_trim()
    if trim is not None:
        trim(0)


def _loop() -> None:
    while True:
        time.sleep(TRIM_EVERY_S)
        try:
            trim_once()
        except Exception:          # noqa: BLE001 - never take the server down for this
            pass


def start_trimmer() -> None:
    """Start the trimming thread once per process (later calls do nothing)."""
    global _STARTED
    with _LOCK:
        if _STARTED:
            return
        _STARTED = True
    threading.Thread(target=_loop, name="llmpara-memory-trim", daemon=True).start()
