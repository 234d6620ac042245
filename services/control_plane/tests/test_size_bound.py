"""The size bound a task is held to (PROTOCOL.md §11, "What is counted"): its canonical
size plus 32 may be at most ``max_message_size`` - 1024; the frame bound is the codec's."""

from __future__ import annotations

import msgspec
import pytest

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.board_types import task_size
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    Codec,
    ErrorCode,
    Get,
    OversizeMessage,
    Param,
    Priority,
    TaskSignature,
    TaskSpec,
)

NOW = 1000.0
LIMIT = 4096
ECHO = TaskSignature(name="echo", params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD")])
# 75 (map header and keys) + 5 ("echo") + 1 ("") + 1 + 1 + 5 (kwargs, headers, 5 nulls)
# + args: fixarray 1, str 16 header 3, then the text
LARGEST_TEXT = LIMIT - 1024 - 32 - (75 + 5 + 1 + 1 + 1 + 5) - (1 + 3)


def echo_of(length: int) -> TaskSpec:
    return TaskSpec(name="echo", args=["z" * length])


def test_the_task_size_is_the_documented_canonical_encoding_plus_32() -> None:
    spec = echo_of(LARGEST_TEXT)
    assert task_size(spec) - 32 == len(msgspec.msgpack.encode(spec)) == LIMIT - 1024 - 32


def test_a_task_exactly_at_the_bound_is_accepted_and_one_byte_over_is_oversize() -> None:
    board = TaskBoard(BoardConfig(max_message_size=LIMIT))
    board.learn_tasks([ECHO])

    (accepted,), _ = board.submit([echo_of(LARGEST_TEXT)], Priority.NORMAL, NOW)
    with pytest.raises(Rejected) as refused:
        board.submit([echo_of(LARGEST_TEXT + 1)], Priority.NORMAL, NOW)

    assert accepted
    assert refused.value.code == ErrorCode.OVERSIZE
    assert refused.value.detail == {"index": 0, "task_name": "echo"}
    assert refused.value.message == "task of 3073 bytes cannot be dispatched in a 4096-byte message"


def test_a_frame_of_exactly_the_limit_is_decoded_and_one_byte_more_is_oversize() -> None:
    codec = Codec(LIMIT)
    at_limit = padded_get(LIMIT)
    assert isinstance(codec.decode(at_limit), Get)
    with pytest.raises(OversizeMessage, match="4097 bytes is over the 4096-byte limit"):
        codec.decode(padded_get(LIMIT + 1))


def padded_get(total: int) -> bytes:
    """A ``get`` of ``total`` bytes: an unknown field (ignored, but counted) pads it."""
    pad = 0
    while (
        len(data := msgspec.msgpack.encode({"op": "get", "task_ids": [], "pad": "p" * pad})) < total
    ):
        pad += 1
    assert len(data) == total
    return data
