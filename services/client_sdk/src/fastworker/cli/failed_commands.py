"""``fastworker failed list | show | retry | purge``: the dead-letter store.

A task that failed for good (its retries used up, a lost worker or a timeout included)
is kept there with its arguments until it is retried, purged or expires. A retry or
purge names its dead letters or says ``--all-matching``; one with neither is a usage
error, so that nobody replays or drops a whole store by accident.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from fastworker.cli.client_commands import print_json, print_table, with_client
from fastworker.cli.common import (
    EXIT_OK,
    EXIT_TASK_FAILED,
    EXIT_USAGE,
    CommandError,
    add_client_options,
)
from fastworker.cli.times import format_time, when_type
from fastworker.errors import TaskNotFound
from fastworker_common.settings import add_option
from fastworker_protocol import MAX_FAILED_LISTED, DeadLetter, TaskError

if TYPE_CHECKING:
    from fastworker._operations import FailedPage
    from fastworker.client import Client

_Commands = argparse._SubParsersAction
MESSAGE_WIDTH = 60  # characters of an error message a listing shows
_WHEN = "an ISO 8601 time (UTC unless it has an offset) or a duration ago: 30m, 12h, 7d"


def add_commands(commands: _Commands[argparse.ArgumentParser]) -> None:
    failed = commands.add_parser(
        "failed", help="find, inspect, retry and purge tasks that failed for good"
    )
    actions = failed.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser("list", help="list failed tasks (dead letters), newest first")
    _add_filters(p)
    add_option(p, "--limit", type=_limit, default=100, help="how many, at most")
    add_option(p, "--json", switch=True, help="print JSON instead of a table")
    p.set_defaults(run=_list)

    p = actions.add_parser(
        "show", help="one failed task: its arguments, every attempt's error, the traceback"
    )
    p.add_argument("task_id", metavar="ID", help="the failed task's id")
    add_option(p, "--json", switch=True, help="print JSON")
    p.set_defaults(run=_show)

    p = actions.add_parser(
        "retry",
        help="run failed tasks again, each as a new task (exit 1 if an id was not found)",
    )
    _add_selection(p, "retry")
    add_option(p, "--json", switch=True, help="print JSON")
    p.set_defaults(run=_retry)

    p = actions.add_parser(
        "purge", help="drop failed tasks from the store (exit 1 if an id was not found)"
    )
    _add_selection(p, "purge")
    add_option(p, "--yes", switch=True, help="do not ask for confirmation of --all-matching")
    p.set_defaults(run=_purge)

    for parser in actions.choices.values():
        add_client_options(parser)


def _add_filters(p: argparse.ArgumentParser) -> None:
    add_option(p, "--task-name", default=None, help="only tasks of this name")
    add_option(
        p,
        "--error-type",
        default=None,
        help="only tasks whose error is of this type, e.g. ValueError, WorkerLost, TimeoutError",
    )
    add_option(
        p, "--since", type=when_type, default=None, metavar="WHEN", help=f"failed since: {_WHEN}"
    )
    add_option(
        p, "--until", type=when_type, default=None, metavar="WHEN", help=f"failed before: {_WHEN}"
    )


def _add_selection(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument(
        "task_ids", nargs="*", metavar="ID", help=f"the failed tasks to {verb} (or --all-matching)"
    )
    add_option(
        p,
        "--all-matching",
        switch=True,
        help=f"{verb} every failed task that matches the filters (every one, with none)",
    )
    _add_filters(p)


def _limit(text: str) -> int:
    try:
        limit = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1 <= limit <= MAX_FAILED_LISTED:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_FAILED_LISTED:,}")
    return limit


def filters_of(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "task_name": args.task_name,
        "error_type": args.error_type,
        "since": args.since,
        "until": args.until,
    }


def check_selection(args: argparse.Namespace) -> None:
    """A usage error for a retry or purge that names neither ids nor ``--all-matching``."""
    if args.task_ids and args.all_matching:
        raise CommandError("give failed task ids or --all-matching, not both")
    if not args.task_ids and not args.all_matching:
        raise CommandError(
            f"give the failed tasks' ids, or --all-matching to {args.action} every one that "
            "matches --task-name/--error-type/--since/--until"
        )


# --- list and show ------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        page = await client.list_failed(limit=args.limit, **filters_of(args))
        if args.json:
            print_json(page)
        else:
            print_table(*failed_table(page))
        if len(page) < page.total:
            print(
                f"fastworker: {len(page)} of {page.total} matching failed tasks shown "
                f"({page.stored} kept in all): raise --limit or narrow the filters",
                file=sys.stderr,
            )
        return EXIT_OK

    return with_client(args, body)


def failed_table(page: FailedPage | list[DeadLetter]) -> tuple[list[str], list[list[Any]]]:
    header = ["TASK", "NAME", "ERROR", "MESSAGE", "ATTEMPTS", "FAILED AT"]
    rows: list[list[Any]] = [
        [
            d.task_id,
            d.name,
            d.error.type if d.error else d.status,
            first_line(d.error.message if d.error else ""),
            d.attempts,
            format_time(d.failed_at),
        ]
        for d in page
    ]
    return header, rows


def first_line(text: str, width: int = MESSAGE_WIDTH) -> str:
    """The first non-empty line of ``text``, cut to ``width`` characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 3] + "..."


