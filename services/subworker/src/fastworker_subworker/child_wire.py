"""What a subworker and its child processes say to each other, and how it is framed.

One socket pair per child, each message a 4-byte big-endian length and a msgpack body.
Only the two sides of one installation speak it, so it is not part of PROTOCOL.md, but it
is as strict: a frame that does not decode ends the child (or the child's use).

Parent to child: ``Spec`` once (what to import), then ``Run`` (a chunk of tasks, only
when the child is idle), ``Cancel`` at any time, ``Stop`` to end it between chunks.

Child to parent: ``Ready`` (or ``Broken``) once; per task of a chunk, in order, ``Done``
(it ran) or ``Skipped`` (cancelled before it started: it never will); ``Halted`` when the
task a ``Cancel`` names is the one running (the child starts nothing more, and the parent
terminates it); ``Idle`` after each chunk, with the child's resident memory.
"""

from __future__ import annotations

import struct

import msgspec

from fastworker_protocol import Assignment, Outcome

HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 31  # a frame's length must fit the header; results are bounded upstream


class TaskRef(msgspec.Struct, frozen=True):
    """Where a child finds a process task: ``module`` imported (or, for a task defined in
    the script the subworker runs, ``main_path`` run as ``__mp_main__``), then
    ``qualname`` looked up in it."""

    name: str
    module: str
    qualname: str
    main_path: str | None = None


class Spec(msgspec.Struct, frozen=True, tag=True):
    sys_path: list[str]
    tasks: list[TaskRef]
    worker_id: str
    log_level: str = "info"
    log_json: bool = False
    hook_modules: list[str] = []  # where signal handlers were connected (imported too)


class Run(msgspec.Struct, frozen=True, tag=True):
    assignments: list[Assignment]


class Cancel(msgspec.Struct, frozen=True, tag=True):
    task_id: str


class Stop(msgspec.Struct, frozen=True, tag=True):
    pass


class Ready(msgspec.Struct, frozen=True, tag=True):
    pid: int


class Broken(msgspec.Struct, frozen=True, tag=True):
    message: str


class Done(msgspec.Struct, frozen=True, tag=True):
    outcome: Outcome


class Skipped(msgspec.Struct, frozen=True, tag=True):
    task_id: str


class Halted(msgspec.Struct, frozen=True, tag=True):
    task_id: str


class Idle(msgspec.Struct, frozen=True, tag=True):
    rss: int  # bytes


ToChild = Spec | Run | Cancel | Stop
FromChild = Ready | Broken | Done | Skipped | Halted | Idle

_encoder = msgspec.msgpack.Encoder()


def frame(message: ToChild | FromChild) -> bytes:
    body = _encoder.encode(message)
    return HEADER.pack(len(body)) + body


def body_length(header: bytes) -> int:
    (length,) = HEADER.unpack(header)
    return int(length)


to_child = msgspec.msgpack.Decoder(ToChild)
from_child = msgspec.msgpack.Decoder(FromChild)
