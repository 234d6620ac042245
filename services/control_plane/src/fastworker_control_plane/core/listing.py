"""A ``list_tasks`` reply cut to fit one message: pure, no I/O.

A listing shows many tasks at once, so one large result must not make it oversize, and
two large results in the cache must not make every listing after them oversize for good.
So a listed task whose ``TaskResult`` encodes to more than ``LISTED_TASK_MAX_BYTES`` is
listed without its result, with its error texts cut, and ``truncated`` set; and listing
stops, with ``more`` set, before the task that would pass the reply's byte budget. A
``get`` of one task still returns it whole: only listings are cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice

import msgspec

from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.result_cache import ResultCache
from fastworker_protocol import TaskError, TaskResult, TaskState

# A listed task larger than this (its TaskResult's msgpack encoding) is truncated.
LISTED_TASK_MAX_BYTES = 64 * 1024
# Characters kept of a truncated task's error texts: a traceback's end (where the error
# is), a message's beginning.
KEPT_CHARS = 2000

_encoder = msgspec.msgpack.Encoder()


@dataclass(frozen=True)
class Listing:
    tasks: list[TaskResult]
    more: bool  # some matching task (within the limit) was left out for want of room


def listed(
    live: dict[str, TaskRecord],
    results: ResultCache[TaskRecord],
    status: TaskState | None,
    now: float,
) -> Iterator[TaskResult]:
    """Every task in ``status`` (any if ``None``), most recent first: live tasks (newest
    accepted first), then kept results (latest finished first)."""
    done = sorted(results.values(now), key=lambda r: r.finished_at or 0, reverse=True)
    matching = (r for r in chain(reversed(live.values()), done) if status in (None, r.state))
    return (r.final or r.snapshot() for r in matching)


def fit(results: Iterable[TaskResult], limit: int, budget: int) -> Listing:
    """The first ``limit`` of ``results``, each truncated if too large, for as long as
    their encodings add up to at most ``budget`` bytes."""
    listed: list[TaskResult] = []
    used = 0
    for result in islice(results, max(0, limit)):
        item, size = listed_form(result)
        if used + size > budget:
            return Listing(listed, more=True)
        listed.append(item)
        used += size
    return Listing(listed, more=False)


def listed_form(result: TaskResult) -> tuple[TaskResult, int]:
    """``result`` as a listing shows it, and its encoded size."""
    size = len(_encoder.encode(result))
    if size <= LISTED_TASK_MAX_BYTES:
        return result, size
    cut = msgspec.structs.replace(
        result,
        result=None,
        error=None if result.error is None else cut_error(result.error),
        attempt_errors=[cut_error(e) for e in result.attempt_errors],
        truncated=True,
    )
    size = len(_encoder.encode(cut))
    if size > LISTED_TASK_MAX_BYTES and cut.attempt_errors:
        # Hundreds of retries: ``error`` already sums them up, so the list can go.
        cut = msgspec.structs.replace(cut, attempt_errors=[])
        size = len(_encoder.encode(cut))
    return cut, size


def cut_error(error: TaskError) -> TaskError:
    """``error`` with its traceback's end and its message's beginning kept."""
    traceback, message = error.traceback, error.message
    if len(traceback) > KEPT_CHARS:
        traceback = f"[{len(traceback) - KEPT_CHARS} characters cut]\n{traceback[-KEPT_CHARS:]}"
    if len(message) > KEPT_CHARS:
        message = f"{message[:KEPT_CHARS]} [{len(message) - KEPT_CHARS} characters cut]"
    return msgspec.structs.replace(error, traceback=traceback, message=message)
