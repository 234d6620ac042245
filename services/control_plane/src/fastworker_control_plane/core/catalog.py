"""What the board knows of each task name from registrations: its signature, how to check
its arguments, its retry policy, its default time limit and its queue. No I/O."""

from __future__ import annotations

from collections.abc import Iterable

from fastworker_control_plane.core.arguments import ArgumentChecker
from fastworker_control_plane.core.limits import Limits
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import DEFAULT_QUEUE, ErrorCode, TaskSignature
from fastworker_protocol.attempts import RetryPolicy


class Catalog:
    def __init__(self) -> None:
        self.signatures: dict[str, TaskSignature] = {}
        self.checkers: dict[str, ArgumentChecker] = {}
        self._policies: dict[str, RetryPolicy] = {}
        self._time_limits: dict[str, float] = {}
        self._queues: dict[str, str] = {}
        self._result_ttls: dict[str, float] = {}

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
        self.signatures.update({s.name: s for s in signatures})
        self._queues.update({s.name: s.queue for s in signatures})
        self._policies.update({s.name: RetryPolicy.of(s) for s in signatures})
        self._time_limits.update(
            {s.name: s.time_limit for s in signatures if s.time_limit is not None}
        )
        self._result_ttls.update(
            {s.name: s.result_ttl for s in signatures if s.result_ttl is not None}
        )

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
