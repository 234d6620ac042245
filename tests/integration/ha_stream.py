"""A stream of submissions for the HA tests: about 2,000 tasks/s, each with its own task
id, recording which were acknowledged and when, so a test can check afterwards that no
acknowledged task was lost and how long the stream went without an acknowledgement."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from harness import wait_until

from fastworker import Client, FastWorkerError

RATE = 2000  # tasks/s the stream aims at
TICK = 0.01  # seconds between the stream's bursts


@dataclass
class Stream:
    """Submits ``add(i, 1)`` at about ``RATE`` tasks/s, each with its own task id, and
    records when each was acknowledged (monotonic) and which calls failed."""

    client: Client
    acked: dict[str, tuple[int, float]] = field(default_factory=dict)
    failed: list[BaseException] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _running: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._running = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stop.set()
        assert self._running is not None
        await self._running

    async def _run(self) -> None:
        calls: set[asyncio.Task[None]] = set()
        number = 0
        while not self._stop.is_set():
            for _ in range(int(RATE * TICK)):
                number += 1
                call = asyncio.get_running_loop().create_task(self._submit(number))
                calls.add(call)
                call.add_done_callback(calls.discard)
            await asyncio.sleep(TICK)  # pacing the stream, not waiting for anything
        await asyncio.gather(*calls)

    async def _submit(self, number: int) -> None:
        task_id = f"task-{number:07d}"
        try:
            await self.client.apply_async("add", (number, 1), task_id=task_id)
        except FastWorkerError as exc:
            self.failed.append(exc)
        else:
            self.acked[task_id] = (number, time.monotonic())

    async def count_at_least(self, count: int, timeout: float = 20.0) -> None:
        async def enough() -> bool:
            return len(self.acked) >= count

        await wait_until(enough, timeout, f"{count} acknowledged tasks")

    def longest_gap(self, since: float) -> float:
        """The longest time without an acknowledgement, from ``since`` on."""
        times = sorted(t for _, t in self.acked.values() if t >= since - 1.0)
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    async def verify(self, client: Client) -> None:
        """Every acknowledged task succeeded with its own result."""
        ids = sorted(self.acked)
        for start in range(0, len(ids), 2000):
            chunk = ids[start : start + 2000]
            results = await client.wait_results(chunk, timeout=60)
            for result in results:
                number, _ = self.acked[result.task_id]
                assert result.status == "success", result
                assert result.result == number + 1, result
