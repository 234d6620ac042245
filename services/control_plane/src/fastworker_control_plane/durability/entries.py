"""What the journal holds, and how it turns back into tasks: pure, no I/O.

One entry per task transition: ``Put`` writes a task whole (accepted, queued again,
waiting for a time), ``Step`` notes it handed to or started by a subworker, ``Done``
writes it final with its result; ``Tick`` keeps a periodic task's progress. ``Dead``
writes a task that failed for good as a dead letter, with its arguments (its ``Done`` may
have let them go), ``DeadGone`` the dead letters retried or purged. Replaying
the entries in order leaves each task's latest state, which is all recovery needs.
Workflows' records (``core/workflow_records``) share the journal; they are kept in order
for ``WorkflowBook.restore``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fastworker_control_plane.core import runtime_schedules
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.board_types import Change
from fastworker_control_plane.core.board_view import BoardView
from fastworker_control_plane.core.limits import Scope, Setting
from fastworker_control_plane.core.periodic import PeriodicState
from fastworker_control_plane.core.workflow_records import WorkflowRecord
from fastworker_control_plane.durability.schema import (
    Controls,
    Dead,
    DeadGone,
    Done,
    Entry,
    Put,
    ScheduleDefined,
    ScheduleDropped,
    Step,
    StoredDead,
    StoredLimit,
    StoredPeriodic,
    StoredSchedule,
    StoredTask,
    Tick,
    dead_letter,
    periodic_state,
    schedule_spec,
    stored_dead,
    stored_periodic,
    stored_schedule,
    stored_task,
    task_record,
)
from fastworker_protocol import ScheduleSpec, TaskState

_STEPS = (TaskState.ASSIGNED, TaskState.RUNNING)
GONE_PER_ENTRY = 10_000  # dead-letter ids per DeadGone entry


class Recorder:
    """Turns the board's transitions into entries, as they happen, reading the rest of
    what changed (periodic progress, controls, run-time schedules) through ``view``.

    Each change carries its task's record, so a task that finished and left the result
    cache before the entries were made is still written final (reading it back from the
    cache would miss it, and the task would run again after a restart).
    """

    def __init__(self, view: BoardView) -> None:
        self._view = view
        self._periodics: dict[str, PeriodicState] = {}  # as last written
        self.controls_version = 0  # the board's ``controls_version`` last written
        self._defined: dict[str, ScheduleSpec] = {}  # run-time schedules, as last written
        self.schedules_version = 0  # the board's ``schedules_version`` last written

    def behind(self) -> bool:
        """Whether the board has changes not yet made entries of (beyond transitions)."""
        view = self._view
        return (
            view.controls_version != self.controls_version
            or view.schedules_version != self.schedules_version
        )

    def entries(self, changes: Iterable[Change], gone: Sequence[str] = ()) -> list[Entry]:
        """The entries for ``changes`` and the dead letters ``gone`` (retried or purged),
        and for what else changed on the board since the last call."""
        view = self._view
        entries: list[Entry] = []
        done: set[str] = set()  # a task failed and retried within the batch: one Done
        for change in changes:
            if change.state in _STEPS:
                entries.append(
                    Step(
                        task_id=change.task_id,
                        state=change.state,
                        attempts=change.attempts,
                        worker_id=change.worker_id,
                    )
                )
            record = change.record
            if record is None or change.state in _STEPS:
                continue
            if not change.state.is_final:
                if not record.state.is_final:  # else its Done comes later in this batch
                    entries.append(Put(task=stored_task(record)))
            elif record.state.is_final and record.id not in done:  # not retrying
                done.add(record.id)
                entries.append(Done(task=stored_task(record)))
                if record.state == TaskState.FAILURE:
                    letter = view.dead_letter(record.id)
                    if letter is not None:
                        entries.append(Dead(letter=stored_dead(letter)))
        if view.schedules_version != self.schedules_version:
            self.schedules_version = view.schedules_version
            entries += self._definitions(view.schedule_definitions())
        for state in view.periodic_states():
            if self._periodics.get(state.name) != state:
                self._periodics[state.name] = state
                entries.append(Tick(periodic=stored_periodic(state)))
        if view.controls_version != self.controls_version:
            self.controls_version = view.controls_version
            entries.append(controls(view))
        for at in range(0, len(gone), GONE_PER_ENTRY):  # a purge of 100,000: ten entries
            entries.append(DeadGone(task_ids=list(gone[at : at + GONE_PER_ENTRY])))
        return entries

    def _definitions(self, defined: Mapping[str, ScheduleSpec]) -> list[Entry]:
        """The run-time schedules made, replaced or dropped since last written; each one's
        progress is written again after (a definition starts it afresh on replay)."""
        entries: list[Entry] = []
        for name in [n for n in self._defined if n not in defined]:
            del self._defined[name]
            self._periodics.pop(name, None)
            entries.append(ScheduleDropped(name=name))
        for name, spec in defined.items():
            if self._defined.get(name) is not spec:
                self._defined[name] = spec
                self._periodics.pop(name, None)
                entries.append(ScheduleDefined(schedule=stored_schedule(spec)))
        return entries


def controls(view: BoardView) -> Controls:
    return Controls(
        paused=view.paused(),
        limits=[
            StoredLimit(scope=str(scope), name=name, rate=s.rate, concurrency=s.concurrency)
            for (scope, name), s in sorted(view.limit_settings().items())
        ],
    )


def snapshot(board: TaskBoard, now: float) -> list[Entry]:
    """The board's whole durable state as entries: what a compacted journal holds."""
    view = BoardView(board)
    kept = sorted(view.kept_results(now), key=lambda r: r.finished_at or 0.0)
    periodics = [*view.periodic_states(), *view.saved_periodic_states()]
    defined = view.schedule_definitions().values()
    return [
        *(Done(task=stored_task(record)) for record in kept),
        *(Put(task=stored_task(record)) for record in view.live_records()),
        *(ScheduleDefined(schedule=stored_schedule(spec)) for spec in defined),  # then Ticks
        *(Tick(periodic=stored_periodic(state)) for state in periodics),
        *([controls(view)] if view.paused() or view.limit_settings() else []),
        *(Dead(letter=stored_dead(letter)) for letter in view.dead_letters()),
    ]


