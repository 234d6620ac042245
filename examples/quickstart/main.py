"""Background tasks in 30 seconds: queue tasks, wait for their results, print them.

From this folder (examples/quickstart), with the cluster of tasks.py running
(``uv run fastworker dev --task-modules tasks`` in another terminal):

    uv run python main.py

The control plane is found at FASTWORKER_DISCOVERY_ADDRESS (default tcp://127.0.0.1:5550).
"""

from __future__ import annotations

import os

from tasks import add, slugify

from fastworker import SyncClient

DISCOVERY = os.environ.get("FASTWORKER_DISCOVERY_ADDRESS", "tcp://127.0.0.1:5550")


def main() -> None:
    with SyncClient(DISCOVERY, timeout=30) as client:
        # Queue a task by its function (or by its name, "add") and get its id at once...
        task_id = client.delay(add, 2, 3)
        # ...then wait for its value whenever you need it.
        print(f"add(2, 3) = {client.wait(task_id, timeout=30)}")

        # Or queue and wait in one call: a TaskResult, with status, worker and timings.
        result = client.submit_task(slugify, args=("Hello Background Tasks",))
        print(f"slugify -> {result.result!r} ({result.status})")

        # Many at once, by task name: one message per priority, ids in input order.
        ids = client.submit_batch([("word_count", (text,)) for text in ("a b", "a b c", "")])
        counts = [r.result for r in client.wait_results(ids, timeout=30)]
        print(f"word counts = {counts}")


if __name__ == "__main__":
    main()
