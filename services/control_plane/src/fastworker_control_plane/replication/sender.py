"""What a leader sends a follower next, given what the follower last said. Pure.

The follower's every message says where it is, so the leader keeps no cursor per
follower: it answers each ``Ack`` from the position in it. In order:

- ``Refused`` with ``stale_epoch`` naming a newer epoch: this leader has been replaced.
  It must stop acknowledging and serving at once (``StepDown``), whatever its lease says.
- A follower on another log (or past the end of this one, which only another log can
  explain): ``SendSnapshot`` of the current log, from 0, or from what it has staged of it.
- A follower on this log, behind: ``SendTail`` from its durable offset.
- A follower at the end: ``Hold`` until the next commit (or a heartbeat interval: the
  driver then sends an empty ``Append``, which doubles as "the leader is alive").

An Ack from an older epoch than the leader's is a follower that has not heard of this
term yet: it is answered like any other (its next message will carry the new epoch).
"""

from __future__ import annotations

from dataclasses import dataclass

from fastworker_control_plane.replication import messages as m


@dataclass(frozen=True)
class LogState:
    """The leader's side: its term, its log, and how much of the log is durable."""

    epoch: int
    log_id: bytes
    size: int


@dataclass(frozen=True)
class SendTail:
    offset: int


@dataclass(frozen=True)
class SendSnapshot:
    offset: int


@dataclass(frozen=True)
class Hold:
    """Nothing new: answer at the next commit, or with a heartbeat."""


@dataclass(frozen=True)
class StepDown:
    """A follower has seen a newer term: this process is no longer leader."""

    epoch: int


@dataclass(frozen=True)
class Incompatible:
    """The follower speaks another stream version: replicating to it is impossible."""


Decision = SendTail | SendSnapshot | Hold | StepDown | Incompatible


def answer(said: m.FollowerMessage, log: LogState) -> Decision:
    match said:
        case m.Refused(reason=m.STALE_EPOCH, epoch=epoch) if epoch > log.epoch:
            return StepDown(epoch)
        case m.Refused(reason=m.VERSION):
            return Incompatible()
        case m.Refused():
            return Hold()  # refused for an epoch not newer than ours: a stale reply
        case m.Ack(epoch=epoch) if epoch > log.epoch:
            return StepDown(epoch)
        case m.Ack(log_id=log_id, durable=durable) if log_id == log.log_id and durable <= log.size:
            return SendTail(durable) if durable < log.size else Hold()
        case m.Ack(staging=staging, staged=staged) if staging == log.log_id and staged <= log.size:
            return SendSnapshot(staged)
    return SendSnapshot(0)


def message(decision: SendTail | SendSnapshot, log: LogState, data: bytes) -> m.LeaderMessage:
    """The message carrying ``data`` (whole frames read from the log at the decision's
    offset) to carry out ``decision``."""
    if isinstance(decision, SendTail):
        return m.Append(
            epoch=log.epoch, log_id=log.log_id, offset=decision.offset, data=data, size=log.size
        )
    return m.Snapshot(
        epoch=log.epoch, log_id=log.log_id, offset=decision.offset, data=data, size=log.size
    )


def hello(log: LogState) -> m.Hello:
    return m.Hello(epoch=log.epoch, log_id=log.log_id, size=log.size)


def heartbeat(log: LogState) -> m.Append:
    return m.Append(epoch=log.epoch, log_id=log.log_id, offset=log.size, data=b"", size=log.size)
