"""Writes the golden journal ``format-2.journal`` beside this file, deterministically,
through the control plane's own ``Journal`` (so its bytes are what the code writes):

    uv run python services/control_plane/tests/data/journal/golden.py

Only run it for a new format version (with a new file name): the checked-in file is what
test_journal_golden.py holds every later version of the code to, byte for byte.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from fastworker_control_plane.core.periodic import PeriodicState
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.durability.schema import (
    Done,
    Entry,
    Put,
    Step,
    Tick,
    stored_periodic,
    stored_task,
)
from fastworker_protocol import Priority, TaskError, TaskState

HERE = Path(__file__).parent
FILE = HERE / "format-2.journal"

FAILED = TaskError(type="ValueError", message="bad", traceback="Traceback ...", reason="exception")
EVERY_FIELD = TaskRecord(
    id="t-every-field",
    name="reports.build",
    priority=Priority.HIGH,
    args=[1, 2.5, "three", None, True, [4, [5]], {"six": 6}, b"\x00\x07"],
    kwargs={"region": "eu", "limit": 10},
    headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    submitted_at=1_700_000_000.25,
    queued_at=1_700_000_001.5,
    size=321,
    state=TaskState.RETRYING,
    attempts=2,
    worker_id="w-1",
    started_at=1_700_000_002.0,
    finished_at=None,
    result=None,
    error=None,
    eta=1_700_000_100.0,
    max_retries=5,
    time_limit=30.0,
    retries=1,
    lost=3,
    returned=4,
    attempt_errors=[FAILED],
    idempotency_key="order-7",
    seq=42,
)
MINIMAL = TaskRecord(
    id="t-minimal",
    name="add",
    priority=Priority.NORMAL,
    args=[],
    kwargs={},
    headers={},
    submitted_at=1_700_000_000.0,
    state=TaskState.QUEUED,
)
SUCCEEDED = TaskRecord(
    id="t-succeeded",
    name="add",
    priority=Priority.LOW,
    args=[],
    kwargs={},
    headers={},
    submitted_at=1_700_000_000.0,
    state=TaskState.SUCCESS,
    attempts=1,
    worker_id="w-2",
    started_at=1_700_000_003.0,
    finished_at=1_700_000_004.0,
    result={"sum": 3, "parts": [1, 2]},
    arguments_kept=False,
)
FAILURE = TaskRecord(
    id="t-failed",
    name="explode",
    priority=Priority.CRITICAL,
    args=["boom"],
    kwargs={},
    headers={},
    submitted_at=1_700_000_000.0,
    state=TaskState.FAILURE,
    attempts=1,
    finished_at=1_700_000_005.0,
    error=TaskError(type="WorkerLost", message="lost 4 times", reason="worker_lost"),
)
PERIODIC = PeriodicState(
    name="tick",
    spec="every 60 s",
    next_run=1_700_000_060.0,
    last_run=1_700_000_000.0,
    times_run=3,
    skipped=1,
    current="t-tick-3",
)
STEPS = [
    Step(task_id="t-minimal", state=TaskState.ASSIGNED, attempts=1, worker_id="w-1"),
    Step(task_id="t-minimal", state=TaskState.RUNNING, attempts=1, worker_id="w-1"),
]


def batches() -> list[list[Entry]]:
    """What the golden journal holds, one list per frame."""
    return [
        [Put(task=stored_task(EVERY_FIELD)), Put(task=stored_task(MINIMAL))],
        list(STEPS),
        [Done(task=stored_task(SUCCEEDED)), Done(task=stored_task(FAILURE))],
        [Tick(periodic=stored_periodic(PERIODIC))],
    ]


async def write(directory: Path) -> bytes:
    """The journal the current code writes for ``batches()``, as bytes."""
    journal = Journal(directory)
    journal.load()
    journal.start(list)
    for batch in batches():
        journal.append(batch)
        await journal.flushed()
    await journal.close()
    return (directory / "journal").read_bytes()


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        FILE.write_bytes(asyncio.run(write(Path(tmp))))
    print(f"wrote {FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
