"""What operators did: the actions taken on the cluster (cancel a task, retry or purge
dead letters, pause a queue, change a limit, add a schedule...), from whichever door
they came in (the dashboard and HTTP API, the SDK or the CLI).

The dashboard's event stream sends them as they happen (``event: actions``), so everyone
watching sees what someone else just did, and each is logged. Bounded: the newest
``MAX_ACTIONS`` are kept, each with a sequence number a reader resumes from.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

MAX_ACTIONS = 1_000


@dataclass(frozen=True, slots=True)
class Action:
    seq: int
    kind: str  # "task.cancel", "failed.retry", "failed.purge", "queue.pause", ...
    target: str  # what it acted on: a task id, a queue, a schedule; "" for a selection
    source: str  # "http" (the dashboard and HTTP API) or "client" (the SDK and the CLI)
    at: float  # Unix seconds
    detail: dict[str, Any] = field(default_factory=dict)  # JSON-ready: counts, filters


class ActionLog:
    def __init__(self, max_actions: int = MAX_ACTIONS) -> None:
        self._actions: deque[Action] = deque(maxlen=max_actions)
        self.last_seq = 0

    def record(self, kind: str, target: str, source: str, at: float, **detail: Any) -> Action:
        self.last_seq += 1
        action = Action(self.last_seq, kind, target, source, at, detail)
        self._actions.append(action)
        return action

    def since(self, seq: int) -> list[Action]:
        """The actions kept after ``seq``, oldest first."""
        return [a for a in self._actions if a.seq > seq]
