"""The board's store: every task it knows, live or final, and the keys that lead to them.

Live (not final) tasks are held by id and counted per priority (the ``queue_full``
bound); final ones are in the result cache for reads and the dashboard; idempotency
keys map a submission back to the task it stands for. No policy lives here: what a task
may do next is the board's and its policies' to decide.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from itertools import islice

from fastworker_control_plane.core.board_types import MESSAGE_OVERHEAD, BoardConfig
from fastworker_control_plane.core.idempotency import IdempotencyKeys
from fastworker_control_plane.core.listing import Listing, fit, listed
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.result_cache import ResultCache
from fastworker_protocol import Priority, TaskResult, TaskSpec, TaskState

WAITING_FOR_TIME = (TaskState.SCHEDULED, TaskState.RETRYING)


class TaskStore:
    def __init__(self, config: BoardConfig) -> None:
        self._config = config
        self._tasks: dict[str, TaskRecord] = {}
        self._live: dict[Priority, int] = dict.fromkeys(Priority, 0)
        # Finished tasks for reads and the dashboard (see ``keep_final``).
        self.results: ResultCache[TaskRecord] = ResultCache(
            config.result_max_size, config.result_ttl, config.result_max_bytes
        )
        self.keys = IdempotencyKeys()

    # --- live tasks ----------------------------------------------------------------------

    def add(self, record: TaskRecord) -> None:
        self._tasks[record.id] = record
        self._live[record.priority] += 1

    def remove(self, record: TaskRecord) -> None:
        del self._tasks[record.id]
        self._live[record.priority] -= 1

    def live(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    @property
    def tasks(self) -> Mapping[str, TaskRecord]:
        """The live tasks by id, to read."""
        return self._tasks

    def live_count(self, priority: Priority) -> int:
        """Live tasks of ``priority``."""
        return self._live[priority]

    def live_records(self) -> list[TaskRecord]:
        return list(self._tasks.values())

    def waiting_for_time(self) -> int:
        """Tasks waiting for an ETA or a retry backoff (counted, not tracked: O(live))."""
        return sum(1 for r in self._tasks.values() if r.state in WAITING_FOR_TIME)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    # --- idempotency ---------------------------------------------------------------------

    def known(self, task_id: str, now: float) -> bool:
        """A live task or a kept result: submitting it again queues nothing."""
        return bool(task_id) and (
            task_id in self._tasks or self.results.peek(task_id, now) is not None
        )

    def existing(self, spec: TaskSpec, now: float) -> str | None:
        """The id of the known task ``spec`` stands for (by id, then by key), if any."""
        if self.known(spec.id, now):
            return spec.id
        task_id = self.keys.get(spec)
        return task_id if task_id is not None and self.known(task_id, now) else None

    def remember_key(self, record: TaskRecord, now: float | None = None) -> None:
        """Note ``record``'s idempotency key; with ``now``, prune keys of tasks gone."""
        if record.idempotency_key is None:
            return
        known = None if now is None else partial(self.known, now=now)
        self.keys.remember(record.name, record.idempotency_key, record.id, known)

    def forget_stale_keys(self, now: float) -> int:
        """Drop idempotency keys whose task is gone (result expired or evicted)."""
        return self.keys.forget(lambda task_id: not self.known(task_id, now))

    # --- final tasks ---------------------------------------------------------------------

    def keep_final(self, record: TaskRecord, finished_at: float) -> None:
        """Keep a final task for reads, at its encoded size, without its arguments unless
        configured (it never runs again; kept whole, 40 x 16 MB arguments took 900 MB)."""
        if not self._config.result_keep_arguments:
            record.drop_arguments()
        self.results.put(record.id, record, finished_at, record.encoded_size(), record.result_ttl)

    # --- reads ---------------------------------------------------------------------------

    def get(self, task_id: str, now: float) -> TaskResult | None:
        record = self._tasks.get(task_id)
        if record is not None:
            return record.snapshot()
        record = self.results.get(task_id, now)
        return None if record is None else record.final or record.snapshot()

    def record(self, task_id: str, now: float, *, count: bool = True) -> TaskRecord | None:
        """A live task, or a finished one still in the result cache (not to be changed);
        ``count=False`` reads the cache without touching its statistics or LRU order."""
        record = self._tasks.get(task_id)
        if record is not None:
            return record
        return self.results.get(task_id, now) if count else self.results.peek(task_id, now)

    def list_tasks(self, status: TaskState | None, limit: int, now: float) -> list[TaskResult]:
        """Most recent first: live tasks, then cached results."""
        return list(islice(self._listed(status, now), max(0, limit)))

    def task_listing(self, status: TaskState | None, limit: int, now: float) -> Listing:
        """``list_tasks`` cut to fit one reply message (``core/listing``)."""
        budget = self._config.max_message_size - MESSAGE_OVERHEAD
        return fit(self._listed(status, now), limit, budget)

    def _listed(self, status: TaskState | None, now: float) -> Iterator[TaskResult]:
        return listed(self._tasks, self.results, status, now)
