"""The time budget of long computations (issue 16): inside ``limits.time_budget`` the long
loops (serving simulation, design-space chunks, NSGA-II generations, parallel-plan search) stop
with TimeBudgetExceeded (a ConfigError: pages show it as their usual error line) once the
thread has spent its CPU seconds; outside one (the CLI) nothing changes. Tested with tiny
budgets: each case stops within a small multiple of its budget instead of running to the end.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from llmpara_core import serving
from llmpara_core import dse
from llmpara_core.dse import nsga as dse_nsga, space as dse_space
from llmpara_core.errors import ConfigError
from llmpara_core.limits import (PAGE_CPU_BUDGET_S, TimeBudgetExceeded, check_time_budget,
                                 time_budget)
from llmpara_core.metrics.cost import MetricsSettings
from llmpara_core.parallel import ParallelPlan, search_plans
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.workload import Workload

TINY_S = 0.2
STOP_WITHIN_S = 3.0          # CPU seconds from the start to the raise (budget + one loop step)


def test_no_budget_no_effect():
    check_time_budget()                        # the CLI never sets one


def test_budget_raises_naming_the_budget_and_what_was_done():
    with time_budget(0.0, "ask for less"):
        with pytest.raises(TimeBudgetExceeded,
                           match=r"time budget of 0 s of computation after 3 of 9 rows.*ask "
                                 r"for less"):
            check_time_budget("3 of 9 rows")
    check_time_budget()                        # gone after the block


def test_budget_is_not_a_config_error():
    """The input was valid; only the work was larger than the budget (issue 29)."""
    assert not issubclass(TimeBudgetExceeded, ConfigError)


def test_wall_clock_budget_counts_waiting_too():
    """A thread that sleeps spends no CPU time, but the wall budget still stops it."""
    with time_budget(100.0, wall_s=0.05):
        time.sleep(0.1)
        with pytest.raises(TimeBudgetExceeded, match=r"0.05 s \(wall clock\)"):
            check_time_budget()


def test_page_wall_budget_is_set():
    from llmpara_core.budget import PAGE_WALL_BUDGET_S
    assert PAGE_CPU_BUDGET_S <= PAGE_WALL_BUDGET_S <= 120


def test_inner_budget_never_extends_the_outer_one():
    with time_budget(0.0):
        with time_budget(100.0):
            with pytest.raises(TimeBudgetExceeded, match="budget of 0 s"):
                check_time_budget()


def test_budget_is_per_thread():
    seen = []

    def other():
        try:
            check_time_budget()
            seen.append("ok")
        except TimeBudgetExceeded:
            seen.append("stopped")

    with time_budget(0.0):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == ["ok"]


def _stops(fn, budget_s: float = TINY_S) -> float:
    """CPU seconds until ``fn`` hit a ``budget_s`` budget (it must hit it)."""
    t0 = time.thread_time()
    with time_budget(budget_s):
        with pytest.raises(TimeBudgetExceeded):
            fn()
    dt = time.thread_time() - t0
    assert dt < STOP_WITHIN_S, dt
    return dt


def test_serving_simulation_stops():
    model, hw = load_model("llama-3.1-8b"), load_hardware("nvidia-h100-sxm")
    spec = serving.RequestSpec(isl=512, osl=512, arrival="poisson", rate=50.0, requests=20_000)
    cfg = serving.engine_config("generic")[0]
    _stops(lambda: serving.serve(model, hw, precision_preset("FP16"), spec, cfg, search=False))


def _dse_ctx():
    return dse.DesignContext(load_model("llama-3-8b"), precision_preset("FP16"),
                             Workload(), load_hardware("nvidia-h100-sxm"), MetricsSettings())


def test_design_space_sampling_checks_between_chunks():
    """1,000,000 designs take ~0.2 s (vectorised): the loop over chunks checks the budget,
    shown with an exhausted one."""
    space = dse_space.find_space("datacenter-gpu")
    _stops(lambda: dse.explore(_dse_ctx(), space, "random", 1_000_000, keep_sample=100), 0.0)


def test_nsga_stops():
    space = dse_space.find_space("datacenter-gpu").without_axis("tdp").without_axis("price")
    _stops(lambda: dse_nsga.run_nsga(_dse_ctx(), space, population=1000, generations=200,
                                     reference_samples=512))


def test_nsga_past_the_evaluation_cap_is_refused_before_work():
    """1,000 x 500 = 500,000 evaluations: refused at once, naming the cap (issue 29)."""
    space = dse_space.find_space("datacenter-gpu")
    t0 = time.thread_time()
    with pytest.raises(ConfigError, match=r"500,000 is more than the cap of 200,000"):
        dse_nsga.run_nsga(_dse_ctx(), space, population=1000, generations=500)
    assert time.thread_time() - t0 < 0.5


def test_parallel_plan_search_stops():
    """1,024 devices (an uploaded cluster TOML may say so): ~200 plans, ~1.5 s unbudgeted."""
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    hw = replace(hw, interconnect=replace(hw.interconnect, devices=1024))
    wl = Workload(batch=8, prompt_len=1024, gen_len=128)
    _stops(lambda: search_plans(load_model("llama-3.1-70b"), hw, precision_preset("FP16"), wl,
                                "min_tpot"))


def test_the_page_budget_is_a_plain_bound():
    assert 1.0 <= PAGE_CPU_BUDGET_S <= 60.0


def test_a_page_past_its_budget_says_so(monkeypatch):
    """The worst serving link (20,000 requests) under a 0.5 s budget: one error line naming
    the budget, no traceback, back in seconds (unbudgeted it runs for minutes)."""
    import ui.guard
    from apptest_util import open_page
    monkeypatch.setattr(ui.guard, "PAGE_CPU_BUDGET_S", 0.5)
    t0 = time.perf_counter()
    at = open_page("app_pages/serving_page.py", timeout=60, sv_requests="20000",
                   sv_view="Latency vs load", sv_points="30")
    assert not at.exception, [e.value for e in at.exception]
    shown = [e.value.replace("\\", "") for e in at.error]     # markdown escapes removed
    assert any("time budget of 0.5 s of computation" in e for e in shown), \
        [e.value for e in at.error]
    assert time.perf_counter() - t0 < 30


def test_guard_stops_a_page_that_does_not_catch_it(monkeypatch, tmp_path):
    """A page without its own ``except ConfigError``: the guard shows one 'Stopped' line."""
    from helpers import guarded_page_app
    monkeypatch.setenv("LLMPARA_RAISE_PAGE_ERRORS", "0")
    at = guarded_page_app(tmp_path, "        while True:\n            check_time_budget()\n",
                          "budget_s=0.3",
                          imports="from llmpara_core.limits import check_time_budget\n")
    assert not at.exception
    assert len(at.error) == 1
    assert at.error[0].value.replace("\\", "").startswith("Stopped: stopped at the time budget "
                                                          "of 0.3 s")


def test_every_app_cache_is_bounded():
    """Expensive results are cached with bounded entries: every ``st.cache_data`` /
    ``st.cache_resource`` in ui/ and app_pages/ names ``max_entries``, every ``lru_cache`` a
    finite ``maxsize`` (so a crowd asking many different things cannot grow the server)."""
    import ast
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    unbounded, seen = [], 0
    for path in [*root.glob("ui/*.py"), *root.glob("app_pages/*.py"), root / "streamlit_app.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for dec in node.decorator_list:
                name = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
                if not name.endswith(("cache_data", "cache_resource", "lru_cache", "cache")):
                    continue
                seen += 1
                kw = {k.arg: k.value for k in dec.keywords} if isinstance(dec, ast.Call) else {}
                ok = ("max_entries" in kw if "cache_" in name else
                      "maxsize" in kw and ast.unparse(kw["maxsize"]) != "None")
                if not ok:
                    unbounded.append(f"{path.name}:{node.name}")
    assert seen >= 10 and not unbounded, unbounded


def test_frontier_stops_instead_of_noting_the_budget_per_plan():
    """The frontier keeps a plan's own ConfigError as a note; the budget stops the sweep."""
    hw = load_hardware("8x-nvidia-h100-sxm-nvlink")
    spec = serving.RequestSpec(isl=512, osl=512, requests=20_000)
    cfg = serving.engine_config("generic")[0]
    plans = [ParallelPlan(tp=t) for t in (1, 2, 4, 8)]
    _stops(lambda: serving.frontier(load_model("llama-3.1-8b"), hw, precision_preset("FP16"),
                                    cfg, spec, plans, (8, 32, 128, 512)))
