"""The packages of `app` import each other without cycles, and the lower layers never import the
window, the command line or the server.

A static scan (no import runs): every `import app.x` / `from app.x import y` / relative import
in app/**/*.py counts, at module level and inside functions alike (a lazy import is still a
dependency; it only moves the moment it is paid).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"

# Layers that must not know about the faces above them.
LOWER = ("app.model", "app.gguf", "app.kernels", "app.engine", "app.library", "app.chats", "app.hub")
UPPER = ("app.ui", "app.cli", "app.server")


def _module_names() -> dict[str, Path]:
    """Dotted name -> file, for every module and package of app."""
    names = {}
    for path in sorted(APP.rglob("*.py")):
        parts = path.relative_to(APP.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


MODULES = _module_names()


def _imports(name: str, path: Path):
    """(imported module, line) for every import statement of one file, nested ones included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:  # `from app import logs` imports the module app.logs
                sub = f"{module}.{alias.name}"
                yield (sub if sub in MODULES else module), node.lineno


def _known(target: str) -> str | None:
    """The longest module of app that `target` names (app.model.config.X -> app.model.config)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _unit(module: str) -> str:
    """The package-level node: app.model.config -> app.model; app.cli -> app.cli; app -> app."""
    return ".".join(module.split(".")[:2])


def module_graph() -> dict[str, dict[str, str]]:
    """module -> {imported module of app: "file:line" of the first such import}."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for name, path in MODULES.items():
        for target, line in _imports(name, path):
            if not target.startswith("app"):
                continue
            known = _known(target)
            if known and known != name:
                graph[name].setdefault(known, f"{path.relative_to(APP.parent)}:{line}")
    return graph


def package_graph() -> dict[str, dict[str, str]]:
    """app.X -> {app.Y: "file:line"}: the module graph folded onto packages and top-level modules."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for src, targets in module_graph().items():
        for dst, where in targets.items():
            a, b = _unit(src), _unit(dst)
            if a != b:
                graph[a].setdefault(b, where)
    return graph


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, in sorted order)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def describe_cycle(cycle: list[str], graph: dict[str, dict[str, str]]) -> str:
    return (
        "import cycle: "
        + " -> ".join(cycle)
        + "\n"
        + "\n".join(f"  {a} -> {b} at {graph[a][b]}" for a, b in zip(cycle, cycle[1:]))
    )


def test_the_scan_sees_the_imports():
    graph = package_graph()
    assert "app.model" in graph["app.engine"]  # from app.model import config_from_gguf
    assert "app.gguf" in graph["app.model"]
    assert "app.ui" in graph["app.cli"]  # lazy, inside _open_window: counted too
    assert find_cycle({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ""}, "b": {}}) is None


def test_no_cycle_between_packages():
    graph = package_graph()
    cycle = find_cycle(graph)
    assert cycle is None, describe_cycle(cycle, graph)


def test_no_cycle_between_modules():
    """Also module by module (app.model.config <-> app.model.memory would be one); a package's
    __init__ importing its own submodules to present them is not counted."""
    graph = {
        src: {
            dst: where
            for dst, where in targets.items()
            if not (MODULES[src].name == "__init__.py" and dst.startswith(src + "."))
        }
        for src, targets in module_graph().items()
    }
    cycle = find_cycle(graph)
    assert cycle is None, describe_cycle(cycle, graph)


@pytest.mark.parametrize("lower", LOWER)
def test_lower_layers_do_not_import_the_faces(lower):
    graph = package_graph()
    bad = {upper: graph[lower][upper] for upper in UPPER if upper in graph.get(lower, {})}
    assert not bad, f"{lower} imports " + ", ".join(f"{u} (at {w})" for u, w in bad.items())


@pytest.mark.parametrize("lower", LOWER)
def test_lower_layers_do_not_import_qt(lower):
    """No Qt below app.ui (the engine, library and store run headless: CLI, server)."""
    found = [
        f"{path.relative_to(APP.parent)}:{line}"
        for name, path in MODULES.items()
        if _unit(name) == lower
        for target, line in _imports(name, path)
        if target.split(".")[0] == "PySide6"
    ]
    assert not found, f"{lower} imports PySide6 at " + ", ".join(found)
