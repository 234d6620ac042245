"""What a ``fastworker`` command imports: a client command starts quickly because it loads
only what it uses (no aiohttp, no OpenTelemetry, no control-plane or subworker plugin).

Each test runs the command in a fresh interpreter, exactly as the console script does,
then reads that interpreter's ``sys.modules``. Nothing here is timed: the start-up time
itself is measured by hand (hyperfine), the import list is what a test can hold fixed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastworker.testing import free_port_block

# The console script's body, then the modules it left loaded as the last line of stdout.
PROBE = """
import json, sys
from fastworker.cli import main
try:
    code = main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

# Each only for the commands that use it: serving HTTP (the control plane's dashboard),
# exporting traces, the service plugins, structured logs for services, ``dev``, ``watch``.
HEAVY = (
    "aiohttp",
    "opentelemetry",
    "prometheus_client",
    "fastapi",
    "fastworker_control_plane",
    "fastworker_subworker",
    "structlog",
    "watchfiles",
    "importlib.metadata",
    "urllib.request",
    "fastworker.cli.cluster",
    "fastworker.cli.batch",
)

CLIENT_COMMANDS = {
    "submit": ["--task-name", "add", "--args", "1", "2"],
    "status": ["--task-id", "t-1"],
    "result": ["--task-id", "t-1"],
    "cancel": ["--task-id", "t-1"],
    "workers": [],
    "tasks": [],
    "schedules": [],
}


def run(*argv: str, **env: str) -> tuple[int, set[str], str]:
    """The exit code, the loaded modules and stderr of ``fastworker *argv``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FASTWORKER_"))}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**clean, **env},
    )
    assert done.stdout, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    return report["code"], set(report["modules"]), done.stderr


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY)


def nothing_at() -> str:
    return f"tcp://127.0.0.1:{free_port_block(6)}"


@pytest.mark.parametrize("command", sorted(CLIENT_COMMANDS))
def test_a_client_command_against_nothing_loads_no_heavy_module(command: str) -> None:
    """Given no control plane, when a client command runs to the point of dialling it,
    then it has imported neither aiohttp, nor OpenTelemetry, nor any plugin."""
    argv = [command, "--address", nothing_at(), "--connect-timeout", "0.1"]

    code, modules, stderr = run(*argv, *CLIENT_COMMANDS[command])

    assert (code, "no control plane answered" in stderr) == (2, True), stderr
    assert "fastworker.client" in modules
    assert heavy_in(modules) == []


# Commands with actions of their own (issue 22): the action, then its own arguments.
CLIENT_ACTIONS = {
    "failed list": ["--since", "12h"],
    "failed show": ["t-1"],
    "failed retry": ["t-1"],
    "failed purge": ["t-1"],
    "schedules list": [],
    "schedules add": ["nightly", "add", "1", "2", "--every", "5m"],
    "schedules remove": ["nightly"],
}


@pytest.mark.parametrize("command", sorted(CLIENT_ACTIONS))
def test_a_client_action_against_nothing_loads_no_heavy_module(command: str) -> None:
    argv = [*command.split(), "--address", nothing_at(), "--connect-timeout", "0.1"]

    code, modules, stderr = run(*argv, *CLIENT_ACTIONS[command])

    assert (code, "no control plane answered" in stderr) == (2, True), stderr
    assert "fastworker.client" in modules
    assert heavy_in(modules) == []


def test_a_client_command_loads_opentelemetry_when_tracing_is_asked_for() -> None:
    """The probe can see a lazy import happen: with ``OTEL_TRACES_EXPORTER`` set, the
    same command does set up tracing."""
    argv = ["status", "--address", nothing_at(), "--connect-timeout", "0.1", "--task-id", "t"]

    code, modules, stderr = run(*argv, OTEL_TRACES_EXPORTER="console")

    assert code == 2, stderr
    assert {"opentelemetry.trace", "opentelemetry.sdk.trace"} <= modules
    assert "aiohttp" not in modules


def test_help_still_lists_every_command_the_packages_contribute() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fastworker.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    code, modules, _ = run("--help")

    assert code == done.returncode == 0
    for command in ("control-plane", "journal", "subworker"):
        assert f"\n    {command}" in done.stdout, done.stdout
    # Listed by their entry points, which name them without importing them (issue 32)
    assert {"fastworker_control_plane.commands", "fastworker_subworker.commands"} <= modules
    assert not {"fastworker_control_plane.cli", "fastworker_subworker.cli"} & modules


def test_a_mistyped_command_is_refused_with_every_command_as_a_choice() -> None:
    code, _, stderr = run("stauts")

    assert code == 2
    for name in ("'control-plane'", "'subworker'", "'journal'", "'status'", "'dev'"):
        assert name in stderr


def test_a_plugin_command_loads_its_own_plugin_only() -> None:
    code, modules, _ = run("subworker", "--help")

    assert code == 0
    assert "fastworker_subworker.cli" in modules
    assert "fastworker_control_plane" not in modules


def test_submit_batch_loads_the_batch_code_when_it_runs(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_name": "add", "args": [1, 2]}\n')
    argv = ["submit", "--batch", str(tasks), "--address", nothing_at(), "--connect-timeout", "0.1"]

    code, modules, stderr = run(*argv)

    assert (code, "no control plane answered" in stderr) == (2, True), stderr
    assert "fastworker.cli.batch" in modules
    assert "aiohttp" not in modules
