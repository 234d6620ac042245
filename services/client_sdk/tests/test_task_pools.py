"""``@task``'s ``pool``, ``time_limit`` and ``soft_time_limit``: where a task runs and how
it is stopped, checked when the function is decorated, not when it first runs."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from fastworker import TaskRegistry, task


def plain() -> None:
    return None


async def coroutine() -> None:
    return None


def decorate(fn: Any, **options: Any) -> Any:
    return task(registry=TaskRegistry(), **options)(fn)


def warned_if_older_name(option: str) -> contextlib.AbstractContextManager[Any]:
    """``timeout``, the older name of ``time_limit``, still works, with a warning."""
    if option == "timeout":
        return pytest.warns(DeprecationWarning, match="use @task\\(time_limit=")
    return contextlib.nullcontext()


def test_an_async_def_runs_on_the_event_loop_and_a_plain_def_on_a_thread_by_default() -> None:
    assert decorate(coroutine).pool == "async"
    assert decorate(plain).pool == "thread"


def test_a_plain_def_can_be_sent_to_the_process_pool() -> None:
    assert decorate(plain, pool="process").pool == "process"


@pytest.mark.parametrize(("fn", "pool"), [(coroutine, "process"), (coroutine, "thread")])
def test_an_async_def_cannot_run_on_a_thread_or_in_a_child_process(fn: Any, pool: str) -> None:
    with pytest.raises(ValueError, match=f"pool='{pool}' does not fit coroutine, an async def"):
        decorate(fn, pool=pool)


def test_a_plain_def_cannot_run_on_the_event_loop() -> None:
    with pytest.raises(ValueError, match="pool='async' does not fit plain, a plain def"):
        decorate(plain, pool="async")


def test_an_unknown_pool_is_refused_and_the_known_ones_are_named() -> None:
    with pytest.raises(ValueError, match="pool must be one of async, thread, process, not 'fork'"):
        decorate(plain, pool="fork")


@pytest.mark.parametrize("pool", [None, "thread"])
def test_a_soft_time_limit_needs_the_process_pool(pool: str | None) -> None:
    with pytest.raises(ValueError, match="soft_time_limit needs pool='process'"):
        decorate(plain, pool=pool, soft_time_limit=1.0)


def test_a_soft_time_limit_on_an_async_task_is_refused() -> None:
    with pytest.raises(ValueError, match="soft_time_limit needs pool='process'"):
        decorate(coroutine, soft_time_limit=1.0)


@pytest.mark.parametrize("soft", [5.0, 6.0])
def test_a_soft_time_limit_must_be_shorter_than_the_hard_one(soft: float) -> None:
    with pytest.raises(ValueError, match="soft_time_limit must be shorter than time_limit"):
        decorate(plain, pool="process", soft_time_limit=soft, time_limit=5.0)


def test_a_process_task_keeps_both_limits() -> None:
    registered = decorate(plain, pool="process", soft_time_limit=1.0, time_limit=5.0)

    assert (registered.soft_time_limit, registered.time_limit) == (1.0, 5.0)


def test_a_soft_time_limit_alone_is_allowed() -> None:
    registered = decorate(plain, pool="process", soft_time_limit=1.0)

    assert (registered.soft_time_limit, registered.time_limit) == (1.0, None)


@pytest.mark.parametrize("limit", [0, -1.0])
def test_a_soft_time_limit_must_be_positive(limit: float) -> None:
    with pytest.raises(ValueError, match="soft_time_limit must be positive"):
        decorate(plain, pool="process", soft_time_limit=limit)


@pytest.mark.parametrize("option", ["time_limit", "timeout"])
@pytest.mark.parametrize("limit", [0, -0.5])
def test_a_time_limit_must_be_positive(option: str, limit: float) -> None:
    with (
        warned_if_older_name(option),
        pytest.raises(ValueError, match="time_limit must be positive"),
    ):
        decorate(plain, **{option: limit})


@pytest.mark.parametrize("option", ["time_limit", "timeout"])
def test_time_limit_and_timeout_are_one_setting_carried_to_the_signature(option: str) -> None:
    with warned_if_older_name(option):
        registered = decorate(plain, **{option: 2.5})

    assert registered.time_limit == 2.5
    assert registered.signature().time_limit == 2.5


def test_time_limit_and_timeout_given_alike_are_accepted() -> None:
    with warned_if_older_name("timeout"):
        assert decorate(plain, time_limit=3.0, timeout=3.0).time_limit == 3.0


def test_time_limit_and_timeout_given_differently_are_refused() -> None:
    refused = pytest.raises(ValueError, match="give time_limit or timeout")
    with warned_if_older_name("timeout"), refused:
        decorate(plain, time_limit=3.0, timeout=4.0)


def test_a_task_without_limits_has_none() -> None:
    registered = decorate(plain)

    assert (registered.time_limit, registered.soft_time_limit) == (None, None)
    assert registered.signature().time_limit is None


def test_a_tasks_timeout_attribute_reads_its_time_limit_with_a_warning() -> None:
    registered = decorate(plain, time_limit=4.0)

    with pytest.warns(DeprecationWarning, match="read Task.time_limit"):
        assert registered.timeout == 4.0


def test_the_older_keyword_warns_where_the_task_is_declared() -> None:
    with pytest.warns(DeprecationWarning, match="time_limit") as caught:
        task(timeout=1.0, registry=TaskRegistry())(plain)

    assert caught[0].filename == __file__
