"""The control plane's dispatch cost with and without a backlog no worker can take.

Run ``uv run python -m bench.dispatch_cost``. In-process (no I/O): a ``TaskBoard`` with one
worker serving the ``default`` queue, 1,000 tasks for it, and in each case a backlog of
100,000 tasks it cannot take: in another queue, of a task name it does not run (same
queue), or parked on a concurrency key that is at its limit. It times dispatching and
finishing the 1,000 tasks, one dispatch round per task (the worst case: a worker with one
slot), and prints microseconds per task; the figure should not depend on the backlog.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from time import perf_counter

from fastworker_control_plane.core.board import TaskBoard
from fastworker_protocol import Outcome, Param, Priority, TaskSignature, TaskSpec

NOW = 1000.0
BACKLOG = 100_000
TASKS = 1_000


def _sig(name: str, queue: str = "default", **fields: object) -> TaskSignature:
    params = [Param(name="key", kind="POSITIONAL_OR_KEYWORD")]
    return TaskSignature(name=name, params=params, queue=queue, **fields)  # type: ignore[arg-type]


RUN = _sig("run")
OTHER_QUEUE = _sig("report", "reports")
OTHER_NAME = _sig("gpu")
KEYED = _sig("imp", concurrency_limit=1, concurrency_key="key")


def _board(backlog: Callable[[TaskBoard], None]) -> TaskBoard:
    board = TaskBoard()
    board.learn_tasks([RUN, OTHER_QUEUE, OTHER_NAME, KEYED])
    board.register("w", "bench", 1, [RUN, KEYED], NOW, queues={"default": 1})
    backlog(board)
    board.submit(
        [TaskSpec(name="run", id=f"t{i}", args=[i]) for i in range(TASKS)], Priority.LOW, NOW
    )
    return board


def _queued(name: str) -> Callable[[TaskBoard], None]:
    def fill(board: TaskBoard) -> None:
        specs = [TaskSpec(name=name, id=f"b{i}", args=[1]) for i in range(BACKLOG)]
        board.submit(specs, Priority.CRITICAL, NOW)

    return fill


def _parked(board: TaskBoard) -> None:
    _queued("imp")(board)
    board.dispatch(["w"], NOW)  # one runs, and its key holds the rest: all parked
    board.dispatch(["w"], NOW)


CASES: dict[str, Callable[[TaskBoard], None]] = {
    "no backlog": lambda board: None,
    "100,000 in another queue": _queued("report"),
    "100,000 of a name it does not run": _queued("gpu"),
    "100,000 parked on a busy key": _parked,
}


def _time(board: TaskBoard) -> float:
    """Seconds per task to dispatch the tasks one round at a time and finish each."""
    held = [t for slot in board.workers for t in slot.in_flight]
    board.report("w", [], [Outcome(task_id=t, ok=True) for t in held], NOW)  # free the slot
    started = perf_counter()
    done = 0
    while done < TASKS:
        plan = board.dispatch(["w"], NOW)[0]
        task_ids = [a.id for a in plan.get("w", [])]
        assert task_ids, "a task it can run was not dispatched"
        board.report("w", [], [Outcome(task_id=t, ok=True) for t in task_ids], NOW)
        done += len(task_ids)
    return (perf_counter() - started) / TASKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for case, backlog in CASES.items():
        times = [_time(_board(backlog)) * 1e6 for _ in range(args.repeats)]
        print(
            f"{case:<36} {statistics.median(times):7.1f} us/task "
            f"(min {min(times):.1f}, max {max(times):.1f})"
        )


if __name__ == "__main__":
    main()
