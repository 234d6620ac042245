"""Priorities: critical, high, normal and low each have a queue; a free worker always
takes the most urgent task waiting. Within a priority, tasks run in submission order.

From this folder (examples/priorities), run a cluster whose only worker runs one task at a
time (the control plane itself, so the order is easy to see):

    uv run fastworker dev --task-modules tasks --subworkers 0 --concurrency 1

and, in another terminal in the same folder:

    uv run python main.py

It occupies the worker with a long job, queues one job per priority from low to critical,
then prints the order they ran in: critical, high, normal, low. The control plane is found
at FASTWORKER_DISCOVERY_ADDRESS (default tcp://127.0.0.1:5550).
"""

from __future__ import annotations

import os
import time

from tasks import page_on_call

from fastworker import SyncClient, TaskStatus

DISCOVERY = os.environ.get("FASTWORKER_DISCOVERY_ADDRESS", "tcp://127.0.0.1:5550")


def main() -> None:
    with SyncClient(DISCOVERY, timeout=30) as client:
        busy = client.delay("long_job", 1.5)
        deadline = time.monotonic() + 30
        while (state := client.get_task_result(busy)) is None or state.status != TaskStatus.RUNNING:
            if time.monotonic() > deadline:
                raise SystemExit("the long job did not start: is the worker busy elsewhere?")
            time.sleep(0.05)  # polling, to be sure the worker is busy before queueing
        print("worker busy; queueing low, normal, high, critical")

        # The same task at four priorities, least urgent first.
        ids = [client.delay("job", p, priority=p) for p in ("low", "normal", "high", "critical")]
        results = client.wait_results(ids, timeout=30)
        ran = sorted(results, key=lambda r: r.started_at or 0.0)  # when each one started
        print("ran in order: " + ", ".join(r.result for r in ran))

        # Submitting by the function object uses the priority its @task declares.
        result = client.submit_task(page_on_call, args=("disk full",))
        print(f"{result.result} (priority {result.priority})")


if __name__ == "__main__":
    main()
