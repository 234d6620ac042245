"""The ``fastworker`` command.

Client commands (submit, status, result, cancel, workers, tasks, schedules, failed,
queues, ...) live here; the ``control-plane`` and ``subworker`` commands are contributed
by their packages through the ``fastworker.commands`` entry-point group, so this SDK
never imports them.

A command must start quickly, and ``fastworker --help`` too: this module imports nothing
at its top but argparse; building a parser imports the SDK's command modules, which
import their client, TLS and tracing only to run. ``fastworker status`` never loads the
plugins (the control plane's brings aiohttp, Prometheus and the dashboard); the others
load each plugin's entry point, a small function that adds its command with
``configure="module:function"``: that module is imported only when the command's own
options are needed (to run it, or for its ``--help``), never to list it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, TypeAlias, cast

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
    if command is None:  # all of it, every option included (the CLI reference shows them)
        for sub in commands.choices.values():
            if isinstance(sub, CommandParser):
                sub.configure()
    return parser


class CommandParser(argparse.ArgumentParser):
    """A command's parser, whose options may be added only when they are needed.

    ``configure`` names the function (``"module:function"``) that adds them; it is called
    before the parser parses or prints its help or usage, so listing the command (in
    ``fastworker --help``) never imports its module.
    """

    def __init__(self, *args: Any, configure: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._configure = configure

    def configure(self) -> None:
        """Add the options now (once)."""
        if self._configure is not None:
            module, _, function = self._configure.partition(":")
            self._configure = None
            getattr(importlib.import_module(module), function)(self)

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads, same behaviour
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.configure()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.configure()
        return super().format_usage()

    def format_help(self) -> str:
        self.configure()
        return super().format_help()


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _empty_parser() -> tuple[argparse.ArgumentParser, _Commands]:
    parser = argparse.ArgumentParser(
        prog="fastworker", description="FastWorker: a brokerless distributed task queue."
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )
    return parser, cast(_Commands, commands)  # each command module adds plain parsers to it


def _add_own(commands: _Commands) -> None:
    from fastworker.cli import (
        client_commands,
        dev,
        failed_commands,
        queue_commands,
        schedule_commands,
        watch,
    )

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
    from fastworker.cli.common import EXIT_OK, EXIT_USAGE, CommandError
    from fastworker.cli.lifetime import follow_parent

    if not follow_parent():
        return EXIT_OK  # started by a `fastworker dev` that has already gone
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else "").parse_args(argv)
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
