"""Print the periodic tasks the control plane knows: schedule, runs, last and next run.

From this folder (examples/scheduling), with ``uv run fastworker dev --task-modules tasks``
running:

    uv run python schedules.py

The control plane is found at FASTWORKER_DISCOVERY_ADDRESS (default tcp://127.0.0.1:5550).
"""

from __future__ import annotations

import os
from datetime import datetime

from fastworker import SyncClient

DISCOVERY = os.environ.get("FASTWORKER_DISCOVERY_ADDRESS", "tcp://127.0.0.1:5550")


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


def main() -> None:
    with SyncClient(DISCOVERY, timeout=30) as client:
        schedules = client.list_schedules()
    print(f"{len(schedules)} periodic tasks")
    for s in sorted(schedules, key=lambda s: s.name):
        print(
            f"{s.name}: {s.spec}, run {s.times_run} times, last {when(s.last_run)}, "
            f"next {when(s.next_run)}"
        )


if __name__ == "__main__":
    main()
