"""Registered types (PROTOCOL.md §3, "Portable values"): a UUID, a Decimal and an
application's registered type travel as msgpack extension values and come back as
themselves where they are used, while the control plane's codec keeps them opaque."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastworker_protocol import (
    BUILTIN_CODES,
    USER_CODES,
    VALUE_TYPES,
    Codec,
    InvalidMessage,
    Results,
    TaskResult,
    TaskState,
    ValueTypeError,
    check_portable,
    describe_ext,
    portable_form,
    register_type,
)

Ext = msgspec.msgpack.Ext
CONTROL_PLANE = Codec()  # extension values opaque
CLIENT = Codec(decode_values=True)


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


class Point3(Point):
    """A subclass: not the registered type."""


def _encode_point(point: Point) -> bytes:
    return msgspec.msgpack.encode([point.x, point.y])


def _decode_point(data: bytes) -> Point:
    x, y = msgspec.msgpack.decode(data)
    return Point(x, y)


POINT_CODE = 97  # one no test module registers (a session imports it_values: 40)


@pytest.fixture
def point() -> Iterator[int]:
    """``Point`` registered under ``POINT_CODE`` for one test."""
    register_type(Point, code=POINT_CODE, encode=_encode_point, decode=_decode_point)
    yield POINT_CODE
    VALUE_TYPES.unregister(Point)


def _through_the_system(value: Any) -> Any:
    """As a result: put in wire form, carried by a control plane (decoded opaque and
    encoded again), then read by a client."""
    wire, problem = portable_form(value, "result")
    assert problem is None
    sent = CONTROL_PLANE.encode(_result(wire))
    carried = CONTROL_PLANE.decode_as(sent, Results).results[0]
    assert carried is not None
    read = CLIENT.decode_as(CONTROL_PLANE.encode(Results(results=[carried])), Results)
    assert read.results[0] is not None
    return read.results[0].result


def _result(value: Any) -> Results:
    return Results(
        results=[TaskResult(task_id="t", name="n", status=TaskState.SUCCESS, result=value)]
    )


def _same(sent: Any, back: Any) -> bool:
    """Equal and of the same type all the way down; a Decimal digit for digit."""
    if type(sent) is tuple:
        sent = list(sent)
    if type(sent) is not type(back):
        return False
    if isinstance(sent, Decimal):
        return str(sent) == str(back)
    if isinstance(sent, float):
        return (math.isnan(sent) and math.isnan(back)) or sent == back
    if isinstance(sent, list):
        return len(sent) == len(back) and all(map(_same, sent, back))
    if isinstance(sent, dict):
        return sent.keys() == back.keys() and all(_same(v, back[k]) for k, v in sent.items())
    return bool(sent == back)


_leaves = st.uuids() | st.decimals() | st.integers(0, 10) | st.text(max_size=3)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)


@given(_values)
def test_uuids_and_decimals_come_back_as_themselves_anywhere_in_a_value(value: Any) -> None:
    assert check_portable(value) is None
    assert _same(value, _through_the_system(value))


@pytest.mark.parametrize(
    "number", ["1.10", "-0", "0E-7", "1E+3", "NaN", "-Infinity", "3.14159265358979323846264338"]
)
def test_a_decimal_keeps_every_digit_and_its_exponent(number: str) -> None:
    back = _through_the_system(Decimal(number))
    assert type(back) is Decimal
    assert str(back) == number


def test_the_control_plane_carries_them_as_opaque_extension_values() -> None:
    # Given a UUID and a Decimal in wire form
    wire, _ = portable_form([UUID(int=7), Decimal("2.50")], "args")
    # When a control plane decodes them
    carried = CONTROL_PLANE.decode_as(CONTROL_PLANE.encode(_result(wire)), Results).results[0]
    # Then they are extension values with FastWorker's codes, described for the dashboard
    assert carried is not None
    first, second = carried.result
    assert (type(first), first.code, first.data) == (Ext, 1, UUID(int=7).bytes)
    assert (type(second), second.code, second.data) == (Ext, 2, b"2.50")
    assert describe_ext(first) == str(UUID(int=7))
    assert describe_ext(second) == "2.50"


def test_a_plain_value_is_not_copied_on_its_way_out_or_in() -> None:
    args = [1, "a", [2.0, None], {"k": b"v"}]
    assert portable_form(args, "args") == (args, None)
    assert portable_form(args, "args")[0] is args
    assert VALUE_TYPES.from_wire(args) is args


def test_a_subworker_makes_the_arguments_back_into_their_types() -> None:
    wire, _ = portable_form([UUID(int=1), {"amount": [Decimal("9.99")]}], "args")
    assert VALUE_TYPES.from_wire(wire) == [UUID(int=1), {"amount": [Decimal("9.99")]}]


def test_a_registered_type_travels_as_itself(point: int) -> None:
    value = {"at": Point(1, 2), "path": [Point(3, 4)]}
    assert check_portable(value) is None
    wire, problem = portable_form(value, "result")
    assert problem is None
    assert wire["at"].code == point
    assert _through_the_system(value) == value
    assert VALUE_TYPES.from_wire(CONTROL_PLANE.decode_as(
        CONTROL_PLANE.encode(_result(wire)), Results
    ).results[0].result) == value  # type: ignore[union-attr]  # fmt: skip


def test_a_subclass_of_a_registered_type_is_refused(point: int) -> None:
    problem = check_portable([Point3(1, 2)], "args")
    assert problem is not None
    assert problem.startswith("args[0] has type")
    assert "fastworker.register_type" in problem


def test_an_unregistered_type_is_refused_with_the_way_to_register_it() -> None:
    problem = check_portable({"p": Point(1, 2)}, "kwargs")
    assert problem is not None
    assert problem.startswith("kwargs['p'] has type")
    assert "fastworker.register_type(" in problem


def test_a_registered_type_is_not_a_map_key(point: int) -> None:
    problem = check_portable({Point(1, 2): 1, UUID(int=1): 2}, "kwargs")
    assert problem is not None
    assert "has a key" in problem


def test_an_extension_value_of_a_code_the_client_does_not_know_stays_opaque() -> None:
    back = CLIENT.decode_as(CONTROL_PLANE.encode(_result(Ext(99, b"raw"))), Results)
    assert back.results[0] is not None
    opaque = back.results[0].result
    assert (type(opaque), opaque.code, opaque.data) == (Ext, 99, b"raw")
    assert describe_ext(opaque) == "ext(99, 3 bytes)"


def test_bytes_a_registered_type_cannot_decode_are_an_invalid_message_naming_it() -> None:
    bad = CONTROL_PLANE.encode(_result([Ext(1, b"short")]))
    with pytest.raises(InvalidMessage, match=r"ext code 1 \(uuid.UUID\) cannot be decoded"):
        CLIENT.decode(bad)
    with pytest.raises(ValueTypeError, match="cannot be decoded from its 5 bytes"):
        VALUE_TYPES.from_wire([Ext(1, b"short")])
    assert describe_ext(Ext(2, b"not a number")) == "ext(2, 12 bytes)"


def test_an_encode_that_fails_or_returns_no_bytes_is_the_value_s_problem() -> None:
    register_type(Point, code=41, encode=lambda p: p.x, decode=_decode_point)
    try:
        _, problem = portable_form([Point(1, 2)], "result")
    finally:
        VALUE_TYPES.unregister(Point)
    assert problem is not None
    assert problem.startswith("result: the encode registered for")
    assert "returned int, not bytes" in problem


@pytest.mark.parametrize("code", [-1, 0, 31, 128, True, "40"])
def test_a_code_outside_the_application_s_range_is_refused(code: Any) -> None:
    with pytest.raises(ValueError, match="code must be an int from 32 to 127"):
        register_type(Point, code=code, encode=_encode_point, decode=_decode_point)
    assert Point not in VALUE_TYPES.by_type


def test_a_code_or_a_type_registered_already_is_refused(point: int) -> None:
    with pytest.raises(ValueError, match=rf"ext code {point} is already registered, for .*Point"):
        register_type(Point3, code=point, encode=_encode_point, decode=_decode_point)
    with pytest.raises(ValueError, match=rf"Point is already registered, as ext code {point}"):
        register_type(Point, code=42, encode=_encode_point, decode=_decode_point)
    with pytest.raises(ValueError, match=r"uuid.UUID is already registered, as ext code 1"):
        register_type(UUID, code=43, encode=bytes, decode=_decode_point)


@pytest.mark.parametrize("cls", [int, str, dict, list, bytes, Ext])
def test_a_type_msgpack_carries_itself_cannot_be_registered(cls: type) -> None:
    with pytest.raises(ValueError, match="already travels as itself"):
        register_type(cls, code=50, encode=bytes, decode=bytes)


def test_registration_needs_a_class_and_two_callables() -> None:
    with pytest.raises(TypeError, match="register a class"):
        register_type(Point(1, 2), code=50, encode=bytes, decode=bytes)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be callables"):
        register_type(Point, code=50, encode=b"", decode=bytes)  # type: ignore[arg-type]


def test_the_code_ranges_split_msgpack_s_application_codes() -> None:
    assert (BUILTIN_CODES.start, BUILTIN_CODES.stop, USER_CODES.stop) == (0, 32, 128)
    assert BUILTIN_CODES.stop == USER_CODES.start
