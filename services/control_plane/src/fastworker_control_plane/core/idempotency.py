"""Idempotency keys: a caller's own name for a submission, standing for the first task
submitted with it (per task name) for as long as that task is live or its result is kept.

Pure bookkeeping; the board decides whether the task a key points at still exists.
"""

from __future__ import annotations

from collections.abc import Callable

from fastworker_protocol import TaskSpec


class IdempotencyKeys:
    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], str] = {}  # (task name, key) -> task id

    def get(self, spec: TaskSpec) -> str | None:
        if spec.idempotency_key is None:
            return None
        return self._ids.get((spec.name, spec.idempotency_key))

    def remember(self, name: str, key: str | None, task_id: str) -> None:
        if key is not None:
            self._ids[name, key] = task_id

    def forget(self, gone: Callable[[str], bool]) -> int:
        """Drop the keys whose task is ``gone``; returns how many."""
        stale = [key for key, task_id in self._ids.items() if gone(task_id)]
        for key in stale:
            del self._ids[key]
        return len(stale)

    def __len__(self) -> int:
        return len(self._ids)
