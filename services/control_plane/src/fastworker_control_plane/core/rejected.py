"""The error a core decision raises for a request it refuses."""

from __future__ import annotations

from fastworker_protocol import ErrorCode


class Rejected(Exception):
    """A request the board refuses; ``code`` is the wire error code."""

    def __init__(
        self, code: ErrorCode, message: str, *, index: int | None = None, **detail: object
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.index = index  # which task of a submission, when it is about one
        self.detail = detail if index is None else {"index": index, **detail}
