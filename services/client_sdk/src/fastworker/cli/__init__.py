"""The ``fastworker`` command.

Client commands (submit, status, result, cancel, workers, tasks, schedules, failed,
queues, ...) live here; the ``control-plane`` and ``subworker`` commands are contributed
by their packages through the ``fastworker.commands`` entry-point group, so this SDK
never imports them.

A client command must start quickly, so ``fastworker status`` never loads those plugins
(the control plane's brings aiohttp, Prometheus and the dashboard): they are loaded only
for help, for a command that is not this SDK's own, or for the plugin named on the line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TypeAlias

from fastworker.cli import (
    client_commands,
    dev,
    failed_commands,
    queue_commands,
    schedule_commands,
    watch,
)
from fastworker.cli.common import EXIT_OK, EXIT_USAGE, CommandError
from fastworker.cli.lifetime import follow_parent

__all__ = ["main"]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole ``fastworker`` parser; given the ``command`` about to run, only as much of
    it as parsing that command needs (see the module docstring)."""
    if command is not None:
        parser, commands = _empty_parser()
        _add_own(commands)
        if command in commands.choices:
            return parser
    parser, commands = _empty_parser()
    _add_plugins(commands, command)
    _add_own(commands)
    return parser


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _empty_parser() -> tuple[argparse.ArgumentParser, _Commands]:
    parser = argparse.ArgumentParser(
        prog="fastworker", description="FastWorker: a brokerless distributed task queue."
    )
    return parser, parser.add_subparsers(dest="command", required=True, metavar="COMMAND")


def _add_own(commands: _Commands) -> None:
    client_commands.add_commands(commands)
    schedule_commands.add_commands(commands)
    failed_commands.add_commands(commands)
    queue_commands.add_commands(commands)
    dev.add_command(commands)
    watch.add_command(commands)


def _add_plugins(commands: _Commands, command: str | None) -> None:
    """The packages' commands: the one named ``command`` if a plugin of that name is
    installed and adds it, else all of them (for help, or argparse's list of choices)."""
    from importlib.metadata import entry_points  # email, zipfile...: plugins only

    plugins = sorted(entry_points(group="fastworker.commands"), key=lambda e: e.name)
    named = [p for p in plugins if p.name == command]
    for plugin in named:
        plugin.load()(commands)
    if command in commands.choices:
        return
    for plugin in plugins:
        if plugin not in named:
            plugin.load()(commands)


def main(argv: Sequence[str] | None = None) -> int:
    if not follow_parent():
        return EXIT_OK  # started by a `fastworker dev` that has already gone
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        code: int = args.run(args)
    except CommandError as exc:
        print(f"fastworker: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `fastworker tasks | head`: the reader has gone, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
