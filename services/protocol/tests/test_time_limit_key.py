"""A run limit is ``time_limit`` in Python and ``timeout`` on the wire, its first name:
renaming a key is a version-2 change (PROTOCOL.md §12), so peers of every age agree."""

from __future__ import annotations

import msgspec
import pytest

import fastworker_protocol as fp

CODEC = fp.Codec()

WITH_A_LIMIT = [
    fp.TaskSpec(name="t", time_limit=2.5),
    fp.Assignment(id="a", name="t", time_limit=2.5),
    fp.TaskSignature(name="t", time_limit=2.5),
]


@pytest.mark.parametrize("record", WITH_A_LIMIT, ids=lambda r: type(r).__name__)
def test_a_time_limit_is_written_under_the_key_timeout(record: msgspec.Struct) -> None:
    raw = msgspec.msgpack.decode(msgspec.msgpack.encode(record))

    assert raw["timeout"] == 2.5
    assert "time_limit" not in raw


@pytest.mark.parametrize("record", WITH_A_LIMIT, ids=lambda r: type(r).__name__)
def test_the_key_timeout_is_read_as_the_time_limit(record: msgspec.Struct) -> None:
    raw = {**msgspec.msgpack.decode(msgspec.msgpack.encode(record)), "timeout": 4.0}

    read = msgspec.msgpack.decode(msgspec.msgpack.encode(raw), type=type(record))

    assert read.time_limit == 4.0  # type: ignore[attr-defined]


def test_a_submission_from_an_older_client_keeps_its_limit() -> None:
    frame = msgspec.msgpack.encode({"op": "submit", "tasks": [{"name": "t", "timeout": 3.0}]})

    message = CODEC.decode(frame)

    assert isinstance(message, fp.Submit)
    assert message.tasks[0].time_limit == 3.0
