"""``fastworker-control-plane`` (also ``fastworker control-plane``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fastworker.cli.common import (
    EXIT_OK,
    EXIT_TASK_FAILED,
    EXIT_USAGE,
    CommandError,
    add_log_level,
    add_tls_options,
    serve,
    tls_from,
    traced,
)
from fastworker_common.allocator import return_large_blocks_to_the_system
from fastworker_common.health import PortInUse, check
from fastworker_common.log_setup import configure_logging
from fastworker_common.settings import add_option, add_settings, config_from
from fastworker_common.supervision import TaskDied
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.durability.journal import JournalError
from fastworker_control_plane.ha.node import replicated_or_alone
from fastworker_control_plane.launch import on_chosen_allocator
from fastworker_subworker import TaskModuleError, load_task_modules


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_option(
        parser,
        "--task-modules",
        many=True,
        default=[],
        metavar="MODULE",
        help="modules whose @task functions the control plane runs and accepts",
    )
    add_settings(parser, ControlPlaneConfig)
    add_tls_options(parser, listening=True)
    add_option(
        parser,
        "--check",
        switch=True,
        help="ask a running control plane's /readyz (same --host/--http-port), exit 0 if ready",
    )
    add_log_level(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args)
    on_chosen_allocator()  # as `fastworker control-plane`: `launch` did it otherwise
    configure_logging(args.log_level)
    return_large_blocks_to_the_system()
    try:
        load_task_modules(args.task_modules)
        config = config_from(ControlPlaneConfig, args, tls=tls_from(args))
        plane = replicated_or_alone(config)
        with traced("fastworker-control-plane"):
            return serve(plane.run, plane.request_stop)
    except (TaskModuleError, ValueError, PortInUse, CommandError, JournalError) as exc:
        print(f"fastworker-control-plane: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TaskDied as exc:  # logged with its traceback already: one line here
        print(f"fastworker-control-plane: {exc}", file=sys.stderr)
        return EXIT_TASK_FAILED


def _check(args: argparse.Namespace) -> int:
    if not args.http_port:
        print("fastworker-control-plane: --check needs the HTTP port on", file=sys.stderr)
        return EXIT_USAGE
    ready, said = check(args.host, args.http_port)
    print(said)
    return EXIT_OK if ready else EXIT_TASK_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = configure_parser(
        argparse.ArgumentParser(
            prog="fastworker-control-plane", description="Run a FastWorker control plane."
        )
    )
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
