"""``fastworker submit | status | result | cancel | workers | tasks``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from fastworker.cli.common import (
    EXIT_OK,
    EXIT_TASK_FAILED,
    EXIT_USAGE,
    CommandError,
    add_client_options,
    tls_from,
    traced,
)
from fastworker.errors import (
    ControlPlaneUnavailable,
    FastWorkerError,
    RequestRejected,
    Timeout,
)
from fastworker.options import queue_name
from fastworker_common.settings import add_option
from fastworker_protocol import Priority, TaskResult, TaskState, describe_ext

if TYPE_CHECKING:
    from fastworker.client import Client


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("submit", help="submit a task or a batch (and wait for results)")
    add_option(p, "--task-name", default=None, help="the registered task name")
    add_option(
        p,
        "--batch",
        default=None,
        metavar="FILE",
        help='tasks from a JSON Lines file (- for stdin), one per line: {"task_name": '
        '"add", "args": [1, 2], "kwargs": {}, "priority": "high", "queue": "reports"}',
    )
    add_option(
        p,
        "--args",
        many=True,
        default=[],
        metavar="ARG",
        help="positional arguments; each is parsed as JSON if it can be",
    )
    add_option(
        p,
        "--kwargs",
        type=json_object,
        default={},
        metavar="JSON",
        help="keyword arguments as a JSON object, e.g. '{\"x\": 1}'",
    )
    add_option(
        p,
        "--priority",
        type=Priority.parse,
        default=Priority.NORMAL,
        help="critical, high, normal or low",
    )
    add_option(
        p,
        "--queue",
        type=queue_name,
        default=None,
        help="the named queue to send it to (default: the one its @task names)",
    )
    add_option(
        p, "--non-blocking", switch=True, help="print the task id and return without waiting"
    )
    add_option(p, "--json", switch=True, help="print the full result as JSON")
    p.set_defaults(run=_submit)

    p = commands.add_parser("status", help="a task's status")
    add_option(p, "--task-id", required=True, help="the task")
    p.set_defaults(run=_status)

    p = commands.add_parser("result", help="a task's result (waits with --wait)")
    add_option(p, "--task-id", required=True, help="the task")
    add_option(p, "--wait", switch=True, help="wait until the task is final")
    add_option(p, "--json", switch=True, help="print the full result as JSON")
    p.set_defaults(run=_result)

    p = commands.add_parser("cancel", help="cancel a task that has not finished")
    add_option(p, "--task-id", required=True, help="the task")
    p.set_defaults(run=_cancel)

    p = commands.add_parser("workers", help="list connected subworkers")
    add_option(p, "--json", switch=True, help="print JSON instead of a table")
    p.set_defaults(run=_workers)

    p = commands.add_parser("tasks", help="list recent tasks, newest first")
    add_option(p, "--status", type=TaskState, default=None, help="only tasks in this state")
    add_option(p, "--limit", type=int, default=20, help="how many")
    add_option(p, "--json", switch=True, help="print JSON instead of a table")
    p.set_defaults(run=_tasks)

    for name in ("submit", "status", "result", "cancel", "workers", "tasks"):
        add_client_options(commands.choices[name])


def with_client(args: argparse.Namespace, body: Callable[[Client], Awaitable[int]]) -> int:
    import asyncio  # the client and its event loop: only for a command that runs

    from fastworker.client import Client

    async def run() -> int:
        async with Client(
            args.discovery_address,
            timeout=args.timeout,
            retries=1,
            connect_timeout=args.connect_timeout,
            address=args.address,
            auth_token=args.auth_token,
            tls=tls_from(args),
        ) as client:
            return await body(client)

    try:
        with traced("fastworker-cli"):
            return asyncio.run(run())
    except ControlPlaneUnavailable as exc:
        raise CommandError(str(exc)) from None
    except Timeout as exc:
        raise CommandError(f"timed out: {exc}") from None
    except RequestRejected as exc:
        raise CommandError(f"rejected: {exc}") from None
    except FastWorkerError as exc:
        raise CommandError(str(exc)) from None


def _submit(args: argparse.Namespace) -> int:
    if args.batch is not None:
        if args.task_name or args.args or args.kwargs:
            raise CommandError("--batch takes every task from its file: drop --task-name/--args")
        from fastworker.cli.batch import submit_batch_file  # only --batch needs it

        async def batch(client: Client) -> int:
            return await submit_batch_file(
                client,
                args.batch,
                wait=not args.non_blocking,
                timeout=args.timeout,
                as_json=args.json,
            )

        return with_client(args, batch)
    if args.task_name is None:
        raise CommandError("give --task-name (one task) or --batch FILE (many)")
    task_args = [json_or_text(a) for a in args.args]

    async def body(client: Client) -> int:
        if args.non_blocking:
            print(
                await client.apply_async(
                    args.task_name,
                    task_args,
                    args.kwargs,
                    priority=args.priority,
                    queue=args.queue,
                )
            )
            return EXIT_OK
        result = await client.submit_task(
            args.task_name,
            task_args,
            args.kwargs,
            priority=args.priority,
            timeout=args.timeout,
            queue=args.queue,
        )
        return _print_result(result, args.json)

    return with_client(args, body)


def _status(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        result = await client.get_task_result(args.task_id)
        if result is None:
            raise CommandError(f"task {args.task_id} is unknown or expired")
        print(result.status)
        return EXIT_OK

    return with_client(args, body)


def _result(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        if args.wait:
            return _print_result(await client.wait_result(args.task_id, args.timeout), args.json)
        result = await client.get_task_result(args.task_id)
        if result is None:
            raise CommandError(f"task {args.task_id} is unknown or expired")
        if not result.status.is_final:
            raise CommandError(
                f"task {args.task_id} is {result.status}: no result yet (use --wait)"
            )
        return _print_result(result, args.json)

    return with_client(args, body)


def _cancel(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        if await client.cancel_task(args.task_id):
            print("cancelled")
        else:
            current = await client.get_task_result(args.task_id)
            print(f"not cancelled: task is already {current.status if current else 'final'}")
        return EXIT_OK

    return with_client(args, body)


def _workers(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        workers = await client.list_workers()
        if args.json:
            print_json(workers)
        else:
            print_table(
                ["WORKER", "STATE", "IN FLIGHT", "CONCURRENCY", "DONE", "SEEN", "QUEUES", "TASKS"],
                [
                    [
                        w.worker_id + (" (local)" if w.local else ""),
                        w.state,
                        w.in_flight,
                        w.concurrency,
                        w.completed,
                        f"{w.last_seen_ago:.1f}s ago",
                        ",".join(f"{q}:{weight}" for q, weight in w.queues.items()),
                        ",".join(w.tasks),
                    ]
                    for w in workers
                ],
            )
        return EXIT_OK

    return with_client(args, body)


def _tasks(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        tasks = await client.list_tasks(args.status, args.limit)
        if args.json:
            print_json(tasks)
        else:
            print_table(
                ["TASK", "NAME", "STATUS", "PRIORITY", "ATTEMPTS", "WORKER"],
                [
                    [t.task_id, t.name, t.status, t.priority, t.attempts, t.worker_id or "-"]
                    for t in tasks
                ],
            )
        if tasks.more:
            print(
                f"fastworker: only {len(tasks)} tasks fit one reply; narrow the listing with "
                "--status or --limit to see the others",
                file=sys.stderr,
            )
        return EXIT_OK

    return with_client(args, body)


# --- output -------------------------------------------------------------------------------


def _print_result(result: TaskResult, as_json: bool) -> int:
    if as_json:
        print_json(result)
    elif result.status == TaskState.SUCCESS:
        print(json.dumps(result.result, default=shown_in_json))
    if result.status == TaskState.SUCCESS:
        return EXIT_OK
    if result.error is not None:
        print(
            f"task {result.task_id} failed: {result.error.type}: {result.error.message}",
            file=sys.stderr,
        )
    else:
        print(f"task {result.task_id} ended {result.status}", file=sys.stderr)
    return EXIT_TASK_FAILED


def print_json(value: Any) -> None:
    print(msgspec.json.encode(value, enc_hook=shown_in_json).decode())


def shown_in_json(value: Any) -> str:
    """A value JSON has no form for, as text: a UUID or a Decimal as its ``str``, an
    extension value of a type this process has not registered as ``ext(code, N bytes)``,
    an application's registered type as its ``str``."""
    if isinstance(value, msgspec.msgpack.Ext):
        return describe_ext(value)
    return str(value)


def print_table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(none)")


def json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


__all__ = [
    "EXIT_USAGE",
    "add_commands",
    "json_object",
    "json_or_text",
    "print_json",
    "print_table",
    "with_client",
]
