"""The union of every top-level message: what the codec decodes, tagged by ``op``.

Its own module because the workflow messages (``workflows``) build on ``messages``; both
feed this one.
"""

from __future__ import annotations

from fastworker_protocol.messages import (
    Accepted,
    Ack,
    Announce,
    Assign,
    Cancel,
    Cancelled,
    Drain,
    Error,
    Fetch,
    Get,
    LimitList,
    ListLimits,
    ListQueues,
    ListSchedules,
    ListTasks,
    ListWorkers,
    Message,
    Probe,
    QueueActed,
    QueueAction,
    QueueList,
    Register,
    Registered,
    Report,
    Results,
    ScheduleList,
    SetLimit,
    Submit,
    TaskList,
    Unregister,
    WorkerList,
)
from fastworker_protocol.operations import (
    AddSchedule,
    FailedList,
    FailedPurged,
    FailedRetried,
    ListFailed,
    PurgeFailed,
    RemoveSchedule,
    RetryFailed,
    ScheduleAdded,
    ScheduleRemoved,
)
from fastworker_protocol.workflows import (
    CancelWorkflow,
    GetWorkflow,
    SubmitWorkflow,
    WorkflowAccepted,
    WorkflowCancelled,
    WorkflowInfo,
)

AnyMessage = (
    Submit | Get | Cancel | ListTasks | ListWorkers | ListSchedules
    | ListQueues | QueueAction | ListLimits | SetLimit
    | SubmitWorkflow | GetWorkflow | CancelWorkflow
    | ListFailed | RetryFailed | PurgeFailed | AddSchedule | RemoveSchedule
    | Register | Fetch | Report | Drain | Unregister
    | Accepted | Results | Cancelled | TaskList | WorkerList | ScheduleList
    | QueueList | QueueActed | LimitList | Registered | Assign
    | WorkflowAccepted | WorkflowInfo | WorkflowCancelled
    | FailedList | FailedRetried | FailedPurged | ScheduleAdded | ScheduleRemoved
    | Ack | Error
    | Announce | Probe
)  # fmt: skip

ALL_MESSAGES: tuple[type[Message], ...] = AnyMessage.__args__
OPS: frozenset[str] = frozenset(str(m.__struct_config__.tag) for m in ALL_MESSAGES)
