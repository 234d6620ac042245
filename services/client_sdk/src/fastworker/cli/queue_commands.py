"""``fastworker queues | queue pause|resume|purge|limit | limits | task-limit``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from fastworker.cli.client_commands import print_json, print_table, with_client
from fastworker.cli.common import EXIT_OK, EXIT_USAGE, CommandError, add_client_options
from fastworker.options import queue_name
from fastworker_common.settings import add_option
from fastworker_protocol import LimitInfo, Priority, QueueInfo

if TYPE_CHECKING:
    from fastworker.client import Client

_Commands = argparse._SubParsersAction
_QUEUE_HEADER = [
    "QUEUE",
    *(str(p).upper() for p in Priority.by_rank()),
    *("OLDEST", "RUNNING", "WORKERS", "LIMITS", "WAITING ON LIMITS", "STATE"),
]


def add_commands(commands: _Commands[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("queues", help="list named queues: depth, age, workers, limits")
    add_option(p, "--json", switch=True, help="print JSON instead of a table")
    p.set_defaults(run=_queues)
    add_client_options(p)

    queue = commands.add_parser("queue", help="pause, resume, purge or limit a named queue")
    actions = queue.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (
        ("pause", "stop dispatching from the queue (it still accepts tasks)"),
        ("resume", "dispatch from the queue again"),
        ("purge", "cancel every task queued in it (not running, delayed or retrying ones)"),
    ):
        p = actions.add_parser(action, help=text)
        p.add_argument("name", type=queue_name, help="the queue")
        if action == "purge":
            add_option(p, "--yes", switch=True, help="do not ask for confirmation")
        p.set_defaults(run=_queue_action)
        add_client_options(p)
    p = actions.add_parser("limit", help="set the queue's rate or concurrency limit")
    p.add_argument("name", type=queue_name, help="the queue")
    _limit_options(p)
    p.set_defaults(run=_limit, scope="queue")
    add_client_options(p)

    p = commands.add_parser("task-limit", help="set a task name's rate or concurrency limit")
    p.add_argument("name", help="the task name")
    _limit_options(p)
    p.set_defaults(run=_limit, scope="task")
    add_client_options(p)

    p = commands.add_parser("limits", help="list the rate and concurrency limits in effect")
    add_option(p, "--json", switch=True, help="print JSON instead of a table")
    p.set_defaults(run=_limits)
    add_client_options(p)


def _limit_options(p: argparse.ArgumentParser) -> None:
    add_option(p, "--rate", default=None, help="e.g. 100/s, 20/m or 5/h; off lifts it")
    add_option(p, "--concurrency", type=int, default=None, help="tasks running at once; 0 lifts it")
    add_option(p, "--reset", switch=True, help="first go back to what @task declared")


def _queues(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        queues = await client.list_queues()
        if args.json:
            print_json(queues)
        else:
            print_table(
                _QUEUE_HEADER,
                [_queue_row(q) for q in queues],
            )
        return EXIT_OK

    return with_client(args, body)


def _queue_row(queue: QueueInfo) -> list[object]:
    return [
        queue.name,
        *(queue.depth.get(str(p), 0) for p in Priority.by_rank()),
        "-" if queue.oldest_age is None else f"{queue.oldest_age:.1f}s",
        queue.running,
        queue.workers,
        _limits_text(queue.rate_limit, queue.concurrency_limit),
        queue.waiting_on_limits,
        "paused" if queue.paused else "active",
    ]


def _limits_text(rate: str | None, concurrency: int | None, key: str | None = None) -> str:
    parts = [f"rate {rate}"] if rate else []
    if concurrency:
        parts.append(f"{concurrency} at once" + (f" per {key}" if key else ""))
    return ", ".join(parts) or "-"


def _queue_action(args: argparse.Namespace) -> int:
    if args.action == "purge" and not args.yes and not _confirmed(args.name):
        print("fastworker: not purged", file=sys.stderr)
        return EXIT_USAGE

    async def body(client: Client) -> int:
        if args.action == "pause":
            await client.pause_queue(args.name)
            print(f"queue {args.name} paused")
        elif args.action == "resume":
            await client.resume_queue(args.name)
            print(f"queue {args.name} resumed")
        else:
            purged = await client.purge_queue(args.name)
            print(f"queue {args.name} purged: {purged} tasks cancelled")
        return EXIT_OK

    return with_client(args, body)


def _confirmed(queue: str) -> bool:
    if not sys.stdin.isatty():
        raise CommandError(f"purging cancels every task queued in {queue}: confirm with --yes")
    answer = input(f"Cancel every task queued in {queue}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _limit(args: argparse.Namespace) -> int:
    if args.rate is None and args.concurrency is None and not args.reset:
        raise CommandError("give --rate, --concurrency or --reset")

    async def body(client: Client) -> int:
        try:
            limits = await client.set_limit(
                args.scope,
                args.name,
                rate=args.rate,
                concurrency=args.concurrency,
                reset=args.reset,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        mine = [limit for limit in limits if (limit.scope, limit.name) == (args.scope, args.name)]
        print(f"{args.scope} {args.name}: " + (_limit_text(mine[0]) if mine else "no limit"))
        return EXIT_OK

    return with_client(args, body)


def _limit_text(limit: LimitInfo) -> str:
    return _limits_text(limit.rate_limit, limit.concurrency_limit, limit.concurrency_key)


def _limits(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        limits = await client.list_limits()
        if args.json:
            print_json(limits)
        else:
            print_table(
                ["SCOPE", "NAME", "LIMITS", "SET AT RUN TIME", "RUNNING", "WAITING"],
                [
                    [
                        limit.scope,
                        limit.name,
                        _limit_text(limit),
                        "yes" if limit.overridden else "no",
                        limit.running,
                        limit.waiting,
                    ]
                    for limit in limits
                ],
            )
        return EXIT_OK

    return with_client(args, body)
