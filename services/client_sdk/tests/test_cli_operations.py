"""``fastworker failed`` and ``fastworker schedules``, without a control plane: parsing
(times, durations, arguments), usage errors, and how dead letters and schedules are shown."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fastworker import Client, FailedPage, Retried, Retries, TaskNotFound, TaskRegistry
from fastworker.cli import build_parser, main
from fastworker.cli.common import EXIT_USAGE
from fastworker.cli.failed_commands import failed_table, first_line, show_lines
from fastworker.cli.schedule_commands import HEADER, call_text, schedule_row
from fastworker.cli.times import format_time, parse_duration, parse_seconds, parse_when
from fastworker.testing import eager
from fastworker_protocol import DeadLetter, Priority, ScheduleInfo, TaskError

NOW = datetime(2026, 12, 3, 19, 0, tzinfo=UTC).timestamp()
NOWHERE = ["--address", "tcp://127.0.0.1:9", "--connect-timeout", "0.2", "--timeout", "0.2"]


def _parse(*argv: str) -> Any:
    return build_parser(argv[0]).parse_args(list(argv))


# --- times and durations ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("12h", 43200),
        ("7d", 604800),
        ("2w", 1209600),
        ("1h30m", 5400),
        ("1.5h", 5400),
    ],
)
def test_a_duration_is_a_number_and_a_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "12", "h", "12x", "-5m", "5 m"])
def test_a_duration_without_its_unit_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_a_relative_when_is_that_long_before_now() -> None:
    assert parse_when("12h", NOW) == NOW - 12 * 3600


def test_an_iso_when_without_an_offset_is_utc() -> None:
    expected = datetime(2026, 12, 3, 8, 0, tzinfo=UTC).timestamp()

    assert parse_when("2026-12-03T08:00", NOW) == expected
    assert parse_when("2026-12-03T09:00:00+01:00", NOW) == expected
    assert parse_when("2026-12-03T08:00:00Z", NOW) == expected
    assert parse_when("2026-12-03", NOW) == datetime(2026, 12, 3, tzinfo=UTC).timestamp()


def test_a_when_that_is_neither_says_what_it_takes() -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_when("yesterday", NOW)


def test_every_takes_seconds_or_a_duration() -> None:
    assert parse_seconds("300") == 300.0
    assert parse_seconds("0.5") == 0.5
    assert parse_seconds("5m") == 300.0
    with pytest.raises(ValueError, match="seconds"):
        parse_seconds("inf")


def test_a_listing_shows_times_in_utc() -> None:
    assert format_time(NOW) == "2026-12-03 19:00:00 UTC"
    assert format_time(None) == "-"


# --- failed: parsing and usage errors -----------------------------------------------------


def test_failed_list_takes_its_filters() -> None:
    args = _parse(
        "failed",
        "list",
        "--task-name",
        "boom",
        "--error-type",
        "ValueError",
        "--since",
        "2026-12-03T08:00",
        "--limit",
        "5",
    )

    assert (args.task_name, args.error_type, args.limit) == ("boom", "ValueError", 5)
    assert args.since == datetime(2026, 12, 3, 8, 0, tzinfo=UTC).timestamp()
    assert args.until is None


@pytest.mark.parametrize("limit", ["0", "10001", "many"])
def test_failed_list_refuses_a_limit_out_of_range(
    limit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse("failed", "list", "--limit", limit)

    assert exit_.value.code == EXIT_USAGE
    assert "--limit" in capsys.readouterr().err


def test_failed_retry_takes_ids_or_all_matching_with_filters() -> None:
    by_ids = _parse("failed", "retry", "a", "b")
    by_filter = _parse("failed", "retry", "--all-matching", "--task-name", "boom", "--since", "7d")

    assert (by_ids.task_ids, by_ids.all_matching) == (["a", "b"], False)
    assert (by_filter.task_ids, by_filter.all_matching, by_filter.task_name) == ([], True, "boom")


@pytest.mark.parametrize(
    "argv",
    [
        ["failed", "retry"],
        ["failed", "retry", "a", "--all-matching"],
        ["failed", "purge", "--task-name", "boom"],
    ],
)
def test_a_retry_or_purge_without_a_clear_selection_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens at NOWHERE: a usage error is found before any connection is tried
    assert main([*argv, *NOWHERE]) == EXIT_USAGE

    assert "--all-matching" in capsys.readouterr().err


def test_purging_every_match_without_a_terminal_asks_for_yes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)

    assert main(["failed", "purge", "--all-matching", *NOWHERE]) == EXIT_USAGE

    assert "--yes" in capsys.readouterr().err


# --- failed: what is shown ----------------------------------------------------------------

BOOM = TaskError(
    type="ValueError",
    message="bad input\nsecond line",
    traceback="Traceback...\nValueError: bad input\n",
)
DEAD = DeadLetter(
    task_id="t1",
    name="boom",
    error=BOOM,
    args=[1, "x"],
    kwargs={"k": True},
    attempts=2,
    attempt_errors=[TaskError(type="KeyError", message="'a'", traceback="Traceback (first)\n")],
    worker_id="w1",
    failed_at=NOW,
    retry_of="t0",
)


def test_a_listing_row_shows_the_first_line_of_the_error() -> None:
    header, rows = failed_table([DEAD])

    assert header == ["TASK", "NAME", "ERROR", "MESSAGE", "ATTEMPTS", "FAILED AT"]
    assert rows == [["t1", "boom", "ValueError", "bad input", 2, "2026-12-03 19:00:00 UTC"]]


def test_a_long_message_is_cut_to_its_width() -> None:
    assert first_line("\n  " + "x" * 100, width=10) == "xxxxxxx..."


def test_show_has_the_arguments_the_link_and_every_attempts_traceback() -> None:
    text = "\n".join(show_lines(DEAD))

    assert "retry of   t0" in text
    assert 'args       [1, "x"]' in text
    assert 'kwargs     {"k": true}' in text
    assert "--- attempt 1: KeyError: 'a'\nTraceback (first)" in text
    last = "--- attempt 2 (last): ValueError: bad input\nsecond line\nTraceback..."
    assert last + "\nValueError: bad input" in text


def test_show_lists_the_last_attempt_once_when_attempt_errors_already_has_it() -> None:
    first = TaskError(type="RuntimeError", message="1", traceback="tb 1")
    second = TaskError(type="RuntimeError", message="2", traceback="tb 2")
    summary = TaskError(type="RuntimeError", message="2 (after 2 attempts: ...)", traceback="tb 2")
    dead = DeadLetter(task_id="t", name="n", error=summary, attempt_errors=[first, second])

    text = "\n".join(show_lines(dead))

    assert text.count("--- attempt") == 2
    assert "--- attempt 2 (last): RuntimeError: 2\ntb 2" in text


def test_show_names_how_a_task_failed_when_it_did_not_raise() -> None:
    lost = DeadLetter(
        task_id="t",
        name="n",
        error=TaskError(type="WorkerLost", message="gone", reason="worker_lost"),
    )

    assert "error      WorkerLost: gone (worker_lost)" in show_lines(lost)


# --- schedules ----------------------------------------------------------------------------


def test_schedules_alone_still_lists() -> None:
    args = _parse("schedules", "--json")

    assert args.run.__name__ == "_list"
    assert args.json is True
    assert _parse("schedules", "list").run.__name__ == "_list"


def test_schedules_add_takes_arguments_as_submit_does() -> None:
    args = _parse(
        "schedules",
        "add",
        "nightly",
        "report",
        "42",
        '"text"',
        "plain",
        "[1]",
        "--kwargs",
        '{"to": "ops"}',
        "--every",
        "5m",
        "--priority",
        "high",
    )

    assert (args.name, args.task) == ("nightly", "report")
    assert args.args == [42, "text", "plain", [1]]
    assert args.kwargs == {"to": "ops"}
    assert (args.every, args.cron, args.tz, args.priority) == (300.0, None, "UTC", Priority.HIGH)


@pytest.mark.parametrize(
    "options",
    [[], ["--cron", "* * * * *", "--every", "5"]],
)
def test_schedules_add_needs_exactly_one_of_cron_and_every(
    options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schedules", "add", "s", "report", *options, *NOWHERE]) == EXIT_USAGE

    assert "exactly one of --cron" in capsys.readouterr().err


def test_schedules_add_refuses_an_interval_of_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse("schedules", "add", "s", "report", "--every", "0")

    assert exit_.value.code == EXIT_USAGE


def test_a_declared_schedule_is_listed_under_its_task() -> None:
    declared = ScheduleInfo(name="tick", spec="every 1 s", next_run=NOW, times_run=3)

    row = schedule_row(declared)

    assert HEADER[:2] == ["TASK", "SCHEDULE"]
    assert row == [
        "tick",
        "every 1 s",
        "2026-12-03 19:00:00 UTC",
        "-",
        3,
        0,
        "no",
        "(declared)",
        "-",
    ]


def test_an_added_schedule_shows_its_name_and_arguments() -> None:
    added = ScheduleInfo(
        name="nightly",
        spec="cron 0 3 * * *",
        next_run=NOW,
        source="runtime",
        task="report",
        args=[42],
        kwargs={"to": "ops"},
    )

    row = schedule_row(added)

    assert (row[0], row[7], row[8]) == ("report", "nightly", '42, to="ops"')


def test_long_arguments_are_cut() -> None:
    assert call_text(["x" * 100], {}, width=12) == '"xxxxxxxx...'


# --- the commands' bodies, against a client whose calls are scripted ----------------------


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """``Client``'s operations calls answer from this dict (keyed by method name) and
    record their arguments under ``"<name>.called"``; the client connects to ``eager()``,
    so nothing dials a network."""
    replies: dict[str, Any] = {}

    def fake(name: str) -> Any:
        async def call(self: Client, *args: Any, **kwargs: Any) -> Any:
            replies[f"{name}.called"] = (args, kwargs)
            reply = replies[name]
            if isinstance(reply, Exception):
                raise reply
            return reply

        return call

    for name in ("list_failed", "get_failed", "retry_failed", "purge_failed"):
        monkeypatch.setattr(Client, name, fake(name))
    for name in ("add_schedule", "remove_schedule", "list_schedules"):
        monkeypatch.setattr(Client, name, fake(name))
    with eager(TaskRegistry()):
        yield replies


def test_failed_list_prints_the_table_and_says_when_some_were_left_out(
    scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    page = FailedPage([DEAD])
    page.total, page.stored = 5, 9
    scripted["list_failed"] = page

    code = main(["failed", "list", "--task-name", "boom", "--limit", "1"])

    out, err = capsys.readouterr()
    assert code == 0
    assert out.splitlines()[0].split() == [
        "TASK",
        "NAME",
        "ERROR",
        "MESSAGE",
        "ATTEMPTS",
        "FAILED",
        "AT",
    ]
    assert out.splitlines()[1].startswith("t1")
    assert "1 of 5 matching failed tasks shown (9 kept in all)" in err
    assert scripted["list_failed.called"][1]["task_name"] == "boom"


def test_failed_show_of_an_unknown_id_exits_2_saying_so(
    scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    scripted["get_failed"] = TaskNotFound("task_not_found", "no dead letter t9: unknown")

    assert main(["failed", "show", "t9"]) == EXIT_USAGE
    assert capsys.readouterr().err == "fastworker: no dead letter t9: unknown\n"


def test_failed_retry_prints_each_new_id_and_exits_1_when_an_id_was_missing(
    scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    done = Retries()
    done.append(Retried(task_id="t1", new_task_id="n1"))
    done.missing.append("t9")
    scripted["retry_failed"] = done

    code = main(["failed", "retry", "t1", "t9"])

    out, err = capsys.readouterr()
    assert (code, out) == (1, "t1 -> n1\nretried 1 failed task\n")
    assert err == "fastworker: not found: t9\n"
    assert scripted["retry_failed.called"][0] == ("t1", "t9")


def test_failed_retry_all_matching_passes_the_filters(
    scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    scripted["retry_failed"] = Retries()

    code = main(
        ["failed", "retry", "--all-matching", "--error-type", "WorkerLost", "--since", "1h"]
    )

    args, kwargs = scripted["retry_failed.called"]
    assert (code, args, kwargs["all_matching"], kwargs["error_type"]) == (0, (), True, "WorkerLost")
    assert kwargs["since"] == pytest.approx(time.time() - 3600, abs=60)
    assert capsys.readouterr().out == "retried 0 failed tasks\n"


def test_failed_purge_counts_and_exits_1_for_ids_not_found(
    scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    scripted["purge_failed"] = 1

    code = main(["failed", "purge", "t1", "t9"])

    out, err = capsys.readouterr()
    assert (code, out, err) == (
        1,
        "purged 1 failed task\n",
        "fastworker: 1 of the ids were not found\n",
    )


def test_schedules_add_prints_the_schedule_and_remove_says_whether_there_was_one(
    scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    scripted["add_schedule"] = ScheduleInfo(
        name="nightly", spec="every 300 s", next_run=NOW, source="runtime", task="report", args=[42]
    )
    scripted["remove_schedule"] = False

    added = main(["schedules", "add", "nightly", "report", "42", "--every", "5m"])
    removed = main(["schedules", "remove", "nightly"])

    out = capsys.readouterr().out.splitlines()
    assert (added, removed) == (0, 0)
    assert out == [
        "schedule nightly: report(42) every 300 s, next run 2026-12-03 19:00:00 UTC",
        "not removed: no schedule was added as nightly",
    ]
    args, kwargs = scripted["add_schedule.called"]
    assert (args, kwargs["args"], kwargs["interval"], kwargs["cron"]) == (
        ("nightly", "report"),
        [42],
        300.0,
        None,
    )


def test_schedules_alone_prints_the_table(
    scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    scripted["list_schedules"] = [ScheduleInfo(name="tick", spec="every 1 s", next_run=NOW)]

    assert main(["schedules"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["TASK", "SCHEDULE"]
    assert row.startswith("tick")
