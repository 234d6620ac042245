"""The subworkers' fetches the engine holds until there is work for them, and what else
the engine keeps per subworker for I/O: the cancels to tell it, the connection it uses.

A worker's ``fetch`` waits here until dispatch hands it tasks, one of its tasks is
cancelled (it is told through the reply), or its wait runs out on the engine's clock
(``world``). One fetch per worker is held: a newer one answers the older, empty.
"""

from __future__ import annotations

import asyncio

from fastworker_control_plane.core.workers import Delivery
from fastworker_control_plane.world import Clock


class HeldFetches:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._held: dict[str, asyncio.Future[Delivery]] = {}
        self._cancels: dict[str, list[str]] = {}  # per worker: held tasks since cancelled
        self._pipes: dict[str, int] = {}  # per worker: the connection it speaks over

    async def hold(self, worker_id: str, wait: float) -> Delivery:
        """Wait for ``answer`` (or ``release``), at most ``wait`` seconds on the clock."""
        self.release(worker_id)
        future: asyncio.Future[Delivery] = asyncio.get_running_loop().create_future()
        self._held[worker_id] = future
        expiry = self._clock.call_at(
            self._clock() + max(0.0, wait), lambda: self._expire(worker_id, future)
        )
        try:
            return await future
        finally:
            expiry.cancel()
            if self._held.get(worker_id) is future:
                del self._held[worker_id]

    def _expire(self, worker_id: str, future: asyncio.Future[Delivery]) -> None:
        if self._held.get(worker_id) is future:
            del self._held[worker_id]
        if not future.done():
            future.set_result(Delivery())

    def answer(self, worker_id: str, delivery: Delivery) -> None:
        """Reply to the worker's held fetch (it must hold one: see ``waiting``)."""
        self._held.pop(worker_id).set_result(delivery)

    def release(self, worker_id: str) -> None:
        """Answer the worker's held fetch now, empty (if it holds one)."""
        held = self._held.pop(worker_id, None)
        if held is not None and not held.done():
            held.set_result(Delivery())

    def waiting(self) -> list[str]:
        """The workers whose fetch waits for work (a fetch whose handler was cancelled
        has a done future until its task runs again)."""
        return [worker_id for worker_id, f in self._held.items() if not f.done()]

    def holders(self) -> list[str]:
        """Every worker with a fetch held here (answered or not): none of them is silent."""
        return list(self._held)

    def __bool__(self) -> bool:
        return bool(self._held)

    # --- cancels told through the reply --------------------------------------------------

    def tell_to_stop(self, worker_id: str, task_id: str) -> None:
        """Have the worker stop a task, through the reply to its held fetch (answered at
        once) or its next one."""
        self._cancels.setdefault(worker_id, []).append(task_id)
        self.release(worker_id)

    def has_cancels(self, worker_id: str) -> bool:
        return worker_id in self._cancels

    def take_cancels(self, worker_id: str) -> list[str]:
        return self._cancels.pop(worker_id, [])

    # --- connections ---------------------------------------------------------------------

    def seen(self, worker_id: str, pipe_id: int) -> None:
        """The worker speaks over connection ``pipe_id`` (negative: none to watch)."""
        if pipe_id >= 0:
            self._pipes[worker_id] = pipe_id

    def on_pipe(self, pipe_id: int) -> list[str]:
        """The workers that spoke over that connection last."""
        return [worker_id for worker_id, pipe in self._pipes.items() if pipe == pipe_id]

    def forget(self, worker_id: str) -> None:
        """The worker is gone: answer its fetch, drop its cancels and its connection."""
        self._pipes.pop(worker_id, None)
        self._cancels.pop(worker_id, None)
        self.release(worker_id)

    def release_all(self) -> None:
        for future in self._held.values():
            if not future.done():
                future.set_result(Delivery())
        self._held.clear()
