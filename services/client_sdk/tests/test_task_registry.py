"""``@task`` and the TaskRegistry: naming functions so subworkers may run them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import fastworker._task
from fastworker import Priority, Task, TaskRegistry, default_registry, task
from fastworker_protocol import Param, TaskSignature


def test_a_bare_decorator_registers_the_function_under_its_module_qualified_name() -> None:
    registry = TaskRegistry()

    def add(x: int, y: int) -> int:
        return x + y

    registered = task(registry=registry)(add)

    full = f"{__name__}.{add.__qualname__}"  # test_...<locals>.add: defined in this test
    assert isinstance(registered, Task)
    assert (registered.name, registered.priority, registered.fn) == (full, Priority.NORMAL, add)
    assert registry.get(full) is registered
    assert registry.resolve("add") is registered
    assert registry.names() == [full]
    assert len(registry) == 1


def test_the_bare_form_registers_into_the_default_registry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fresh = TaskRegistry()
    monkeypatch.setattr(fastworker._task, "default_registry", fresh)

    @task
    def double(x: int) -> int:
        return 2 * x

    assert fresh.resolve("double") is double
    assert double.priority == Priority.NORMAL
    assert isinstance(default_registry, TaskRegistry)


def test_a_task_can_be_given_a_name_and_a_default_priority() -> None:
    registry = TaskRegistry()

    @task(name="reports.build", priority="high", registry=registry)
    def build() -> str:
        return "report"

    assert (build.name, build.priority) == ("reports.build", Priority.HIGH)
    assert registry.names() == ["reports.build"]
    assert registry.get("build") is None


def test_an_unknown_priority_is_refused_when_decorating() -> None:
    registry = TaskRegistry()

    with pytest.raises(ValueError, match="unknown priority 'urgent'"):

        @task(priority="urgent", registry=registry)
        def job() -> None:
            return None

    assert len(registry) == 0


def test_two_functions_cannot_share_a_task_name() -> None:
    registry = TaskRegistry()

    @task(name="job", registry=registry)
    def first() -> None:
        return None

    def second() -> None:
        return None

    with pytest.raises(ValueError, match=r"'job' is already registered by .*first"):
        task(name="job", registry=registry)(second)
    assert registry.get("job") is first


def test_registering_the_same_function_twice_is_harmless() -> None:
    registry = TaskRegistry()

    def job() -> None:
        return None

    task(registry=registry)(job)
    again = task(registry=registry)(job)

    assert registry.resolve("job") is again
    assert len(registry) == 1


def test_iterating_a_registry_yields_its_tasks() -> None:
    registry = TaskRegistry()
    a = task(name="a", registry=registry)(lambda: 1)
    b = task(name="b", registry=registry)(lambda: 2)

    assert list(registry) == [a, b]


def test_a_task_called_locally_behaves_like_the_plain_function() -> None:
    @task(registry=TaskRegistry())
    def greet(name: str, *, greeting: str = "hello") -> str:
        return f"{greeting} {name}"

    assert greet("ada") == "hello ada"
    assert greet("ada", greeting="hi") == "hi ada"


async def test_an_async_task_is_recognised_and_awaitable_locally() -> None:
    registry = TaskRegistry()

    @task(registry=registry)
    async def fetch(x: int) -> int:
        return x * 2

    @task(registry=registry)
    def compute(x: int) -> int:
        return x * 2

    assert fetch.is_async
    assert not compute.is_async
    assert await fetch(21) == 42


def test_the_signature_lists_every_parameter_kind_and_whether_it_has_a_default() -> None:
    @task(name="shapes", registry=TaskRegistry())
    def shapes(a: int, /, b: int, c: int = 0, *rest: int, d: int, e: int = 1, **extra: Any) -> None:
        return None

    assert shapes.signature() == TaskSignature(
        name="shapes",
        params=[
            Param(name="a", kind="POSITIONAL_ONLY", has_default=False),
            Param(name="b", kind="POSITIONAL_OR_KEYWORD", has_default=False),
            Param(name="c", kind="POSITIONAL_OR_KEYWORD", has_default=True),
            Param(name="rest", kind="VAR_POSITIONAL", has_default=False),
            Param(name="d", kind="KEYWORD_ONLY", has_default=False),
            Param(name="e", kind="KEYWORD_ONLY", has_default=True),
            Param(name="extra", kind="VAR_KEYWORD", has_default=False),
        ],
    )


def test_the_signature_of_a_function_without_parameters_is_empty() -> None:
    @task(name="ping", registry=TaskRegistry())
    def ping() -> str:
        return "pong"

    assert ping.signature() == TaskSignature(name="ping", params=[])


def test_a_default_of_none_still_counts_as_a_default() -> None:
    @task(registry=TaskRegistry())
    def maybe(x: int | None = None) -> int | None:
        return x

    assert maybe.signature().params == [
        Param(name="x", kind="POSITIONAL_OR_KEYWORD", has_default=True)
    ]


def test_the_signature_carries_the_priority_and_how_long_results_are_kept() -> None:
    @task(priority="high", result_ttl=timedelta(minutes=5), registry=TaskRegistry())
    def report() -> None:
        return None

    signature = report.signature()

    assert (signature.priority, signature.result_ttl) == (Priority.HIGH, 300.0)


def test_a_result_ttl_of_zero_keeps_no_result_and_none_leaves_the_default() -> None:
    @task(result_ttl=0, registry=TaskRegistry())
    def fire() -> None:
        return None

    @task(registry=TaskRegistry())
    def plain() -> None:
        return None

    assert fire.signature().result_ttl == 0.0
    assert plain.signature().result_ttl is None


@pytest.mark.parametrize("ttl", [-1, float("nan"), float("inf"), timedelta(seconds=-1)])
def test_a_negative_or_endless_result_ttl_is_refused(ttl: float | timedelta) -> None:
    with pytest.raises(ValueError, match="result_ttl"):
        task(result_ttl=ttl, registry=TaskRegistry())(lambda: None)
