"""Frames for fuzzing a live control plane's ports: seeds of every request op, and random,
mutated, oversize and at-the-limit variants of them."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import msgspec

import fastworker_protocol as fp

LIMIT = 65_536  # the control plane's --max-message-size: oversize frames stay cheap
CODEC = fp.Codec(max_message_size=LIMIT)
CODEC_UNLIMITED = fp.Codec()
REPLY_OPS = {
    "submit": {"accepted", "results"},
    "get": {"results"},
    "cancel": {"cancelled"},
    "list_tasks": {"tasks"},
    "list_workers": {"workers"},
    "list_schedules": {"schedules"},
    "register": {"registered"},
    "fetch": {"assign"},
    "report": {"ack"},
    "drain": {"ack"},
    "unregister": {"ack"},
}

# --- frames --------------------------------------------------------------------------------

STRINGS = ["", "add", "echo", "explode", "no_such_task", "fuzz_task", "fuzz-worker", "t1"]
STRINGS += ["0123456789abcdef0123456789abcdef", "submit", "op", "ü✓ 漢字", "\x00", "x" * 40]
INTS = [0, 1, 2, 3, -1, 7, 100, 255, 65_536, 2**31, 2**32, 2**63 - 1, -(2**63), 2**64 - 1]
FLOATS = [0.0, -0.0, 0.001, 1.0, 2.5, -1.0, 1.7e9, 1e300, 5e-324, math.inf, -math.inf, math.nan]
ODD_VERSIONS: list[Any] = [1, 0, 2, -1, 2**63 - 1, 2**64 - 1, 1.0, True, None, "1", [1]]
HUGE_HEADERS = [b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\x7f\xff\xff\xff"]
HUGE_HEADERS += [b"\xc6\xff\xff\xff\xff", b"\xc9\xff\xff\xff\xff\x01", b"\xde\xff\xff"]
EDGE_VALUES = [
    b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff",  # uint 64 max
    b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",  # NaN
    b"\xd7\xff\xff\xff\xff\xfc\x00\x00\x00\x00",  # timestamp, nanoseconds out of range
    b"\xc7\x0c\xff\x00\x00\x00\x00\x7f\xff\xff\xff\xff\xff\xff\xff",  # timestamp, year huge
    b"\xd4\xff\x00",  # ext -1 of a size no timestamp has
    b"\xc1",  # never used
]


def seed_messages() -> list[fp.Message]:
    """Valid messages of every op, the requests shaped so that none can hold a reply for
    long or run anything slow: only ``add``, ``echo`` and ``explode`` run, fetches wait 0 s."""
    spec = fp.TaskSpec(name="add", args=[2, 3], headers={"traceparent": "00-" + "a" * 32})
    error = fp.TaskError(type="ValueError", message="boom")
    outcome = fp.Outcome(task_id="t1", ok=False, error=error, started_at=1.0, finished_at=2.0)
    signature = fp.TaskSignature(
        name="fuzz_task",
        params=[fp.Param(name="x", kind="POSITIONAL_OR_KEYWORD")],
        max_retries=2,
        retry_on=["KeyError"],
    )
    periodic = fp.TaskSignature(name="fuzz_periodic", repeat_interval=3600.0)
    result = fp.TaskResult(task_id="t1", name="add", status=fp.TaskState.SUCCESS, result=5)
    return [
        fp.Submit(tasks=[spec]),
        fp.Submit(tasks=[fp.TaskSpec(name="echo", id="t1", args=[{"k": [1, 2.5, None]}])]),
        fp.Submit(tasks=[spec, fp.TaskSpec(name="no_such_task")], atomic=False),
        fp.Submit(tasks=[fp.TaskSpec(name="explode", args=["x"], max_retries=0)], wait=0.2),
        fp.Submit(tasks=[fp.TaskSpec(name="add", args=[1], eta=1.7e9, time_limit=1.0)]),
        fp.Get(task_ids=["t1", "t2"]),
        fp.Get(task_ids=["t1"], wait=0.1, any=True),
        fp.Cancel(task_id="t2"),
        fp.ListTasks(status=fp.TaskState.QUEUED, limit=5),
        fp.ListWorkers(),
        fp.ListSchedules(),
        fp.Register(worker_id="fuzz-worker", name="fuzz", concurrency=2, tasks=[signature]),
        fp.Register(worker_id="fuzz-worker-2", name="fuzz", concurrency=1, tasks=[periodic]),
        fp.Fetch(worker_id="fuzz-worker", wait=0.0, prefetch=3, started=["t1"]),
        fp.Fetch(worker_id="fuzz-worker", wait=0.0, outcomes=[outcome]),
        fp.Report(worker_id="fuzz-worker", started=["t1"], outcomes=[outcome]),
        fp.Drain(worker_id="fuzz-worker"),
        fp.Unregister(worker_id="fuzz-worker-2"),
        # replies and bus ops: wrong_port on every REP socket
        fp.Accepted(task_ids=["t1"]),
        fp.Results(results=[result, None]),
        fp.Cancelled(task_id="t1", status=fp.TaskState.CANCELLED, changed=True),
        fp.TaskList(tasks=[result]),
        fp.WorkerList(workers=[]),
        fp.ScheduleList(schedules=[]),
        fp.Registered(worker_id="w", control_plane_id="c", heartbeat_timeout=10.0),
        fp.Assign(tasks=[fp.Assignment(id="t1", name="add", args=[1, 2])]),
        fp.Ack(),
        fp.Error(code=fp.ErrorCode.INTERNAL, message="m"),
        fp.Announce(instance_id="i", submit=["tcp://a:1"] * 4, results="r", registration="g"),
        fp.Probe(),
    ]


SEED_MESSAGES = seed_messages()
SEED_FRAMES = [CODEC.encode(m) for m in SEED_MESSAGES]
REGISTER_SEED = next(i for i, m in enumerate(SEED_MESSAGES) if isinstance(m, fp.Register))
FIELD_NAMES = sorted(
    {name for frame in SEED_FRAMES for name in msgspec.msgpack.decode(frame)} - {"op", "v"}
)


def any_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice(INTS)
    if kind == 2:
        return rng.choice(FLOATS)
    if kind == 3:
        return rng.choice(STRINGS)
    if kind == 4:
        return rng.randbytes(rng.randrange(5))
    if kind == 5:
        return msgspec.msgpack.Ext(rng.choice([0, 5, 127, -2]), rng.randbytes(2))
    if kind in (6, 7):
        return [any_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys: list[Any] = [*STRINGS[:6], 0, None, b"k"]
    return {rng.choice(keys): any_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_bytes(rng: random.Random) -> bytes:
    roll = rng.random()
    size = rng.randrange(33) if roll < 0.5 else rng.randrange(2001)
    return rng.randbytes(size)


def byte_mutated(rng: random.Random) -> bytes:
    """A seed frame under 1 to 3 blind byte-level mutations."""
    frame = bytearray(rng.choice(SEED_FRAMES))
    for _ in range(rng.choice((1, 1, 2, 3))):
        at = rng.randrange(len(frame) + 1)
        match rng.randrange(10):
            case 0 if frame:
                frame[at % len(frame)] ^= 1 << rng.randrange(8)
            case 1 if frame:
                frame[at % len(frame)] = rng.randrange(256)
            case 2 if frame:
                frame[at % len(frame)] = rng.choice([0xC0, 0xC1, 0xC2, 0xC3, 0x90, 0x80, 0xA0])
            case 3:
                frame[at:at] = rng.randbytes(rng.randrange(1, 9))
            case 4:
                del frame[at : at + rng.randrange(1, 9)]
            case 5:
                del frame[at:]  # truncated
            case 6:
                other = rng.choice(SEED_FRAMES)  # spliced
                frame[at:] = other[rng.randrange(len(other)) :]
            case 7:
                frame[at:at] = rng.choice(HUGE_HEADERS)
            case 8:
                frame[at:at] = rng.choice(EDGE_VALUES)
            case _:
                depth = rng.choice([rng.randrange(2, 50), rng.randrange(900, 1100), 3000])
                frame[at:at] = rng.choice([b"\x91", b"\x81\xa1k"]) * depth + b"\xc0"
    return bytes(frame)


def tree_mutated(rng: random.Random) -> bytes:
    """A seed frame decoded to plain values, one value changed, encoded again: msgpack that
    parses, so the change reaches validation (and sometimes makes another valid request)."""
    obj = msgspec.msgpack.decode(rng.choice(SEED_FRAMES))
    boxes = list(_containers(obj))
    box = rng.choice(boxes)
    roll = rng.random()
    if box is obj and roll < 0.3:
        key = rng.choice(["op", "v"])
        obj[key] = rng.choice(sorted(REPLY_OPS)) if key == "op" else rng.choice(ODD_VERSIONS)
    elif isinstance(box, dict) and box and roll < 0.5:
        del box[rng.choice(list(box))]
    elif isinstance(box, dict):
        key = rng.choice(list(box)) if box and roll < 0.8 else rng.choice(FIELD_NAMES)
        box[key] = any_value(rng)
    elif box:
        box[rng.randrange(len(box))] = any_value(rng)
    else:
        box.append(any_value(rng))
    return msgspec.msgpack.encode(obj)


def _containers(value: Any) -> Any:
    if isinstance(value, dict | list):
        yield value
        for item in value.values() if isinstance(value, dict) else value:
            yield from _containers(item)


def structured(rng: random.Random) -> bytes:
    """A msgpack map of random fields around an ``op`` (known, unknown or not a string)
    and an odd ``v``."""
    obj: dict[Any, Any] = {}
    roll = rng.random()
    if roll < 0.6:
        obj["op"] = rng.choice([*sorted(REPLY_OPS), "accepted", "probe", "error"])
    elif roll < 0.9:
        obj["op"] = rng.choice(["frobnicate", "SUBMIT", "", 7, None, ["get"]])
    if rng.random() < 0.5:
        obj["v"] = rng.choice(ODD_VERSIONS)
    for _ in range(rng.randrange(5)):
        obj[rng.choice(FIELD_NAMES)] = any_value(rng)
    return msgspec.msgpack.encode(obj)


def oversize(rng: random.Random) -> bytes:
    """Just over the limit (but under twice it, where NNG drops the connection instead)."""
    size = LIMIT + rng.choice([1, 2, rng.randrange(1, 4096)])
    if rng.random() < 0.5:
        return rng.randbytes(size)
    return padded_submit(size)


def padded_submit(size: int) -> bytes:
    """A valid ``submit`` of ``echo`` whose argument pads it to exactly ``size`` bytes."""
    pad = size
    for _ in range(3):  # the string's header grows with it: settle in a step or two
        frame = CODEC_UNLIMITED.encode(
            fp.Submit(tasks=[fp.TaskSpec(name="echo", args=["x" * pad])])
        )
        pad -= len(frame) - size
    assert len(frame) == size
    return frame


def at_the_limit(rng: random.Random) -> bytes:
    """Exactly ``LIMIT`` bytes: not oversize, so it must be judged on its content."""
    return b"\xc1" + rng.randbytes(LIMIT - 1)


FAMILIES: list[tuple[str, float, Callable[[random.Random], bytes]]] = [
    ("random", 0.25, random_bytes),
    ("mutated", 0.35, byte_mutated),
    ("tree", 0.2, tree_mutated),
    ("structured", 0.19, structured),
    ("oversize", 0.008, oversize),
    ("at-limit", 0.002, at_the_limit),
]


def next_frame(rng: random.Random) -> tuple[str, bytes]:
    """A frame and its family; never a ``register`` of a real task's name (the protocol lets
    any peer change a task's signature, and a changed ``add`` is not a bug)."""
    while True:
        roll = rng.random()
        family, make = FAMILIES[-1][0], FAMILIES[-1][2]
        for name, weight, maker in FAMILIES:
            roll -= weight
            if roll < 0:
                family, make = name, maker
                break
        frame = make(rng)
        if not _registers_real_task(frame):
            return family, frame


def _registers_real_task(frame: bytes) -> bool:
    try:
        message = CODEC.decode(frame)
    except fp.DecodeError:
        return False
    return isinstance(message, fp.Register) and any(
        not t.name.startswith("fuzz") for t in message.tasks
    )
