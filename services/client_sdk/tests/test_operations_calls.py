"""The dead-letter and run-time schedule calls of both clients, against scripted replies:
what each call sends, how it reads the replies, when it asks again, and what it refuses
before sending anything."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest

from fastworker import (
    Client,
    DeadLetter,
    FailedPage,
    InvalidArguments,
    Priority,
    Retried,
    Retries,
    ScheduleInfo,
    SyncClient,
    TaskNotFound,
    TaskRegistry,
    task,
)
from fastworker._operation_calls import AsyncOperations, SyncOperations
from fastworker._operations import (
    check_selection,
    failed_filter,
    interval_seconds,
    purge_again,
    retry_again,
    schedule_spec,
    unix_time,
)
from fastworker_protocol import (
    MAX_FAILED_ACTED,
    AddSchedule,
    FailedFilter,
    FailedList,
    FailedPurged,
    FailedRetried,
    ListFailed,
    Message,
    PurgeFailed,
    RemoveSchedule,
    RetryFailed,
    ScheduleAdded,
    ScheduleRemoved,
)

M = TypeVar("M", bound=Message)


class Scripted(SyncOperations):
    """A blocking client whose control plane answers from a script, and which keeps what
    it was sent."""

    def __init__(self, *replies: Message) -> None:
        self.replies: Iterator[Message] = iter(replies)
        self.sent: list[Message] = []

    def _request(
        self,
        lane: Priority | None,
        message: Message,
        reply_type: type[M],
        wait: float | None = None,
    ) -> M:
        assert lane is None, "operations go on the results channel"
        self.sent.append(message)
        reply = next(self.replies)
        assert isinstance(reply, reply_type)
        return reply


class ScriptedAsync(AsyncOperations):
    def __init__(self, *replies: Message) -> None:
        self.script = Scripted(*replies)

    async def _request(
        self, lane: Priority | None, message: Message, reply_type: type[M], wait: float | None
    ) -> M:
        return self.script._request(lane, message, reply_type, wait)


def _dead(task_id: str) -> DeadLetter:
    return DeadLetter(task_id=task_id, name="boom", attempts=3, failed_at=1_700_000_000.0)


# --- selections and times -----------------------------------------------------------------


def test_a_naive_datetime_is_utc_and_an_aware_one_keeps_its_offset() -> None:
    naive = datetime(2026, 12, 3, 8, 0)
    aware = datetime(2026, 12, 3, 9, 0, tzinfo=timezone(timedelta(hours=1)))

    assert unix_time(naive, "since") == datetime(2026, 12, 3, 8, 0, tzinfo=UTC).timestamp()
    assert unix_time(aware, "since") == unix_time(naive, "since")
    assert unix_time(1_700_000_000, "since") == 1_700_000_000.0
    assert unix_time(None, "since") is None


@pytest.mark.parametrize("bad", [True, "yesterday", -1.0, float("nan")])
def test_a_time_that_is_no_time_is_refused(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        unix_time(bad, "since")


def test_a_filter_carries_only_what_was_given() -> None:
    found = failed_filter(task_name="boom", since=10.0)

    assert found == FailedFilter(task_name="boom", since=10.0)


@pytest.mark.parametrize(("ids", "all_matching"), [((), False), (("a",), True)])
def test_a_retry_or_purge_needs_ids_or_all_matching_but_not_both(
    ids: tuple[str, ...], all_matching: bool
) -> None:
    with pytest.raises(ValueError, match="all_matching"):
        check_selection(ids, all_matching)


def test_retry_with_neither_ids_nor_all_matching_sends_nothing() -> None:
    client = Scripted()

    with pytest.raises(ValueError, match="all_matching"):
        client.retry_failed(task_name="boom")
    with pytest.raises(ValueError, match="all_matching"):
        client.purge_failed()

    assert client.sent == []


# --- list and get -------------------------------------------------------------------------


def test_list_failed_sends_the_filters_and_returns_a_page_with_its_counts() -> None:
    client = Scripted(FailedList(tasks=[_dead("a")], total=7, stored=9, more=True))

    page = client.list_failed(task_name="boom", error_type="ValueError", until=5.0, limit=1)

    assert client.sent == [
        ListFailed(
            filter=FailedFilter(task_name="boom", error_type="ValueError", until=5.0), limit=1
        )
    ]
    assert isinstance(page, FailedPage)
    assert page == [_dead("a")]
    assert (page.total, page.stored, page.more) == (7, 9, True)


@pytest.mark.parametrize("limit", [0, -1, True])
def test_a_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        Scripted().list_failed(limit=limit)


def test_get_failed_asks_for_one_id_and_returns_it() -> None:
    client = Scripted(FailedList(tasks=[_dead("a")], total=1))

    assert client.get_failed("a") == _dead("a")
    assert client.sent == [ListFailed(filter=FailedFilter(task_ids=["a"]), limit=1)]


def test_get_failed_of_an_id_not_in_the_store_raises_task_not_found() -> None:
    with pytest.raises(TaskNotFound, match="no dead letter gone"):
        Scripted(FailedList(tasks=[])).get_failed("gone")


# --- retry --------------------------------------------------------------------------------


def test_retry_by_ids_returns_the_new_ids_and_the_missing_ones() -> None:
    reply = FailedRetried(retried=[Retried(task_id="a", new_task_id="a2")], missing=["x"])
    client = Scripted(reply)

    done = client.retry_failed("a", "x")

    assert client.sent == [RetryFailed(filter=FailedFilter(task_ids=["a", "x"]))]
    assert isinstance(done, Retries)
    assert done == [Retried(task_id="a", new_task_id="a2")]
    assert done.missing == ["x"]


async def test_retry_all_matching_asks_again_while_the_control_plane_says_more() -> None:
    # Given a store whose matches take three replies
    replies = [
        FailedRetried(retried=[Retried(task_id=f"t{i}", new_task_id=f"n{i}")], more=i < 2)
        for i in range(3)
    ]
    client = ScriptedAsync(*replies)

    # When every match is retried
    done = await client.retry_failed(all_matching=True, error_type="ValueError")

    # Then the same request went three times and every retried id is returned
    expected = RetryFailed(filter=FailedFilter(error_type="ValueError"), all_matching=True)
    assert client.script.sent == [expected] * 3
    assert [r.task_id for r in done] == ["t0", "t1", "t2"]


def test_retry_stops_when_a_reply_says_more_but_retried_nothing() -> None:
    sent = RetryFailed(filter=FailedFilter(), all_matching=True)

    assert retry_again(sent, FailedRetried(retried=[], more=True), Retries()) is None


def test_a_retry_by_ids_that_says_more_goes_on_with_the_ids_left() -> None:
    sent = RetryFailed(filter=FailedFilter(task_ids=["a", "b", "c"]))
    reply = FailedRetried(
        retried=[Retried(task_id="a", new_task_id="a2")], missing=["b"], more=True
    )

    again = retry_again(sent, reply, Retries())

    assert again == RetryFailed(filter=FailedFilter(task_ids=["c"]))


def test_many_ids_go_in_parts_of_the_most_one_request_acts_on() -> None:
    ids = [f"t{i}" for i in range(MAX_FAILED_ACTED + 1)]
    client = Scripted(FailedRetried(), FailedRetried())

    client.retry_failed(*ids)

    assert [len(m.filter.task_ids) for m in client.sent if isinstance(m, RetryFailed)] == [
        MAX_FAILED_ACTED,
        1,
    ]


# --- purge --------------------------------------------------------------------------------


def test_purge_by_ids_counts_what_was_dropped() -> None:
    client = Scripted(FailedPurged(purged=1, missing=["x"]))

    assert client.purge_failed("a", "x", task_name="boom") == 1
    assert client.sent == [PurgeFailed(filter=FailedFilter(task_ids=["a", "x"], task_name="boom"))]


async def test_purge_all_matching_asks_again_after_a_full_request() -> None:
    client = ScriptedAsync(FailedPurged(purged=MAX_FAILED_ACTED), FailedPurged(purged=2))

    assert await client.purge_failed(all_matching=True) == MAX_FAILED_ACTED + 2
    assert len(client.script.sent) == 2


def test_a_purge_by_ids_is_not_sent_again() -> None:
    sent = PurgeFailed(filter=FailedFilter(task_ids=["a"]))

    assert not purge_again(sent, FailedPurged(purged=MAX_FAILED_ACTED))


# --- schedules ----------------------------------------------------------------------------


def test_add_schedule_sends_the_task_its_arguments_and_the_interval() -> None:
    info = ScheduleInfo(name="nightly", spec="every 60 s", next_run=1.0, source="runtime")
    client = Scripted(ScheduleAdded(schedule=info))

    got = client.add_schedule(
        "nightly", "report", args=[42], kwargs={"to": "ops"}, interval=timedelta(minutes=1)
    )

    assert got == info
    (message,) = client.sent
    assert isinstance(message, AddSchedule)
    spec = message.schedule
    assert (spec.name, spec.task, spec.args, spec.kwargs) == (
        "nightly",
        "report",
        [42],
        {"to": "ops"},
    )
    assert (spec.interval, spec.cron, spec.tz, spec.priority) == (
        60.0,
        None,
        "UTC",
        Priority.NORMAL,
    )


def test_a_task_object_gives_its_name_and_its_priority() -> None:
    registry = TaskRegistry()

    @task(priority="high", registry=registry)
    def report(customer: int) -> None: ...

    spec = schedule_spec(
        "r",
        report,
        [1],
        None,
        cron="0  3 * * 1",
        interval=None,
        tz="Europe/Paris",
        priority=None,
        queue=None,
    )

    assert (spec.task, spec.priority, spec.cron, spec.tz) == (
        report.name,  # module-qualified: the name it is registered under
        Priority.HIGH,
        "0 3 * * 1",
        "Europe/Paris",
    )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "exactly one"),
        ({"cron": "* * * * *", "interval": 5.0}, "exactly one"),
        ({"cron": "* * * *"}, "five fields"),
        ({"interval": 0.0}, "between"),
        ({"interval": timedelta(days=400)}, "between"),
        ({"interval": 5.0, "queue": "no spaces"}, "queue"),
    ],
)
def test_a_bad_schedule_is_refused_before_it_is_sent(options: dict[str, Any], match: str) -> None:
    client = Scripted()

    with pytest.raises(ValueError, match=match):
        client.add_schedule("s", "report", **options)

    assert client.sent == []


@pytest.mark.parametrize("name", ["", "-leading", "has space", "x" * 201])
def test_a_bad_schedule_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="schedule name"):
        Scripted().add_schedule(name, "report", interval=5.0)
    with pytest.raises(ValueError, match="schedule name"):
        Scripted().remove_schedule(name)


def test_arguments_that_would_not_come_back_as_themselves_are_refused() -> None:
    with pytest.raises(InvalidArguments):
        Scripted().add_schedule("s", "report", args=[{1, 2}], interval=5.0)


def test_an_interval_is_seconds_or_a_timedelta() -> None:
    assert interval_seconds(90) == 90.0
    assert interval_seconds(timedelta(hours=1)) == 3600.0
    with pytest.raises(TypeError):
        interval_seconds("5m")  # type: ignore[arg-type]


async def test_remove_schedule_says_whether_there_was_one() -> None:
    client = ScriptedAsync(
        ScheduleRemoved(name="s", removed=True), ScheduleRemoved(name="s", removed=False)
    )

    assert await client.remove_schedule("s") is True
    assert await client.remove_schedule("s") is False
    assert client.script.sent == [RemoveSchedule(name="s")] * 2


@pytest.mark.parametrize(
    "name",
    [
        "list_failed",
        "get_failed",
        "retry_failed",
        "purge_failed",
        "add_schedule",
        "remove_schedule",
    ],
)
def test_both_clients_have_the_call_with_the_same_parameters(name: str) -> None:
    async_call, sync_call = getattr(Client, name), getattr(SyncClient, name)

    assert inspect.iscoroutinefunction(async_call)
    assert not inspect.iscoroutinefunction(sync_call)
    assert inspect.signature(async_call) == inspect.signature(sync_call)
    assert sync_call.__doc__
    assert async_call.__doc__
