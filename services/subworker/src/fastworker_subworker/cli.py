"""``fastworker-subworker`` (also ``fastworker subworker``)."""

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
from fastworker.errors import RequestRejected, Unauthorized
from fastworker_common.allocator import return_large_blocks_to_the_system
from fastworker_common.health import PortInUse, check
from fastworker_common.leader import addresses
from fastworker_common.log_setup import configure_logging
from fastworker_common.settings import add_option, add_settings, config_from
from fastworker_common.tls import TLSError, dial_config
from fastworker_protocol import EncodeError
from fastworker_subworker.config import SubworkerConfig
from fastworker_subworker.loader import TaskModuleError, load_task_modules
from fastworker_subworker.processes import ChildBroken
from fastworker_subworker.worker import Subworker


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_option(
        parser,
        "--task-modules",
        many=True,
        default=[],
        metavar="MODULE",
        help="modules to import; their @task functions are what this worker runs",
    )
    add_settings(parser, SubworkerConfig)
    add_tls_options(parser)
    add_option(
        parser,
        "--check",
        switch=True,
        help="ask a running subworker's /readyz (same --metrics-port) and exit 0 if ready",
    )
    add_log_level(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args)
    configure_logging(args.log_level)
    return_large_blocks_to_the_system()
    try:
        load_task_modules(args.task_modules)
        config = config_from(SubworkerConfig, args, tls=tls_from(args))
        for address in addresses(config.discovery_address):
            dial_config(address, config.tls)  # a bad TLS setting fails here
        worker = Subworker(config)
    except (TaskModuleError, ValueError) as exc:
        print(f"fastworker-subworker: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with traced("fastworker-subworker"):
            return serve(worker.run, worker.request_stop)
    except (CommandError, PortInUse, TLSError, ChildBroken) as exc:
        print(f"fastworker-subworker: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except EncodeError as exc:  # its own registration (every task's signature) is too big
        print(
            f"fastworker-subworker: cannot register: {exc} (raise --max-message-size here "
            "and on the control plane, or load fewer task modules)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except Unauthorized:
        print(
            "fastworker-subworker: the control plane refused this subworker: missing or "
            "wrong auth token (set FASTWORKER_AUTH_TOKEN to the control plane's)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except RequestRejected as exc:  # its registration: a schedule that cannot run, say
        said = "fastworker-subworker: the control plane refused this subworker:"
        print("\n  ".join([said, *exc.message.splitlines()]), file=sys.stderr)
        return EXIT_USAGE


def _check(args: argparse.Namespace) -> int:
    if args.metrics_port is None:
        print("fastworker-subworker: --check needs --metrics-port", file=sys.stderr)
        return EXIT_USAGE
    ready, said = check(args.metrics_host, args.metrics_port)
    print(said)
    return EXIT_OK if ready else EXIT_TASK_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = configure_parser(
        argparse.ArgumentParser(
            prog="fastworker-subworker", description="Run a FastWorker subworker."
        )
    )
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
