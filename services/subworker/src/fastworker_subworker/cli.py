"""``fastworker-subworker`` (also ``fastworker subworker``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from fastworker.cli.common import (
    EXIT_OK,
    EXIT_TASK_FAILED,
    EXIT_USAGE,
    CommandError,
    add_auth_token,
    add_log_level,
    add_tls_options,
    serve,
    tls_from,
    traced,
)
from fastworker.errors import Unauthorized
from fastworker.options import add_option, queue_weights
from fastworker_common.allocator import return_large_blocks_to_the_system
from fastworker_common.health import PortInUse, check
from fastworker_common.leader import addresses
from fastworker_common.log_setup import configure_logging
from fastworker_common.tls import TLSError, dial_config
from fastworker_protocol import DEFAULT_DISCOVERY_ADDRESS, DEFAULT_MAX_MESSAGE_SIZE, EncodeError
from fastworker_subworker.loader import TaskModuleError, load_task_modules
from fastworker_subworker.processes import ChildBroken, cpu_count
from fastworker_subworker.worker import Subworker, SubworkerConfig


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_option(
        parser,
        "--discovery-address",
        default=DEFAULT_DISCOVERY_ADDRESS,
        help="the control plane's discovery BUS (the only setting a subworker needs); "
        "replicated control planes: each replica's, comma-separated",
    )
    add_option(
        parser,
        "--task-modules",
        many=True,
        default=[],
        metavar="MODULE",
        help="modules to import; their @task functions are what this worker runs",
    )
    add_option(
        parser, "--concurrency", type=int, default=os.cpu_count() or 1, help="tasks run at once"
    )
    add_option(
        parser,
        "--processes",
        type=int,
        default=cpu_count(),
        help='child processes for tasks declared @task(pool="process"), started only if '
        "there are some (the CPU count by default)",
    )
    add_recycling_options(parser)
    add_option(
        parser,
        "--queues",
        type=queue_weights,
        default=None,
        metavar="QUEUE[:WEIGHT],...",
        help="queues to take tasks from, with their weights in its fair share "
        "(e.g. reports:1,default:4; default: every queue its tasks name)",
    )
    add_option(
        parser,
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="seconds in-flight tasks get to finish on SIGTERM before cancellation",
    )
    add_option(parser, "--name", default=None, help="display name (default host:pid)")
    add_option(
        parser,
        "--max-message-size",
        type=int,
        default=DEFAULT_MAX_MESSAGE_SIZE,
        help="largest message accepted, in bytes",
    )
    add_option(
        parser,
        "--metrics-port",
        type=int,
        default=None,
        help="serve /metrics, /healthz and /readyz on this HTTP port (default: off)",
    )
    add_option(
        parser,
        "--metrics-host",
        default="127.0.0.1",
        help="address the HTTP port binds (0.0.0.0 in a container)",
    )
    add_auth_token(parser)
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


def add_recycling_options(parser: argparse.ArgumentParser) -> None:
    """When a process pool's children are replaced (the control plane's pool too)."""
    add_option(
        parser,
        "--max-tasks-per-child",
        type=int,
        default=None,
        metavar="N",
        help="replace a child process after it has run N tasks (none: never)",
    )
    add_option(
        parser,
        "--max-memory-per-child",
        type=int,
        default=None,
        metavar="MIB",
        help="replace a child process, between tasks, once its resident memory is over "
        "MIB mebibytes (none: never)",
    )


def run(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args)
    configure_logging(args.log_level)
    return_large_blocks_to_the_system()
    try:
        load_task_modules(args.task_modules)
        config = SubworkerConfig(
            discovery_address=args.discovery_address,
            concurrency=args.concurrency,
            queues=args.queues,
            processes=args.processes,
            max_tasks_per_child=args.max_tasks_per_child,
            max_memory_per_child=args.max_memory_per_child,
            shutdown_timeout=args.shutdown_timeout,
            max_message_size=args.max_message_size,
            metrics_host=args.metrics_host,
            metrics_port=args.metrics_port,
            auth_token=args.auth_token or None,
            tls=tls_from(args),
            **({"name": args.name} if args.name else {}),
        )
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
