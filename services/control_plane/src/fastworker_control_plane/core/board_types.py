"""The board's settings, the record of one transition, and the size rule that keeps every
task dispatchable: what the board and its readers (engine, journal, listings) share."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from fastworker_control_plane.core.dead_letters import (
    DEFAULT_DEAD_LETTER_MAX,
    DEFAULT_DEAD_LETTER_MAX_BYTES,
    DEFAULT_DEAD_LETTER_TTL,
    DeadLetters,
)
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.result_cache import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SIZE,
    DEFAULT_TTL,
)
from fastworker_protocol import DEFAULT_MAX_MESSAGE_SIZE, TaskSpec, TaskState

# Live tasks per priority before submissions get queue_full: memory stays bounded.
DEFAULT_MAX_QUEUED = 250_000
# Bytes an Assign adds around each task's own encoding, and around all of them (a
# listing's reply keeps the same room around its tasks).
TASK_OVERHEAD = 32
MESSAGE_OVERHEAD = 1024
_encoder = msgspec.msgpack.Encoder()


def task_size(spec: TaskSpec) -> int:
    """What the spec will take up in an ``Assign``; 0 for arguments nested too deep to
    encode at all, which ``refusal`` refuses before the size counts."""
    try:
        return len(_encoder.encode(spec)) + TASK_OVERHEAD
    except RecursionError:
        return 0


@dataclass(frozen=True, slots=True)
class Change:
    """One transition: the task's new state, for the event bus and the journal."""

    state: TaskState
    task_id: str
    name: str
    worker_id: str | None
    attempts: int
    # The task itself (a reference, not a copy): the journal writes it from here, since a
    # final one may have left the result cache before the change is journaled.
    record: TaskRecord | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class BoardConfig:
    max_redeliveries: int = 3
    result_max_size: int = DEFAULT_MAX_SIZE
    result_max_bytes: int = DEFAULT_MAX_BYTES
    result_keep_arguments: bool = False  # keep a final task's args/kwargs in the cache
    result_ttl: float = DEFAULT_TTL
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_queued: int = DEFAULT_MAX_QUEUED  # live (not final) tasks per priority
    dead_letter_max: int = DEFAULT_DEAD_LETTER_MAX  # tasks failed for good, kept at most
    dead_letter_ttl: float = DEFAULT_DEAD_LETTER_TTL
    dead_letter_max_bytes: int = DEFAULT_DEAD_LETTER_MAX_BYTES

    def dead_letter_store(self) -> DeadLetters:
        return DeadLetters(self.dead_letter_max, self.dead_letter_ttl, self.dead_letter_max_bytes)

    @property
    def max_batch_bytes(self) -> int:
        """What the tasks of one ``Assign`` may add up to, so it always fits a message."""
        return self.max_message_size - MESSAGE_OVERHEAD
