"""What a REP server keeps per connection (NNG pipe): the handlers answering its requests,
and the replies queued for it that NNG has not taken yet.

Both exist so that one peer cannot make the control plane hold memory for it forever:

* A peer that goes away leaves requests being handled (a ``get`` held for an hour). When
  its pipe closes, their handlers are cancelled: there is nobody left to answer.
* A peer that stops reading leaves replies queued. On a REP context, ``asend`` completes
  as soon as NNG hands the reply to the pipe, which takes one message at a time and only
  the next one once the previous one is written to the kernel; replies to a peer that does
  not read wait in their contexts, each holding its bytes. Past ``max_bytes`` or
  ``max_replies`` of them the connection is cut instead of queueing more.

Pure bookkeeping: the server calls it, it never touches a socket.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

_GONE_KEPT = 4096  # closed pipe ids remembered (NNG allocates ids in sequence, no reuse soon)


@dataclass
class _Pipe:
    handlers: set[asyncio.Task[Any]] = field(default_factory=set)
    queued_replies: int = 0
    queued_bytes: int = 0


class Connections:
    def __init__(self, max_bytes: int, max_replies: int) -> None:
        self.max_bytes = max_bytes
        self.max_replies = max_replies
        self._pipes: dict[int, _Pipe] = {}
        # A request can be received just before its pipe's close is told to the event
        # loop: remembering closed ids lets it be dropped rather than handled.
        self._gone: OrderedDict[int, None] = OrderedDict()

    def is_gone(self, pipe_id: int) -> bool:
        return pipe_id in self._gone

    def handling(self, pipe_id: int, handler: asyncio.Task[Any]) -> None:
        """``handler`` is answering a request from ``pipe_id`` (until ``handled``)."""
        self._pipe(pipe_id).handlers.add(handler)

    def handled(self, pipe_id: int, handler: asyncio.Task[Any]) -> None:
        pipe = self._pipes.get(pipe_id)
        if pipe is not None:
            pipe.handlers.discard(handler)
            self._drop_if_idle(pipe_id, pipe)

    def fits(self, pipe_id: int, size: int) -> bool:
        """Whether one more reply of ``size`` bytes may be queued for ``pipe_id``."""
        pipe = self._pipes.get(pipe_id)
        if pipe is None:
            return True
        return pipe.queued_replies < self.max_replies and pipe.queued_bytes + size <= self.max_bytes

    def queued(self, pipe_id: int, size: int) -> None:
        pipe = self._pipe(pipe_id)
        pipe.queued_replies += 1
        pipe.queued_bytes += size

    def sent(self, pipe_id: int, size: int) -> None:
        pipe = self._pipes.get(pipe_id)
        if pipe is not None:
            pipe.queued_replies -= 1
            pipe.queued_bytes -= size
            self._drop_if_idle(pipe_id, pipe)

    def closed(self, pipe_id: int) -> int:
        """The pipe is gone: cancel the handlers of its requests; returns how many."""
        self._gone[pipe_id] = None
        if len(self._gone) > _GONE_KEPT:
            self._gone.popitem(last=False)
        pipe = self._pipes.pop(pipe_id, None)
        if pipe is None:
            return 0
        for handler in pipe.handlers:
            handler.cancel()
        return len(pipe.handlers)

    @property
    def handlers(self) -> int:
        """Requests being handled, over every connection."""
        return sum(len(p.handlers) for p in self._pipes.values())

    def _pipe(self, pipe_id: int) -> _Pipe:
        pipe = self._pipes.get(pipe_id)
        if pipe is None:
            pipe = self._pipes[pipe_id] = _Pipe()
        return pipe

    def _drop_if_idle(self, pipe_id: int, pipe: _Pipe) -> None:
        if not pipe.handlers and not pipe.queued_replies:
            del self._pipes[pipe_id]
