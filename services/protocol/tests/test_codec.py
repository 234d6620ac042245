"""The codec: every message survives the wire, and no bytes make decoding misbehave."""

from __future__ import annotations

import builtins
import contextlib
import pickle
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from fastworker_protocol import (
    ALL_MESSAGES,
    PROTOCOL_VERSION,
    Assign,
    Codec,
    DecodeError,
    EncodeError,
    Error,
    ErrorCode,
    InvalidMessage,
    MalformedMessage,
    Message,
    OversizeMessage,
    Results,
    Submit,
    TaskSpec,
    UnknownOp,
    UnsupportedVersion,
    message_op,
)
from hypothesis import given, settings
from hypothesis import strategies as st

CODEC = Codec()

MSGPACK_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.binary(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def strategy_for(t: mi.Type) -> st.SearchStrategy[Any]:
    """A strategy for any value of a msgspec type, read from its type info."""
    match t:
        case mi.AnyType():
            return MSGPACK_VALUES
        case mi.NoneType():
            return st.none()
        case mi.BoolType():
            return st.booleans()
        case mi.IntType():
            return st.integers(min_value=-(2**63), max_value=2**63 - 1)
        case mi.FloatType():
            return st.floats(allow_nan=False)
        case mi.StrType():
            return st.text(max_size=16)
        case mi.EnumType(cls=cls):
            return st.sampled_from(cls)
        case mi.ListType(item_type=item):
            return st.lists(strategy_for(item), max_size=3)
        case mi.DictType(key_type=key, value_type=value):
            return st.dictionaries(strategy_for(key), strategy_for(value), max_size=3)
        case mi.UnionType(types=types):
            return st.one_of(*(strategy_for(member) for member in types))
        case mi.StructType(cls=cls, fields=fields):
            return st.builds(
                cls,
                **{
                    f.name: st.just(PROTOCOL_VERSION) if f.name == "v" else strategy_for(f.type)
                    for f in fields
                },
            )
    raise TypeError(f"no strategy for {t!r}")


def messages_of(message_type: type[Message]) -> st.SearchStrategy[Message]:
    return strategy_for(mi.type_info(message_type))


ANY_MESSAGE = st.sampled_from(ALL_MESSAGES).flatmap(messages_of)


def wire(message: Message) -> dict[str, Any]:
    """A message as the plain msgpack map a foreign peer would send."""
    return msgspec.msgpack.decode(CODEC.encode(message))


def raw(obj: object) -> bytes:
    return msgspec.msgpack.encode(obj)


@pytest.mark.parametrize("message_type", ALL_MESSAGES, ids=lambda m: m.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_message_type_survives_an_encode_decode_round_trip(
    message_type: type[Message], data: st.DataObject
) -> None:
    message = data.draw(messages_of(message_type))
    assert CODEC.decode(CODEC.encode(message)) == message


FIELD_NAMES = sorted({f.encode_name for m in ALL_MESSAGES for f in mi.type_info(m).fields})
NEAR_VALID_FRAMES = st.fixed_dictionaries(
    {"op": st.sampled_from([message_op(m) for m in ALL_MESSAGES]) | MSGPACK_VALUES},
    optional={name: MSGPACK_VALUES for name in FIELD_NAMES},
)


@settings(deadline=None)
@given(st.binary(max_size=256))
def test_decoding_arbitrary_bytes_raises_nothing_but_decode_errors(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        CODEC.decode(data)


@settings(deadline=None)
@given(MSGPACK_VALUES | NEAR_VALID_FRAMES)
def test_decoding_arbitrary_msgpack_values_raises_nothing_but_decode_errors(value: Any) -> None:
    with contextlib.suppress(DecodeError):
        CODEC.decode(raw(value))


@settings(deadline=None)
@given(ANY_MESSAGE, st.data())
def test_decoding_a_valid_frame_with_a_corrupted_byte_raises_nothing_but_decode_errors(
    message: Message, data: st.DataObject
) -> None:
    frame = bytearray(CODEC.encode(message))
    frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(DecodeError):
        CODEC.decode(bytes(frame))


@settings(max_examples=50, deadline=None)
@given(ANY_MESSAGE)
def test_every_truncation_of_a_valid_frame_is_rejected_as_malformed(message: Message) -> None:
    data = CODEC.encode(message)
    for end in range(len(data)):
        with pytest.raises(MalformedMessage):
            CODEC.decode(data[:end])


def test_a_frame_over_the_size_limit_is_rejected_as_oversize() -> None:
    data = CODEC.encode(Submit(tasks=[TaskSpec(name="t", args=["x" * 100])]))
    with pytest.raises(OversizeMessage):
        Codec(max_message_size=len(data) - 1).decode(data)
    assert Codec(max_message_size=len(data)).decode(data) == CODEC.decode(data)


def test_encoding_a_message_over_the_size_limit_raises_encode_error() -> None:
    with pytest.raises(EncodeError, match="limit"):
        Codec(max_message_size=64).encode(Submit(tasks=[TaskSpec(name="t", args=["x" * 100])]))


def test_a_codec_needs_a_positive_size_limit() -> None:
    with pytest.raises(ValueError, match="positive"):
        Codec(max_message_size=0)


@pytest.mark.parametrize("bad_value", [object(), 2**64, -(2**63) - 1, {"key": object()}], ids=repr)
def test_encoding_a_value_msgpack_cannot_carry_raises_encode_error(bad_value: Any) -> None:
    with pytest.raises(EncodeError):
        CODEC.encode(Submit(tasks=[TaskSpec(name="t", args=[bad_value])]))


@pytest.mark.xfail(strict=True, reason="bug: RecursionError escapes Codec.encode")
def test_encoding_a_self_referencing_value_raises_encode_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(EncodeError):
        CODEC.encode(Submit(tasks=[TaskSpec(name="t", args=[loop])]))


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "submit", "tasks": "not a list"},
        {"op": "submit", "tasks": [{"name": 1}]},
        {"op": "submit", "tasks": [], "wait": True},
        {"op": "submit", "tasks": [], "v": "1"},
        {"op": "submit", "tasks": [{"name": "t", "kwargs": {"1": 2, "b": 3}, "headers": {"h": 1}}]},
        {"op": "get", "task_ids": [1]},
        {"op": "get", "task_ids": [], "wait": "soon"},
        {"op": "fetch", "worker_id": "w", "wait": None},
        {"op": "register", "worker_id": "w", "name": "n", "concurrency": "4", "tasks": []},
        {"op": "list_tasks", "limit": 1.5},
        {"op": "list_tasks", "status": "exploded"},
        {"op": "error", "code": "no_such_code", "message": "m"},
        {"op": "results", "results": [{"task_id": "a", "name": "n", "status": 7}]},
    ],
    ids=lambda frame: f"{frame['op']}:{sorted(frame)}",
)
def test_a_field_of_the_wrong_type_is_rejected_as_invalid(frame: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessage):
        CODEC.decode(raw(frame))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([m for m in ALL_MESSAGES if mi.type_info(m).fields]).flatmap(messages_of))
