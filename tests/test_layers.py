"""The package's architecture as checks (issue: layers whose arrows point one way).

Every ``import`` of a ``pgrpo`` module, function-level ones included, is read from the source with ``ast``:

- no import cycle between modules;
- the pure core (theory, bandit, fit, diagnose, grpo) imports nothing above it (stages, figures, tables, cli), and
  figures/tables import no stage and not the CLI;
- matplotlib is imported only in ``figures/``;
- no module is over 700 lines; ``markdown_table``, ``latex_table``, ``latex_escape`` are defined once.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "pgrpo"
CORE = ("theory", "bandit", "fit", "diagnose", "grpo")
VIEWS = ("figures", "tables")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The pgrpo modules a file imports anywhere in it (``from pgrpo.x import y`` counts ``pgrpo.x.y`` if a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pgrpo"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pgrpo") and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
    return {m for m in found if m in known}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imported_modules(path, known) - {name} for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules, or None (iterative DFS with colours)."""
    colour = {n: 0 for n in graph}
    for start in graph:
        if colour[start]:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour[child] == 1:
                return path[path.index(child):] + [child]
            elif colour[child] == 0:
                colour[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "pgrpo"


def test_find_cycle_detects_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles():
    assert find_cycle(import_graph()) is None


@pytest.mark.parametrize("core", CORE)
def test_core_imports_nothing_above_it(core):
    above = {"stages", "figures", "tables", "cli"}
    bad = {(m, dep) for m, deps in import_graph().items() if layer(m) == core for dep in deps if layer(dep) in above}
    assert not bad, f"core imports a higher layer: {sorted(bad)}"


def test_views_import_no_stage_and_no_cli():
    bad = {(m, d) for m, deps in import_graph().items() if layer(m) in VIEWS for d in deps
           if layer(d) in ("stages", "cli")}
    assert not bad, sorted(bad)


def test_matplotlib_only_in_figures():
    users = set()
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "matplotlib" for n in names):
                users.add(name)
    assert users and all(layer(u) == "figures" for u in users), sorted(users)


def test_no_module_over_700_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 700}
    assert not long, long


@pytest.mark.parametrize("function", ["markdown_table", "latex_table", "latex_escape", "html_table"])
def test_table_writers_defined_once(function):
    where = [name for name, path in modules().items() for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.FunctionDef) and node.name == function]
    assert where == ["pgrpo.tables.render"], where


def test_every_module_has_a_docstring():
    missing = [name for name, path in modules().items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not missing, missing
