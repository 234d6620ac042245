"""What operators do with dead letters: list them, run them again, drop them. Pure: the
board and ``now`` in, the reply and its ``Effects`` out (new ids from the board's
entropy).

A retry is a new submission, so it goes through the board's admission like any other:
if one selected letter's task is unknown now, its arguments no longer bind, or its
priority's queue is full, the whole request is refused (``Rejected``) and every letter
stays, so a bulk retry never half-happens without saying so. A retry or purge must name
ids or say ``all_matching``: an empty selection never means "everything".
"""

from __future__ import annotations

from collections import Counter
from itertools import islice

import msgspec

from fastworker_control_plane.core.admission import queue_full, refusal
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.board_types import MESSAGE_OVERHEAD, task_size
from fastworker_control_plane.core.dead_letters import Kept
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.listing import LISTED_TASK_MAX_BYTES, cut_error
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    MAX_FAILED_ACTED,
    DeadLetter,
    ErrorCode,
    FailedFilter,
    FailedList,
    FailedPurged,
    FailedRetried,
    Retried,
    TaskSpec,
)

_encoder = msgspec.msgpack.Encoder()
NO_SELECTION = (
    "name the dead letters (task_ids) or set all_matching to act on every one the filters match"
)


def listing(board: TaskBoard, selection: FailedFilter, limit: int, now: float) -> FailedList:
    """The newest ``limit`` matching letters, cut to fit one reply (``core/listing``)."""
    selection = _named(board, selection)
    matching = list(board.dead_letters.newest_first(selection, now))
    budget = board.config.max_message_size - MESSAGE_OVERHEAD
    tasks: list[DeadLetter] = []
    used, more = 0, False  # as a task listing's: left out for want of room
    for found in islice(matching, max(0, limit)):
        letter, size = listed_form(found.letter)
        if used + size > budget:
            more = True
            break
        tasks.append(letter)
        used += size
    return FailedList(tasks=tasks, total=len(matching), stored=len(board.dead_letters), more=more)


def listed_form(letter: DeadLetter) -> tuple[DeadLetter, int]:
    """``letter`` as a listing shows it (without its arguments and with its error texts
    cut when it is large), and its encoded size."""
    size = len(_encoder.encode(letter))
    if size <= LISTED_TASK_MAX_BYTES:
        return letter, size
    cut = msgspec.structs.replace(
        letter,
        args=[],
        kwargs={},
        error=None if letter.error is None else cut_error(letter.error),
        attempt_errors=[cut_error(e) for e in letter.attempt_errors],
        truncated=True,
    )
    size = len(_encoder.encode(cut))
    if size > LISTED_TASK_MAX_BYTES and cut.attempt_errors:
        cut = msgspec.structs.replace(cut, attempt_errors=[])
        size = len(_encoder.encode(cut))
    return cut, size


def retry(
    board: TaskBoard,
    selection: FailedFilter,
    all_matching: bool,
    now: float,
    *,
    record: bool = False,
) -> tuple[FailedRetried, Effects]:
    """Queue the selected letters again as new tasks (oldest first, at most
    ``MAX_FAILED_ACTED``), each linked to its letter by ``retry_of``, and drop them."""
    selection = _named(board, selection)
    chosen, missing, more = _select(board, selection, all_matching, now)
    # A letter kept under a short name (before names were module-qualified) runs under
    # the full name it stands for now.
    specs = [board.catalog.named(_spec(kept, board.entropy.new_id())) for kept in chosen]
    _admit(board, chosen, specs)
    retried = []
    fx = Effects(record)
    for kept, spec in zip(chosen, specs, strict=True):
        new_id = board.enqueue(spec, task_size(spec), kept.letter.priority, now, fx)
        task = board.record(new_id, now, count=False)
        assert task is not None, "just queued"
        task.retry_of = kept.task_id
        retried.append(Retried(task_id=kept.task_id, new_task_id=new_id))
    fx.dead_gone = board.dead_letters.remove(k.task_id for k in chosen)
    return FailedRetried(retried=retried, missing=missing, more=more), fx


def purge(
    board: TaskBoard, selection: FailedFilter, all_matching: bool, now: float
) -> tuple[FailedPurged, Effects]:
    """Drop the selected letters (every one that matches, with ``all_matching``)."""
    selection = _named(board, selection)
    missing = _check(board, selection, all_matching, now)
    chosen = [k.task_id for k in board.dead_letters.newest_first(selection, now)]
    fx = Effects(dead_gone=board.dead_letters.remove(chosen))
    return FailedPurged(purged=len(chosen), missing=missing), fx


def _named(board: TaskBoard, selection: FailedFilter) -> FailedFilter:
    """``selection`` with its task name as the full name a short one stands for
    (``Catalog.resolve``), as a submission's is."""
    if selection.task_name is None:
        return selection
    name = board.catalog.resolve(selection.task_name)
    return msgspec.structs.replace(selection, task_name=name)


def _check(board: TaskBoard, selection: FailedFilter, all_matching: bool, now: float) -> list[str]:
    """The ids named but not stored; refuses a selection of nothing in particular."""
    if not selection.task_ids and not all_matching:
        raise Rejected(ErrorCode.INVALID_MESSAGE, NO_SELECTION)
    return board.dead_letters.missing(selection, now)


def _select(
    board: TaskBoard, selection: FailedFilter, all_matching: bool, now: float
) -> tuple[list[Kept], list[str], bool]:
    missing = _check(board, selection, all_matching, now)
    matching = board.dead_letters.oldest_first(selection, now)
    return matching[:MAX_FAILED_ACTED], missing, len(matching) > MAX_FAILED_ACTED


def _spec(kept: Kept, task_id: str) -> TaskSpec:
    letter = kept.letter
    return TaskSpec(
        name=letter.name,
        id=task_id,
        args=letter.args,
        kwargs=letter.kwargs,
        headers=kept.headers,
        queue=letter.queue,
    )


def _admit(board: TaskBoard, chosen: list[Kept], specs: list[TaskSpec]) -> None:
    """Refuse the whole retry if any of it would be refused as a submission."""
    config = board.config
    for kept, spec in zip(chosen, specs, strict=True):
        refused = refusal(
            0,
            spec,
            task_size(spec),
            board.catalog.checkers.get(spec.name),
            max_bytes=config.max_batch_bytes,
            max_message_size=config.max_message_size,
        )
        if refused is not None:
            raise Rejected(
                refused.code,
                f"dead letter {kept.task_id} cannot run again: {refused.message} "
                "(nothing was retried; purge it or leave it out)",
                task_id=kept.task_id,
                task_name=spec.name,
            )
    for priority, new in Counter(k.letter.priority for k in chosen).items():
        full = queue_full(priority, board.live_count(priority), new, config.max_queued)
        if full is not None:
            raise Rejected(
                full.code,
                f"{full.message} (nothing was retried; the dead letters stay)",
                index=None,  # refused as a whole, as a submit's: priority, live, bound
                **full.detail,
            )
