"""Guards on what the SDK's modules import: no growing import cycle, no server dependency.

A module in an import cycle can only be imported, understood and tested with every other
module of the cycle. The SDK's was 23 modules (everything through ``fastworker/__init__``);
its package faces now import their names on first use, and this keeps it from growing
back. ``uv run python scripts/import_cycles.py`` prints the largest cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from scripts.import_cycles import SDK, import_graph, largest_cycle

ROOT = Path(__file__).resolve().parent.parent
LARGEST_SDK_CYCLE = 3  # fastworker.testing and its two modules

# The client installs neither the ``server`` extra of fastworker-common nor ``dev``.
SERVER_ONLY = {
    "structlog",
    "aiohttp",
    "prometheus_client",
    "fastworker_common.web",
    "fastworker_common.log_setup",
}


def test_the_sdk_s_largest_import_cycle_does_not_grow() -> None:
    cycle = largest_cycle(import_graph(*SDK))

    assert len(cycle) <= LARGEST_SDK_CYCLE, (
        f"the SDK's largest import cycle has {len(cycle)} modules (at most "
        f"{LARGEST_SDK_CYCLE}): {cycle}"
    )


def test_the_cycle_check_sees_a_cycle_through_a_package_face(tmp_path: Path) -> None:
    # Given a package whose __init__ re-exports a module that imports a sibling
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import A\n", encoding="utf-8")
    (package / "a.py").write_text("from pkg.b import B\nA = B\n", encoding="utf-8")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import f\nB = 1\n",
        encoding="utf-8",
    )
    (package / "c.py").write_text("def f():\n    from pkg.a import A\n", encoding="utf-8")

    # When its import graph and largest cycle are measured
    graph = import_graph(tmp_path, "pkg")
    cycle = largest_cycle(graph)

    # Then the face and every module imported through it are in the cycle (a module
    # depends on its package); imports under TYPE_CHECKING or in functions are not edges
    assert cycle == ["pkg", "pkg.a", "pkg.b"]
    assert graph["pkg.b"] == {"pkg"}
    assert graph["pkg.c"] == {"pkg"}


def test_the_sdk_imports_nothing_of_the_server_extra() -> None:
    src, package = SDK
    offences = [
        f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
        for path in sorted((src / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in _imported(node)
        if any(name == s or name.startswith(f"{s}.") for s in SERVER_ONLY)
    ]

    assert not offences, "\n".join(offences)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return []
