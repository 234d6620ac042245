"""The codec: every message survives the wire, and no bytes make decoding misbehave."""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastworker_protocol as fp

CODEC = fp.Codec()
INT64 = st.integers(-(2**63), 2**63 - 1)
SCALARS: st.SearchStrategy[Any] = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
)
SCALARS |= st.text(max_size=12) | st.binary(max_size=12)
MSGPACK_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_LEAVES: dict[type, st.SearchStrategy[Any]] = {
    mi.AnyType: MSGPACK_VALUES,
    mi.NoneType: st.none(),
    mi.BoolType: st.booleans(),
    mi.IntType: INT64,
    mi.FloatType: st.floats(allow_nan=False),
    mi.StrType: st.text(max_size=16),
}


def strategy_for(t: mi.Type) -> st.SearchStrategy[Any]:
    """A strategy for any value of a msgspec type, read from its type info."""
    match t:
        case mi.FloatType(gt=gt, ge=ge, le=le) if (gt, ge, le) != (None, None, None):
            low = gt if gt is not None else ge
            return st.floats(low, le, exclude_min=gt is not None, allow_nan=False)
        case mi.IntType(ge=ge, le=le) if ge is not None:
            return st.integers(ge, le if le is not None else 2**63 - 1)
        case mi.StrType(pattern=pattern) if pattern is not None:
            return st.from_regex(pattern, fullmatch=True)
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
                **{f.name: st.just(1) if f.name == "v" else strategy_for(f.type) for f in fields},
            )
    return _LEAVES[type(t)]


def messages_of(message_type: type[fp.Message]) -> st.SearchStrategy[fp.Message]:
    return strategy_for(mi.type_info(message_type))


def fields_of(message_type: type[fp.Message]) -> tuple[mi.Field, ...]:
    info = mi.type_info(message_type)
    assert isinstance(info, mi.StructType)
    return info.fields


ANY_MESSAGE = st.sampled_from(fp.ALL_MESSAGES).flatmap(messages_of)
WITH_FIELDS = st.sampled_from([m for m in fp.ALL_MESSAGES if fields_of(m)])
FIELD_NAMES = sorted({f.encode_name for m in fp.ALL_MESSAGES for f in fields_of(m)})
NEAR_VALID_FRAMES = st.fixed_dictionaries(
    {"op": st.sampled_from([fp.message_op(m) for m in fp.ALL_MESSAGES]) | MSGPACK_VALUES},
    optional=dict.fromkeys(FIELD_NAMES, MSGPACK_VALUES),
)


def wire(message: fp.Message) -> dict[str, Any]:
    """A message as the plain msgpack map a foreign peer would send."""
    frame: dict[str, Any] = msgspec.msgpack.decode(CODEC.encode(message))
    return frame


def raw(obj: object) -> bytes:
    return msgspec.msgpack.encode(obj)


def submit_frame(*args: Any) -> bytes:
    return raw({"op": "submit", "v": 1, "tasks": [{"name": "t", "args": list(args)}]})


