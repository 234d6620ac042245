"""Tasks with ``pool="process"``: up to one lane per child process, each handing an idle
child (``processes``) a chunk of queued tasks (``Durations.take_chunk``, no more than the
child may still run before it is recycled) and reporting what it ran (``child_run``).

The wait for an idle child is not run time: a chunk is told started only once a child
has it. A task cancelled while queued here is reported at once; one in a child through
its chunk's run, which reports it.
"""

from __future__ import annotations

import asyncio
from collections import deque

from fastworker_protocol import Assignment
from fastworker_subworker.child_run import ChildRun, Fate
from fastworker_subworker.pools import Run, Shared
from fastworker_subworker.processes import ProcessPool
from fastworker_subworker.stops import cancelled_before_start


class ProcessLanes:
    def __init__(self, shared: Shared, pool: ProcessPool) -> None:
        self._shared = shared
        self.pool = pool
        self._queued: deque[Assignment] = deque()
        self._in_children: dict[str, ChildRun] = {}  # by task id, until its chunk ends
        self._lanes: set[asyncio.Task[None]] = set()

    @property
    def held(self) -> int:
        return len(self._queued) + len(self._in_children)

    @property
    def outside_loop(self) -> int:
        return len(self._in_children)

    def add(self, assignment: Assignment) -> None:
        self._queued.append(assignment)

    def open_lanes(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._queued and len(self._lanes) < self.pool.options.processes:
            lane = loop.create_task(self._lane())
            self._lanes.add(lane)
            lane.add_done_callback(self._lanes.discard)

    def cancel(self, wanted: set[str]) -> list[Run]:
        queued = [a for a in self._queued if a.id in wanted]
        for assignment in queued:
            self._queued.remove(assignment)
        for task_id in wanted & self._in_children.keys():
            self._in_children[task_id].cancel(task_id)
        return [(a, cancelled_before_start(a)) for a in queued]

    async def _lane(self) -> None:
        """Chunks of process tasks, each to an idle child (waited for first: not run time)."""
        pool, shared = self.pool, self._shared
        while self._queued:
            child = await pool.acquire()
            if not self._queued:
                pool.release(child)
                return
            async with shared.slots:
                if not self._queued:
                    pool.release(child)
                    return
                chunk = shared.durations.take_chunk(
                    self._queued, pool.options.processes, child.tasks_left(pool.options)
                )
                run = ChildRun(child, chunk, shared.executor.instrument)
                self._in_children.update((a.id, run) for a in chunk)
                shared.on_started([a.id for a in chunk])
                try:
                    end = await run.run()
                except BaseException:
                    pool.discard(child, crashed=False, why="its subworker stopped")
                    raise
                finally:
                    for assignment in chunk:
                        del self._in_children[assignment.id]
                if end.fate == Fate.IDLE:
                    pool.release(child)
                else:
                    pool.discard(child, crashed=end.fate == Fate.DIED, why=end.why)
                for assignment in reversed(end.unstarted):
                    if run.cancelled(assignment.id):  # as the run ended: it must not start
                        end.outcomes.append((assignment, cancelled_before_start(assignment)))
                    else:
                        self._queued.appendleft(assignment)
                shared.changed()
            shared.report(end.outcomes)

    async def give_up(self) -> list[str]:
        unfinished = [a.id for a in self._queued]
        self._queued.clear()
        for run in set(self._in_children.values()):
            unfinished += run.interrupt()  # its child is terminated
        return unfinished

    def shutdown(self) -> list[asyncio.Task[None]]:
        lanes = list(self._lanes)
        for lane in lanes:
            lane.cancel()
        return lanes

    async def close(self) -> None:
        """Stop the child processes (terminating busy ones)."""
        await self.pool.close()
