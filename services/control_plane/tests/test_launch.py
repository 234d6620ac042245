"""The control plane's command starts itself again on glibc's malloc (``launch``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastworker_control_plane.launch import started_as_a_command

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

SCRIPT = """\
import os, sys
print("start", os.getpid(), flush=True)
from fastworker_control_plane.launch import on_chosen_allocator
on_chosen_allocator()
print("running", os.getpid(), os.environ.get("PYTHONMALLOC"), sys.argv[1:], flush=True)
"""


@pytest.mark.parametrize(
    ("argv0", "command"),
    [
        ("/usr/local/bin/fastworker-control-plane", True),
        ("/venv/bin/fastworker", True),
        ("/site-packages/fastworker/cli/__main__.py", True),
        ("/venv/bin/pytest", False),
        ("-c", False),
        ("/site-packages/other/cli/__main__.py", False),
        ("", False),
    ],
)
def test_only_the_commands_that_run_a_control_plane_start_again(argv0: str, command: bool) -> None:
    assert started_as_a_command(argv0) is command


def run(tmp_path: Path, name: str, **env: str) -> list[str]:
    script = tmp_path / name
    script.write_text(SCRIPT)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    done = subprocess.run(
        [sys.executable, str(script), "--base-port", "5555"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def test_the_command_runs_again_in_the_same_process_with_its_arguments(tmp_path: Path) -> None:
    start, again, running = run(tmp_path, "fastworker-control-plane")

    pid = start.split()[1]
    assert again == start  # the same process, from the top
    assert running == f"running {pid} malloc ['--base-port', '5555']"


def test_an_allocator_chosen_by_the_user_is_kept(tmp_path: Path) -> None:
    lines = run(tmp_path, "fastworker-control-plane", PYTHONMALLOC="pymalloc")

    assert len(lines) == 2
    assert lines[1].split()[2] == "pymalloc"


def test_a_program_that_calls_it_itself_is_never_replaced(tmp_path: Path) -> None:
    lines = run(tmp_path, "my_program.py")

    assert len(lines) == 2
    assert lines[1].split()[2] == "None"
