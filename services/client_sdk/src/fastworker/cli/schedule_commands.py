"""``fastworker schedules [list] | schedules add | schedules remove``.

``fastworker schedules`` alone lists, as it did before schedules could be added at run
time. ``add`` takes the task's arguments as ``fastworker submit`` does: each one JSON if
it parses as JSON, else text; keyword arguments as one JSON object.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from fastworker.cli.client_commands import (
    json_object,
    json_or_text,
    print_json,
    print_table,
    with_client,
)
from fastworker.cli.common import EXIT_OK, CommandError, add_client_options
from fastworker.cli.times import format_time, seconds_type
from fastworker.options import queue_name
from fastworker_common.settings import add_option
from fastworker_protocol import Priority, ScheduleInfo

if TYPE_CHECKING:
    from fastworker.client import Client

_Commands = argparse._SubParsersAction
ARGUMENTS_WIDTH = 40  # characters of a schedule's arguments a listing shows
HEADER = [
    "TASK",
    "SCHEDULE",
    "NEXT RUN",
    "LAST RUN",
    "RUNS",
    "SKIPPED",
    "RUNNING",
    "NAME",
    "ARGUMENTS",
]


def add_commands(commands: _Commands[argparse.ArgumentParser]) -> None:
    schedules = commands.add_parser(
        "schedules",
        help="list, add and remove schedules (periodic tasks); alone, it lists them",
    )
    _add_listing(schedules)
    actions = schedules.add_subparsers(dest="action", required=False, metavar="ACTION")

    p = actions.add_parser(
        "list", help="list every schedule (declared by @task or added) and its runs"
    )
    _add_listing(p)

    p = actions.add_parser(
        "add", help="run a task with arguments on a schedule (replaces one of that name)"
    )
    p.add_argument("name", metavar="NAME", help="the schedule's name")
    p.add_argument("task", metavar="TASK", help="the registered task it runs")
    p.add_argument(
        "args",
        nargs="*",
        type=json_or_text,
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
        p, "--cron", default=None, metavar="EXPR", help="a cron expression, e.g. '0 3 * * 1'"
    )
    add_option(
        p,
        "--every",
        type=seconds_type,
        default=None,
        metavar="SECONDS",
        help="an interval: seconds, or a duration such as 30s, 5m, 1h",
    )
    add_option(p, "--tz", default="UTC", help="the cron expression's time zone")
    add_option(
        p,
        "--priority",
        type=Priority.parse,
        default=None,
        help="critical, high, normal or low (default: normal)",
    )
    add_option(
        p,
        "--queue",
        type=queue_name,
        default=None,
        help="the named queue its runs go to (default: the task's)",
    )
    add_option(p, "--json", switch=True, help="print the schedule as JSON")
    p.set_defaults(run=_add)
    add_client_options(p)

    p = actions.add_parser("remove", help="stop and forget a schedule added at run time")
    p.add_argument("name", metavar="NAME", help="the schedule's name")
    p.set_defaults(run=_remove)
    add_client_options(p)


def _add_listing(p: argparse.ArgumentParser) -> None:
    add_option(p, "--json", switch=True, help="print JSON instead of a table")
    p.set_defaults(run=_list)
    add_client_options(p)


def _list(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        schedules = await client.list_schedules()
        if args.json:
            print_json(schedules)
        else:
            print_table(HEADER, [schedule_row(s) for s in schedules])
        return EXIT_OK

    return with_client(args, body)


def schedule_row(s: ScheduleInfo) -> list[Any]:
    """A schedule as the listing shows it: a declared one is named for its task."""
    return [
        s.task or s.name,
        s.spec,
        format_time(s.next_run),
        format_time(s.last_run),
        s.times_run,
        s.skipped,
        "yes" if s.running else "no",
        s.name if s.source != "declared" else "(declared)",
        call_text(s.args, s.kwargs),
    ]


def call_text(args: list[Any], kwargs: dict[str, Any], width: int = ARGUMENTS_WIDTH) -> str:
    """Arguments as a call would show them (``1, "a", x=2``), cut to ``width``; ``-``
    for none."""
    parts = [json.dumps(a, default=repr) for a in args]
    parts += [f"{k}={json.dumps(v, default=repr)}" for k, v in kwargs.items()]
    text = ", ".join(parts) or "-"
    return text if len(text) <= width else text[: width - 3] + "..."


def _add(args: argparse.Namespace) -> int:
    if (args.cron is None) == (args.every is None):
        raise CommandError("give exactly one of --cron EXPR and --every SECONDS")

    async def body(client: Client) -> int:
        try:
            schedule = await client.add_schedule(
                args.name,
                args.task,
                args=args.args,
                kwargs=args.kwargs,
                cron=args.cron,
                interval=args.every,
                tz=args.tz,
                priority=args.priority,
                queue=args.queue,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if args.json:
            print_json(schedule)
        else:
            print(added_text(schedule))
        return EXIT_OK

    return with_client(args, body)


def added_text(s: ScheduleInfo) -> str:
    call = call_text(s.args, s.kwargs, width=200)
    return (
        f"schedule {s.name}: {s.task or s.name}({'' if call == '-' else call}) {s.spec}, "
        f"next run {format_time(s.next_run)}"
    )


def _remove(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        try:
            removed = await client.remove_schedule(args.name)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if removed:
            print(f"schedule {args.name} removed")
        else:
            print(f"not removed: no schedule was added as {args.name}")
        return EXIT_OK

    return with_client(args, body)


__all__ = ["HEADER", "add_commands", "added_text", "call_text", "schedule_row"]
