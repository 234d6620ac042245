"""Frames for fuzzing the codec: random bytes, msgpack token soup, byte- and tree-mutated
valid messages of every op, and random maps; with the error code PROTOCOL.md section 4
predicts where it is defined."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from typing import Any

import msgspec
import msgspec.inspect as mi

import fastworker_protocol as fp

SEED = 20_240_611

# --- values a fuzzer likes -------------------------------------------------------------------

# Words some fields are limited to (queue actions, limit scopes), for fields with a pattern.
WORDS = ["default", "reports", "pause", "resume", "purge", "queue", "task"]
STRINGS = [
    "",
    "add",
    "echo",
    "explode",
    "no_such_task",
    "fuzz_task",
    "fuzz-worker",
    "example-1",
    "0123456789abcdef0123456789abcdef",
    "submit",
    "op",
    "v",
    "ü✓ 漢字",
    "\x00",
    "\ud7ff\ue000",
    "x" * 40,
    "traceparent",
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "*/5 * * * *",
    "Europe/Paris",
    "POSITIONAL_OR_KEYWORD",
]
INTS = [0, 1, 2, 3, -1, 7, 100, 127, 128, 255, 256, 65_535, 65_536, -33, -129]
INTS += [2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1]
FLOATS = [0.0, -0.0, 0.001, 1.0, 1.5, 5.0, 60.0, -1.0, 1.7e9, 1e300, 5e-324, 2.2e-308]
FLOATS += [math.inf, -math.inf, math.nan]
KNOWN_OPS = frozenset(fp.message_op(m) for m in fp.ALL_MESSAGES)
OPS = sorted(KNOWN_OPS)


def _fields(message_type: type[fp.Message]) -> tuple[mi.Field, ...]:
    info = mi.type_info(message_type)
    assert isinstance(info, mi.StructType)
    return info.fields


FIELD_NAMES = sorted({f.encode_name for m in fp.ALL_MESSAGES for f in _fields(m)} - {"op"})
ODD_VERSIONS: list[Any] = [1, 0, 2, -1, 2**63 - 1, -(2**63), 2**64 - 1, 1.0, True, False]
ODD_VERSIONS += [None, "1", b"\x01", [1], {"v": 1}, math.nan]

# msgpack headers that make a decoder read on (or allocate) far past the end of the frame
HUGE_HEADERS = [
    b"\xdd\xff\xff\xff\xff",  # array 32, 4 G items
    b"\xdf\xff\xff\xff\xff",  # map 32, 4 G entries
    b"\xdb\x7f\xff\xff\xff",  # str 32, 2 GiB
    b"\xc6\xff\xff\xff\xff",  # bin 32, 4 GiB
    b"\xc9\xff\xff\xff\xff\x01",  # ext 32, 4 GiB
    b"\xdc\xff\xff",  # array 16
    b"\xde\xff\xff",  # map 16
    b"\xda\xff\xff",  # str 16
    b"\xc5\xff\xff",  # bin 16
    b"\xd9\xff",  # str 8
    b"\xc4\xff",  # bin 8
    b"\xc7\xff\x05",  # ext 8
]
# single values at the edges of what msgpack (and Python's datetime) can hold
EDGE_VALUES = [
    b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff",  # uint 64 max
    b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00",  # int 64 min
    b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",  # float 64 NaN
    b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00",  # float 64 +inf
    b"\xca\x7f\xc0\x00\x00",  # float 32 NaN
    b"\xd6\xff\xff\xff\xff\xff",  # timestamp 32: 2106
    b"\xd7\xff\xff\xff\xff\xfc\x00\x00\x00\x00",  # timestamp 64, nanoseconds over 10^9
    b"\xd7\xff\x00\x00\x00\x03\xff\xff\xff\xff",  # timestamp 64, far future
    b"\xc7\x0c\xff\x00\x00\x00\x00\x7f\xff\xff\xff\xff\xff\xff\xff",  # timestamp 96, year huge
    b"\xc7\x0c\xff\x00\x00\x00\x00\x80\x00\x00\x00\x00\x00\x00\x00",  # timestamp 96, year -huge
    b"\xc7\x0c\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00",  # timestamp 96, bad ns
    b"\xd4\xff\x00",  # ext -1 with a 1-byte body: no timestamp has that size
    b"\xc7\x00\x05",  # empty ext
    b"\xd4\x80\x00",  # ext -128
    b"\xc1",  # the one byte msgpack never uses
]
TYPE_BYTES = [*range(0xC0, 0x100), 0x80, 0x81, 0x8F, 0x90, 0x91, 0x9F, 0xA0, 0xA1, 0xBF, 0x00]
TYPE_BYTES += [0x7F]


# --- frames ------------------------------------------------------------------------------------


def any_value(rng: random.Random, depth: int = 0) -> Any:
    """A random msgpack value: scalars, bins, exts (never timestamps), arrays and maps."""
    kind = rng.randrange(10 if depth < 3 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice(INTS)
    if kind == 3:
        return rng.choice(FLOATS)
    if kind == 4:
        return rng.choice(STRINGS)
    if kind == 5:
        return rng.randbytes(rng.randrange(6))
    if kind == 6:
        return msgspec.msgpack.Ext(rng.choice([0, 1, 42, 127, -2, -128]), rng.randbytes(3))
    if kind in (7, 8):
        return [any_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys: list[Any] = [*STRINGS[:8], 0, 1, -1, None, b"k", 1.5]
    return {rng.choice(keys): any_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_of(rng: random.Random, t: mi.Type, depth: int = 0) -> Any:
    """A random value of a msgspec type, read from its type info (structs built valid)."""
    match t:
        case mi.StructType(cls=cls, fields=fields):
            values = {f.name: random_of(rng, f.type, depth + 1) for f in fields if f.name != "v"}
            return cls(**values)
        case mi.ListType(item_type=item):
            return [
                random_of(rng, item, depth + 1) for _ in range(rng.randrange(3 if depth < 4 else 1))
            ]
        case mi.DictType(key_type=key, value_type=value):
            size = rng.randrange(3 if depth < 4 else 1)
            return {
                random_of(rng, key, depth + 1): random_of(rng, value, depth + 1)
                for _ in range(size)
            }
        case mi.UnionType(types=types):
            return random_of(rng, rng.choice(types), depth)
        case mi.EnumType(cls=cls):
            return rng.choice(list(cls))
        case mi.LiteralType(values=values):
            return rng.choice(values)
        case mi.NoneType():
            return None
        case mi.BoolType():
            return rng.random() < 0.5
        case mi.IntType():
            return rng.choice([i for i in INTS if _in_range(i, t)])
        case mi.FloatType():
            return rng.choice([f for f in FLOATS if _in_range(f, t)])
        case mi.StrType(pattern=pattern) if pattern is not None:
            return rng.choice([s for s in (*STRINGS, *WORDS) if re.fullmatch(pattern, s)])
        case mi.StrType():
            return rng.choice(STRINGS)
        case mi.AnyType():
            return any_value(rng, depth)
    raise AssertionError(f"no generator for {t!r}: teach random_of about it")


def _in_range(number: float, t: mi.IntType | mi.FloatType) -> bool:
    """Whether ``number`` meets the field's range rule (NaN meets none)."""
    return all(
        (
            t.ge is None or number >= t.ge,
            t.gt is None or number > t.gt,
            t.le is None or number <= t.le,
            t.lt is None or number < t.lt,
        )
    )