@dataclass
class Recovered:
    """The latest state of every task and periodic schedule the journal names, and the
    workflow records in journal order (``WorkflowBook.restore`` replays them)."""

    live: dict[str, StoredTask] = field(default_factory=dict)
    final: dict[str, StoredTask] = field(default_factory=dict)
    periodics: dict[str, StoredPeriodic] = field(default_factory=dict)
    schedules: dict[str, StoredSchedule] = field(default_factory=dict)  # made at run time
    controls: Controls = field(default_factory=Controls)
    dead: dict[str, StoredDead] = field(default_factory=dict)
    workflows: list[WorkflowRecord] = field(default_factory=list)
    # Run-time schedules ``restore`` could not make again (their time zone is gone).
    dropped_schedules: list[str] = field(default_factory=list)

    def apply(self, entry: Entry) -> None:
        match entry:
            case Put(task=task):
                self.final.pop(task.id, None)
                self.live[task.id] = task
            case Step(task_id=task_id, state=state, attempts=attempts, worker_id=worker_id):
                held = self.live.get(task_id)
                if held is not None:
                    held.state, held.attempts, held.worker_id = state, attempts, worker_id
            case Done(task=task):
                self.live.pop(task.id, None)
                self.final[task.id] = task
            case Tick(periodic=state):
                self.periodics[state.name] = state
            case ScheduleDefined(schedule=schedule):
                self.schedules[schedule.name] = schedule
                self.periodics.pop(schedule.name, None)
            case ScheduleDropped(name=name):
                self.schedules.pop(name, None)
                self.periodics.pop(name, None)
            case Controls():
                self.controls = entry
            case Dead(letter=letter):
                self.dead[letter.id] = letter
            case DeadGone(task_ids=task_ids):
                for task_id in task_ids:
                    self.dead.pop(task_id, None)
            case _:
                self.workflows.append(entry)

    def restore(self, board: TaskBoard, now: float) -> int:
        """Put everything back on ``board``; returns how many tasks a subworker held when
        the control plane stopped (in doubt until it says whether it still holds them)."""
        view = BoardView(board)
        for task in sorted(self.final.values(), key=lambda t: t.finished_at or 0.0):
            ttl = view.result_ttl if task.result_ttl is None else task.result_ttl
            if (task.finished_at or 0.0) + ttl > now:
                board.keep(task_record(task))
        # Oldest first, through the store's own bounds: expired ones are not kept.
        for letter in sorted(self.dead.values(), key=lambda d: d.failed_at):
            board.dead_letters.add(dead_letter(letter), now)
        in_doubt = 0
        for task in sorted(self.live.values(), key=lambda t: t.seq):  # in queue order
            in_doubt += task.state in _STEPS
            board.adopt(task_record(task), now)
        board.schedules.save([periodic_state(p) for p in self.periodics.values()])
        specs = [schedule_spec(s) for s in self.schedules.values()]
        # Each takes its progress from saved
        self.dropped_schedules = runtime_schedules.restore(board, specs, now)
        board.restore_controls(
            self.controls.paused,
            {
                (Scope(limit.scope), limit.name): Setting(limit.rate, limit.concurrency)
                for limit in self.controls.limits
            },
        )
        return in_doubt
