"""A follower's state machine: the leader's messages in, instructions out. Pure.

The rules, in the order they are checked:

1. **Version.** A message in another stream version is refused (``version``).
2. **Fencing.** A message from an epoch older than the highest the follower has seen is
   refused (``stale_epoch``, naming that epoch): an old leader, paused past its lease,
   learns it is no longer leader and writes nothing here. A newer epoch is persisted
   (``Persist``) before anything from it is written, so a restart cannot forget it.
3. **Appends fit or are rejected whole.** An ``Append`` is written only if it is of the
   log the follower holds, starts exactly at its durable offset, and is whole, intact
   frames checksummed for that offset (``frames.span``, the journal's own check). Anything
   else is written nowhere, and the Ack says where the follower is and why: the leader
   resends from there, or sends a snapshot if the log is another.
4. **Snapshots are staged aside.** Pieces of another log are staged (from 0, in order,
   each checked like an append) and replace the journal only once they reach the
   leader's durable size, so a follower never holds half a snapshot as its journal.
5. **Acknowledge after the write.** The ``Reply`` is the last instruction: the driver
   sends it only once the writes before it are synced, so an Ack is a durable promise.

Phase (the follower's own view): ``CATCHING_UP`` until its journal holds the leader's
log up to the size the leader last announced, then ``IN_SYNC``. The leader's tracker
decides what counts for acknowledgements; this is for the follower's logs and readiness.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from fastworker_control_plane.durability import frames
from fastworker_control_plane.replication import messages as m


class Phase(enum.Enum):
    CATCHING_UP = "catching_up"
    IN_SYNC = "in_sync"


@dataclass(frozen=True)
class Persist:
    """Record the highest epoch seen and the log held (atomically, synced)."""

    epoch: int
    log_id: bytes


@dataclass(frozen=True)
class Write:
    """Append ``data`` to the journal at ``offset`` (its end), then fdatasync."""

    offset: int
    data: bytes


@dataclass(frozen=True)
class Stage:
    """Write ``data`` at ``offset`` of the staged snapshot (0 starts a new one)."""

    offset: int
    data: bytes


@dataclass(frozen=True)
class Install:
    """Sync the staged snapshot and put it in place of the journal, atomically; it
    holds ``log_id`` up to ``size``. (Persist an empty log first, so a crash between
    the two never pairs the new file with the old log's name.)"""

    log_id: bytes
    size: int


@dataclass(frozen=True)
class Reply:
    message: m.Ack | m.Refused


Instruction = Persist | Write | Stage | Install | Reply


class Follower:
    """Where the follower is: the highest epoch seen, the log its journal holds and how
    much of it is durable, and the snapshot it is staging, if any."""

    def __init__(self, epoch: int = 0, log_id: bytes = b"", durable: int = 0) -> None:
        self.epoch = epoch
        self.log_id = log_id
        self.durable = durable
        self.staging = b""
        self.staged = 0
        self.leader_size: int | None = None  # as last announced
        self.rejected = 0  # messages that did not fit (a gap, a bad checksum, another log)

    @property
    def phase(self) -> Phase:
        if self.leader_size is not None and self.durable >= self.leader_size and self.log_id:
            return Phase.IN_SYNC
        return Phase.CATCHING_UP

    def ack(self, why: str = m.FIT) -> m.Ack:
        return m.Ack(
            epoch=self.epoch,
            log_id=self.log_id,
            durable=self.durable,
            staging=self.staging,
            staged=self.staged,
            why=why,
        )

    def receive(self, message: m.LeaderMessage) -> list[Instruction]:
        if message.v != m.STREAM_VERSION:
            return [Reply(m.Refused(epoch=self.epoch, reason=m.VERSION))]
        if message.epoch < self.epoch:
            return [Reply(m.Refused(epoch=self.epoch, reason=m.STALE_EPOCH))]
        done: list[Instruction] = []
        if message.epoch > self.epoch:
            self.epoch = message.epoch
            done.append(Persist(self.epoch, self.log_id))
        match message:
            case m.Hello(log_id=log_id, size=size):
                self._announced(log_id, size)
                done.append(Reply(self.ack()))
            case m.Append():
                done += self._append(message)
            case m.Snapshot():
                done += self._snapshot(message)
        return done

    def _announced(self, log_id: bytes, size: int) -> None:
        self.leader_size = size if log_id == self.log_id else None
        if self.staging and log_id != self.staging:
            self.staging, self.staged = b"", 0  # that snapshot's log is gone

    def _append(self, message: m.Append) -> list[Instruction]:
        self._announced(message.log_id, message.size)
        why = self._misfit(message.log_id, message.offset, self.durable, message.data)
        if why != m.FIT:
            self.rejected += 1
            return [Reply(self.ack(why))]
        done: list[Instruction] = []
        if message.data:
            done.append(Write(self.durable, message.data))
            self.durable += len(message.data)
        return [*done, Reply(self.ack())]

    def _snapshot(self, message: m.Snapshot) -> list[Instruction]:
        if message.offset == 0 and message.log_id != self.staging:
            self.staging, self.staged = message.log_id, 0  # a new one (or a new log)
        why = self._misfit(message.log_id, message.offset, self.staged, message.data, staging=True)
        if why != m.FIT or message.offset + len(message.data) > message.size:
            self.rejected += 1
            return [Reply(self.ack(why or m.CHECKSUM))]
        done: list[Instruction] = [Stage(message.offset, message.data)]
        self.staged += len(message.data)
        if self.staged == message.size:
            done.append(Persist(self.epoch, b""))
            done.append(Install(message.log_id, message.size))
            self.log_id, self.durable, self.leader_size = message.log_id, message.size, message.size
            self.staging, self.staged = b"", 0
            done.append(Persist(self.epoch, self.log_id))
        return [*done, Reply(self.ack())]

    def _misfit(
        self, log_id: bytes, offset: int, expected: int, data: bytes, *, staging: bool = False
    ) -> str:
        if log_id != (self.staging if staging else self.log_id):
            return m.OTHER_LOG
        if offset != expected:
            return m.GAP
        if (data or offset == 0) and frames.span(data, offset) is None:
            return m.CHECKSUM
        return m.FIT
