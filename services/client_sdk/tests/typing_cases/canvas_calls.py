"""Calls mypy --strict must judge: ``test_canvas`` runs mypy on this file and expects an
error on exactly the lines marked ``# wrong``. Never imported, never run."""

from fastworker import task
from fastworker.canvas import Signature, chain, sig


@task
def add(x: int, y: int, *, scale: int = 1) -> int:
    return (x + y) * scale


def calls() -> None:
    add.si(1, 2)
    add.si(1, 2, scale=3)
    add.si(1)  # wrong
    add.si(1, "2")  # wrong
    add.si(1, 2, z=3)  # wrong
    add.s(2)  # fed its first argument: untyped, checked when compiled
    add.s("anything", goes=True)  # untyped
    add.s(1).set(priority="high", max_retries=2)
    add.s(1).set(countdown=5)  # wrong
    sig("add", 1, 2, priority="high", queue="q")


def a_chain_is_no_signature() -> Signature:
    return chain(add.s(1, 2), add.s(3))  # wrong
