"""``fastworker --help`` and a command's ``--help`` import the parsers, not what runs them.

The client, NNG, tracing, the event loop and the server packages are imported only by a
command that runs (the time it takes is in bench/, not here: this checks what is loaded).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from fastworker.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("\\nMODULES", *sorted(sys.modules))
"""

# What only running a command needs, and what each costs to import at start.
NOT_FOR_HELP = [
    "asyncio",
    "pynng",
    "opentelemetry",
    "structlog",
    "aiohttp",
    "prometheus_client",
    "watchfiles",
    "fastworker.client",
    "fastworker.sync_client",
    "fastworker.tracing",
    "fastworker_common.transport",
    "fastworker_common.tls",
    "fastworker_subworker.cli",
    "fastworker_subworker.worker",
    "fastworker_control_plane.cli",
    "fastworker_control_plane.app",
    "fastworker_control_plane.journal_cli",
]


def modules_loaded_by(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    marker = done.stdout.rindex("\nMODULES ")
    return set(done.stdout[marker:].split()[1:])


@pytest.mark.parametrize(
    "argv", [("--help",), ("status", "--help"), ("no-such-command",)], ids=" ".join
)
def test_help_and_usage_import_none_of_what_running_a_command_needs(argv: tuple[str, ...]) -> None:
    loaded = modules_loaded_by(*argv)

    heavy = sorted(
        m for m in NOT_FOR_HELP if m in loaded or any(n.startswith(f"{m}.") for n in loaded)
    )
    assert heavy == [], f"`fastworker {' '.join(argv)}` imported {heavy}"


def test_help_still_lists_the_commands_the_server_packages_add() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fastworker.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )

    assert "run a control plane" in done.stdout
    assert "run a subworker" in done.stdout
    assert "inspect a control plane's journal" in done.stdout


def test_a_server_command_s_own_help_shows_its_options() -> None:
    loaded = modules_loaded_by("subworker", "--help")

    assert "fastworker_subworker.cli" in loaded