def plausible_messages() -> list[fp.Message]:
    """Hand-written messages of the kind real peers send, then one random valid instance
    of every message type (so an op added later is fuzzed too)."""
    spec = fp.TaskSpec(
        name="add",
        id="example-1",
        args=[2, 3],
        kwargs={"z": [1.5, None, "ü"]},
        headers={"traceparent": STRINGS[17]},
        eta=1.7e9,
        max_retries=2,
        time_limit=5.0,
        idempotency_key="once",
    )
    error = fp.TaskError(type="ValueError", message="boom", traceback="Traceback...\n")
    result = fp.TaskResult(
        task_id="t1",
        name="add",
        status=fp.TaskState.SUCCESS,
        priority=fp.Priority.HIGH,
        result={"sum": 5, "blob": b"\x00\x01"},
        attempts=1,
        worker_id="w1",
        submitted_at=1.7e9,
        started_at=1.7e9 + 0.5,
        finished_at=1.7e9 + 1,
        attempt_errors=[error],
    )
    signature = fp.TaskSignature(
        name="fuzz_task",
        params=[
            fp.Param(name="x", kind="POSITIONAL_OR_KEYWORD"),
            fp.Param(name="rest", kind="VAR_KEYWORD", has_default=True),
        ],
        max_retries=3,
        retry_on=["KeyError"],
        time_limit=2.5,
    )
    periodic = fp.TaskSignature(name="fuzz_periodic", cron="*/5 * * * *", cron_tz="Europe/Paris")
    outcome = fp.Outcome(task_id="t1", ok=False, error=error, started_at=1.0, finished_at=2.0)
    worker = fp.WorkerInfo(
        worker_id="w1",
        name="host-1",
        state=fp.WorkerState.RUNNING,
        concurrency=4,
        in_flight=1,
        completed=10,
        tasks=["add", "echo"],
        last_seen_ago=0.25,
    )
    messages: list[fp.Message] = [
        fp.Submit(tasks=[spec]),
        fp.Submit(tasks=[fp.TaskSpec(name="echo", args=[{"k": [1, 2, 3]}])], wait=5.0),
        fp.Submit(tasks=[spec, fp.TaskSpec(name="no_such_task")], atomic=False),
        fp.Get(task_ids=["t1", "t2"]),
        fp.Get(task_ids=["t1"], wait=0.5, any=True),
        fp.Cancel(task_id="t1"),
        fp.ListTasks(status=fp.TaskState.QUEUED, limit=5),
        fp.ListWorkers(),
        fp.ListSchedules(),
        fp.Register(worker_id="fuzz-worker", name="fuzz", concurrency=2, tasks=[signature]),
        fp.Register(worker_id="fuzz-worker", name="fuzz", concurrency=1, tasks=[periodic]),
        fp.Fetch(worker_id="fuzz-worker", wait=0.0, prefetch=3, started=["t1"]),
        fp.Fetch(worker_id="fuzz-worker", wait=0.01, outcomes=[outcome]),
        fp.Report(worker_id="fuzz-worker", started=["t1"], outcomes=[outcome]),
        fp.Report(worker_id="fuzz-worker", outcomes=[fp.Outcome(task_id="t2", ok=True, result=5)]),
        fp.Drain(worker_id="fuzz-worker"),
        fp.Unregister(worker_id="fuzz-worker"),
        fp.Accepted(
            task_ids=["t1", ""],
            rejected=[fp.Rejection(index=1, code=fp.ErrorCode.UNKNOWN_TASK, message="no")],
        ),
        fp.Results(results=[result, None]),
        fp.Cancelled(task_id="t1", status=fp.TaskState.CANCELLED, changed=True),
        fp.TaskList(tasks=[result]),
        fp.WorkerList(workers=[worker]),
        fp.ScheduleList(schedules=[fp.ScheduleInfo(name="tick", spec="every 5 s", next_run=1.7e9)]),
        fp.Registered(worker_id="w1", control_plane_id="c" * 32, heartbeat_timeout=10.0),
        fp.Assign(
            tasks=[fp.Assignment(id="t1", name="add", args=[1, 2], priority=fp.Priority.LOW)],
            cancel=["t9"],
        ),
        fp.Ack(),
        fp.Error(code=fp.ErrorCode.UNKNOWN_TASK, message="m", detail={"index": 0}),
        fp.Announce(
            instance_id="i" * 32,
            submit=[f"tcp://127.0.0.1:{5555 + i}" for i in range(4)],
            results="tcp://127.0.0.1:5559",
            registration="tcp://127.0.0.1:5560",
            version="0.1.0",
        ),
        fp.Probe(role="subworker"),
    ]
    rng = random.Random(SEED)
    messages += [random_of(rng, mi.type_info(m)) for m in fp.ALL_MESSAGES for _ in range(3)]
    return messages


