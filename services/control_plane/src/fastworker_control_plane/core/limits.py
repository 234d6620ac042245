"""Rate and concurrency limits on queues and task names: what may start now. No I/O.

A limit is declared by ``@task`` (per task name) or set at run time (per task name or per
queue; a run-time setting wins until reset). Dispatch asks before it hands out a task and
tells when one is handed out or let go, so the limits hold exactly across all subworkers:
one control plane sees every start.

- A rate limit is a token bucket: it holds up to a tenth of a second of its rate (at
  least one token) and refills continuously, so in any window of ``t`` seconds at most
  ``rate * t + burst`` tasks start.
- A concurrency limit counts tasks handed to subworkers and not yet back (assigned or
  running), per task name, per queue, or per value of the task's ``concurrency_key``
  argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

import msgspec

from fastworker_control_plane.core.records import TaskRecord
from fastworker_protocol import Rate, TaskSignature

BURST_SECONDS = 0.1  # a bucket holds this much of its rate (at least one token)
_EPSILON = 1e-9  # so a token due at a time computed in floats is there at that time
OFF = "off"  # a run-time rate setting that lifts the limit
_encode_key = msgspec.msgpack.Encoder().encode
_DEFAULTED = b"\xc1"  # stands for an argument left to its default (never valid msgpack)


class Scope(StrEnum):
    QUEUE = "queue"
    TASK = "task"


class TokenBucket:
    """Starts full."""

    def __init__(self, rate: Rate) -> None:
        self.per_second = rate.per_second
        self.capacity = max(1.0, self.per_second * BURST_SECONDS)
        self._tokens = self.capacity
        self._stamp: float | None = None

    def _refill(self, now: float) -> None:
        if self._stamp is None:
            self._stamp = now
        elif now > self._stamp:
            gained = (now - self._stamp) * self.per_second
            self._tokens = min(self.capacity, self._tokens + gained)
            self._stamp = now

    def has_token(self, now: float) -> bool:
        self._refill(now)
        return self._tokens >= 1.0 - _EPSILON

    def take(self, now: float) -> None:
        self._refill(now)
        self._tokens -= 1.0

    def next_token_at(self, now: float) -> float:
        self._refill(now)
        return now + max(0.0, 1.0 - self._tokens) / self.per_second


@dataclass
class Setting:
    """What is set at run time for one queue or task name: ``None`` is not set (the
    declared limit holds), ``OFF`` / ``0`` lifts the limit."""

    rate: str | None = None
    concurrency: int | None = None

    @property
    def empty(self) -> bool:
        return self.rate is None and self.concurrency is None


@dataclass
class Declared:
    rate: str | None = None
    concurrency: int | None = None
    key: str | None = None  # the argument concurrency is counted per value of
    key_position: int | None = None  # its place among positional arguments


@dataclass
class Limit:
    """A limit in effect, and the tasks it counts as running."""

    scope_name: tuple[Scope, str]
    rate: str | None
    concurrency: int | None
    bucket: TokenBucket | None
    running: dict[bytes, set[str]] = field(default_factory=dict)  # per key value

    def open(self, now: float, key: bytes = b"") -> bool:
        if self.bucket is not None and not self.bucket.has_token(now):
            return False
        return self.concurrency is None or len(self.running.get(key, ())) < self.concurrency

    def running_total(self) -> int:
        return sum(len(ids) for ids in self.running.values())


class Limits:
    def __init__(self) -> None:
        self._declared: dict[str, Declared] = {}  # per task name
        self.settings: dict[tuple[Scope, str], Setting] = {}  # kept in the journal
        self._limits: dict[tuple[Scope, str], Limit] = {}  # in effect
        self._holders: dict[str, list[tuple[Limit, bytes]]] = {}  # task id -> counted in

    # --- what is in effect ---------------------------------------------------------------

    @staticmethod
    def check(signatures: Iterable[TaskSignature]) -> None:
        """Raise ``ValueError`` for a bad declared limit (before ``declare``)."""
        for signature in signatures:
            _declared(signature)

    def declare(self, signatures: Iterable[TaskSignature]) -> None:
        """Take the limits ``@task`` declares; raises ``ValueError`` for a bad one."""
        for signature in signatures:
            declared = _declared(signature)
            if declared != self._declared.get(signature.name, Declared()):
                self._declared[signature.name] = declared
                self._update(Scope.TASK, signature.name)

    def change(
        self,
        scope: Scope,
        name: str,
        rate: str | None,
        concurrency: int | None,
        *,
        reset: bool = False,
    ) -> None:
        """A run-time change (``SetLimit``); raises ``ValueError`` for a bad rate."""
        if rate is not None and rate != OFF:
            Rate.parse(rate)
        setting = Setting() if reset else self.settings.get((scope, name), Setting())
        if rate is not None:
            setting.rate = rate
        if concurrency is not None:
            setting.concurrency = concurrency
        if setting.empty:
            self.settings.pop((scope, name), None)
        else:
            self.settings[(scope, name)] = setting
        self._update(scope, name)

    def restore(self, settings: dict[tuple[Scope, str], Setting]) -> None:
        """Take back run-time settings from the journal."""
        for (scope, name), setting in settings.items():
            self.settings[(scope, name)] = setting
            self._update(scope, name)

    def _update(self, scope: Scope, name: str) -> None:
        rate, concurrency = self._effective(scope, name)
        current = self._limits.get((scope, name))
        if rate is None and concurrency is None:
            if current is not None:  # lifted: kept only to count its running tasks out
                current.rate, current.concurrency, current.bucket = None, None, None
                self._forget_if_lifted(current)
            return
        if current is None:
            current = self._limits[(scope, name)] = Limit((scope, name), None, None, None)
        if current.rate != rate:
            current.bucket = None if rate is None else TokenBucket(Rate.parse(rate))
        current.rate, current.concurrency = rate, concurrency

    def _effective(self, scope: Scope, name: str) -> tuple[str | None, int | None]:
        declared = self._declared.get(name, Declared()) if scope == Scope.TASK else Declared()
        setting = self.settings.get((scope, name), Setting())
        rate = declared.rate if setting.rate is None else setting.rate
        concurrency = declared.concurrency if setting.concurrency is None else setting.concurrency
        return (None if rate == OFF else rate), (concurrency or None)

    def __bool__(self) -> bool:
        """Whether any limit is in effect (or still counts running tasks)."""
        return bool(self._limits)

    def get(self, scope: Scope, name: str) -> Limit | None:
        return self._limits.get((scope, name))

    def key_of(self, name: str) -> str | None:
        """The argument ``name``'s concurrency is counted per value of, if any."""
        declared = self._declared.get(name)
        return declared.key if declared is not None else None

    def items(self) -> Iterator[tuple[tuple[Scope, str], Limit]]:
        return iter(list(self._limits.items()))

    # --- dispatch ---------------------------------------------------------------------------

    def closed_names(self, now: float) -> set[str]:
        """Task names none of whose tasks may start now (rate spent, or as many running
        as allowed per name); a limit per key value is checked task by task."""
        return {
            name
            for (scope, name) in self._limits
            if scope == Scope.TASK and self.name_closed(name, now)
        }

    def name_closed(self, name: str, now: float) -> bool:
        limit = self._limits.get((Scope.TASK, name))
        if limit is None:
            return False
        if limit.bucket is not None and not limit.bucket.has_token(now):
            return True
        return self.key_of(name) is None and not limit.open(now)

    def queue_open(self, queue: str, now: float) -> bool:
        limit = self._limits.get((Scope.QUEUE, queue))
        return limit is None or limit.open(now)

    def key_open(self, record: TaskRecord) -> bool:
        """Whether ``record`` may start as far as its concurrency key goes."""
        key = self.key_of(record.name)
        limit = self._limits.get((Scope.TASK, record.name))
        if key is None or limit is None or limit.concurrency is None:
            return True
        return len(limit.running.get(self.key_value(record), ())) < limit.concurrency

    def key_value(self, record: TaskRecord) -> bytes:
        """The value of the task's concurrency key argument, encoded (what it is counted
        by); arguments left to their default share one value."""
        declared = self._declared[record.name]
        assert declared.key is not None
        if declared.key in record.kwargs:
            return _encode_key(record.kwargs[declared.key])
        position = declared.key_position
        if position is not None and position < len(record.args):
            return _encode_key(record.args[position])
        return _DEFAULTED

    def acquire(self, record: TaskRecord, now: float) -> None:
        """``record`` was handed out: it takes a token and counts as running."""
        held = []
        for scope, name in ((Scope.TASK, record.name), (Scope.QUEUE, record.queue)):
            limit = self._limits.get((scope, name))
            if limit is None:
                continue
            if limit.bucket is not None:
                limit.bucket.take(now)
            key = self.key_value(record) if scope == Scope.TASK and self.key_of(name) else b""
            limit.running.setdefault(key, set()).add(record.id)
            held.append((limit, key))
        if held:
            self._holders[record.id] = held

    def release(self, task_id: str) -> bytes | None:
        """``task_id`` is back (finished, failed, queued again); returns the key value it
        freed when its name has a concurrency key, else ``None``."""
        freed = None
        for limit, key in self._holders.pop(task_id, ()):
            ids = limit.running.get(key)
            if ids is not None:
                ids.discard(task_id)
                if not ids:
                    del limit.running[key]
            if key:
                freed = key
            self._forget_if_lifted(limit)
        return freed

    def _forget_if_lifted(self, limit: Limit) -> None:
        if limit.rate is None and limit.concurrency is None and not limit.running:
            self._limits.pop(limit.scope_name, None)

    def next_token_at(self, now: float) -> float | None:
        """When the first spent bucket has a token again (``None``: none is spent)."""
        due = [
            limit.bucket.next_token_at(now)
            for limit in self._limits.values()
            if limit.bucket is not None and not limit.bucket.has_token(now)
        ]
        return min(due, default=None)


def _declared(signature: TaskSignature) -> Declared:
    if signature.rate_limit is not None:
        Rate.parse(signature.rate_limit)
    key, position = signature.concurrency_key, None
    if key is not None:
        params = {p.name: p for p in signature.params}
        if key not in params or params[key].kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            raise ValueError(f"concurrency_key {key!r} is not a named parameter of the task")
        positional = [
            p.name
            for p in signature.params
            if p.kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
        ]
        position = positional.index(key) if key in positional else None
        if signature.concurrency_limit is None:
            raise ValueError("concurrency_key needs a concurrency_limit")
    return Declared(signature.rate_limit, signature.concurrency_limit, key, position)
