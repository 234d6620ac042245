"""The leader's view of its followers: how far each has acknowledged, its lag, the
in-sync set, and which group commits are replicated. Pure: events and ``now`` in.

Commits are numbered (``seq``, across logs) as the journal makes them durable, each with
the offset it ends at and when it was made. A follower's Ack of an offset covers every
commit ending at or before it. When the leader rewrites its file (compaction), the new
log starts with one commit standing for all earlier ones (the snapshot holds their
effect), so a follower covers them by installing the new log, or by having acknowledged
them on the old one before the rewrite.

**In sync** means: heard from within ``lag_bound`` seconds, and no commit it has not
acknowledged is older than ``lag_bound``. The same rule admits a catching-up follower
(once its oldest missing commit is recent) and drops a laggard, so there is no separate
"rejoin" state to get wrong. A follower that has never acknowledged a position on the
leader's log is not in sync.

**Releasing acknowledgements.** A commit is *replicated* once ``sync_replicas`` in-sync
followers have acknowledged it (it is durable on the leader before it is ever shipped).
``mode`` decides what the leader may acknowledge:

- ``REPLICATED``: enough followers in sync: commits are released once replicated;
- ``ALONE``: too few, without ``require_sync``: released once the followers still in
  sync have it (on the leader's own fsync if none is), and the leader says so (log,
  metric, readiness detail); but only while ``alone_permitted`` (a replicated leader
  first marks it in the coordinator, so no follower deposes it meanwhile: until then
  commits are released as they become replicated, as when refusing);
- ``REFUSING``: too few, with ``require_sync``: new writes are refused; commits already
  waiting are released only as they become replicated (on any follower's disk).
"""

from __future__ import annotations

import bisect
import enum
from collections import deque
from dataclasses import dataclass

LAG_BOUND = 2.0  # seconds: a follower further behind, or silent longer, is out of sync
SYNC_REPLICAS = 1


class Mode(enum.Enum):
    REPLICATED = "replicated"
    ALONE = "alone"
    REFUSING = "refusing"


@dataclass(frozen=True)
class Commit:
    seq: int
    end: int  # offset in the log where it ends
    at: float  # when it became durable on the leader
    frames: int  # frames committed up to and including it, since the tracker began


@dataclass(frozen=True)
class Lag:
    commits: int
    frames: int
    bytes: int
    seconds: float


@dataclass
class FollowerView:
    name: str
    heard: float
    covered: int | None = None  # the last commit seq its acks cover (None: none known)
    durable: int = 0  # its last acknowledged offset on the leader's log
    on_log: bool = False  # its last Ack was of the leader's current log
    in_sync: bool = False


