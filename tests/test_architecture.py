"""Guards on the shape of the code: import direction, private modules, pure modules,
curated public APIs, module sizes.

Imports run one way only: protocol <- common <- client_sdk <- subworker <- control_plane,
and no package imports another's private (underscore) modules. The protocol, the control
plane's core and its pure replication and election modules do no I/O and read no clock
or entropy: time, ids and randomness are handed to them.
"""

from __future__ import annotations

import ast
import importlib
import re
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
    "AsyncTaskHandle",
    "AsyncWorkflowHandle",
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
    "Retry",
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
    "TaskHandle",
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
    "WorkflowHandle",
    "__version__",
    "chain",
    "chord",
    "configure",
    "current_task",
    "default_client",
    "default_registry",
    "group",
    "register_type",
    "retry",
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
    """Every absolute module a file imports, with its line (relative imports stay inside).

    Besides import statements, this counts modules named by a string: the literal argument
    of ``importlib.import_module``/``__import__``, and, in a file that imports by a computed
    name (a lazy ``__getattr__`` table), every string in it that names a module of ours.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    computed = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Call) and imports_by_name(node):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value
            else:
                computed = True
    if computed:
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and top_level(node.value) in PACKAGES
                and MODULE_NAME.fullmatch(node.value)
            ):
                yield node.lineno, node.value


MODULE_NAME = re.compile(r"[a-z_]+(\.[a-z_]+)*")


def imports_by_name(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("import_module", "__import__")


def top_level(module: str) -> str:
    return module.partition(".")[0]


def test_every_source_file_belongs_to_a_checked_package() -> None:
    for package, path in PACKAGES.items():
        assert (path / "__init__.py").is_file(), f"{package} has no __init__.py at {path}"
    unchecked = [
        str(path.relative_to(ROOT))
        for path in all_source_files()
        if not any(path.is_relative_to(root) for root in PACKAGES.values())
    ]

    assert not unchecked, f"source files outside every checked package: {unchecked}"


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


def private_part(module: str) -> str | None:
    """The first private (underscore) part of a dotted module name, if any."""
    return next((part for part in module.split(".") if part.startswith("_")), None)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_package_imports_another_packages_private_modules(package: str) -> None:
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in modules(package)
        for line, module in imported_modules(path)
        if top_level(module) in PACKAGES
        and top_level(module) != package
        and private_part(module) is not None
    ]

    assert not offences, (
        f"{package} reaches into other packages' private modules (move what is shared "
        "to fastworker_common, public):\n" + "\n".join(offences)
    )


CONTROL_PLANE = PACKAGES["fastworker_control_plane"]
PURE = [
    PACKAGES["fastworker_protocol"],
    CONTROL_PLANE / "core",
    CONTROL_PLANE / "replication/follower.py",
    CONTROL_PLANE / "replication/messages.py",
    CONTROL_PLANE / "replication/sender.py",
    CONTROL_PLANE / "replication/tracker.py",
    CONTROL_PLANE / "election/_etcd_wire.py",
    CONTROL_PLANE / "election/kube_lease.py",
    CONTROL_PLANE / "election/settings.py",
    CONTROL_PLANE / "election/terms.py",
]
# What a pure module may not import: I/O, threads and processes, clocks, entropy.
IMPURE_MODULES = {
    "aiohttp",
    "asyncio",
    "http",
    "io",
    "logging",
    "multiprocessing",
    "os",
    "pathlib",
    "pynng",
    "random",
    "secrets",
    "select",
    "selectors",
    "shutil",
    "signal",
    "socket",
    "ssl",
    "structlog",
    "subprocess",
    "sys",
    "tempfile",
    "threading",
    "time",
    "urllib.request",
}
# What a pure module may not call: the I/O builtins, and the clock by any route.
IMPURE_BUILTINS = {"open", "print", "input"}
IMPURE_METHODS = {
    "now",
    "utcnow",
    "today",
    "urandom",
    "monotonic",
    "perf_counter",
    "uuid1",
    "uuid4",
}


def pure_files() -> list[Path]:
    return sorted(
        file for entry in PURE for file in ([entry] if entry.is_file() else entry.rglob("*.py"))
    )


def impurities(path: Path) -> Iterator[str]:
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for line, module in imported_modules(path):
        if module in IMPURE_MODULES or top_level(module) in IMPURE_MODULES:
            yield f"{where}:{line} imports {module}"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in IMPURE_BUILTINS | IMPURE_METHODS:
            yield f"{where}:{node.lineno} calls {func.id}()"
        elif isinstance(func, ast.Attribute) and func.attr in IMPURE_METHODS:
            yield f"{where}:{node.lineno} calls {func.attr}()"


def test_every_pure_module_listed_exists() -> None:
    missing = [str(entry.relative_to(ROOT)) for entry in PURE if not entry.exists()]

    assert not missing, f"pure modules listed here that are gone: {missing}"


@pytest.mark.parametrize("path", pure_files(), ids=lambda p: str(p.relative_to(SERVICES)))
def test_pure_modules_do_no_io_read_no_clock_and_draw_no_entropy(path: Path) -> None:
    found = list(impurities(path))

    assert not found, "a pure module is handed time, ids and randomness:\n" + "\n".join(found)


def test_the_purity_check_sees_io_clocks_and_entropy(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import uuid\n"
        "from time import monotonic\n"
        "from datetime import datetime\n"
        "def f(path):\n"
        "    open(path)\n"
        "    return datetime.now(), monotonic(), uuid.uuid4()\n",
        encoding="utf-8",
    )

    found = [finding.partition(" ")[2] for finding in impurities(sample)]

    assert sorted(found) == sorted(
        ["imports time", "calls open()", "calls now()", "calls monotonic()", "calls uuid4()"]
    )


def test_the_import_check_sees_modules_named_by_strings(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import importlib\n"
        "importlib.import_module('fastworker_control_plane.testing')\n"
        "HOMES = {'Thing': 'fastworker_subworker.worker'}\n"
        "def load(name):\n"
        "    return importlib.import_module(HOMES[name])\n",
        encoding="utf-8",
    )

    found = {module for _, module in imported_modules(sample)}

    assert found == {"fastworker_control_plane.testing", "fastworker_subworker.worker", "importlib"}
