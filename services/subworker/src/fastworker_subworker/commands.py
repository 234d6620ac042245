"""The ``fastworker`` command this package adds (its ``fastworker.commands`` entry point).

It only names the command and the function that adds its options: the subworker is
imported when the command runs or prints its own help, never for ``fastworker --help``.
"""

from __future__ import annotations

import argparse


def subworker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    commands.add_parser(
        "subworker", help="run a subworker", configure="fastworker_subworker.cli:configure_parser"
    )
