"""The election's errors, by what the caller can do about them."""

from __future__ import annotations


class ElectionError(Exception):
    """Root of every error the election raises."""


class CoordinatorUnavailable(ElectionError):
    """No coordinator endpoint answered in time; retrying later may work."""


class CoordinatorRejected(ElectionError):
    """The coordinator answered with an error (bad request, permission, unknown lease)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class CoordinatorRefused(CoordinatorRejected):
    """The coordinator refuses this candidate (not authenticated, or not permitted: HTTP
    401/403, etcd's unauthenticated/permission denied): no retry can help."""


class ElectionFailed(ElectionError):
    """The campaign ended for good (a ``CoordinatorRefused``): this candidate cannot lead
    or follow an election until it is reconfigured."""


class Conflict(CoordinatorRejected):
    """An optimistic-concurrency write lost the race (HTTP 409): read again, then decide."""
