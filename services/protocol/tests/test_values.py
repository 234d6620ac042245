"""The portable-value rule: what passes comes back through msgpack as itself; what does not
is named, with where it is and what to send instead."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import OrderedDict, namedtuple
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastworker_protocol import MAX_NESTING, Codec, Submit, TaskSpec, check_portable
from fastworker_protocol.values import Id

_DECODER = msgspec.msgpack.Decoder()


def _round_trip(value: object) -> Any:
    return _DECODER.decode(msgspec.msgpack.encode(value))


def _same(sent: object, back: object) -> bool:
    """Equal and of the same type all the way down (NaN equal to NaN; tuples and bytes
    buffers compare as what the rule says they come back as: a list, bytes)."""
    if isinstance(sent, tuple):
        sent = list(sent)
    if isinstance(sent, bytearray | memoryview):
        sent = bytes(sent)
    if type(sent) is not type(back):
        return False
    if isinstance(sent, float):
        return (math.isnan(sent) and math.isnan(back)) or sent == back  # type: ignore[arg-type]
    if isinstance(sent, list):
        assert isinstance(back, list)
        return len(sent) == len(back) and all(map(_same, sent, back))
    if isinstance(sent, dict):
        assert isinstance(back, dict)
        return sent.keys() == back.keys() and all(_same(v, back[k]) for k, v in sent.items())
    return sent == back


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary()
    | st.datetimes(timezones=st.just(UTC))
)
_portable = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers(-(2**63), 2**64 - 1), inner, max_size=5)
    ),
    max_leaves=30,
)


@given(_portable)
def test_every_value_the_rule_accepts_comes_back_through_msgpack_as_itself(value: Any) -> None:
    assert check_portable(value) is None
    assert _same(value, _round_trip(value))


@given(st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))])))
def test_an_aware_datetime_comes_back_as_the_same_instant_in_utc(when: datetime) -> None:
    assert check_portable(when) is None
    back = _round_trip(when)
    assert back == when
    assert back.tzinfo == UTC


def test_bytearray_and_memoryview_are_sent_as_bytes() -> None:
    assert check_portable([bytearray(b"ab"), memoryview(b"cd")]) is None
    assert _round_trip([bytearray(b"ab"), memoryview(b"cd")]) == [b"ab", b"cd"]


def test_the_ends_of_the_64_bit_range_pass_and_one_past_them_does_not() -> None:
    assert check_portable([-(2**63), 2**64 - 1]) is None
    assert check_portable([*range(20), 2**64 - 1]) is None
    for big in (2**64, -(2**63) - 1):
        for value, where in ((big, "v"), ([big], "v[0]"), ([0] * 20 + [big], "v[20]")):
            problem = check_portable(value, "v")
            assert problem is not None
            assert problem.startswith(f"{where} is an int outside msgpack's 64-bit range")


@dataclasses.dataclass
class Point:
    x: int


class Shade(enum.IntEnum):
    DARK = 1


class Colour(enum.StrEnum):
    RED = "red"


class Struct(msgspec.Struct):
    x: int


Pair = namedtuple("Pair", "a b")


class Money(Decimal):
    """A subclass of a registered type is not that type."""


class Ident(UUID):
    pass


@pytest.mark.parametrize(
    ("value", "type_name", "hint"),
    [
        ({1, 2}, "set", "send a list"),
        (frozenset({1}), "frozenset", "send a list"),
        (Money("1.10"), "Money", "would come back a plain Decimal"),
        (Ident(int=1), "Ident", "would come back a plain UUID"),
        (date(2024, 1, 2), "datetime.date", "fastworker.register_type"),
        (timedelta(seconds=1), "datetime.timedelta", "send str(value)"),
        (datetime(2024, 1, 2), "datetime.datetime", "is naive"),
        (Point(1), "Point", "send a dict"),
        (Point(1), "Point", "fastworker.register_type"),
        (Struct(1), "Struct", "send a dict"),
        (Shade.DARK, "Shade", "would come back a plain int"),
        (Colour.RED, "Colour", "would come back a plain str"),
        (OrderedDict(a=1), "collections.OrderedDict", "would come back a plain dict"),
        (Pair(1, 2), "Pair", "would come back a plain tuple"),
        (True.__class__, "type", "has no wire form"),
        (object(), "object", "has no wire form"),
        (object(), "object", "fastworker.register_type"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else None,
)
def test_a_value_that_would_not_come_back_as_itself_is_named_with_its_place_and_a_hint(
    value: object, type_name: str, hint: str
) -> None:
    # Given the value at the top, in a list and deep in a map
    deep = ({"a": [{"b": value}]}, "args['a'][0]['b']")
    places = [(value, "args"), ([1, value], "args[1]"), deep]
    for container, where in places:
        # When it is checked
        problem = check_portable(container, "args")
        # Then the problem names where it is, its type and what to do
        assert problem is not None
        assert problem.startswith(f"{where} has type ")
        assert type_name in problem
        assert hint in problem


@pytest.mark.parametrize("key", [2**64, frozenset({1}), ("a", 1j), (1, 2**64)])
def test_a_map_key_that_would_not_come_back_as_itself_is_refused(key: object) -> None:
    problem = check_portable({"ok": {key: 1}}, "kwargs")
    assert problem is not None
    assert problem.startswith(f"kwargs['ok'] has a key {key!r} of type")


@pytest.mark.parametrize("key", [None, True, 1.5, b"k", (1, (2, b"x")), "s", -(2**63)])
def test_map_keys_msgpack_gives_back_as_they_were_are_kept(key: object) -> None:
    assert check_portable({key: 1}) is None
    assert _round_trip({key: 1}) == {key: 1}


def test_int_keys_within_64_bits_are_kept() -> None:
    assert check_portable({1: "a", -(2**63): "b"}) is None
    assert _round_trip({1: "a"}) == {1: "a"}


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 10_000])
def test_a_value_nested_past_the_limit_is_refused_without_recursing(depth: int) -> None:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    assert check_portable(value, "result") == (
        f"result nests deeper than the protocol's {MAX_NESTING} arrays and maps"
    )


def test_a_value_exactly_at_the_limit_passes() -> None:
    deep: list[object] = []
    for _ in range(MAX_NESTING - 1):
        deep = [deep]
    assert check_portable(deep) is None


def test_long_flat_containers_take_the_fast_path_and_still_find_a_bad_item() -> None:
    assert check_portable([*range(1000), "x", None, 1.5]) is None
    assert check_portable({str(i): i for i in range(100)}) is None
    problem = check_portable([*range(100), {3}], "args")
    assert problem is not None
    assert problem.startswith("args[100] has type set")
    problem = check_portable({str(i): i for i in range(100)} | {"z": date(2024, 1, 1)}, "kwargs")
    assert problem is not None
    assert problem.startswith("kwargs['z'] has type datetime.date")


def test_an_id_is_the_one_str_subclass_that_travels_as_its_text() -> None:
    class Handle(Id):  # as the SDK's task handles are: an id with more on it
        pass

    handle = Handle("task-1")
    assert check_portable([handle, {"of": handle}, {handle: 1}], "args") is None
    message = Submit(tasks=[TaskSpec(name="t", args=[handle])])
    [sent] = msgspec.msgpack.decode(Codec().encode(message))["tasks"]
    assert sent["args"] == ["task-1"]