def test_a_message_missing_any_required_field_is_rejected_as_invalid(message: Message) -> None:
    for f in mi.type_info(type(message)).fields:
        if f.required:
            frame = wire(message)
            del frame[f.encode_name]
            with pytest.raises(InvalidMessage, match=f.encode_name):
                CODEC.decode(raw(frame))


@pytest.mark.parametrize("op", ["frobnicate", "SUBMIT", "", 7])
def test_a_map_with_an_unknown_op_is_rejected_as_unknown_op(op: object) -> None:
    with pytest.raises(UnknownOp):
        CODEC.decode(raw({"op": op, "v": 1}))


@pytest.mark.parametrize("value", [[], ["submit"], 1, "submit", None, b"\x80", 1.5], ids=repr)
def test_a_frame_that_is_not_a_map_is_rejected_as_invalid(value: object) -> None:
    with pytest.raises(InvalidMessage, match="map"):
        CODEC.decode(raw(value))


def test_a_map_without_an_op_is_rejected_as_invalid() -> None:
    with pytest.raises(InvalidMessage, match="'op'"):
        CODEC.decode(raw({"v": 1, "tasks": []}))


@given(ANY_MESSAGE, st.integers(-(2**63), 2**63 - 1).filter(lambda v: v != PROTOCOL_VERSION))
def test_any_other_protocol_version_is_rejected_as_unsupported(message: Message, v: int) -> None:
    with pytest.raises(UnsupportedVersion):
        CODEC.decode(raw({**wire(message), "v": v}))


@pytest.mark.xfail(strict=True, reason="bug: fields are validated before `v` is checked")
def test_a_version_2_message_with_a_renamed_field_is_rejected_as_unsupported() -> None:
    with pytest.raises(UnsupportedVersion):
        CODEC.decode(raw({"op": "submit", "v": 2, "jobs": []}))


def test_a_message_without_v_is_read_as_version_1() -> None:
    assert CODEC.decode(raw({"op": "submit", "tasks": []})) == Submit(tasks=[])


@settings(deadline=None)
@given(ANY_MESSAGE, st.dictionaries(st.text(min_size=1, max_size=8), MSGPACK_VALUES, max_size=3))
def test_unknown_fields_are_ignored(message: Message, extra: dict[str, Any]) -> None:
    frame = wire(message)
    frame.update({f"x-{key}": value for key, value in extra.items()})
    assert CODEC.decode(raw(frame)) == message


def test_unknown_fields_inside_nested_records_are_ignored() -> None:
    frame = {"op": "submit", "tasks": [{"name": "t", "priority_hint": 9}], "trace": {"a": 1}}
    assert CODEC.decode(raw(frame)) == Submit(tasks=[TaskSpec(name="t")])


class _Exploit:
    """Unpickling this runs code: the classic pickle exploit."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, ("import builtins; builtins.fastworker_pwned = True",))


@given(st.integers(0, 127), st.binary(max_size=32))
def test_msgpack_ext_values_in_args_decode_as_inert_ext_objects(code: int, data: bytes) -> None:
    message = CODEC.decode(
        raw({"op": "submit", "tasks": [{"name": "t", "args": [msgspec.msgpack.Ext(code, data)]}]})
    )
    assert isinstance(message, Submit)
    (value,) = message.tasks[0].args
    assert isinstance(value, msgspec.msgpack.Ext)
    assert (value.code, value.data) == (code, data)


def test_a_pickle_inside_an_ext_or_bin_value_is_never_unpickled() -> None:
    payload = pickle.dumps(_Exploit())
    args = [msgspec.msgpack.Ext(1, payload), payload, {"p": payload}]
    message = CODEC.decode(raw({"op": "submit", "tasks": [{"name": "t", "args": args}]}))
    assert isinstance(message, Submit)
    assert message.tasks[0].args[1:] == [payload, {"p": payload}]
    assert not hasattr(builtins, "fastworker_pwned")


def test_decode_as_returns_the_expected_reply_type() -> None:
    reply = Results(results=[None])
    assert CODEC.decode_as(CODEC.encode(reply), Results) == reply


def test_decode_as_rejects_a_reply_of_another_type_as_invalid() -> None:
    data = CODEC.encode(Error(code=ErrorCode.INTERNAL, message="boom"))
    with pytest.raises(InvalidMessage, match="expected 'assign', got 'error'"):
        CODEC.decode_as(data, Assign)
