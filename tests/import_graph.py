"""Which of the project's modules import which, read from the sources with ``ast`` (nothing is
imported): every import statement counts, at module level, in a function or under
``TYPE_CHECKING``, since each is a dependency someone reading or moving the code must respect.

Importing ``a.b`` runs ``a/__init__.py`` first, so an import of ``a.b`` depends on ``a`` too,
except from inside ``a`` itself (a submodule runs while its package is being imported). A name
taken from a package's ``__init__`` (``from . import ensure_onnx``) is a dependency on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Everything the project ships; tests/ is left out (nothing imports it, and it runs with its own path).
PACKAGES = ("model", "export", "runtime", "benchmarks", "playground", "deploy")
SCRIPTS = ("app.py",)


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> its file, for every ``.py`` of :data:`PACKAGES` and :data:`SCRIPTS`."""
    files = {Path(name).stem: root / name for name in SCRIPTS}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _imported(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The project modules one file's import statements name (before the package rule)."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                # A submodule imported by name, else a name defined in ``base`` itself.
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {target for target in found if target in known}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules importing it runs (see the module docstring)."""
    files = module_files(root)
    known = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        own = {name, *_ancestors(name)}
        edges: set[str] = set()
        for target in _imported(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py", known):
            edges.add(target)
            edges.update(a for a in _ancestors(target) if a not in own and a in known)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module importing ``start`` can run, ``start`` included."""
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
