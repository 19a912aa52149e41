"""Time budgets of long computations: every CLI subcommand (``--time-budget``, default
``DEFAULT_CLI_BUDGET_S`` wall seconds, env ``LLMPARA_TIME_BUDGET_S``) and every dashboard page
(``PAGE_CPU_BUDGET_S`` CPU seconds of the page's thread *and* ``PAGE_WALL_BUDGET_S`` wall
seconds) run inside :func:`time_budget`. The long loops (serving simulation, design-space
chunks, NSGA-II generations, parallel-plan search, validation rows and refits) call
:func:`check_time_budget`, which raises :class:`TimeBudgetExceeded` once either clock is spent,
naming what was done and how to go further.

``TimeBudgetExceeded`` is an ``LLMParaError`` but not a ``ConfigError``: the input was valid,
the work was only larger than the budget (faces show it as "stopped", not as a bad input).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time

from .errors import ConfigError, LLMParaError

# Wall seconds one CLI subcommand may run (``--time-budget`` / LLMPARA_TIME_BUDGET_S).
DEFAULT_CLI_BUDGET_S = 20.0
BUDGET_ENV = "LLMPARA_TIME_BUDGET_S"
MAX_BUDGET_S = 7 * 86_400.0           # a week: the largest --time-budget accepted

# CPU seconds one run of a dashboard page may spend computing. Measured under AppTest on the
# 2-core test machine (entry run + page): every page at its defaults needs <= 4 s (Serving
# "Latency vs load" 4.0 s, NSGA-II 100 x 40 1.0 s, Validation 1.3 s), the heaviest legitimate
# link seen 15 s (Serving frontier, 20,000 requests on 8 GPUs). CPU time of the page's own
# thread, so a crowd on the same server does not make a normal page time out ...
PAGE_CPU_BUDGET_S = 20.0
# ... and wall seconds, so a saturated host cannot hold a page for minutes (issue 29 measured
# 94-285 s of wall time under the CPU budget alone on a saturated host).
PAGE_WALL_BUDGET_S = 60.0


class TimeBudgetExceeded(LLMParaError):
    """A long computation stopped at its time budget (a clear message instead of a result)."""


_BUDGET = threading.local()


class _State:
    __slots__ = ("cpu_deadline", "cpu_s", "wall_deadline", "wall_s", "advice")

    def __init__(self, cpu_s, wall_s, advice):
        self.cpu_s, self.wall_s, self.advice = cpu_s, wall_s, advice
        self.cpu_deadline = math.inf if cpu_s is None else time.thread_time() + cpu_s
        self.wall_deadline = math.inf if wall_s is None else time.monotonic() + wall_s


@contextlib.contextmanager
def time_budget(seconds: float | None, advice: str = "", wall_s: float | None = None):
    """Inside the block, :func:`check_time_budget` raises :class:`TimeBudgetExceeded` once this
    thread has spent ``seconds`` of CPU time (None: no CPU limit) or ``wall_s`` seconds of wall
    time (None: no wall limit) in the block; ``advice`` ends the message. Nested budgets never
    extend an outer one."""
    outer = getattr(_BUDGET, "state", None)
    state = _State(seconds, wall_s, advice)
    if outer is not None:
        if outer.cpu_deadline < state.cpu_deadline:
            state.cpu_deadline, state.cpu_s = outer.cpu_deadline, outer.cpu_s
        if outer.wall_deadline < state.wall_deadline:
            state.wall_deadline, state.wall_s = outer.wall_deadline, outer.wall_s
        state.advice = outer.advice or advice
    _BUDGET.state = state
    try:
        yield
    finally:
        _BUDGET.state = outer


def check_time_budget(done: str | None = None) -> None:
    """Raise TimeBudgetExceeded if this thread's time budget is spent (no budget: no-op).
    ``done`` says what was finished so far ("12 of 40 generations")."""
    s = getattr(_BUDGET, "state", None)
    if s is None:
        return
    if time.monotonic() > s.wall_deadline:
        spent = f"{s.wall_s:g} s (wall clock)"
    elif time.thread_time() > s.cpu_deadline:
        spent = f"{s.cpu_s:g} s of computation"
    else:
        return
    raise TimeBudgetExceeded(
        f"stopped at the time budget of {spent}"
        f"{' after ' + done if done else ''}{': ' + s.advice if s.advice else ''}")


def cli_budget_s(value: float | None) -> float:
    """The CLI's wall budget: ``--time-budget`` if given, else LLMPARA_TIME_BUDGET_S, else
    DEFAULT_CLI_BUDGET_S (ConfigError for an environment value that is not in (0, a week])."""
    if value is not None:
        return value
    raw = os.environ.get(BUDGET_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_CLI_BUDGET_S
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not (0 < v <= MAX_BUDGET_S):
        raise ConfigError(f"{BUDGET_ENV} must be a number of seconds in (0, {MAX_BUDGET_S:g}], "
                          f"got {raw[:40]!r}")
    return v
