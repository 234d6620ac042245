"""Guards on the shape of the code: import direction, curated public APIs, module sizes.

Imports run one way only: protocol <- common <- client_sdk <- subworker <- control_plane.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ROOT / "services"
MAX_MODULE_LINES = 600

PACKAGES = {
    "fastworker_protocol": SERVICES / "protocol/src/fastworker_protocol",
    "fastworker_common": SERVICES / "common/src/fastworker_common",
    "fastworker": SERVICES / "client_sdk/src/fastworker",
    "fastworker_subworker": SERVICES / "subworker/src/fastworker_subworker",
    "fastworker_control_plane": SERVICES / "control_plane/src/fastworker_control_plane",
}

FORBIDDEN = {
    "fastworker_protocol": {
        "fastworker_common",
        "fastworker",
        "fastworker_subworker",
        "fastworker_control_plane",
    },
    "fastworker_common": {"fastworker", "fastworker_subworker", "fastworker_control_plane"},
    "fastworker": {"fastworker_subworker", "fastworker_control_plane"},
    "fastworker_subworker": {"fastworker_control_plane"},
    "fastworker_control_plane": set(),
}

FASTWORKER_API = {
    "BatchItem",
    "Client",
    "ControlPlaneUnavailable",
    "DeadLetter",
    "FailedPage",
    "FastWorkerError",
    "InvalidArguments",
    "MessageTooLarge",
    "Priority",
    "RequestRejected",
    "Retried",
    "Retries",
    "ScheduleInfo",
    "Signature",
    "SoftTimeLimitExceeded",
    "SyncClient",
    "TLS",
    "TLSError",
    "Task",
    "TaskCancelled",
    "TaskContext",
    "TaskError",
    "TaskFailed",
    "QueueFull",
    "TaskNotFound",
    "TaskRegistry",
    "TaskPage",
    "TaskResult",
    "TaskStatus",
    "Timeout",
    "Unauthorized",
    "UnknownTask",
    "Workflow",
    "__version__",
    "chain",
    "chord",
    "configure",
    "current_task",
    "default_client",
    "default_registry",
    "group",
    "sig",
    "task",
    "unwrap",
}
SUBWORKER_API = {"Subworker", "SubworkerConfig", "TaskModuleError", "load_task_modules"}
CONTROL_PLANE_API = {"ControlPlane", "ControlPlaneConfig", "PortInUse"}


def modules(package: str) -> list[Path]:
    return sorted(PACKAGES[package].rglob("*.py"))


def all_source_files() -> list[Path]:
    return sorted(SERVICES.glob("*/src/**/*.py"))


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every absolute module a file imports, with its line (relative imports stay inside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def top_level(module: str) -> str:
    return module.partition(".")[0]


def test_every_package_has_source_to_check() -> None:
    for package, path in PACKAGES.items():
        assert (path / "__init__.py").is_file(), f"{package} has no __init__.py at {path}"
    assert len(all_source_files()) >= sum(len(modules(p)) for p in PACKAGES)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_imports_run_one_way_from_control_plane_down_to_protocol(package: str) -> None:
    forbidden = FORBIDDEN[package]
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in modules(package)
        for line, module in imported_modules(path)
        if top_level(module) in forbidden
    ]

    assert not offences, f"{package} must not import {sorted(forbidden)}:\n" + "\n".join(offences)


def test_the_import_check_sees_the_imports_it_is_meant_to_forbid(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import fastworker.client\n"
        "from fastworker_control_plane.core import board\n"
        "from . import sibling\n"
        "def f():\n    import fastworker_subworker\n",
        encoding="utf-8",
    )

    found = [top_level(m) for _, m in imported_modules(sample)]

    assert found == ["fastworker", "fastworker_control_plane", "fastworker_subworker"]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_package_curates_its_public_names_in_dunder_all(package: str) -> None:
    module = importlib.import_module(package)
    public = getattr(module, "__all__", None)

    assert public is not None, f"{package}.__init__ does not define __all__"
    assert len(public) == len(set(public)), f"{package}.__all__ has duplicates"
    missing = [name for name in public if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not define: {missing}"


@pytest.mark.parametrize(
    ("package", "expected"),
    [
        ("fastworker", FASTWORKER_API),
        ("fastworker_subworker", SUBWORKER_API),
        ("fastworker_control_plane", CONTROL_PLANE_API),
    ],
)
def test_the_public_api_changes_only_deliberately(package: str, expected: set[str]) -> None:
    public = set(importlib.import_module(package).__all__)

    assert public == expected, (
        f"{package}.__all__ changed: added {sorted(public - expected)}, "
        f"removed {sorted(expected - public)}; update this test if that was deliberate"
    )


def test_the_protocol_exports_every_message_type() -> None:
    protocol = importlib.import_module("fastworker_protocol")

    missing = [m.__name__ for m in protocol.ALL_MESSAGES if m.__name__ not in protocol.__all__]

    assert not missing, f"fastworker_protocol does not export message types {missing}"


@pytest.mark.parametrize("path", all_source_files(), ids=lambda p: str(p.relative_to(SERVICES)))
def test_no_module_is_over_six_hundred_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())

    assert lines <= MAX_MODULE_LINES, (
        f"{path.relative_to(ROOT)} has {lines} lines (> {MAX_MODULE_LINES}): split it"
    )
