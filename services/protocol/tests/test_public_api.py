"""The package's public names and the parts of the wire contract that must never drift."""

from __future__ import annotations

import ast
import builtins
import pickle
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

import fastworker_protocol as fp

EXPECTED_PUBLIC_NAMES = {
    "ALL_MESSAGES", "DEFAULT_BASE_PORT", "DEFAULT_DISCOVERY_ADDRESS", "DEFAULT_DISCOVERY_PORT",
    "DEFAULT_HTTP_PORT", "DEFAULT_MAX_MESSAGE_SIZE", "FINAL_TASK_STATES", "MAX_NESTING",
    "MAX_TIMESTAMP", "PROTOCOL_VERSION",
    "TASK_TRANSITIONS", "TERMINAL_TASK_STATES", "WORKER_TRANSITIONS",
    "Accepted", "Ack", "Announce", "AnyMessage", "Assign", "Assignment", "Cancel", "Cancelled",
    "Codec", "DecodeError", "Drain", "EncodeError", "Error", "ErrorCode", "FailureReason",
    "Fetch", "Get",
    "InvalidMessage", "InvalidTransition", "ListSchedules", "ListTasks", "ListWorkers",
    "MalformedMessage",
    "Message", "Outcome", "OversizeMessage", "Param", "PortMap", "Priority", "Probe",
    "ProtocolError", "Register", "Registered", "Rejection", "Report", "Results", "ScheduleInfo",
    "ScheduleList", "Submit",
    "TaskError",
    "TaskEvent", "TaskList", "TaskResult", "TaskSignature", "TaskSpec", "TaskState", "UnknownOp",
    "Unregister", "UnsupportedVersion", "WorkerEvent", "WorkerInfo", "WorkerList", "WorkerState",
    "check_portable", "message_op",
    "nesting_depth", "next_task_state", "next_worker_state", "tcp_address",
    # named queues and limits (issue 17)
    "DEFAULT_QUEUE", "Rate", "check_queue", "check_rate", "parse_queues", "LimitInfo",
    "LimitList", "ListLimits", "ListQueues", "QueueAction", "QueueActed", "QueueInfo",
    "QueueList", "SetLimit",
    # workflows (issue 21)
    "MAX_EDGES", "MAX_LINKS", "MAX_PARENTS", "MAX_STEPS", "CancelWorkflow", "Feed",
    "GetWorkflow", "OnFailure", "StepInfo", "StepState", "SubmitWorkflow", "WorkflowAccepted",
    "WorkflowCancelled", "WorkflowInfo", "WorkflowState", "WorkflowStep",
    # dead letters and schedules at run time (issue 22)
    "MAX_FAILED_ACTED", "MAX_FAILED_LISTED", "AddSchedule", "DeadLetter", "FailedFilter",
    "FailedList", "FailedPurged", "FailedRetried", "ListFailed", "PurgeFailed",
    "RemoveSchedule", "Retried", "RetryFailed", "ScheduleAdded", "ScheduleRemoved",
    "ScheduleSpec",
    # values of registered types (issue 34)
    "BUILTIN_CODES", "USER_CODES", "VALUE_TYPES", "ValueType", "ValueTypeError", "ValueTypes",
    "describe_ext", "portable_form", "register_type",
}  # fmt: skip

