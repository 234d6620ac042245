"""The board as its readers see it: the dashboard's views, the metrics, the listings of
the result server and the journal's recorder and snapshots.

Read-only: nothing here changes the board, and a task read through it leaves the result
cache's statistics and LRU order alone (``count=False``). Readers get numbers, snapshots
and mappings typed read-only, never the board's parts to reach into, so the board may
change how it keeps its state without its readers noticing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from fastworker_control_plane.core import queue_controls
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.board_types import BoardConfig
from fastworker_control_plane.core.dead_letters import Kept
from fastworker_control_plane.core.limits import Scope, Setting
from fastworker_control_plane.core.listing import Listing
from fastworker_control_plane.core.periodic import PeriodicState
from fastworker_control_plane.core.queue_views import limit_infos, queue_infos, waiting_on_limits
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.result_cache import CacheStats
from fastworker_control_plane.core.stats import TaskStats
from fastworker_protocol import (
    LimitInfo,
    Priority,
    QueueInfo,
    ScheduleInfo,
    ScheduleSpec,
    TaskResult,
    TaskSignature,
    TaskState,
    WorkerInfo,
    WorkerState,
)


class BoardView:
    def __init__(self, board: TaskBoard) -> None:
        self._board = board

    @property
    def config(self) -> BoardConfig:
        return self._board.config

    # --- tasks ---------------------------------------------------------------------------

    def task(self, task_id: str, now: float) -> TaskRecord | None:
        """A live task, or a final one still kept (not to be changed)."""
        return self._board.record(task_id, now, count=False)

    def list_tasks(self, status: TaskState | None, limit: int, now: float) -> list[TaskResult]:
        return self._board.list_tasks(status, limit, now)

    def task_listing(self, status: TaskState | None, limit: int, now: float) -> Listing:
        return self._board.task_listing(status, limit, now)

    def live_records(self) -> list[TaskRecord]:
        """Every live task (what a journal snapshot writes)."""
        return self._board.live_records()

    def __len__(self) -> int:
        """Live (not final) tasks."""
        return len(self._board)

    def next_limit_due(self, now: float) -> float | None:
        """When a spent rate limit next lets a queued task go (``None``: none waits)."""
        return queue_controls.next_limit_due(self._board, now)

    def waiting_for_time(self) -> int:
        return self._board.waiting_for_time()

    def depth(self, priority: Priority) -> int:
        """Tasks queued at ``priority``, in every queue."""
        return self._board.queues.depth(priority)

    @property
    def stats(self) -> TaskStats:
        """The task counters and histograms (to read)."""
        return self._board.stats

    @property
    def idempotency_keys(self) -> int:
        return len(self._board.store.keys)

    # --- results and dead letters --------------------------------------------------------

    @property
    def results(self) -> int:
        return len(self._board.results)

    @property
    def results_bytes(self) -> int:
        return self._board.results.bytes

    @property
    def results_max_bytes(self) -> int:
        return self._board.results.max_bytes

    @property
    def result_ttl(self) -> float:
        """How long a result is kept when its task says nothing else."""
        return self._board.results.ttl

    @property
    def results_stats(self) -> CacheStats:
        return self._board.results.stats

    def kept_results(self, now: float) -> list[TaskRecord]:
        """The final tasks kept at ``now`` (what a journal snapshot writes)."""
        return self._board.results.values(now)

    @property
    def dead_letter_count(self) -> int:
        return len(self._board.dead_letters)

    @property
    def dead_letters_bytes(self) -> int:
        return self._board.dead_letters.bytes

    @property
    def dead_letters_max_bytes(self) -> int:
        return self._board.dead_letters.max_bytes

    def dead_letter(self, task_id: str) -> Kept | None:
        """The dead letter of that id, expired or not (the journal writes what was added)."""
        return self._board.dead_letters.peek(task_id)

    def dead_letters(self) -> list[Kept]:
        """Every dead letter, oldest first."""
        return self._board.dead_letters.letters()

    # --- workers -------------------------------------------------------------------------

    def list_workers(self, now: float) -> list[WorkerInfo]:
        return self._board.list_workers(now)

    @property
    def workers(self) -> int:
        return len(self._board.workers)

    def in_flight(self) -> int:
        """Tasks held by subworkers, all told."""
        return sum(len(slot.in_flight) for slot in self._board.workers)

    def worker_states(self) -> Counter[WorkerState]:
        return Counter(slot.state for slot in self._board.workers)

    # --- queues, limits and controls -----------------------------------------------------

    def queue_infos(self, now: float, *, with_default: bool = False) -> list[QueueInfo]:
        return queue_infos(self._board, now, with_default=with_default)

    def limit_infos(self, now: float) -> list[LimitInfo]:
        return limit_infos(self._board, now)

    def waiting_on_limits(self, now: float) -> Counter[tuple[str, str]]:
        return waiting_on_limits(self._board, now)

    def is_paused(self, queue: str) -> bool:
        return queue in self._board.queues.paused

    def paused(self) -> list[str]:
        return sorted(self._board.queues.paused)

    def limit_settings(self) -> Mapping[tuple[Scope, str], Setting]:
        """The limits changed at run time (kept in the journal)."""
        return self._board.limits.settings

    @property
    def controls_version(self) -> int:
        """Bumped when a pause or a limit changes."""
        return self._board.controls_version

    # --- tasks known, schedules ----------------------------------------------------------

    @property
    def signatures(self) -> Mapping[str, TaskSignature]:
        return self._board.catalog.signatures

    def known_task_names(self) -> list[str]:
        return self._board.known_task_names()

    def schedule_infos(self) -> list[ScheduleInfo]:
        return self._board.schedules.infos()

    @property
    def schedules_version(self) -> int:
        """Bumped when a run-time schedule is made, replaced or dropped."""
        return self._board.schedules.version

    def schedule_definitions(self) -> Mapping[str, ScheduleSpec]:
        """The run-time schedules, by name."""
        return self._board.schedules.defined

    def periodic_states(self) -> Iterator[PeriodicState]:
        """The progress of every active periodic schedule."""
        return (periodic.state() for periodic in self._board.schedules.active.values())

    def saved_periodic_states(self) -> list[PeriodicState]:
        """Progress from the journal of schedules not declared again yet."""
        return list(self._board.schedules.saved.values())
