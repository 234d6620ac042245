"""Tasks that subworkers held when the control plane before this one was lost (a restart,
or a failover to another replica): held *in doubt* for a short grace, not redelivered at
once. Pure: no I/O, ``now`` in.

Each subworker that registers again says what it still holds (``Register.holding``:
tasks running, waiting for a slot, or finished with their outcome not yet reported). A
task in doubt that its subworker holds stays with it (its outcome ends it as usual); one
it does not hold is redelivered then; what no subworker claims within ``GRACE`` of the
takeover is redelivered at its end. So a failover runs again only the tasks that were
truly lost with their subworker, or that never reached it, instead of racing the
subworkers' hand-over of what they finished.
"""

from __future__ import annotations

from collections.abc import Collection

GRACE = 3.0  # seconds after a takeover that subworkers have to say what they hold


class Handover:
    def __init__(self, grace: float = GRACE) -> None:
        self.grace = grace
        self.until = 0.0  # when the grace ends (monotonic, like ``now``)
        self._held: dict[str, dict[str, None]] = {}  # worker id -> task ids, in order

    def __len__(self) -> int:
        return sum(len(tasks) for tasks in self._held.values())

    def hold(self, worker_id: str, task_id: str, now: float) -> None:
        """``task_id`` was held by ``worker_id`` when the last control plane was lost."""
        if not self._held:
            self.until = now + self.grace
        self._held.setdefault(worker_id, {})[task_id] = None

    def claim(self, worker_id: str, holding: Collection[str]) -> tuple[list[str], list[str]]:
        """``worker_id`` registered again holding ``holding``: of its tasks in doubt, the
        ones it keeps and the ones it lacks (to redeliver now). Neither is in doubt after."""
        tasks = self._held.pop(worker_id, {})
        kept = [task_id for task_id in tasks if task_id in holding]
        lacking = [task_id for task_id in tasks if task_id not in holding]
        return kept, lacking

    def expired(self, now: float) -> list[tuple[str, str]]:
        """Past the grace: every (worker id, task id) still in doubt, no longer so."""
        if not self._held or now < self.until:
            return []
        held, self._held = self._held, {}
        return [(worker_id, task_id) for worker_id, tasks in held.items() for task_id in tasks]