def _show(args: argparse.Namespace) -> int:
    async def body(client: Client) -> int:
        try:
            dead = await client.get_failed(args.task_id)
        except TaskNotFound as exc:
            raise CommandError(exc.message) from None
        if args.json:
            print_json(dead)
        else:
            print("\n".join(show_lines(dead)))
        return EXIT_OK

    return with_client(args, body)


def show_lines(dead: DeadLetter) -> list[str]:
    """Everything about a dead letter, for people: its fields, then every attempt's error
    with its traceback, oldest first."""
    fields = [
        ("task", dead.task_id),
        ("name", dead.name),
        ("status", str(dead.status)),
        ("error", _error_text(dead.error)),
        ("attempts", str(dead.attempts)),
        ("priority", str(dead.priority)),
        ("queue", dead.queue),
        ("worker", dead.worker_id or "-"),
        ("submitted", format_time(dead.submitted_at)),
        ("failed at", format_time(dead.failed_at)),
        ("retry of", dead.retry_of or "-"),
        ("args", json.dumps(dead.args, default=repr)),
        ("kwargs", json.dumps(dead.kwargs, default=repr)),
    ]
    width = max(len(k) for k, _ in fields)
    lines = [f"{key.ljust(width)}  {value}" for key, value in fields]
    if dead.truncated:
        lines.append("(some of it was too long to list and was left out)")
    errors = attempt_errors(dead)
    for number, error in enumerate(errors, 1):
        last = " (last)" if number == len(errors) and dead.error is not None else ""
        lines += ["", f"--- attempt {number}{last}: {_error_text(error)}"]
        lines += (error.traceback or "(no traceback)").rstrip("\n").splitlines()
    return lines


def attempt_errors(dead: DeadLetter) -> list[TaskError]:
    """Every attempt's error, oldest first: ``attempt_errors``, and the last error unless
    they already end with its attempt (a control plane may list every attempt there, or
    only the earlier ones)."""
    errors = list(dead.attempt_errors)
    last = dead.error
    if last is not None and not (
        errors and (errors[-1].type, errors[-1].traceback) == (last.type, last.traceback)
    ):
        errors.append(last)
    return errors


def _error_text(error: TaskError | None) -> str:
    if error is None:
        return "-"
    text = f"{error.type}: {error.message}" if error.message else error.type
    return text if error.reason == "exception" else f"{text} ({error.reason})"


# --- retry and purge ----------------------------------------------------------------------


def _retry(args: argparse.Namespace) -> int:
    check_selection(args)

    async def body(client: Client) -> int:
        try:
            done = await client.retry_failed(
                *args.task_ids, all_matching=args.all_matching, **filters_of(args)
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if args.json:
            print_json({"retried": list(done), "missing": done.missing})
        else:
            for retried in done:
                print(f"{retried.task_id} -> {retried.new_task_id}")
            print(f"retried {len(done)} failed task{'' if len(done) == 1 else 's'}")
        if done.missing:
            print(f"fastworker: not found: {', '.join(done.missing)}", file=sys.stderr)
            return EXIT_TASK_FAILED
        return EXIT_OK

    return with_client(args, body)


def _purge(args: argparse.Namespace) -> int:
    check_selection(args)
    if args.all_matching and not args.yes and not _confirmed():
        print("fastworker: not purged", file=sys.stderr)
        return EXIT_USAGE

    async def body(client: Client) -> int:
        try:
            purged = await client.purge_failed(
                *args.task_ids, all_matching=args.all_matching, **filters_of(args)
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        print(f"purged {purged} failed task{'' if purged == 1 else 's'}")
        asked = len(set(args.task_ids))
        if asked > purged:
            print(f"fastworker: {asked - purged} of the ids were not found", file=sys.stderr)
            return EXIT_TASK_FAILED
        return EXIT_OK

    return with_client(args, body)


def _confirmed() -> bool:
    if not sys.stdin.isatty():
        raise CommandError("purging every matching failed task: confirm with --yes")
    answer = input("Drop every failed task that matches? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


__all__ = ["add_commands", "attempt_errors", "failed_table", "first_line", "show_lines"]
