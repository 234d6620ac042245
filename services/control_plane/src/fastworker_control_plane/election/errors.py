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


class Conflict(CoordinatorRejected):
    """An optimistic-concurrency write lost the race (HTTP 409): read again, then decide."""
