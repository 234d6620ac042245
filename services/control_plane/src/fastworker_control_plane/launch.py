"""The control plane runs on the C library's malloc, not on Python's own allocator.

Python's allocator (pymalloc) keeps each 1 MiB arena it took while a single object in it
lives. After a burst (thousands of held requests from clients that then hang up) the few
objects that outlive it pin most of those arenas: 20,000 abandoned waits left +40 MiB
resident for good, however much was freed. Served by glibc's malloc instead, the freed
memory goes back (``reclaim`` trims it): +3 MiB. So the control plane starts itself again,
at once and with the same command line, with ``PYTHONMALLOC=malloc``, which Python reads
only at start-up. Set ``PYTHONMALLOC`` yourself (``pymalloc`` included) to keep your own.

Only a process started as a command does this (``fastworker-control-plane``,
``fastworker control-plane``, ``python -m fastworker.cli control-plane``): one that calls
the command's ``main`` itself (a test, an embedding program) is never replaced.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ALLOCATOR = "malloc"
COMMANDS = ("fastworker-control-plane", "fastworker")  # console scripts that may start it


def started_as_a_command(argv0: str) -> bool:
    """Whether ``argv0`` (``sys.argv[0]``) is one of the commands that run a control plane."""
    path = Path(argv0)
    if path.name == "__main__.py":  # python -m fastworker.cli
        return path.parent.name == "cli" and path.parent.parent.name == "fastworker"
    return path.name in COMMANDS


def on_chosen_allocator() -> None:
    """Start this process again with ``PYTHONMALLOC=malloc``, unless it was set or this
    process was not started as a command (then return). Called before anything is opened
    or bound: the process image is replaced, its pid and open descriptors stay."""
    if "PYTHONMALLOC" in os.environ or not sys.platform.startswith("linux"):
        return
    if not started_as_a_command(sys.argv[0]):
        return
    os.environ["PYTHONMALLOC"] = ALLOCATOR
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    except OSError:  # no interpreter to run again (embedded, frozen): carry on as we are
        return


def main() -> None:
    """``fastworker-control-plane``: imports the control plane only once on its allocator."""
    on_chosen_allocator()
    from fastworker_control_plane.cli import main as run

    sys.exit(run())
