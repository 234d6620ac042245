"""Submissions: which are admitted (``core/admission`` says why one is refused) and how a
batch is taken, all of it or none (``submit``), or each spec on its own
(``submit_each``). A spec that stands for a task the board knows (by id, or by
idempotency key) is not queued again: its id is returned as if accepted, which is what
makes client retries safe. A spec is taken under the registered name it stands for
(``Catalog.resolve``: ``add`` for ``app.tasks.add``), so its record, result, metrics and
limits all carry the full name.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastworker_control_plane.core.admission import queue_full, refusal
from fastworker_control_plane.core.board_types import task_size
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.lifecycle import Lifecycle
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import Priority, TaskSpec


class Intake:
    def __init__(self, lifecycle: Lifecycle) -> None:
        self._life = lifecycle
        self._store = lifecycle.store
        self._config = lifecycle.config
        self._catalog = lifecycle.catalog

    def submit(
        self, specs: Sequence[TaskSpec], priority: Priority, now: float, fx: Effects
    ) -> list[str]:
        """Accept all of ``specs`` or none (raises ``Rejected`` naming the first bad one)."""
        named, sizes = [], []
        for index, submitted in enumerate(specs):
            spec = self._catalog.named(submitted, index=index)
            size = task_size(spec)
            if (rejected := self.refusal(index, spec, size)) is not None:
                raise rejected
            named.append(spec)
            sizes.append(size)
        new = sum(1 for spec in named if self._store.existing(spec, now) is None)
        if (full := self.full(priority, new)) is not None:
            raise full
        accept = self._life.accept
        return [accept(s, size, priority, now, fx) for s, size in zip(named, sizes, strict=True)]

    def submit_each(
        self, specs: Sequence[TaskSpec], priority: Priority, now: float, fx: Effects
    ) -> tuple[list[str], list[Rejected]]:
        """Accept every valid spec on its own; the id of a rejected one is ``""``."""
        ids, rejections = [], []
        for index, submitted in enumerate(specs):
            try:
                spec = self._catalog.named(submitted, index=index)
            except Rejected as ambiguous:
                ids.append("")
                rejections.append(ambiguous)
                continue
            size = task_size(spec)
            rejected = self.refusal(index, spec, size)
            if rejected is None and self._store.existing(spec, now) is None:
                rejected = self.full(priority, 1, index=index)
            if rejected is None:
                ids.append(self._life.accept(spec, size, priority, now, fx))
            else:
                ids.append("")
                rejections.append(rejected)
        return ids, rejections

    def full(self, priority: Priority, new: int, index: int | None = None) -> Rejected | None:
        """``queue_full`` if ``new`` more tasks of ``priority`` would pass ``max_queued``."""
        live = self._store.live_count(priority)
        return queue_full(priority, live, new, self._config.max_queued, index)

    def refusal(self, index: int, spec: TaskSpec, size: int) -> Rejected | None:
        """Why ``spec`` (at ``index`` of its batch, ``size`` bytes) cannot run, if it
        cannot: an unknown task, arguments that do not bind, too large (``admission``)."""
        return refusal(
            index,
            spec,
            size,
            self._catalog.checkers.get(spec.name),
            max_bytes=self._config.max_batch_bytes,
            max_message_size=self._config.max_message_size,
        )
