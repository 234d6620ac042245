"""Idempotency keys: a caller's own name for a submission, standing for the first task
submitted with it (per task name) for as long as that task is live or its result is kept.

Pure bookkeeping; the board decides whether the task a key points at still exists.

Keys are forgotten as their tasks go, without waiting for the periodic ``forget`` scan:
each new key looks at the ``PRUNE_STEP`` oldest ones first, dropping a key whose task is
gone and sending one whose task is still known to the back. Under steady load the keys
held so stay about as many as the tasks they stand for (a scan every 30 s let 60,000
stale ones pile up at 2,000 keyed tasks/s).
"""

from __future__ import annotations

from collections.abc import Callable

from fastworker_protocol import TaskSpec

Known = Callable[[str], bool]  # whether the task of this id is still known (live or kept)
PRUNE_STEP = 2  # oldest keys looked at per key remembered: more than one, so they shrink


class IdempotencyKeys:
    def __init__(self) -> None:
        # (task name, key) -> task id, oldest looked-at first
        self._ids: dict[tuple[str, str], str] = {}

    def get(self, spec: TaskSpec) -> str | None:
        if spec.idempotency_key is None:
            return None
        return self._ids.get((spec.name, spec.idempotency_key))

    def remember(
        self, name: str, key: str | None, task_id: str, known: Known | None = None
    ) -> None:
        """Stand ``key`` for ``task_id``; with ``known``, first forget a few stale keys."""
        if key is None:
            return
        if known is not None:
            self._prune(known)
        self._ids.pop((name, key), None)  # a key given again goes to the back
        self._ids[name, key] = task_id

    def forget(self, gone: Callable[[str], bool]) -> int:
        """Drop the keys whose task is ``gone``; returns how many."""
        stale = [key for key, task_id in self._ids.items() if gone(task_id)]
        for key in stale:
            del self._ids[key]
        return len(stale)

    def _prune(self, known: Known) -> None:
        for _ in range(min(PRUNE_STEP, len(self._ids))):
            oldest = next(iter(self._ids))
            task_id = self._ids.pop(oldest)
            if known(task_id):
                self._ids[oldest] = task_id  # still stands for a task: looked at again later

    def __len__(self) -> int:
        return len(self._ids)
