"""Tasks over values of registered types, and the type they register: imported by the
control plane, the subworker and the test (the client), so all of them agree on it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from uuid import UUID

import fastworker
from fastworker import task


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str


@dataclass(frozen=True)
class Unregistered:
    x: int


def _encode_money(money: Money) -> bytes:
    return json.dumps([str(money.amount), money.currency]).encode()


def _decode_money(data: bytes) -> Money:
    amount, currency = json.loads(data)
    return Money(Decimal(amount), currency)


fastworker.register_type(Money, code=40, encode=_encode_money, decode=_decode_money)


@task
def typed_echo(value: object) -> dict[str, object]:
    """The value back, and the type names the task saw (so the test knows they arrived
    as themselves, not just came back so)."""
    seen = value if isinstance(value, list) else [value]
    return {"value": value, "types": [type(v).__name__ for v in seen]}


@task
def order_total(order_id: UUID, lines: list[Money]) -> dict[str, object]:
    assert isinstance(order_id, UUID)
    total = sum((line.amount for line in lines), Decimal(0))
    return {"order": order_id, "total": Money(total, lines[0].currency)}


@task
def unregistered_result() -> Unregistered:
    return Unregistered(1)


@task(pool="process")
def typed_echo_in_a_child(value: object) -> dict[str, object]:
    """``typed_echo`` in a child process (which imports this module, so knows ``Money``)."""
    return typed_echo.fn(value)
