"""Argument checks against the signatures subworkers send, built from real ``@task``s."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker import Task, TaskRegistry, task
from fastworker_control_plane.core.arguments import ArgumentChecker
from fastworker_protocol import Param, TaskSignature

registry = TaskRegistry()


@task(registry=registry)
def add(x: int, y: int) -> int:
    return x + y


@task(registry=registry)
def greet(name: str, greeting: str = "hello") -> str:
    return f"{greeting} {name}"


@task(registry=registry)
def total(*numbers: int) -> int:
    return sum(numbers)


@task(registry=registry)
def configure(**options: Any) -> dict[str, Any]:
    return options


@task(registry=registry)
def resize(image: str, *, width: int, height: int = 0) -> str:
    return image


@task(registry=registry)
def power(base: int, /, exponent: int = 2) -> int:
    return int(base**exponent)


@task(registry=registry)
def anything(first: int, *rest: int, flag: bool = False, **extra: Any) -> None:
    return None


@task(registry=registry)
def nothing() -> None:
    return None


def checker(t: Task[..., Any]) -> ArgumentChecker:
    return ArgumentChecker(t.signature())


FITS: list[tuple[Task[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (add, (1, 2), {}),
    (add, (1,), {"y": 2}),
    (add, (), {"x": 1, "y": 2}),
    (greet, ("ada",), {}),
    (greet, ("ada", "hi"), {}),
    (greet, ("ada",), {"greeting": "hi"}),
    (total, (), {}),
    (total, (1, 2, 3, 4, 5), {}),
    (configure, (), {}),
    (configure, (), {"a": 1, "b": 2}),
    (resize, ("img",), {"width": 10}),
    (resize, ("img",), {"width": 10, "height": 5}),
    (power, (3,), {}),
    (power, (3, 4), {}),
    (power, (3,), {"exponent": 4}),
    (anything, (1,), {}),
    (anything, (1, 2, 3), {"flag": True, "other": "x"}),
    (nothing, (), {}),
]

MISFITS: list[tuple[Task[..., Any], tuple[Any, ...], dict[str, Any], str]] = [
    (add, (1,), {}, "missing a required argument: 'y'"),
    (add, (), {}, "missing a required argument: 'x'"),
    (add, (1, 2, 3), {}, "too many positional arguments"),
    (add, (1, 2), {"z": 3}, "unexpected keyword argument 'z'"),
    (add, (1,), {"x": 2}, "multiple values for argument 'x'"),
    (greet, (), {"greeting": "hi"}, "missing a required argument: 'name'"),
    (total, (), {"numbers": [1]}, "unexpected keyword argument 'numbers'"),
    (configure, (1,), {}, "too many positional arguments"),
    (resize, ("img",), {}, "missing a required argument: 'width'"),
    (resize, ("img", 10), {}, "too many positional arguments"),
    (power, (), {"base": 3}, "base"),
    (nothing, (1,), {}, "too many positional arguments"),
    (nothing, (), {"x": 1}, "unexpected keyword argument 'x'"),
]


@pytest.mark.parametrize(("t", "args", "kwargs"), FITS, ids=[f"{t.name}{a}{k}" for t, a, k in FITS])
def test_a_call_that_fits_the_signature_is_accepted(
    t: Task[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert checker(t).problem(list(args), kwargs) is None
    t(*args, **kwargs)  # the function itself agrees


@pytest.mark.parametrize(
    ("t", "args", "kwargs", "why"), MISFITS, ids=[f"{m[0].name}{m[1]}{m[2]}" for m in MISFITS]
)
def test_a_call_that_does_not_fit_is_rejected_with_a_message_naming_the_task(
    t: Task[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], why: str
) -> None:
    problem = checker(t).problem(list(args), kwargs)

    assert problem is not None
    assert problem.startswith(f"{t.name}(): ")
    assert why in problem
    with pytest.raises(TypeError):
        t(*args, **kwargs)  # the function itself agrees


def test_the_checker_uses_the_registered_name_not_the_function_name() -> None:
    renamed = Task(fn=add.fn, name="math.add")

    problem = ArgumentChecker(renamed.signature()).problem([], {})

    assert problem is not None
    assert problem.startswith("math.add(): ")


def test_default_values_are_not_needed_only_whether_a_default_exists() -> None:
    sig = TaskSignature(
        name="remote",
        params=[
            Param(name="a", kind="POSITIONAL_OR_KEYWORD"),
            Param(name="b", kind="POSITIONAL_OR_KEYWORD", has_default=True),
        ],
    )

    check = ArgumentChecker(sig)

    assert check.problem([1], {}) is None
    assert check.problem([1, 2], {}) is None
    assert check.problem([], {}) is not None


def test_an_unknown_parameter_kind_is_treated_as_a_plain_parameter() -> None:
    sig = TaskSignature(name="future", params=[Param(name="a", kind="SOMETHING_NEW")])

    check = ArgumentChecker(sig)

    assert check.problem([1], {}) is None
    assert check.problem([], {"a": 1}) is None
    assert check.problem([1, 2], {}) is not None


def test_an_impossible_signature_cannot_be_built() -> None:
    sig = TaskSignature(
        name="bad",
        params=[
            Param(name="a", kind="POSITIONAL_OR_KEYWORD", has_default=True),
            Param(name="b", kind="POSITIONAL_OR_KEYWORD"),
        ],
    )

    with pytest.raises(ValueError, match="default"):
        ArgumentChecker(sig)
