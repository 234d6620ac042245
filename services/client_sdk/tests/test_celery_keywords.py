"""Celery's task options are refused by ``@task`` with FastWorker's way to say the same."""

from __future__ import annotations

import pytest

from fastworker import Retry, TaskRegistry, retry, task


def test_celery_only_options_are_refused_one_line_each_with_the_equivalent() -> None:
    with pytest.raises(TypeError) as refused:
        task(bind=True, autoretry_for=(KeyError,), registry=TaskRegistry())  # type: ignore[call-overload]

    assert str(refused.value).splitlines() == [
        "@task(autoretry_for=...) is Celery's; in FastWorker, retry_on=(...) with "
        "max_retries=N retries those exceptions",
        "@task(bind=...) is Celery's; in FastWorker, tasks are not bound: read the running "
        "task with fastworker.current_task() (id, name, attempt...) and retry it with "
        "fastworker.retry(countdown=..., exc=...)",
    ]


def test_an_option_no_one_has_is_refused_by_its_name() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        task(colour="blue")  # type: ignore[call-overload]


def test_retry_raises_retry_with_what_it_was_given() -> None:
    cause = ConnectionError("refused")
    with pytest.raises(Retry) as asked:
        retry(countdown=5, exc=cause)
    assert (asked.value.countdown, asked.value.exc, asked.value.reason) == (5.0, cause, "refused")
    assert Retry().reason == "retry asked for"


@pytest.mark.parametrize("countdown", [-1, float("nan"), float("inf")])
def test_a_countdown_that_is_no_delay_is_refused(countdown: float) -> None:
    with pytest.raises(ValueError, match="countdown must be 0 or more seconds"):
        Retry(countdown=countdown)
