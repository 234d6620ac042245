"""What the board knows of each task name from registrations: its signature, how to check
its arguments, its retry policy, its default time limit and its queue; and which
registered name a shorter name submitted stands for (``resolve``). No I/O."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from fastworker_control_plane.core.arguments import ArgumentChecker
from fastworker_control_plane.core.limits import Limits
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import DEFAULT_QUEUE, ErrorCode, TaskSignature, TaskSpec
from fastworker_protocol.attempts import RetryPolicy
from fastworker_protocol.task_names import AmbiguousTaskName, TaskNames


class Catalog:
    def __init__(self) -> None:
        self.signatures: dict[str, TaskSignature] = {}
        self.checkers: dict[str, ArgumentChecker] = {}
        self._policies: dict[str, RetryPolicy] = {}
        self._time_limits: dict[str, float] = {}
        self._queues: dict[str, str] = {}
        self._result_ttls: dict[str, float] = {}
        self._names = TaskNames()  # every registered name by its dotted suffixes

    def learn(self, signatures: Iterable[TaskSignature], limits: Limits) -> None:
        """Take these registrations (and the limits they declare); raises ``Rejected``
        for a bad one, having taken none of them."""
        signatures = list(signatures)
        try:
            checkers = {s.name: ArgumentChecker(s) for s in signatures}
            limits.check(signatures)
        except (ValueError, TypeError) as exc:
            raise Rejected(ErrorCode.INVALID_MESSAGE, f"bad task signature: {exc}") from None
        limits.declare(signatures)
        self.checkers.update(checkers)
        for name in checkers:
            self._names.add(name)
        self.signatures.update({s.name: s for s in signatures})
        self._queues.update({s.name: s.queue for s in signatures})
        self._policies.update({s.name: RetryPolicy.of(s) for s in signatures})
        self._time_limits.update(
            {s.name: s.time_limit for s in signatures if s.time_limit is not None}
        )
        self._result_ttls.update(
            {s.name: s.result_ttl for s in signatures if s.result_ttl is not None}
        )

    def resolve(self, name: str, *, index: int | None = None) -> str:
        """The registered name ``name`` stands for: itself when registered, else the one
        registered name it is a dotted suffix of (``add`` for ``app.tasks.add``); ``name``
        unchanged when it stands for none, for the caller to refuse as unknown. Raises
        ``Rejected`` (``unknown_task``, listing them) when it ends several."""
        try:
            return self._names.resolve(name) or name
        except AmbiguousTaskName as exc:
            raise Rejected(
                ErrorCode.UNKNOWN_TASK,
                str(exc),
                index=index,
                task_name=name,
                candidates=exc.candidates,
            ) from None

    def named(self, spec: TaskSpec, *, index: int | None = None) -> TaskSpec:
        """``spec`` under the registered name it stands for (``resolve``)."""
        name = self.resolve(spec.name, index=index)
        return spec if name == spec.name else msgspec.structs.replace(spec, name=name)

    def names(self) -> list[str]:
        return sorted(self.checkers)

    def queue(self, name: str) -> str:
        return self._queues.get(name, DEFAULT_QUEUE)

    def time_limit(self, name: str) -> float | None:
        return self._time_limits.get(name)

    def result_ttl(self, name: str) -> float | None:
        """How long the task's results are kept (``None``: the control plane's default)."""
        return self._result_ttls.get(name)

    def policy(self, name: str) -> RetryPolicy:
        return self._policies.get(name) or RetryPolicy()