class Tracker:
    def __init__(
        self,
        log_id: bytes,
        size: int,
        now: float,
        *,
        sync_replicas: int = SYNC_REPLICAS,
        lag_bound: float = LAG_BOUND,
        require_sync: bool = False,
        alone_permitted: bool = True,
    ) -> None:
        if sync_replicas < 1:
            raise ValueError("sync_replicas must be at least 1")
        self.sync_replicas = sync_replicas
        self.lag_bound = lag_bound
        self.require_sync = require_sync
        self.alone_permitted = alone_permitted
        self.alone_upto = 0  # the last commit released while alone
        self.followers: dict[str, FollowerView] = {}
        self.seq = 0
        self._frames = 0
        self._released = 0
        self.log_id = log_id
        self._commits: deque[Commit] = deque([Commit(0, size, now, 0)])

    # --- events ------------------------------------------------------------------------

    def committed(self, end: int, now: float, frames: int = 1) -> int:
        """A group commit ending at ``end`` is durable on the leader; returns its seq."""
        self.seq += 1
        self._frames += frames
        self._commits.append(Commit(self.seq, end, now, self._frames))
        return self.seq

    def rewritten(self, log_id: bytes, size: int, now: float) -> None:
        """The leader's file was rewritten as ``log_id``, ``size`` bytes long, holding
        the effect of every commit so far."""
        self.log_id = log_id
        self._commits = deque([Commit(self.seq, size, now, self._frames)])
        for view in self.followers.values():
            view.on_log = False

    def acked(self, name: str, log_id: bytes, durable: int, now: float) -> None:
        view = self.followers.setdefault(name, FollowerView(name, now))
        view.heard = now
        view.on_log = log_id == self.log_id
        if view.on_log:
            view.durable = durable
            ends = [c.end for c in self._commits]
            at = bisect.bisect_right(ends, durable) - 1
            if at >= 0:
                seq = self._commits[at].seq
                view.covered = seq if view.covered is None else max(view.covered, seq)
        view.in_sync = self._in_sync(view, now)
        self._trim()

    def forget(self, name: str) -> None:
        """The follower is gone (disconnected, removed): it counts for nothing."""
        self.followers.pop(name, None)

    def check(self, now: float) -> list[tuple[str, bool]]:
        """Re-judge every follower at ``now``; returns those whose in-sync flag changed."""
        changed = []
        for view in self.followers.values():
            in_sync = self._in_sync(view, now)
            if in_sync != view.in_sync:
                view.in_sync = in_sync
                changed.append((view.name, in_sync))
        return changed

    # --- questions -----------------------------------------------------------------------

    def lag(self, name: str, now: float) -> Lag:
        """How far ``name`` is behind: commits, frames and bytes it has not acknowledged,
        and the age of the oldest of them (0 when it has them all)."""
        view = self.followers[name]
        last = self._commits[-1]
        behind = self._oldest_missing(view)
        if behind is None:
            return Lag(0, 0, 0, 0.0)
        covered = 0 if view.covered is None else view.covered
        return Lag(
            commits=last.seq - covered,
            frames=last.frames - self._frames_at(covered),
            bytes=max(0, last.end - (view.durable if view.on_log else 0)),
            seconds=max(0.0, now - behind.at),
        )

    @property
    def in_sync(self) -> list[str]:
        return sorted(v.name for v in self.followers.values() if v.in_sync)

    def mode(self, now: float) -> Mode:
        self.check(now)
        if len(self.in_sync) >= self.sync_replicas:
            return Mode.REPLICATED
        return Mode.REFUSING if self.require_sync else Mode.ALONE

    def accepts_writes(self, now: float) -> bool:
        return self.mode(now) is not Mode.REFUSING

    def releasable(self, now: float) -> int:
        """Commits up to this seq may be acknowledged to clients now (never decreases)."""
        mode = self.mode(now)
        in_sync = [v for v in self.followers.values() if v.in_sync]
        if mode is Mode.REPLICATED:
            line = self._kth_covered(in_sync, self.sync_replicas)
        elif mode is Mode.ALONE and self.alone_permitted:
            # Too few in sync: still wait for those that are (each has every commit
            # within the lag bound), and with none, for the leader's own fsync only.
            line = self._kth_covered(in_sync, len(in_sync)) if in_sync else self.seq
            self.alone_upto = max(self.alone_upto, line)
        else:  # refusing: what is already waiting is released as it reaches any disks
            line = self._kth_covered(list(self.followers.values()), self.sync_replicas)
        self._released = max(self._released, line)
        return self._released

    def alone_covered(self, now: float) -> bool:
        """Whether the leader may stop being marked alone: it acknowledges replicated
        writes again, and every follower it knows has all it acknowledged alone."""
        views = list(self.followers.values())
        return (
            self.mode(now) is Mode.REPLICATED
            and bool(views)
            and self._kth_covered(views, len(views)) >= self.alone_upto
        )

    # --- inside ---------------------------------------------------------------------------

    def _in_sync(self, view: FollowerView, now: float) -> bool:
        if view.covered is None or now - view.heard > self.lag_bound:
            return False
        behind = self._oldest_missing(view)
        return behind is None or now - behind.at <= self.lag_bound

    def _oldest_missing(self, view: FollowerView) -> Commit | None:
        """The oldest retained commit ``view`` has not acknowledged (the oldest retained
        one if it is behind them all; None if it has them all)."""
        if view.covered is None:
            return self._commits[0]
        for commit in self._commits:
            if commit.seq > view.covered:
                return commit
        return None

    def _frames_at(self, seq: int) -> int:
        """Frames committed up to commit ``seq`` (if forgotten: as of the oldest kept)."""
        for commit in self._commits:
            if commit.seq == seq:
                return commit.frames
        return 0 if seq == 0 else self._commits[0].frames

    @staticmethod
    def _kth_covered(views: list[FollowerView], k: int) -> int:
        """The highest commit ``k`` of ``views`` have all acknowledged (0: fewer than k)."""
        covered = sorted((v.covered for v in views if v.covered is not None), reverse=True)
        return covered[k - 1] if len(covered) >= k else 0

    def _trim(self) -> None:
        """Forget commits every known follower has acknowledged (keeping the last, which
        maps an Ack of the log's end to its seq)."""
        known = [v.covered for v in self.followers.values() if v.covered is not None]
        if len(known) < len(self.followers) or not known:
            return
        floor = min(known)
        while len(self._commits) > 1 and self._commits[1].seq <= floor:
            self._commits.popleft()
