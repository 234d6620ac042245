"""Completion callbacks: queue tasks and be called back with each final result, without
polling (``delay_with_callback``; the callback may be sync or async).

From this folder (examples/callbacks), with the cluster running in another terminal
(``uv run fastworker dev --task-modules tasks``):

    uv run python main.py

The control plane is found at FASTWORKER_DISCOVERY_ADDRESS (default tcp://127.0.0.1:5550).
"""

from __future__ import annotations

import asyncio
import os

from fastworker import Client, TaskResult

DISCOVERY = os.environ.get("FASTWORKER_DISCOVERY_ADDRESS", "tcp://127.0.0.1:5550")


async def main() -> None:
    outcomes: dict[str, str] = {}
    everything_done = asyncio.Event()
    expected = 4

    async def on_done(result: TaskResult) -> None:
        """Runs on this client's event loop once the task is final (success or not)."""
        if result.error is None:
            outcome = f"{result.status}: {result.result}"
        else:
            outcome = f"{result.status}: {result.error.type}: {result.error.message}"
        outcomes[result.task_id] = outcome
        print(f"callback: {result.name} -> {outcome}", flush=True)
        if len(outcomes) == expected:
            everything_done.set()

    async with Client(DISCOVERY, timeout=30) as client:
        ids = [
            await client.delay_with_callback("resize_image", on_done, "cat.png", width)
            for width in (300, 200, 100)
        ]
        ids.append(await client.delay_with_callback("corrupt_image", on_done, "dog.png"))
        print(f"queued {len(ids)} tasks; doing other work while they run", flush=True)
        # A real program keeps running; here, wait until every callback has been called.
        await asyncio.wait_for(everything_done.wait(), timeout=30)
    print(f"all {len(outcomes)} callbacks called")


if __name__ == "__main__":
    asyncio.run(main())
