"""The dead-letter store: tasks that failed for good, kept with their arguments so that an
operator can find them, see why they failed and run them again. Pure: no I/O, ``now`` is
passed in.

A dead letter is its own copy of the task, taken before the result cache lets go of the
arguments, and it outlives the result: it stays until it is retried or purged, or one of
three bounds drops it. Past ``ttl`` seconds after it failed it expires; past ``max_count``
letters or ``max_bytes`` (each counted at its encoded size) the oldest go first. The
newest is always kept, even one larger than ``max_bytes`` on its own.

Letters are held in the order they failed, so expiry and eviction only ever look at the
front. The store never changes the board: retrying goes through the board's own
admission (``dead_letter_ops``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import msgspec

from fastworker_control_plane.core.records import TaskRecord
from fastworker_protocol import DeadLetter, FailedFilter, TaskError, TaskState

DEFAULT_DEAD_LETTER_MAX = 100_000
DEFAULT_DEAD_LETTER_TTL = 7 * 24 * 3600.0
DEFAULT_DEAD_LETTER_MAX_BYTES = 32 * 1024 * 1024

_encoder = msgspec.msgpack.Encoder()


@dataclass(frozen=True, slots=True)
class Kept:
    """A dead letter as stored: what the wire shows, its headers (trace context, for the
    retry), and what it costs in bytes."""

    letter: DeadLetter
    headers: dict[str, str]
    size: int

    @property
    def task_id(self) -> str:
        return self.letter.task_id


def kept(letter: DeadLetter, headers: dict[str, str]) -> Kept:
    """``letter`` with its encoded size (arguments and tracebacks are most of it)."""
    size = len(_encoder.encode(letter)) + sum(len(k) + len(v) for k, v in headers.items())
    return Kept(letter, headers, size)


def from_record(record: TaskRecord, failed_at: float) -> Kept:
    """The dead letter of a task that just failed for good (its arguments still held)."""
    letter = DeadLetter(
        task_id=record.id,
        name=record.name,
        status=TaskState.FAILURE,
        error=record.error,
        args=list(record.args),
        kwargs=dict(record.kwargs),
        priority=record.priority,
        queue=record.queue,
        attempts=record.attempts,
        attempt_errors=list(record.attempt_errors),
        worker_id=record.worker_id,
        submitted_at=record.submitted_at,
        failed_at=failed_at,
        retry_of=record.retry_of,
    )
    return kept(letter, dict(record.headers))


def matches(letter: DeadLetter, selection: FailedFilter) -> bool:
    """Whether ``letter`` passes the filters (``task_ids`` are not looked at here)."""
    if selection.task_name is not None and letter.name != selection.task_name:
        return False
    if selection.error_type is not None and _error_type(letter.error) != selection.error_type:
        return False
    if selection.since is not None and letter.failed_at < selection.since:
        return False
    return selection.until is None or letter.failed_at < selection.until


def _error_type(error: TaskError | None) -> str | None:
    return None if error is None else error.type


class DeadLetters:
    def __init__(
        self,
        max_count: int = DEFAULT_DEAD_LETTER_MAX,
        ttl: float = DEFAULT_DEAD_LETTER_TTL,
        max_bytes: int = DEFAULT_DEAD_LETTER_MAX_BYTES,
    ) -> None:
        if max_count <= 0 or ttl <= 0 or max_bytes <= 0:
            raise ValueError("dead-letter bounds (count, ttl, bytes) must be positive")
        self.max_count = max_count
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.bytes = 0
        self.evicted = 0  # dropped for a bound of count or bytes (not age)
        self.expired = 0
        self._kept: OrderedDict[str, Kept] = OrderedDict()  # oldest failure first

    def add(self, letter: Kept, now: float) -> None:
        """Keep ``letter`` as the newest; then apply the bounds."""
        self._drop(letter.task_id)
        self._kept[letter.task_id] = letter
        self.bytes += letter.size
        self.sweep(now)
        while len(self._kept) > 1 and (
            len(self._kept) > self.max_count or self.bytes > self.max_bytes
        ):
            _, oldest = self._kept.popitem(last=False)
            self.bytes -= oldest.size
            self.evicted += 1

    def sweep(self, now: float) -> int:
        """Drop the letters older than ``ttl``; returns how many."""
        expired = 0
        while self._kept:
            oldest = next(iter(self._kept.values()))
            if oldest.letter.failed_at + self.ttl > now:
                break
            self._drop(oldest.task_id)
            expired += 1
        self.expired += expired
        return expired

    def peek(self, task_id: str) -> Kept | None:
        """The letter of that id, expired or not (the journal writes what was added)."""
        return self._kept.get(task_id)

    def newest_first(self, selection: FailedFilter, now: float) -> Iterator[Kept]:
        """Every letter ``selection`` names (its ids, else all) that passes its filters."""
        self.sweep(now)
        if selection.task_ids:
            named = {k.task_id: k for t in selection.task_ids if (k := self._kept.get(t))}
            found: Iterable[Kept] = sorted(
                named.values(), key=lambda k: k.letter.failed_at, reverse=True
            )
        else:
            found = reversed(self._kept.values())
        return (k for k in found if matches(k.letter, selection))

    def oldest_first(self, selection: FailedFilter, now: float) -> list[Kept]:
        return list(self.newest_first(selection, now))[::-1]

    def missing(self, selection: FailedFilter, now: float) -> list[str]:
        """The ids ``selection`` names that are not in the store."""
        self.sweep(now)
        return [t for t in dict.fromkeys(selection.task_ids) if t not in self._kept]

    def remove(self, task_ids: Iterable[str]) -> list[str]:
        """Take these out (retried or purged); returns the ids that were here (the journal
        writes them gone)."""
        return [task_id for task_id in task_ids if self._drop(task_id)]

    def letters(self) -> list[Kept]:
        """Every letter, oldest first (what a journal snapshot writes)."""
        return list(self._kept.values())

    def _drop(self, task_id: str) -> bool:
        letter = self._kept.pop(task_id, None)
        if letter is None:
            return False
        self.bytes -= letter.size
        return True

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._kept