CODEC = fp.Codec()
VALID_MESSAGES = plausible_messages()
VALID_FRAMES = [CODEC.encode(m) for m in VALID_MESSAGES]


def random_bytes(rng: random.Random) -> bytes:
    roll = rng.random()
    size = (
        rng.randrange(33)
        if roll < 0.5
        else rng.randrange(257)
        if roll < 0.8
        else rng.randrange(2001)
    )
    if rng.random() < 0.7:
        return rng.randbytes(size)
    return bytes(
        rng.choice(TYPE_BYTES) if rng.random() < 0.5 else rng.randrange(256) for _ in range(size)
    )


def token_soup(rng: random.Random) -> bytes:
    """Well-formed msgpack tokens strung together at random: headers whose counts may or may
    not match what follows, so the decoder gets deep before it finds out."""
    tokens = [
        lambda: bytes([0x80 | rng.randrange(4)]),  # fixmap
        lambda: bytes([0x90 | rng.randrange(4)]),  # fixarray
        lambda: (s := rng.choice(STRINGS).encode()) and bytes([0xA0 | min(len(s), 31)]) + s[:31],
        lambda: bytes([0xA0 | 2]) + b"op",
        lambda: bytes([0xA1]) + b"v",
        lambda: msgspec.msgpack.encode(rng.choice(OPS)),
        lambda: msgspec.msgpack.encode(rng.choice(FIELD_NAMES)),
        lambda: msgspec.msgpack.encode(any_value(rng, 2)),
        lambda: rng.choice(EDGE_VALUES),
        lambda: rng.choice(HUGE_HEADERS),
    ]
    out = bytearray(bytes([0x80 | rng.randrange(1, 6)]))
    for _ in range(rng.randrange(1, 24)):
        out += rng.choice(tokens)()
    return bytes(out)