OPS = {
    fp.Submit: "submit", fp.Get: "get", fp.Cancel: "cancel", fp.ListTasks: "list_tasks",
    fp.ListWorkers: "list_workers", fp.Register: "register", fp.Fetch: "fetch",
    fp.Report: "report", fp.Drain: "drain", fp.Unregister: "unregister",
    fp.Accepted: "accepted", fp.Results: "results", fp.Cancelled: "cancelled",
    fp.TaskList: "tasks", fp.WorkerList: "workers", fp.Registered: "registered",
    fp.Assign: "assign", fp.Ack: "ack", fp.Error: "error", fp.Announce: "announce",
    fp.Probe: "probe", fp.ListSchedules: "list_schedules", fp.ScheduleList: "schedules",
    fp.ListQueues: "list_queues", fp.QueueList: "queues", fp.QueueAction: "queue_action",
    fp.QueueActed: "queue_acted", fp.ListLimits: "list_limits", fp.SetLimit: "set_limit",
    fp.LimitList: "limits", fp.SubmitWorkflow: "submit_workflow",
    fp.WorkflowAccepted: "workflow_accepted", fp.GetWorkflow: "get_workflow",
    fp.WorkflowInfo: "workflow_info", fp.CancelWorkflow: "cancel_workflow",
    fp.WorkflowCancelled: "workflow_cancelled", fp.ListFailed: "list_failed",
    fp.FailedList: "failed_list", fp.RetryFailed: "retry_failed",
    fp.FailedRetried: "failed_retried", fp.PurgeFailed: "purge_failed",
    fp.FailedPurged: "failed_purged", fp.AddSchedule: "add_schedule",
    fp.ScheduleAdded: "schedule_added", fp.RemoveSchedule: "remove_schedule",
    fp.ScheduleRemoved: "schedule_removed",
}  # fmt: skip

ERROR_CODES = {
    "malformed", "oversize", "invalid_message", "unknown_op", "wrong_port",
    "unsupported_version", "unknown_task", "invalid_arguments", "task_not_found",
    "unknown_worker", "shutting_down", "queue_full", "unauthorized", "unavailable", "internal",
}  # fmt: skip

FAILURE_REASONS = {
    "exception", "retry", "unserializable_result", "timeout", "cancelled", "interrupted",
    "worker_lost", "worker_crashed",
}  # fmt: skip

CODEC = fp.Codec()


def _required(message_type: type[fp.Message]) -> dict[str, Any]:
    """Placeholder values for required fields (encoding does not validate them)."""
    info = msgspec.inspect.type_info(message_type)
    assert isinstance(info, msgspec.inspect.StructType)
    return {f.name: None for f in info.fields if f.required}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(fp.__all__) == EXPECTED_PUBLIC_NAMES
    assert len(fp.__all__) == len(set(fp.__all__))


@pytest.mark.parametrize("name", sorted(EXPECTED_PUBLIC_NAMES))
def test_every_public_name_exists(name: str) -> None:
    assert getattr(fp, name) is not None


def test_the_protocol_is_version_1_with_a_16_mib_frame_limit() -> None:
    assert fp.PROTOCOL_VERSION == 1
    assert fp.DEFAULT_MAX_MESSAGE_SIZE == 16 * 1024 * 1024
    assert fp.Codec().max_message_size == fp.DEFAULT_MAX_MESSAGE_SIZE


def test_all_messages_are_exactly_the_tagged_message_types() -> None:
    assert set(fp.ALL_MESSAGES) == set(OPS)
    assert set(fp.AnyMessage.__args__) == set(OPS)


@pytest.mark.parametrize(("message_type", "op"), OPS.items(), ids=OPS.values())
def test_message_op_returns_the_tag_of_a_message_type_and_of_its_instances(
    message_type: type[fp.Message], op: str
) -> None:
    message = message_type(**_required(message_type))
    assert fp.message_op(message_type) == fp.message_op(message) == op
    assert msgspec.msgpack.decode(CODEC.encode(message))["op"] == op


@pytest.mark.parametrize("message_type", OPS, ids=OPS.values())
def test_every_message_carries_the_protocol_version_and_is_immutable(
    message_type: type[fp.Message],
) -> None:
    message = message_type(**_required(message_type))
    assert message.v == fp.PROTOCOL_VERSION
    with pytest.raises(AttributeError):
        message.v = 2


def test_error_codes_are_the_stable_wire_strings() -> None:
    assert {code.value for code in fp.ErrorCode} == ERROR_CODES
    assert all(code == code.value for code in fp.ErrorCode)


def test_failure_reasons_are_the_stable_wire_strings() -> None:
    assert {reason.value for reason in fp.FailureReason} == FAILURE_REASONS
    assert fp.TaskError(type="E", message="m").reason == fp.FailureReason.EXCEPTION


