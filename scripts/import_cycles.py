"""The largest import cycle of a package, from its source (nothing is imported).

    uv run python scripts/import_cycles.py                      # the client SDK
    uv run python scripts/import_cycles.py services/subworker/src fastworker_subworker

A module depends on what it imports at module level (not inside functions, nor under
``if TYPE_CHECKING:``) and on its parent packages, whose ``__init__`` runs first when it
is imported. Modules that depend on each other, directly or around a loop, form a strongly
connected component: the largest one is the package's largest import cycle (1: none). Each
module in a cycle can only be imported, understood and tested together with all the others.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK = (ROOT / "services/client_sdk/src", "fastworker")


def modules_of(src: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``src``, by dotted name (a package by its own)."""
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of ``package`` it depends on at import."""
    modules = modules_of(src, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        needed = set(_parents(name))
        for target in _imports(ast.parse(path.read_text(encoding="utf-8")).body):
            module, names = _absolute(target, name, is_package)
            needed.update(_parents(module))
            needed.add(module)
            needed.update(f"{module}.{n}" for n in names)
        graph[name] = {m for m in needed if m in modules and m != name}
    return graph


def largest_cycle(graph: dict[str, set[str]]) -> list[str]:
    """The modules of the largest strongly connected component (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    largest: list[str] = []

    def visit(node: str) -> None:
        nonlocal largest
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in sorted(graph[node]):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > len(largest):
                largest = sorted(component)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return largest


def _imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements run when a module is imported (``if``/``try``/``with`` blocks
    included, function and class bodies and ``if TYPE_CHECKING:`` not)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _imports(node.body)
            yield from _imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _imports(block)
            for handler in node.handlers:
                yield from _imports(handler.body)
        elif isinstance(node, ast.With):
            yield from _imports(node.body)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool
) -> tuple[str, list[str]]:
    """The module a statement imports and the names it takes from it (maybe submodules)."""
    if isinstance(node, ast.Import):
        return node.names[0].name, []  # one name per statement (ruff's style)
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor if is_package else anchor[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base]) if base else ".".join(anchor)
    return base, [alias.name for alias in node.names]


def _parents(module: str) -> Iterator[str]:
    parts = module.split(".")
    for end in range(1, len(parts)):
        yield ".".join(parts[:end])


def main(argv: list[str]) -> int:
    src, package = (Path(argv[0]), argv[1]) if argv else SDK
    graph = import_graph(src, package)
    cycle = largest_cycle(graph)
    print(f"{package}: {len(graph)} modules, largest import cycle {len(cycle)}")
    for member in cycle if len(cycle) > 1 else []:
        print(f"  {member}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
