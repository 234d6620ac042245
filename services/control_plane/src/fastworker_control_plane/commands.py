"""The ``fastworker`` commands this package adds (its ``fastworker.commands`` entry points).

Each only names its command and the function that adds its options: the modules that run
it (the whole control plane, for ``control-plane``) are imported when the command runs or
prints its own help, never for ``fastworker --help``.
"""

from __future__ import annotations

import argparse
from typing import TypeAlias

_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def control_plane(commands: _Commands) -> None:
    commands.add_parser(
        "control-plane",
        help="run a control plane",
        configure="fastworker_control_plane.cli:configure_parser",
    )


def journal(commands: _Commands) -> None:
    commands.add_parser(
        "journal",
        help="inspect a control plane's journal",
        configure="fastworker_control_plane.journal_cli:configure_parser",
    )
