"""``fastworker submit --batch FILE``: many tasks from a JSON Lines file, with a progress
bar and a summary.

Each line is one task: ``{"task_name": "add", "args": [1, 2], "kwargs": {}, "priority":
"high", "queue": "reports"}`` (only ``task_name`` is required; ``-`` reads standard
input). Every line is checked before anything is sent, so a typo is one error naming
its line, not half a batch.
With ``--non-blocking`` the task ids go to standard output, one per line, in the file's
order; otherwise each task's result value does (its whole result with ``--json``), as
JSON lines, and the exit code says whether all succeeded.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from time import perf_counter
from typing import Annotated, Any, TextIO, TypeVar

import msgspec

from fastworker.cli.client_commands import shown_in_json
from fastworker.cli.common import EXIT_OK, EXIT_TASK_FAILED, CommandError
from fastworker.client import BatchItem, Client
from fastworker.errors import RequestRejected
from fastworker_protocol import Priority, TaskState
from fastworker_protocol.queues import QUEUE_PATTERN

CHUNK = 1_000  # tasks per submit_batch call: one progress step
_BAR = 30
T = TypeVar("T")


class BatchLine(msgspec.Struct, forbid_unknown_fields=True):
    task_name: str
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    priority: Priority | None = None
    queue: Annotated[str, msgspec.Meta(pattern=QUEUE_PATTERN)] | None = None


def read_batch(source: str, stdin: TextIO = sys.stdin) -> list[BatchItem]:
    """Every task of the file (blank lines skipped); ``CommandError`` names a bad line."""
    decoder = msgspec.json.Decoder(BatchLine)
    try:
        text = stdin.read() if source == "-" else Path(source).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {source}: {exc}") from None
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            task = decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise CommandError(f"{source}:{number}: {exc}") from None
        items.append(BatchItem(task.task_name, task.args, task.kwargs, task.priority, task.queue))
    if not items:
        raise CommandError(f"{source} holds no tasks")
    return items


class Progress:
    """A bar on a terminal (redrawn in place); silent when the stream is not one."""

    def __init__(self, total: int, verb: str, stream: TextIO = sys.stderr) -> None:
        self.total, self.done, self.verb, self._stream = total, 0, verb, stream
        self._live = stream.isatty()
        self._draw()

    def advance(self, count: int) -> None:
        self.done += count
        self._draw()

    def close(self) -> None:
        if self._live:
            self._stream.write("\n")

    def _draw(self) -> None:
        if self._live:
            filled = _BAR * self.done // max(1, self.total)
            bar = "#" * filled + "." * (_BAR - filled)
            self._stream.write(f"\r{self.verb} [{bar}] {self.done:,}/{self.total:,}")
            self._stream.flush()


async def submit_batch_file(
    client: Client, source: str, *, wait: bool, timeout: float, as_json: bool
) -> int:
    items = read_batch(source)
    ids: list[str] = []
    started = perf_counter()
    progress = Progress(len(items), "submitting")
    try:
        for first, chunk in _chunks(items):
            try:
                ids += await client.submit_batch(chunk)
            except RequestRejected as exc:
                last = first + len(chunk) - 1
                raise CommandError(
                    f"{source}: one of tasks {first:,}-{last:,} (in file order) was refused, "
                    f"so none of them was queued ({exc}); the {len(ids):,} before them were"
                ) from None
            progress.advance(len(chunk))
    finally:
        progress.close()
    elapsed = perf_counter() - started
    rate = len(ids) / elapsed if elapsed > 0 else float("inf")
    _say(f"submitted {len(ids):,} tasks from {source} in {elapsed:.2f} s ({rate:,.0f} tasks/s)")
    if not wait:
        print("\n".join(ids))
        return EXIT_OK
    return await _wait_all(client, ids, timeout, as_json)


async def _wait_all(client: Client, ids: list[str], timeout: float, as_json: bool) -> int:
    statuses: Counter[TaskState] = Counter()
    progress = Progress(len(ids), "running   ")
    try:
        for _, chunk in _chunks(ids):
            results = await client.wait_results(chunk, timeout)
            statuses.update(r.status for r in results)
            for result in results:
                shown = result if as_json else result.result
                print(msgspec.json.encode(shown, enc_hook=shown_in_json).decode())
            progress.advance(len(chunk))
    finally:
        progress.close()
    counts = ", ".join(f"{n:,} {status}" for status, n in statuses.most_common())
    _say(f"finished: {counts}")
    return EXIT_OK if set(statuses) == {TaskState.SUCCESS} else EXIT_TASK_FAILED


def _chunks(items: Sequence[T]) -> Iterator[tuple[int, list[T]]]:
    """``(number of its first item, counting from 1, items)`` per chunk."""
    for start in range(0, len(items), CHUNK):
        yield start + 1, list(items[start : start + CHUNK])


def _say(message: str) -> None:
    print(message, file=sys.stderr)
