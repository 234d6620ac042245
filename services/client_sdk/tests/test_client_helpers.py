"""The client's pure parts: addresses, unwrapping results, the error tree, argument checks."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker import (
    BatchItem,
    Client,
    ControlPlaneUnavailable,
    FastWorkerError,
    InvalidArguments,
    Priority,
    RequestRejected,
    Task,
    TaskCancelled,
    TaskError,
    TaskFailed,
    TaskNotFound,
    TaskResult,
    TaskStatus,
    Timeout,
    UnknownTask,
    unwrap,
)
from fastworker._calls import announce_from_base, batch_item, priority_of, task_spec
from fastworker_common.errors import rejection
from fastworker_protocol import ErrorCode


def test_a_base_address_gives_four_submission_ports_then_results_then_registration() -> None:
    announce = announce_from_base("tcp://h:5555")

    assert announce.submit == [f"tcp://h:{p}" for p in (5555, 5556, 5557, 5558)]
    assert announce.results == "tcp://h:5559"
    assert announce.registration == "tcp://h:5560"


def test_an_ipv6_base_address_keeps_its_brackets() -> None:
    announce = announce_from_base("tcp://[::1]:6000")

    assert announce.submit[0] == "tcp://[::1]:6000"
    assert announce.submit[3] == "tcp://[::1]:6003"
    assert announce.results == "tcp://[::1]:6004"
    assert announce.registration == "tcp://[::1]:6005"


@pytest.mark.parametrize(
    "address",
    [
        "h:5555",
        "http://h:5555",
        "tcp://h",
        "tcp://h:",
        "tcp://:5555",
        "tcp://h:port",
        "tcp://h:-1",
        "tcp://h:0",
        "tcp://h:65531",
        "",
    ],
)
def test_a_bad_base_address_is_refused(address: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - several messages, all ValueError
        announce_from_base(address)


def test_an_empty_bracketed_host_is_refused() -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        announce_from_base("tcp://[]:5555")


def result(status: TaskStatus, **fields: Any) -> TaskResult:
    return TaskResult(task_id="t1", name="add", status=status, **fields)


def test_unwrap_returns_the_value_of_a_success() -> None:
    assert unwrap(result(TaskStatus.SUCCESS, result={"sum": 3})) == {"sum": 3}
    assert unwrap(result(TaskStatus.SUCCESS)) is None


def test_unwrap_raises_task_failed_carrying_the_remote_exception() -> None:
    error = TaskError(type="KeyError", message="'x'", traceback="Traceback...", reason="exception")

    with pytest.raises(TaskFailed) as caught:
        unwrap(result(TaskStatus.FAILURE, error=error))

    failed = caught.value
    assert (failed.task_id, failed.remote_type, failed.remote_message) == ("t1", "KeyError", "'x'")
    assert (failed.remote_traceback, failed.reason) == ("Traceback...", "exception")
    assert "t1" in str(failed)
    assert "KeyError" in str(failed)


def test_unwrap_reports_a_lost_worker_as_the_failure_reason() -> None:
    error = TaskError(type="WorkerLost", message="gone", reason="worker_lost")

    with pytest.raises(TaskFailed) as caught:
        unwrap(result(TaskStatus.FAILURE, error=error))

    assert caught.value.reason == "worker_lost"


def test_unwrap_raises_task_cancelled_for_a_cancelled_task() -> None:
    with pytest.raises(TaskCancelled) as caught:
        unwrap(result(TaskStatus.CANCELLED))

    assert caught.value.task_id == "t1"


def test_unwrap_of_a_task_that_is_not_final_is_a_timeout() -> None:
    with pytest.raises(Timeout, match="still running"):
        unwrap(result(TaskStatus.RUNNING))


@pytest.mark.parametrize(
    "error",
    [
        ControlPlaneUnavailable,
        Timeout,
        RequestRejected,
        UnknownTask,
        InvalidArguments,
        TaskNotFound,
        TaskFailed,
        TaskCancelled,
    ],
)
def test_every_sdk_error_is_a_fastworker_error(error: type[Exception]) -> None:
    assert issubclass(error, FastWorkerError)


def test_a_timeout_is_also_the_builtin_timeout_error() -> None:
    assert issubclass(Timeout, TimeoutError)
    with pytest.raises(TimeoutError):
        raise Timeout("too slow")


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (ErrorCode.UNKNOWN_TASK, UnknownTask),
        (ErrorCode.INVALID_ARGUMENTS, InvalidArguments),
        (ErrorCode.TASK_NOT_FOUND, TaskNotFound),
        (ErrorCode.SHUTTING_DOWN, RequestRejected),
        (ErrorCode.MALFORMED, RequestRejected),
        ("some_future_code", RequestRejected),
    ],
)
def test_a_rejection_maps_its_code_to_the_matching_error(
    code: str, expected: type[RequestRejected]
) -> None:
    error = rejection(code, "because")

    assert type(error) is expected
    assert (error.code, error.message) == (code, "because")
    assert str(error) == f"{code}: because"


@pytest.mark.parametrize(("timeout", "retries"), [(0, 3), (-1.0, 3), (1.0, -1)])
def test_a_client_with_no_time_or_negative_retries_is_refused(timeout: float, retries: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        Client(timeout=timeout, retries=retries)


async def test_calling_a_client_before_start_says_to_start_it() -> None:
    client = Client(address="tcp://127.0.0.1:5555")

    with pytest.raises(FastWorkerError, match="not started"):
        await client.get_task_result("t1")
    with pytest.raises(FastWorkerError, match="not started"):
        await client.apply_async("add", (1, 2))
    with pytest.raises(FastWorkerError, match="not started"):
        await client.cancel_task("t1")
    client.stop()  # harmless when never started


def test_task_status_members_equal_their_lowercase_names() -> None:
    assert str(TaskStatus.SUCCESS) == "success"
    assert "success" in {TaskStatus.SUCCESS}
    assert all(member == member.name.lower() for member in TaskStatus)
    assert TaskStatus("cancelled") is TaskStatus.CANCELLED


def test_a_spec_keeps_a_given_id_and_otherwise_generates_one() -> None:
    given = task_spec("add", (1, 2), {"z": 3}, "my-id")
    generated = task_spec("add", [], None, None)

    assert (given.id, given.name, given.args, given.kwargs) == ("my-id", "add", [1, 2], {"z": 3})
    assert len(generated.id) == 32
    assert generated.kwargs == {}


def test_the_priority_is_the_explicit_one_then_the_task_s_then_normal() -> None:
    urgent = Task(fn=print, name="urgent", priority=Priority.CRITICAL)

    assert priority_of("add", None) == Priority.NORMAL
    assert priority_of(urgent, None) == Priority.CRITICAL
    assert priority_of(urgent, "low") == Priority.LOW
    assert task_spec(urgent, (), None, None).name == "urgent"


def test_batch_items_may_be_items_tuples_or_mappings() -> None:
    item = BatchItem("add", (1, 2), {}, "high")

    assert batch_item(item) is item
    assert batch_item(("add", (1, 2), {}, "high")) == item
    assert batch_item({"task_name": "add", "args": (1, 2), "priority": "high"}) == item
    assert batch_item({"name": "add"}) == BatchItem("add")


def test_a_batch_mapping_without_a_task_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no task_name"):
        batch_item({"args": (1,)})


def test_the_discovery_address_comes_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FASTWORKER_DISCOVERY_ADDRESS", "tcp://10.0.0.5:6000")
    assert Client().discovery_address == "tcp://10.0.0.5:6000"
    assert Client("tcp://10.0.0.6:7000").discovery_address == "tcp://10.0.0.6:7000"
    monkeypatch.delenv("FASTWORKER_DISCOVERY_ADDRESS")
    assert Client().discovery_address == "tcp://127.0.0.1:5550"
