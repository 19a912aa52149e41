"""The layers of ARCHITECTURE.md, checked on the source: the core imports no UI library and
nothing above it, and no two files import each other (directly or round a longer circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UI_LIBRARIES = {"streamlit", "pandas", "plotly", "altair"}
LAYERS_ABOVE_CORE = {"ui", "app_pages", "streamlit_app"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported_modules(path: Path, known: set[str], text: str | None = None) -> set[str]:
    """Modules ``path`` imports (anywhere in the file, function-level imports included),
    relative imports resolved; ``from pkg import sub`` counts as importing ``pkg.sub``."""
    me = module_name(path)
    package = me if is_package(path) else me.rpartition(".")[0]
    out: set[str] = set()
    source = path.read_text(encoding="utf-8") if text is None else text
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.add(sub if sub in known else mod)
    return out


def source_files(*tops: str) -> list[Path]:
    files = []
    for top in tops:
        p = ROOT / top
        files += [p] if p.suffix == ".py" else sorted(p.rglob("*.py"))
    return files


CORE = source_files("llmpara_core")


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_no_ui_library_and_nothing_above_it(path):
    known = {module_name(p) for p in CORE}
    bad = {m for m in imported_modules(path, known)
           if m.split(".")[0] in UI_LIBRARIES | LAYERS_ABOVE_CORE}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_checker_sees_forbidden_and_relative_imports():
    # The rule above must be able to fail: imports inside a function, and relative ones.
    text = ("def f():\n    import pandas as pd\n    from plotly import graph_objects\n"
            "from ..ui import charts\nfrom . import engine\n")
    got = imported_modules(ROOT / "llmpara_core" / "tiers" / "probe.py",
                           {"llmpara_core.tiers.engine"}, text)
    assert {"pandas", "plotly", "llmpara_core.ui", "llmpara_core.tiers.engine"} <= got


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_find_cycle_finds_a_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_file_imports_another_that_imports_it_back():
    files = source_files("llmpara_core", "ui", "app_pages", "streamlit_app.py")
    known = {module_name(p) for p in files}
    graph = {}
    for p in files:
        me = module_name(p)
        deps = imported_modules(p, known) & known
        # A submodule importing names its own package re-exports is how packages work, not a
        # circle between files; an __init__ importing its submodules likewise.
        graph[me] = {d for d in deps if d != me and not me.startswith(d + ".")}
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def package_of(module: str) -> str:
    """The package a module belongs to for the layering rule: an analysis subpackage
    (``llmpara_core.calibration.fitting`` -> ``llmpara_core.calibration``), ``ui``,
    ``app_pages``; a kernel file (``llmpara_core.hardware``) is its own node."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "llmpara_core" else parts[0]


def package_graph(files: list[Path], texts: dict[Path, str] | None = None) -> dict[str, set[str]]:
    """Package -> packages it imports (function-level imports included)."""
    known = {module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    for p in files:
        me = package_of(module_name(p))
        deps = {package_of(d) for d in imported_modules(p, known, (texts or {}).get(p)) & known}
        graph.setdefault(me, set()).update(deps - {me})
    return graph


def test_no_package_imports_another_that_imports_it_back():
    # Two packages importing each other -- even inside functions and through files that do not
    # import each other (parallel.measurements -> calibration.efficiency while
    # calibration.stack_fit -> parallel) -- blur which layer is below which.
    files = source_files("llmpara_core", "ui", "app_pages", "streamlit_app.py")
    cycle = find_cycle(package_graph(files))
    assert cycle is None, " -> ".join(cycle)


def test_the_package_check_sees_a_cycle_made_inside_functions():
    a = ROOT / "llmpara_core" / "parallel" / "probe.py"
    b = ROOT / "llmpara_core" / "calibration" / "probe.py"
    texts = {a: "def f():\n    from ..calibration import probe\n",
             b: "from ..parallel import probe\n"}
    assert find_cycle(package_graph([a, b], texts)) is not None
    texts[a] = "def f():\n    return 1\n"
    assert find_cycle(package_graph([a, b], texts)) is None


def test_the_kernel_imports_no_analysis():
    # The kernel (llmpara_core/*.py) sits below every analysis package; __main__ is the
    # command-line entry point, not kernel.
    files = source_files("llmpara_core")
    known = {module_name(p) for p in files}
    kernel = [p for p in files if p.parent == ROOT / "llmpara_core" and p.name != "__main__.py"]
    for p in kernel:
        bad = {d for d in imported_modules(p, known) & known
               if d.count(".") and (ROOT / "llmpara_core" / d.split(".")[1]).is_dir()}
        assert not bad, f"{p.relative_to(ROOT)} imports {sorted(bad)}"
