"""The protocol's range rules: how deep values nest, which numbers fields take, how
timestamps travel, and that a request's ``auth`` can be read before anything else."""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import msgspec
import pytest

import fastworker_protocol as fp

CODEC = fp.Codec()


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def timestamp(seconds: int, nanoseconds: int = 0) -> bytes:
    """A msgpack timestamp (ext -1) in its 96-bit form."""
    return b"\xc7\x0c\xff" + struct.pack(">I", nanoseconds) + struct.pack(">q", seconds)


def submit_with_arg(raw_arg: bytes) -> bytes:
    """A submit frame whose one argument is ``raw_arg``, already msgpack."""
    frame = msgspec.msgpack.encode({"op": "submit", "tasks": [{"name": "t", "args": [None]}]})
    return frame.replace(b"\x91\xc0", b"\x91" + raw_arg)


def submit(**spec: Any) -> bytes:
    return msgspec.msgpack.encode({"op": "submit", "tasks": [{"name": "t", **spec}]})


# --- nesting ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "depth"),
    [
        (1, 0),
        ("text", 0),
        ([], 1),
        ({"a": 1}, 1),
        ({"a": [1, {"b": 2}]}, 3),
        ({(1, (2,)): None}, 3),  # msgpack map keys can be arrays: they count
        ([[], [[[]]], 5], 4),
        (nested(32), 32),
    ],
)
def test_nesting_depth_counts_arrays_and_maps(value: Any, depth: int) -> None:
    assert fp.nesting_depth(value) == depth


def test_nesting_depth_stops_just_past_the_limit_without_recursing() -> None:
    very_deep = nested(200_000)  # far past any recursion limit
    assert fp.nesting_depth(very_deep, fp.MAX_NESTING) == fp.MAX_NESTING + 1
    assert fp.nesting_depth(very_deep, 10**6) == 200_000


def test_nesting_depth_of_a_wide_flat_value_is_one() -> None:
    assert fp.nesting_depth(list(range(1_000_000))) == 1
    assert fp.nesting_depth({str(i): i for i in range(100_000)}) == 1


# --- ranges ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        (submit(eta=math.nan), "$.tasks[0].eta"),
        (submit(eta=math.inf), "$.tasks[0].eta"),
        (submit(eta=-1.0), "$.tasks[0].eta"),
        (submit(eta=fp.MAX_TIMESTAMP + 1), "$.tasks[0].eta"),
        (submit(timeout=0.0), "$.tasks[0].timeout"),
        (submit(timeout=-5.0), "$.tasks[0].timeout"),
        (submit(timeout=math.nan), "$.tasks[0].timeout"),
        (submit(max_retries=-1), "$.tasks[0].max_retries"),
        (msgspec.msgpack.encode({"op": "submit", "tasks": [], "wait": -1.0}), "$.wait"),
        (msgspec.msgpack.encode({"op": "get", "task_ids": [], "wait": math.nan}), "$.wait"),
        (msgspec.msgpack.encode({"op": "get", "task_ids": [], "wait": math.inf}), "$.wait"),
        (msgspec.msgpack.encode({"op": "fetch", "worker_id": "w", "wait": -1}), "$.wait"),
        (
            msgspec.msgpack.encode({"op": "fetch", "worker_id": "w", "wait": 1, "prefetch": -1}),
            "$.prefetch",
        ),
        (
            msgspec.msgpack.encode(
                {"op": "report", "worker_id": "w", "outcomes": [{"task_id": "t", "ok": True,
                                                                 "started_at": math.nan}]}
            ),
            "$.outcomes[0].started_at",
        ),
        (
            msgspec.msgpack.encode(
                {"op": "register", "worker_id": "w", "name": "n", "concurrency": 1,
                 "tasks": [{"name": "t", "retry_backoff": -1.0}]}
            ),
            "$.tasks[0].retry_backoff",
        ),
        (submit_with_arg(timestamp(253_402_300_800)), "$.tasks[0].args[0]"),  # year 10000
        (submit_with_arg(timestamp(-62_135_596_801)), "$.tasks[0].args[0]"),  # before year 1
    ],
)  # fmt: skip
def test_a_number_out_of_range_is_an_invalid_message_naming_its_field(
    frame: bytes, field: str
) -> None:
    with pytest.raises(fp.InvalidMessage, match=re.escape(f"at `{field}`")):
        CODEC.decode(frame)


def test_the_ends_of_each_range_are_accepted() -> None:
    message = CODEC.decode(submit(eta=fp.MAX_TIMESTAMP, timeout=1e-9, max_retries=0))
    assert isinstance(message, fp.Submit)
    assert message.tasks[0].eta == fp.MAX_TIMESTAMP
    waits = msgspec.msgpack.encode({"op": "get", "task_ids": [], "wait": 0})
    assert CODEC.decode(waits) == fp.Get(task_ids=[], wait=0.0)


def test_timestamps_in_arguments_arrive_as_utc_datetimes_to_the_microsecond() -> None:
    message = CODEC.decode(submit_with_arg(timestamp(1, 123_456_789)))
    assert isinstance(message, fp.Submit)
    moment = message.tasks[0].args[0]
    assert moment.isoformat() == "1970-01-01T00:00:01.123457+00:00"  # nanoseconds rounded
    assert CODEC.decode(submit_with_arg(timestamp(253_402_300_799))) is not None


# --- auth ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "auth"),
    [
        (msgspec.msgpack.encode({"op": "explode", "auth": "t0ken", "x": [[[{}]]]}), "t0ken"),
        (msgspec.msgpack.encode({"auth": "t0ken"}), "t0ken"),  # nothing else looked at
        # a bad value elsewhere does not hide it (0x82 -> 0x83: one more key, the first)
        (submit_with_arg(timestamp(2**40)).replace(b"\x82", b"\x83\xa4auth\xa1k", 1), "k"),
        (msgspec.msgpack.encode({"op": "get", "task_ids": []}), None),
        (msgspec.msgpack.encode({"op": "get", "auth": 5}), None),
        (msgspec.msgpack.encode({"op": "get", "tasks": [{"auth": "t0ken"}]}), None),
        (msgspec.msgpack.encode(["auth", "t0ken"]), None),
        (msgspec.msgpack.encode({1: "t0ken"}), None),
        (b"\xc1garbage", None),
        (b"", None),
    ],
)
def test_auth_is_read_from_the_top_level_map_alone_and_never_raises(
    frame: bytes, auth: str | None
) -> None:
    assert CODEC.auth_of(frame) == auth