# mutators: each takes the frame, the rng and the list of valid frames to splice from


def _pos(rng: random.Random, frame: bytearray) -> int:
    return rng.randrange(len(frame) + 1)


def flip_bit(frame: bytearray, rng: random.Random) -> None:
    if frame:
        frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)


def set_byte(frame: bytearray, rng: random.Random) -> None:
    if frame:
        frame[rng.randrange(len(frame))] = rng.randrange(256)


def set_type_byte(frame: bytearray, rng: random.Random) -> None:
    if frame:
        frame[rng.randrange(len(frame))] = rng.choice(TYPE_BYTES)


def insert_bytes(frame: bytearray, rng: random.Random) -> None:
    at = _pos(rng, frame)
    frame[at:at] = rng.randbytes(rng.randrange(1, 17))


def delete_bytes(frame: bytearray, rng: random.Random) -> None:
    if frame:
        at = rng.randrange(len(frame))
        del frame[at : at + rng.randrange(1, 9)]


def truncate(frame: bytearray, rng: random.Random) -> None:
    del frame[rng.randrange(len(frame) + 1) :]


def duplicate_chunk(frame: bytearray, rng: random.Random) -> None:
    if frame:
        start = rng.randrange(len(frame))
        chunk = frame[start : start + rng.randrange(1, 33)]
        at = _pos(rng, frame)
        frame[at:at] = chunk


def splice(frame: bytearray, rng: random.Random) -> None:
    other = rng.choice(VALID_FRAMES)
    frame[_pos(rng, frame) :] = other[rng.randrange(len(other) + 1) :]


def append_trailing(frame: bytearray, rng: random.Random) -> None:
    frame += rng.choice(
        [b"\x00", b"\xc0", rng.randbytes(rng.randrange(1, 9)), rng.choice(VALID_FRAMES)]
    )


def huge_length(frame: bytearray, rng: random.Random) -> None:
    header = rng.choice(HUGE_HEADERS)
    if rng.random() < 0.3:
        frame[:1] = header  # the top-level map claims billions of entries
    else:
        at = _pos(rng, frame)
        frame[at:at] = header


def edge_value(frame: bytearray, rng: random.Random) -> None:
    """Replace a one-byte value (or insert) with a value at the edge of what msgpack holds."""
    value = rng.choice(EDGE_VALUES)
    singles = [i for i, b in enumerate(frame) if b < 0x80 or b in (0xC0, 0xC2, 0xC3) or b >= 0xE0]
    if singles and rng.random() < 0.8:
        at = rng.choice(singles)
        frame[at : at + 1] = value
    else:
        at = _pos(rng, frame)
        frame[at:at] = value


def retally(frame: bytearray, rng: random.Random) -> None:
    """Make a fixmap/fixarray/fixstr header claim one more or one less than it holds."""
    heads = [i for i, b in enumerate(frame) if 0x80 <= b <= 0xBF]
    if heads:
        at = rng.choice(heads)
        mask = 0x1F if frame[at] >= 0xA0 else 0x0F  # fixstr counts 0..31, the others 0..15
        count = (frame[at] + rng.choice([-1, 1])) & mask
        frame[at] = (frame[at] & ~mask & 0xFF) | count


def deep_nesting(frame: bytearray, rng: random.Random) -> None:
    depth = rng.choice([rng.randrange(2, 200), rng.randrange(900, 1100), rng.randrange(2000, 5000)])
    layer = rng.choice([b"\x91", b"\x81\xa1k", b"\x81\x00", b"\xdc\x00\x01"])
    if rng.random() < 0.5:
        frame[:0] = layer * depth  # the whole frame buried
    else:
        at = _pos(rng, frame)  # a nested value somewhere inside
        frame[at:at] = layer * depth + b"\xc0"


MUTATORS: dict[str, Callable[[bytearray, random.Random], None]] = {
    m.__name__: m
    for m in (
        flip_bit,
        set_byte,
        set_type_byte,
        insert_bytes,
        delete_bytes,
        truncate,
        duplicate_chunk,
        splice,
        append_trailing,
        huge_length,
        edge_value,
        retally,
        deep_nesting,
    )
}
MUTATOR_NAMES = sorted(MUTATORS)


