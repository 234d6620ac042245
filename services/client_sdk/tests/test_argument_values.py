"""Arguments that would not come back as themselves are refused at submit, before anything
is sent: ``InvalidArguments`` naming the task, the argument's place and its type."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from fastworker import BatchItem, Client, InvalidArguments, Priority
from fastworker._calls import task_spec


@dataclasses.dataclass
class Point:
    x: int


class Money(Decimal):
    """Not a Decimal to the wire rule: types match exactly."""


class Ident(UUID):
    pass


REFUSED = [
    ({1, 2}, "set"),
    (frozenset({1}), "frozenset"),
    (Money("1.5"), "Money"),
    (Ident(int=3), "Ident"),
    (Point(1), "Point"),
    (datetime(2024, 1, 2), "naive"),
    (2**64, "outside msgpack's 64-bit range"),
    (-(2**63) - 1, "outside msgpack's 64-bit range"),
    (object(), "object"),
]
IDS = ["set", "frozenset", "decimal-subclass", "uuid-subclass", "dataclass", "naive", "big"]
IDS += ["small", "object"]


class _Spy:
    """Stands in for every way a started client sends: records, never sends."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def submit(self, spec: Any) -> str:
        self.sent.append(spec)
        return str(spec.id)

    async def send_submit(self, *args: Any) -> Any:
        self.sent.append(args)
        raise AssertionError("nothing should have been sent")


@pytest.fixture
def spied() -> tuple[Client, _Spy]:
    client, spy = Client(address="tcp://127.0.0.1:1"), _Spy()
    client._results = object()  # type: ignore[assignment]  # "started", with no socket at all
    client._coalescers = {p: spy for p in Priority}  # type: ignore[misc]
    client._send_submit = spy.send_submit  # type: ignore[method-assign,assignment]
    return client, spy


@pytest.mark.parametrize(("value", "named"), REFUSED, ids=IDS)
async def test_each_refused_type_raises_invalid_arguments_at_submit_and_nothing_is_sent(
    spied: tuple[Client, _Spy], value: object, named: str
) -> None:
    client, spy = spied
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: client.delay("add", 1, value),
        lambda: client.delay("add", 1, y={"deep": [value]}),
        lambda: client.apply_async("add", (value,)),
        lambda: client.submit_task("add", args=[[value]]),
        lambda: client.submit_batch([BatchItem("add", (1, 2)), BatchItem("add", (value,))]),
    ]
    for call in calls:
        with pytest.raises(InvalidArguments) as refused:
            await call()
        assert refused.value.code == "invalid_arguments"
        assert refused.value.message.startswith("add(): ")
        assert named in refused.value.message
    assert spy.sent == []


def test_the_message_names_the_argument_s_place() -> None:
    with pytest.raises(InvalidArguments, match=r"add\(\): args\[1\] has type set"):
        task_spec("add", (1, {2}), None, None)
    with pytest.raises(InvalidArguments, match=r"add\(\): kwargs\['y'\]\['k'\]\[0\] has type"):
        task_spec("add", (), {"y": {"k": [Point(0)]}}, None)


def test_portable_arguments_pass_and_a_tuple_is_sent_as_a_list() -> None:
    when = datetime(2024, 1, 2, tzinfo=UTC)
    args = (None, True, 2**64 - 1, -(2**63), 1.5, "s", b"b", (1, 2), {"k": [when]}, {1: "int key"})
    spec = task_spec("t", args, {"raw": bytearray(b"x")}, None)
    assert spec.args == list(args)
    assert spec.kwargs == {"raw": bytearray(b"x")}


def test_a_kwargs_key_that_is_not_a_str_is_refused() -> None:
    with pytest.raises(InvalidArguments, match="kwargs has a key that is not a str"):
        task_spec("t", (), {1: "x"}, None)  # type: ignore[dict-item]
