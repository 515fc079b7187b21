"""The package's modules import each other without a circle, and surrogate modules stay small.

The graph is read from the source with ``ast`` (nothing is imported): an edge ``a -> b`` for every
``import`` of a module ``b`` of the package anywhere in ``a``, in a function or under
``TYPE_CHECKING`` too (``from p import name`` goes to ``p.name`` when that is a module, else to
``p``). Parents a submodule import loads implicitly are not edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "orthobench"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
MAX_LINES = 700


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` for every module under ``root``."""
    files = {_module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")
                    anchor = anchor[: len(anchor) - node.level + is_package]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            edges.update(t for t in targets if t in files and t != name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle ``[a, b, ..., a]`` of ``graph``, or ``None`` (depth-first search)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                done.add(path.pop())
                stack.pop()
            elif nxt in path:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert "orthobench.surrogates.fit" in graph  # the walk found the package
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_find_cycle_finds_a_circle_through_a_function_level_import(tmp_path):
    package = tmp_path / PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from . import b\n")
    (package / "sub" / "b.py").write_text(
        "def f():\n    from orthobench.sub.c import g\n    return g\n"
    )
    (package / "sub" / "c.py").write_text("import orthobench.sub.a\n")
    graph = import_graph(package)
    assert graph["orthobench.sub.a"] == {"orthobench.sub.b"}
    assert find_cycle(graph) == [
        "orthobench.sub.a",
        "orthobench.sub.b",
        "orthobench.sub.c",
        "orthobench.sub.a",
    ]
    (package / "sub" / "c.py").write_text("")
    assert find_cycle(import_graph(package)) is None


def test_no_module_has_more_than_700_lines():
    """A module past that becomes a package of modules by concept (as in BoTorch and Optuna)."""
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sorted(ROOT.rglob("*.py"))
    }
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}