@pytest.mark.parametrize("message_type", fp.ALL_MESSAGES, ids=lambda m: m.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_message_type_survives_an_encode_decode_round_trip(
    message_type: type[fp.Message], data: st.DataObject
) -> None:
    message = data.draw(messages_of(message_type))
    assert CODEC.decode(CODEC.encode(message)) == message


@settings(deadline=None)
@given(st.binary(max_size=256) | (MSGPACK_VALUES | NEAR_VALID_FRAMES).map(raw))
def test_decoding_arbitrary_bytes_raises_nothing_but_decode_errors(data: bytes) -> None:
    with contextlib.suppress(fp.DecodeError):
        CODEC.decode(data)


@settings(deadline=None)
@given(ANY_MESSAGE, st.data())
def test_a_valid_frame_with_a_corrupted_byte_raises_nothing_but_decode_errors(
    message: fp.Message, data: st.DataObject
) -> None:
    frame = bytearray(CODEC.encode(message))
    frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(fp.DecodeError):
        CODEC.decode(bytes(frame))


@settings(max_examples=50, deadline=None)
@given(ANY_MESSAGE)
def test_every_truncation_of_a_valid_frame_is_rejected_as_malformed(message: fp.Message) -> None:
    data = CODEC.encode(message)
    for end in range(len(data)):
        with pytest.raises(fp.MalformedMessage):
            CODEC.decode(data[:end])


def test_a_frame_over_the_size_limit_is_rejected_as_oversize() -> None:
    data = submit_frame("x" * 100)
    with pytest.raises(fp.OversizeMessage, match="limit"):
        fp.Codec(max_message_size=len(data) - 1).decode(data)
    assert fp.Codec(max_message_size=len(data)).decode(data) == CODEC.decode(data)


def test_encoding_a_message_over_the_size_limit_raises_encode_error() -> None:
    with pytest.raises(fp.EncodeError, match="limit"):
        fp.Codec(max_message_size=64).encode(
            fp.Submit(tasks=[fp.TaskSpec(name="t", args=["x" * 100])])
        )


def test_a_codec_needs_a_positive_size_limit() -> None:
    with pytest.raises(ValueError, match="positive"):
        fp.Codec(max_message_size=0)


@pytest.mark.parametrize(
    "value",
    [object(), 2**64, -(2**63) - 1, {"k": object()}],
    ids=["object", "2**64", "-(2**63)-1", "dict-of-object"],  # stable: xdist workers compare ids
)
def test_encoding_a_value_msgpack_cannot_carry_raises_encode_error(value: Any) -> None:
    with pytest.raises(fp.EncodeError):
        CODEC.encode(fp.Submit(tasks=[fp.TaskSpec(name="t", args=[value])]))


def test_encoding_a_self_referencing_value_raises_encode_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(fp.EncodeError):
        CODEC.encode(fp.Submit(tasks=[fp.TaskSpec(name="t", args=[loop])]))


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "submit", "tasks": "not a list"},
        {"op": "submit", "tasks": [{"name": 1}]},
        {"op": "submit", "tasks": [], "wait": True},
        {"op": "submit", "tasks": [], "v": "1"},
        {"op": "submit", "tasks": [{"name": "t", "headers": {"traceparent": 1}}]},
        {"op": "get", "task_ids": [], "wait": "soon"},
        {"op": "fetch", "worker_id": "w", "wait": None},
        {"op": "register", "worker_id": "w", "name": "n", "concurrency": "4", "tasks": []},
        {"op": "list_tasks", "limit": 1.5},
        {"op": "list_tasks", "status": "exploded"},
        {"op": "error", "code": "no_such_code", "message": "m"},
    ],
    ids=repr,
)
def test_a_field_of_the_wrong_type_is_rejected_as_invalid(frame: dict[str, Any]) -> None:
    with pytest.raises(fp.InvalidMessage, match=f"invalid '{frame['op']}' message"):
        CODEC.decode(raw(frame))


@settings(max_examples=60, deadline=None)
@given(WITH_FIELDS.flatmap(messages_of))
def test_a_message_missing_any_required_field_is_rejected_as_invalid(message: fp.Message) -> None:
    for field in (f for f in fields_of(type(message)) if f.required):
        frame = wire(message)
        del frame[field.encode_name]
        with pytest.raises(
            fp.InvalidMessage, match=f"missing required field `{field.encode_name}`"
        ):
            CODEC.decode(raw(frame))


@pytest.mark.parametrize("op", ["frobnicate", "SUBMIT", "", 7, True])
def test_a_map_with_an_unknown_op_is_rejected_as_unknown_op(op: object) -> None:
    with pytest.raises(fp.UnknownOp):
        CODEC.decode(raw({"op": op, "v": 1}))


@pytest.mark.parametrize("op", [[], {"a": 1}], ids=repr)
def test_a_map_whose_op_is_a_list_or_map_is_rejected_as_unknown_op(op: object) -> None:
    with pytest.raises(fp.UnknownOp):
        CODEC.decode(raw({"op": op, "v": 1}))


@pytest.mark.parametrize("value", [[], ["submit"], 1, "submit", None, b"\x80", 1.5], ids=repr)
def test_a_frame_that_is_not_a_map_is_rejected_as_invalid(value: object) -> None:
    with pytest.raises(fp.InvalidMessage, match="must be a map"):
        CODEC.decode(raw(value))


def test_a_map_without_an_op_is_rejected_as_invalid() -> None:
    with pytest.raises(fp.InvalidMessage, match="no 'op' field"):
        CODEC.decode(raw({"v": 1, "tasks": []}))


@settings(deadline=None)
@given(ANY_MESSAGE, INT64.filter(lambda v: v != fp.PROTOCOL_VERSION))
def test_any_other_protocol_version_is_rejected_as_unsupported(message: fp.Message, v: int) -> None:
    with pytest.raises(fp.UnsupportedVersion):
        CODEC.decode(raw({**wire(message), "v": v}))


@settings(deadline=None)
@given(ANY_MESSAGE, st.dictionaries(st.text(max_size=8), MSGPACK_VALUES, max_size=3))
def test_unknown_fields_are_ignored(message: fp.Message, extra: dict[str, Any]) -> None:
    frame = wire(message)
    frame.update({f"x-{key}": value for key, value in extra.items()})
    assert CODEC.decode(raw(frame)) == message


@settings(deadline=None)
@given(st.integers(0, 127), st.binary(max_size=32))
def test_msgpack_ext_values_in_args_decode_as_inert_ext_objects(code: int, data: bytes) -> None:
    message = CODEC.decode(submit_frame(msgspec.msgpack.Ext(code, data)))
    assert isinstance(message, fp.Submit)
    (value,) = message.tasks[0].args
    assert isinstance(value, msgspec.msgpack.Ext)
    assert (value.code, value.data) == (code, data)
