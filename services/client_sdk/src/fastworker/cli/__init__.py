"""The ``fastworker`` command.

Client commands (submit, status, result, cancel, workers, tasks) live here; the
``control-plane`` and ``subworker`` commands are contributed by their packages through the
``fastworker.commands`` entry-point group, so this SDK never imports them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from fastworker.cli import client_commands, dev, watch
from fastworker.cli.common import EXIT_OK, EXIT_USAGE, CommandError

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fastworker", description="FastWorker: a brokerless distributed task queue."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for plugin in sorted(entry_points(group="fastworker.commands"), key=lambda e: e.name):
        plugin.load()(commands)
    client_commands.add_commands(commands)
    dev.add_command(commands)
    watch.add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
