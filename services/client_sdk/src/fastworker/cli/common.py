"""Pieces every FastWorker command shares: exit codes, client options, running a service
until SIGTERM/SIGINT.

Building a parser must stay cheap (``fastworker --help`` builds them all): what only a
command that runs needs (TLS, tracing, the event loop) is imported when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from fastworker.options import AUTH_TOKEN_HELP
from fastworker_common.settings import add_option
from fastworker_protocol import DEFAULT_DISCOVERY_ADDRESS

if TYPE_CHECKING:
    from fastworker.tls import TLS

EXIT_OK = 0
EXIT_TASK_FAILED = 1
EXIT_USAGE = 2

GC_YOUNG_THRESHOLD = 10_000  # allocations between young collections in a service (default 700)


class CommandError(Exception):
    """A one-line message for stderr and the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_auth_token(parser: argparse.ArgumentParser) -> None:
    add_option(
        parser,
        "--auth-token",
        default=None,
        secret=True,
        help=AUTH_TOKEN_HELP,
    )


def add_tls_options(parser: argparse.ArgumentParser, *, listening: bool = False) -> None:
    """``--tls-*``: the control plane's certificate (``listening``), or what a peer needs
    to dial ``tls+tcp://`` addresses."""
    add_option(
        parser,
        "--tls-cert",
        default=None,
        metavar="PEM",
        help="this side's certificate: the control plane then listens on tls+tcp://"
        if listening
        else "this side's certificate, for a control plane that requires one (mutual TLS)",
    )
    add_option(parser, "--tls-key", default=None, metavar="PEM", help="the certificate's key")
    add_option(
        parser,
        "--tls-ca",
        default=None,
        metavar="PEM",
        help="require peers to present a certificate signed by this CA (mutual TLS)"
        if listening
        else "the CA that signed the control plane's certificate (for tls+tcp:// addresses)",
    )
    if not listening:
        add_option(
            parser,
            "--tls-server-name",
            default=None,
            help="the name the control plane's certificate must carry (default: the host dialed)",
        )


def tls_from(args: argparse.Namespace) -> TLS | None:
    """The ``--tls-*`` options as a ``TLS``, or ``None`` if none was given."""
    from fastworker.tls import TLS

    tls = TLS(
        args.tls_ca or None,
        args.tls_cert or None,
        args.tls_key or None,
        getattr(args, "tls_server_name", None) or None,
    )
    return None if tls == TLS() else tls


def add_client_options(parser: argparse.ArgumentParser) -> None:
    add_option(
        parser,
        "--discovery-address",
        default=DEFAULT_DISCOVERY_ADDRESS,
        help="where to find the control plane (its BUS)",
    )
    add_option(
        parser,
        "--address",
        default=None,
        help="skip discovery: the control plane's first submission address, "
        "e.g. tcp://127.0.0.1:5555",
    )
    add_option(
        parser,
        "--timeout",
        type=float,
        default=30.0,
        help="seconds a call may take, retries included (and the wait for a result)",
    )
    add_option(
        parser,
        "--connect-timeout",
        type=float,
        default=3.0,
        help="seconds to find and connect to the control plane before giving up",
    )
    add_auth_token(parser)
    add_tls_options(parser)


def add_log_level(parser: argparse.ArgumentParser) -> None:
    add_option(
        parser, "--log-level", default="info", type=str.lower, help="debug, info, warning or error"
    )


def serve(run: Callable[[], Awaitable[None]], stop: Callable[[], None]) -> int:
    """Run a service's coroutine; SIGTERM and SIGINT call ``stop`` (a graceful drain)."""
    import asyncio

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        await run()

    # Everything imported so far (the libraries, the task modules) lives as long as the
    # process: keep it out of the garbage collector's scans, which otherwise grow with
    # every library a service imports and are paid again and again under load.
    gc.freeze()
    # And collect young objects less often: a server allocates a few containers per
    # message, so the default (every 700) ran a collection every few hundred tasks, each
    # older one scanning the whole result cache (10-15% of a control plane's time under
    # load in bench/, for a few thousand more short-lived objects held between runs).
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    asyncio.run(main())
    return EXIT_OK


@contextlib.contextmanager
def traced(service_name: str) -> Iterator[None]:
    """Export this command's traces if the ``OTEL_*`` variables ask; flushed at the end."""
    from fastworker.tracing import TracingUnavailable, configure_tracing

    try:
        provider = configure_tracing(service_name)
    except TracingUnavailable as exc:
        raise CommandError(str(exc)) from None
    try:
        yield
    finally:
        if provider is not None:
            provider.shutdown()
