"""``fastworker dev``: a whole local cluster in one command.

It runs a control plane and N subworkers as child processes of this one, prints where
everything listens once they are ready, streams their logs with a prefix per process,
restarts the processes that import task code when a ``.py`` file changes (``--reload``),
and on Ctrl-C stops them all (subworkers drain first), leaving nothing running.

The children get their own sessions, so the terminal's Ctrl-C reaches only this process,
which then stops them in order. With subworkers, the control plane only dispatches and
never imports task code: a reload restarts the subworkers (new ones first, then the old
ones drain) while queued tasks and results stay in the control plane.
"""

from __future__ import annotations

import argparse
import importlib.util
import signal

from fastworker.cli.common import EXIT_USAGE, CommandError
from fastworker_common.settings import add_option
from fastworker_protocol import DEFAULT_BASE_PORT, DEFAULT_DISCOVERY_PORT, DEFAULT_HTTP_PORT


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_option(
        parser,
        "--task-modules",
        many=True,
        required=True,
        metavar="MODULE",
        help="modules (importable from here) whose @task functions the cluster runs",
    )
    add_option(parser, "--subworkers", type=int, default=2, help="subworker processes")
    add_option(
        parser,
        "--concurrency",
        type=int,
        default=None,
        help="tasks each subworker runs at once (None: the CPU count)",
    )
    add_option(
        parser,
        "--reload",
        switch=True,
        help="restart the workers when a .py file changes (needs the fastworker[dev] extra)",
    )
    add_option(parser, "--host", default="127.0.0.1", help="address everything binds")
    add_option(parser, "--base-port", type=int, default=DEFAULT_BASE_PORT, help="first NNG port")
    add_option(
        parser, "--discovery-port", type=int, default=DEFAULT_DISCOVERY_PORT, help="discovery BUS"
    )
    add_option(parser, "--http-port", type=int, default=DEFAULT_HTTP_PORT, help="dashboard and API")
    parser.set_defaults(run=run)


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    configure_parser(
        commands.add_parser(
            "dev", help="run a local cluster: a control plane, subworkers and the dashboard"
        )
    )


def run(args: argparse.Namespace) -> int:
    if args.subworkers < 0:
        raise CommandError("--subworkers must be 0 or more")
    if args.reload and importlib.util.find_spec("watchfiles") is None:
        raise CommandError(
            "--reload needs watchfiles: install the fastworker[dev] extra "
            "(pip install 'fastworker[dev]')"
        )
    import asyncio

    from fastworker.cli.cluster import DevCluster, DevSettings  # only this command needs it

    settings = DevSettings(
        task_modules=tuple(args.task_modules),
        subworkers=args.subworkers,
        concurrency=args.concurrency,
        reload=args.reload,
        host=args.host,
        base_port=args.base_port,
        discovery_port=args.discovery_port,
        http_port=args.http_port,
    )

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await DevCluster(settings).run(stop)

    try:
        return asyncio.run(main())
    except CommandError:
        raise
    except OSError as exc:
        raise CommandError(f"cannot start the cluster: {exc}", EXIT_USAGE) from None