def mutated(rng: random.Random) -> bytes:
    frame = bytearray(rng.choice(VALID_FRAMES))
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        rng.choice(list(MUTATORS.values()))(frame, rng)
    return bytes(frame)


def tree_mutated(rng: random.Random) -> tuple[bytes, Any]:
    """A valid frame decoded to plain values, changed where it counts (a field dropped, a
    value of another type, an op swapped, a ``v`` set), and encoded again: msgpack that
    parses, so the mangling reaches validation."""
    obj = msgspec.msgpack.decode(rng.choice(VALID_FRAMES))
    for _ in range(rng.choice((1, 1, 2, 3))):
        containers = list(_containers(obj))
        box = rng.choice(containers)
        if box is obj and rng.random() < 0.3:
            key = rng.choice(["op", "op", "v"])
            obj[key] = rng.choice(OPS) if key == "op" else rng.choice(ODD_VERSIONS)
        elif isinstance(box, dict):
            roll = rng.random()
            if box and roll < 0.3:
                del box[rng.choice(list(box))]
            elif box and roll < 0.7:
                key = rng.choice(list(box))
                box[key] = _twist(box[key])
            else:
                key = rng.choice(FIELD_NAMES) if rng.random() < 0.7 else rng.choice(STRINGS)
                box[key] = any_value(rng) if rng.random() < 0.5 else _field_like(rng)
        elif box and rng.random() < 0.5:
            at = rng.randrange(len(box))
            box[at] = _twist(box[at]) if rng.random() < 0.5 else any_value(rng)
        else:
            box.insert(rng.randrange(len(box) + 1), any_value(rng))
    try:
        return msgspec.msgpack.encode(obj), obj
    except (TypeError, ValueError, OverflowError):
        return structured(rng)


def _containers(value: Any) -> Any:
    if isinstance(value, dict | list):
        yield value
        for item in value.values() if isinstance(value, dict) else value:
            yield from _containers(item)


def _twist(value: Any) -> Any:
    """The same value as another msgpack type."""
    match value:
        case str():
            return value.encode()
        case bytes():
            return value.decode("latin-1")
        case bool():
            return int(value)
        case int():
            return float(value)
        case float():
            return int(value) if math.isfinite(value) and abs(value) < 2**63 else str(value)
        case list():
            return {str(i): v for i, v in enumerate(value)}
        case dict():
            return list(value.values())
    return [value]


def random_map(rng: random.Random) -> Any:
    """A random Python structure shaped like a message (or, sometimes, not a map at all)."""
    if rng.random() < 0.05:
        return any_value(rng)
    obj: dict[Any, Any] = {}
    roll = rng.random()
    if roll < 0.6:
        obj["op"] = rng.choice(OPS)
    elif roll < 0.8:
        obj["op"] = rng.choice(["frobnicate", "SUBMIT", "", "submit ", "get\x00", "ü"])
    elif roll < 0.95:
        obj["op"] = any_value(rng)
    if rng.random() < 0.6:
        obj["v"] = rng.choice(ODD_VERSIONS)
    for _ in range(rng.randrange(6)):
        name = rng.choice(FIELD_NAMES) if rng.random() < 0.85 else rng.choice(STRINGS)
        if name != "op" and name != "v":
            obj[name] = any_value(rng) if rng.random() < 0.5 else _field_like(rng)
    if rng.random() < 0.1:
        obj[rng.choice([0, 1, -1, None, b"op", 1.5, True])] = any_value(rng)
    keys = list(obj)
    rng.shuffle(keys)
    return {k: obj[k] for k in keys}


def _field_like(rng: random.Random) -> Any:
    """A value that looks like what some field of some message wants."""
    message = rng.choice(VALID_MESSAGES)
    fields = msgspec.structs.asdict(message)
    return rng.choice(list(fields.values())) if fields else None


def structured(rng: random.Random) -> tuple[bytes, Any]:
    obj = random_map(rng)
    return msgspec.msgpack.encode(obj), obj


def expected_codes(obj: Any) -> set[str | None]:
    """What PROTOCOL.md section 4 says of a msgpack value (``None``: it may decode)."""
    if not isinstance(obj, dict):
        return {"invalid_message"}
    version = obj.get("v", fp.PROTOCOL_VERSION)
    if type(version) is int and version != fp.PROTOCOL_VERSION:
        return {"unsupported_version"}
    op = obj.get("op")
    if op is None:
        return {"invalid_message"}
    if not isinstance(op, str) or op not in KNOWN_OPS:
        return {"unknown_op"}
    if type(version) is not int:
        return {"invalid_message"}
    return {None, "invalid_message"}