def test_a_failure_reason_this_version_does_not_know_still_decodes_as_its_string() -> None:
    frame = {"op": "report", "worker_id": "w", "outcomes": [
        {"task_id": "t", "ok": False, "error": {"type": "E", "message": "m", "reason": "new"}}
    ]}  # fmt: skip
    decoded = CODEC.decode(msgspec.msgpack.encode(frame))
    assert isinstance(decoded, fp.Report)
    assert decoded.outcomes[0].error is not None
    assert decoded.outcomes[0].error.reason == "new"
    assert decoded.outcomes[0].retryable is None  # an older subworker leaves it out


@pytest.mark.parametrize(
    ("exception", "code"),
    [
        (fp.MalformedMessage, "malformed"),
        (fp.OversizeMessage, "oversize"),
        (fp.InvalidMessage, "invalid_message"),
        (fp.UnknownOp, "unknown_op"),
        (fp.UnsupportedVersion, "unsupported_version"),
    ],
)
def test_each_decode_error_carries_the_error_code_a_server_replies_with(
    exception: type[fp.DecodeError], code: str
) -> None:
    assert issubclass(exception, fp.DecodeError)
    assert exception.code == code


def test_every_protocol_exception_descends_from_protocol_error() -> None:
    assert issubclass(fp.DecodeError, fp.ProtocolError)
    assert issubclass(fp.EncodeError, fp.ProtocolError)
    assert not issubclass(fp.EncodeError, fp.DecodeError)
    assert issubclass(fp.InvalidTransition, ValueError)


def test_decode_as_returns_the_expected_reply_type() -> None:
    reply = fp.Results(results=[None])
    assert CODEC.decode_as(CODEC.encode(reply), fp.Results) == reply


def test_decode_as_rejects_a_reply_of_another_type_as_invalid() -> None:
    data = CODEC.encode(fp.Error(code=fp.ErrorCode.INTERNAL, message="boom"))
    with pytest.raises(fp.InvalidMessage, match="expected 'assign', got 'error'"):
        CODEC.decode_as(data, fp.Assign)


def test_unknown_fields_inside_nested_records_are_ignored() -> None:
    frame = {"op": "submit", "tasks": [{"name": "t", "colour": "red"}], "trace": {"a": 1}}
    decoded = CODEC.decode(msgspec.msgpack.encode(frame))
    assert decoded == fp.Submit(tasks=[fp.TaskSpec(name="t")])


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "submit", "v": 2, "jobs": []},
        {"op": "submit", "v": 2, "tasks": "x"},
        {"op": "new", "v": 2},
    ],
    ids=["renamed-field", "changed-type", "new-op"],
)
def test_a_version_2_frame_is_rejected_as_unsupported_whatever_its_fields(
    frame: dict[str, Any],
) -> None:
    with pytest.raises(fp.UnsupportedVersion):
        CODEC.decode(msgspec.msgpack.encode(frame))


class _Exploit:
    """Unpickling this runs code: the classic pickle exploit."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, ("import builtins; builtins.fastworker_pwned = True",))


def test_a_pickle_inside_an_ext_or_bin_value_is_never_unpickled() -> None:
    payload = pickle.dumps(_Exploit())
    args = [msgspec.msgpack.Ext(1, payload), payload, {"p": payload}]
    frame = {"op": "submit", "tasks": [{"name": "t", "args": args}]}
    message = CODEC.decode(msgspec.msgpack.encode(frame))
    assert isinstance(message, fp.Submit)
    assert message.tasks[0].args[1:] == [payload, {"p": payload}]
    assert not hasattr(builtins, "fastworker_pwned")


def test_the_package_imports_only_itself_msgspec_and_the_standard_library() -> None:
    imported = set()
    for source in Path(fp.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
    top_level = {name.split(".")[0] for name in imported} - set(sys.stdlib_module_names)
    assert top_level == {"fastworker_protocol", "msgspec"}


def test_the_package_ships_type_information() -> None:
    assert (Path(fp.__file__).parent / "py.typed").is_file()
