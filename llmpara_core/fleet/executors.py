"""Where the fleet search's tasks run: in this process, on a local process pool (the default),
or on Ray (a local Ray started here, or an existing cluster joined with ``address``).

An executor has one method, ``map_unordered(fn, items)``, yielding ``fn(item)`` as each task
finishes (any order: the planner sorts what comes back, so plans do not depend on it). A task
carries names and a few numbers only; workers load presets themselves (cached per worker
process). Stopping the iteration early (a cancel, Ctrl-C) cancels the tasks not yet finished;
what finished is kept by the caller. Ray is optional (``pip install llmpara[ray]``) and is only
imported when the Ray executor is made.
"""

from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from ..errors import ConfigError

EXECUTORS = ("local", "ray")
REPO_ROOT = Path(__file__).resolve().parents[2]


class InProcess:
    """Every task in this process, in order (tests, one worker)."""
    workers = 1

    def map_unordered(self, fn, items):
        for it in items:
            yield fn(it)

    def close(self):
        pass


class LocalPool:
    """A process pool of ``workers`` processes (default: the CPUs of this machine), kept for
    the whole plan."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._pool = None

    def map_unordered(self, fn, items):
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            yield from InProcess().map_unordered(fn, items)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        pending = {self._pool.submit(fn, it) for it in items}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    yield f.result()
        finally:
            for f in pending:
                f.cancel()

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class RayExecutor:
    """One Ray task per item (1 CPU each). ``address`` None starts a local Ray with
    ``workers`` CPUs; ``"auto"`` or ``"ray://host:10001"`` joins an existing cluster, shipping
    this checkout (code and presets, not tests or docs) once per job as the working
    directory."""

    def __init__(self, workers: int | None = None, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise ConfigError("the Ray executor needs Ray: pip install 'llmpara[ray]'") from None
        self._ray = ray
        self.workers = workers
        self._started = False
        if not ray.is_initialized():
            kw = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            if address:
                kw["runtime_env"] = {"working_dir": str(REPO_ROOT),
                                     "excludes": [".git", "tests", "docs", "benchmarks",
                                                  "*.png", "__pycache__"]}
                try:
                    ray.init(address=address, **kw)
                except Exception as e:       # noqa: BLE001 -- Ray raises many kinds
                    why = str(e).splitlines()[0] if str(e) else type(e).__name__
                    hint = ("" if os.environ.get("RAY_AUTH_MODE") == "token" else
                            " (a cluster with token authentication -- the default of local "
                            "clusters since Ray 2.59 -- needs RAY_AUTH_MODE=token here, with "
                            "its token in RAY_AUTH_TOKEN or ~/.ray/auth_token: `ray "
                            "get-auth-token` on the head node)")
                    raise ConfigError(f"cannot join the Ray cluster at {address}: {why}{hint}"
                                      ) from None
            else:
                env = {"env_vars": {"PYTHONPATH": os.pathsep.join(
                    [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(
                        os.pathsep) if p])}}
                ray.init(num_cpus=workers or os.cpu_count() or 1, runtime_env=env, **kw)
            self._started = True
        self._remote = {}

    def map_unordered(self, fn, items):
        ray = self._ray
        rf = self._remote.get(fn)
        if rf is None:
            rf = self._remote[fn] = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = [rf.remote(it) for it in items]
        try:
            while refs:
                done, refs = ray.wait(refs, num_returns=1)
                yield ray.get(done[0])
        finally:
            for r in refs:
                ray.cancel(r, force=True)

    def close(self):
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False


def make_executor(kind: str = "local", workers: int | None = None,
                  address: str | None = None):
    """The executor named ``kind`` ("local" or "ray"); ConfigError on a bad choice."""
    if kind not in EXECUTORS:
        raise ConfigError(f"executor must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    if workers is not None and not (isinstance(workers, int) and 1 <= workers <= 4096):
        raise ConfigError(f"workers must be an integer in [1, 4096], got {workers!r}")
    if address is not None and kind != "ray":
        raise ConfigError("--address joins a Ray cluster: use it with --executor ray")
    if kind == "ray":
        return RayExecutor(workers, address)
    return LocalPool(workers)
