"""Values under ``eager()``: a UUID, a Decimal and a registered type make the same round
trip as in production (extension values both ways), and an unregistered type is refused
at submit just as a client talking to a control plane refuses it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
import pytest

import fastworker
from fastworker import InvalidArguments, SyncClient, TaskRegistry, TaskStatus, task
from fastworker.testing import eager
from fastworker_protocol import VALUE_TYPES, register_type

registry = TaskRegistry()
seen: list[Any] = []


@dataclasses.dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str


@dataclasses.dataclass(frozen=True)
class Unregistered:
    x: int


@task(registry=registry)
def echo(value: Any) -> Any:
    seen.append(value)
    return value


@task(registry=registry)
def total(prices: list[Money]) -> Money:
    seen.append(prices)
    return Money(sum((p.amount for p in prices), Decimal(0)), prices[0].currency)


@task(registry=registry)
def make_unregistered() -> Unregistered:
    return Unregistered(1)


@pytest.fixture(autouse=True)
def money() -> Iterator[None]:
    """``Money`` registered as the application would, in the tasks' module."""
    seen.clear()
    fastworker.register_type(
        Money,
        code=60,
        encode=lambda m: json.dumps([str(m.amount), m.currency]).encode(),
        decode=lambda data: Money(Decimal(json.loads(data)[0]), json.loads(data)[1]),
    )
    yield
    VALUE_TYPES.unregister(Money)


def test_a_uuid_and_a_decimal_reach_the_task_and_come_back_as_themselves() -> None:
    value = {"id": UUID(int=42), "price": Decimal("19.90"), "pair": (UUID(int=1), "x")}
    with eager(registry) as runner, SyncClient() as client:
        back = client.wait(echo.delay(value))
    assert seen == [{"id": UUID(int=42), "price": Decimal("19.90"), "pair": [UUID(int=1), "x"]}]
    assert back == {"id": UUID(int=42), "price": Decimal("19.90"), "pair": [UUID(int=1), "x"]}
    assert str(back["price"]) == "19.90"  # every digit kept
    assert runner.submissions[0].args == [seen[0]]  # what the task got
    assert runner.submissions[0].result.result == back


def test_a_registered_type_reaches_the_task_and_comes_back_as_itself() -> None:
    prices = [Money(Decimal("1.10"), "EUR"), Money(Decimal("2.05"), "EUR")]
    with eager(registry), SyncClient() as client:
        assert client.wait(total.delay(prices)) == Money(Decimal("3.15"), "EUR")
    assert seen == [prices]


def test_an_unregistered_type_is_refused_at_submit_naming_the_hook() -> None:
    with (
        eager(registry) as runner,
        SyncClient() as client,
        pytest.raises(InvalidArguments, match=r"echo\(\): args\[0\]\['u'\] has type") as refused,
    ):
        client.delay(echo, {"u": Unregistered(1)})
    assert "fastworker.register_type(" in refused.value.message
    assert runner.submissions == []


def test_an_unregistered_result_fails_the_task_as_unserializable() -> None:
    with eager(registry, propagate=False), SyncClient() as client:
        result = client.wait_result(make_unregistered.delay())
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "unserializable_result"
    assert "fastworker.register_type(" in result.error.message


def test_the_hook_is_part_of_the_sdk_s_public_face() -> None:
    assert "register_type" in fastworker.__all__
    assert fastworker.register_type is register_type


def test_the_cli_prints_them_as_text_where_json_has_no_form() -> None:
    from fastworker.cli.client_commands import print_json, shown_in_json

    assert json.dumps([UUID(int=1), Decimal("1.10")], default=shown_in_json) == (
        '["00000000-0000-0000-0000-000000000001", "1.10"]'
    )
    assert shown_in_json(msgspec.msgpack.Ext(77, b"abc")) == "ext(77, 3 bytes)"
    print_json({"opaque": msgspec.msgpack.Ext(77, b"abc")})  # never raises
