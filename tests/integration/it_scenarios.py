"""The tasks of the shared scenario table (``test_scenarios.py``), run by eager mode, the
in-process ``Cluster`` and a real control plane and subworker (``--task-modules
it_scenarios``). Names carry a ``scenario_`` prefix so they never meet ``it_tasks``' in the
default registry of a test session."""

from __future__ import annotations

import asyncio
import itertools
import time

from fastworker import Retry, TaskRegistry, current_task, retry, task

REGISTRY = TaskRegistry()  # these tasks only, for eager() and Cluster


@task(name="scenario_add")
def add(x: float, y: float) -> float:
    return x + y


@task(name="scenario_echo")
async def echo(value: object) -> object:
    return value


@task(name="scenario_total")
def total(values: list[float]) -> float:
    """A chord's callback: the sum of its header's results."""
    return sum(values)


@task(name="scenario_explode", max_retries=2, retry_backoff=0.01)
def explode(message: str) -> None:
    raise RuntimeError(message)


@task(name="scenario_picky", max_retries=2, retry_backoff=0.01, retry_on=(ConnectionError,))
def picky(kind: str) -> None:
    """Retried only for a ``ConnectionError`` (a subclass too), never for the rest."""
    if kind == "reset":
        raise ConnectionResetError("reset by peer")
    raise ValueError(kind)


@task(name="scenario_third_time", max_retries=3, retry_backoff=0.01)
def third_time() -> int:
    """Fails its first two attempts, then returns its attempt number."""
    context = current_task()
    assert context is not None
    if context.attempt < 3:
        raise ConnectionError(f"attempt {context.attempt}")
    return context.attempt


@task(name="scenario_asks_again", max_retries=3, retry_on=(KeyError,))
def asks_again() -> int:
    """Asks to be tried again (which ``retry_on`` does not stop) until its third attempt."""
    context = current_task()
    assert context is not None
    if context.attempt < 3:
        retry(f"not ready at attempt {context.attempt}", countdown=0.01)
    return context.attempt


@task(name="scenario_keeps_asking", max_retries=2)
async def keeps_asking() -> None:
    """Always asks for a retry of an error: the task fails with that error at the end."""
    raise Retry(exc=ValueError("still not ready"), countdown=0)


@task(name="scenario_unsendable", max_retries=2, retry_backoff=0.01)
def unsendable() -> object:
    return object()


@task(name="scenario_slow", max_retries=2, retry_backoff=0.01, time_limit=0.2)
async def slow() -> str:
    await asyncio.sleep(30)
    return "too late"


@task(name="scenario_nap")
async def nap(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@task(name="scenario_block", time_limit=0.2)
def block(seconds: float) -> float:
    """Blocks its thread past its time limit (a thread cannot be stopped)."""
    time.sleep(seconds)
    return seconds


ORDERED = "scenario_ordered"  # a queue of its own: pausing it stops nothing else


_runs = itertools.count()  # in the process that runs the tasks


@task(name="scenario_ordered", queue=ORDERED)
def ordered(tag: str) -> list[object]:
    """``[tag, n]``: this was the n-th run of it in its process (the order tasks ran in)."""
    return [tag, next(_runs)]


SCENARIO_TASKS = (
    add,
    echo,
    total,
    explode,
    picky,
    third_time,
    asks_again,
    keeps_asking,
    unsendable,
    slow,
    nap,
    block,
    ordered,
)
for _scenario_task in SCENARIO_TASKS:
    REGISTRY.add(_scenario_task)
