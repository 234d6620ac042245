"""``@task``: naming a function so subworkers may run it and clients may submit it.

The registry is the only thing that decides what can run: a subworker executes a task
name only if a module it loaded registered it. Nothing from the wire is imported.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Never, ParamSpec, TypeVar, overload

from fastworker._celery_keywords import refusal
from fastworker.schedule_checks import check_schedule
from fastworker_protocol import (
    DEFAULT_QUEUE,
    Param,
    Priority,
    TaskSignature,
    check_queue,
    check_rate,
)
from fastworker_protocol.task_names import TaskNames

if TYPE_CHECKING:
    from fastworker.canvas import Signature
    from fastworker.handles import TaskHandle

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

Pool = Literal["async", "thread", "process"]
POOLS: tuple[Pool, ...] = ("async", "thread", "process")


@dataclass(frozen=True)
class Task(Generic[P, R]):
    """A registered task. Calling it runs the function locally, like the plain function."""

    fn: Callable[P, R]
    name: str
    priority: Priority = Priority.NORMAL
    max_retries: int = 0
    retry_backoff: float = 1.0
    retry_backoff_max: float = 600.0
    retry_on: tuple[type[BaseException], ...] = ()
    time_limit: float | None = None
    repeat_interval: float | None = None
    cron: str | None = None
    cron_tz: str = "UTC"
    queue: str = DEFAULT_QUEUE
    rate_limit: str | None = None
    concurrency_limit: int | None = None
    concurrency_key: str | None = None
    pool: Pool = "thread"
    soft_time_limit: float | None = None
    result_ttl: float | None = None

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    @property
    def timeout(self) -> float | None:
        """Deprecated: the older name of :attr:`time_limit`."""
        warnings.warn(
            "Task.timeout is deprecated: read Task.time_limit", DeprecationWarning, stacklevel=2
        )
        return self.time_limit

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    @overload
    def delay(
        self: Task[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[T]: ...

    @overload
    def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]: ...

    def delay(self, *args: Any, **kwargs: Any) -> TaskHandle[Any]:
        """Queue this task through the process's default client and return its handle
        (its id: ``handle.get(timeout=...)`` waits for its value). Set the client up
        with ``fastworker.configure``, or ``FASTWORKER_*`` variables. Every keyword is
        the task's own; submission options go to ``apply_async``."""
        from fastworker._default import default_client

        return default_client().apply_async(self, args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        priority: Priority | str | None = None,
        task_id: str | None = None,
        countdown: float | None = None,
        eta: datetime | float | None = None,
        max_retries: int | None = None,
        time_limit: float | None = None,
        idempotency_key: str | None = None,
        queue: str | None = None,
    ) -> TaskHandle[Any]:
        """Queue this task with options (those of :meth:`fastworker.Client.apply_async`)
        through the process's default client, and return its handle (whose ``get()`` is
        typed ``Any``; ``delay``'s is typed by the task's return type)."""
        from fastworker._default import default_client

        return default_client().apply_async(
            self,
            args,
            kwargs,
            priority=priority,
            task_id=task_id,
            countdown=countdown,
            eta=eta,
            max_retries=max_retries,
            time_limit=time_limit,
            idempotency_key=idempotency_key,
            queue=queue,
        )

    def delay_on_commit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Queue this task once the current Django database transaction commits (at once
        outside one; never if it rolls back). Needs ``fastworker.integration.django``."""
        from fastworker.integration.django import delay_on_commit

        delay_on_commit(self, args, kwargs)

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature for a workflow (``fastworker.canvas``) that is fed the result of
        what runs before it as its first argument: ``args`` are the ones after that one.
        Untyped, since which argument is fed depends on where it is placed (a chain's first
        step is fed nothing); the arguments are checked against the parameters when the
        workflow is compiled. Options: ``.set(priority=..., queue=...)``."""
        from fastworker.canvas import Signature

        return Signature(self, args, kwargs)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """An immutable signature: it runs with exactly these arguments, typed like the
        task's, and is fed nothing (it only waits for what runs before it)."""
        from fastworker.canvas import Signature

        return Signature(self, args, kwargs, immutable=True)

    def signature(self) -> TaskSignature:
        """The wire form of the parameters, so the control plane can check arguments."""
        params = [
            Param(name=p.name, kind=p.kind.name, has_default=p.default is not p.empty)
            for p in inspect.signature(self.fn).parameters.values()
        ]
        return TaskSignature(
            name=self.name,
            params=params,
            max_retries=self.max_retries,
            retry_backoff=self.retry_backoff,
            retry_backoff_max=self.retry_backoff_max,
            retry_on=[e.__name__ for e in self.retry_on],
            time_limit=self.time_limit,
            repeat_interval=self.repeat_interval,
            cron=self.cron,
            cron_tz=self.cron_tz,
            queue=self.queue,
            rate_limit=self.rate_limit,
            concurrency_limit=self.concurrency_limit,
            concurrency_key=self.concurrency_key,
            priority=self.priority,
            result_ttl=self.result_ttl,
        )


@dataclass
class TaskRegistry:
    """Task names to tasks. ``@task`` fills :data:`default_registry`."""

    _tasks: dict[str, Task[..., Any]] = field(default_factory=dict)
    _names: TaskNames = field(default_factory=TaskNames)  # names by their dotted suffixes

    def __post_init__(self) -> None:
        for name in self._tasks:
            self._names.add(name)

    def add(self, t: Task[..., Any]) -> None:
        existing = self._tasks.get(t.name)
        if existing is not None and existing.fn is not t.fn:
            raise ValueError(
                f"task name {t.name!r} is already registered by "
                f"{existing.fn.__module__}.{existing.fn.__qualname__}"
            )
        self._tasks[t.name] = t
        self._names.add(t.name)

    def get(self, name: str) -> Task[..., Any] | None:
        """The task registered under exactly ``name`` (what a subworker is handed)."""
        return self._tasks.get(name)

    def resolve(self, name: str) -> Task[..., Any] | None:
        """The task ``name`` stands for: the one registered under it, else the one whose
        name it is the only dotted suffix of (``add`` for ``app.tasks.add``), as a control
        plane resolves a submitted name. Raises ``AmbiguousTaskName`` (a ``ValueError``)
        when several registered names end with it."""
        full = self._names.resolve(name)
        return None if full is None else self._tasks.get(full)

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def __iter__(self) -> Iterator[Task[..., Any]]:
        return iter(list(self._tasks.values()))

    def __len__(self) -> int:
        return len(self._tasks)


default_registry = TaskRegistry()


@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...


@overload
def task(
    *,
    name: str | None = None,
    priority: Priority | str = Priority.NORMAL,
    max_retries: int = 0,
    retry_backoff: float = 1.0,
    retry_backoff_max: float = 600.0,
    retry_on: tuple[type[BaseException], ...] = (),
    timeout: float | None = None,
    repeat_interval: float | None = None,
    cron: str | None = None,
    cron_tz: str = "UTC",
    queue: str = DEFAULT_QUEUE,
    rate_limit: str | None = None,
    concurrency_limit: int | None = None,
    concurrency_key: str | None = None,
    pool: Pool | None = None,
    time_limit: float | None = None,
    soft_time_limit: float | None = None,
    result_ttl: float | timedelta | None = None,
    registry: TaskRegistry | None = None,
    **unsupported: Never,
) -> Callable[[Callable[P, R]], Task[P, R]]: ...


def task(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    priority: Priority | str = Priority.NORMAL,
    max_retries: int = 0,
    retry_backoff: float = 1.0,
    retry_backoff_max: float = 600.0,
    retry_on: tuple[type[BaseException], ...] = (),
    timeout: float | None = None,
    repeat_interval: float | None = None,
    cron: str | None = None,
    cron_tz: str = "UTC",
    queue: str = DEFAULT_QUEUE,
    rate_limit: str | None = None,
    concurrency_limit: int | None = None,
    concurrency_key: str | None = None,
    pool: Pool | None = None,
    time_limit: float | None = None,
    soft_time_limit: float | None = None,
    result_ttl: float | timedelta | None = None,
    registry: TaskRegistry | None = None,
    **unsupported: Never,
) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
    """Register a function (sync or async) as a task, by default under its module-qualified
    name (``default_name``: ``billing.tasks.notify``), so two modules' ``notify`` never
    collide; ``name`` gives one of its own. A client may still submit it by a shorter dotted
    suffix (``notify``, ``tasks.notify``) while no other registered name ends with it.

    ``priority`` is the default priority clients use when they submit by this object,
    and the one its periodic runs take.
    A failure is retried up to ``max_retries`` times (only for exceptions that are
    instances of a type in ``retry_on``, subclasses included, when it is given; the
    subworker checks that where the exception is raised), waiting a random time up to
    ``min(retry_backoff_max, retry_backoff * 2 ** (retry - 1))`` seconds before each retry.
    ``pool`` is where it runs: ``"async"`` (an ``async def``: on the subworker's event
    loop, the default for those), ``"thread"`` (a plain ``def`` on a thread, the default
    for those) or ``"process"`` (a plain ``def`` in a child process of the subworker: CPU
    work in parallel, and limits that really stop it).
    An attempt running longer than ``time_limit`` seconds is stopped and fails with reason
    ``timeout``: an async task is cancelled, a process task's child is terminated, and a
    thread task, which cannot be stopped, is abandoned to its thread. The time counts from
    its start, not from its wait for a free thread or child. ``soft_time_limit`` (process
    tasks only) raises ``SoftTimeLimitExceeded`` inside the task first, so it can clean up.
    ``repeat_interval`` (seconds) or ``cron`` (an expression, in ``cron_tz``) makes it a
    periodic task, run without arguments by the control plane's scheduler, once per tick.
    A schedule that cannot run (a bad interval, cron expression or time zone, parameters
    without defaults) raises a ``ValueError`` here, listing every problem, one per line.
    ``queue`` names the queue its submissions go to (subworkers take tasks only from the
    queues they serve). The control plane starts at most ``rate_limit`` (``"20/m"``; per
    ``s``, ``m`` or ``h``) of its tasks, and keeps at most ``concurrency_limit`` running at
    once, per value of the argument ``concurrency_key`` when given, over all subworkers.
    ``result_ttl`` (seconds, or a timedelta) is how long the control plane keeps its
    results (0: none is kept; ``wait`` then cannot read it), instead of its
    ``--result-ttl``. ``timeout`` is the deprecated older name of ``time_limit``.
    """
    if unsupported:  # Celery's options, with what to write instead
        raise TypeError(refusal(unsupported))
    if timeout is not None:
        warnings.warn(
            "@task(timeout=...) is deprecated: use @task(time_limit=...), the same setting",
            DeprecationWarning,
            stacklevel=2,
        )

    def register(f: Callable[P, R]) -> Task[P, R]:
        if max_retries < 0 or retry_backoff < 0 or retry_backoff_max < 0:
            raise ValueError("max_retries and the retry backoffs cannot be negative")
        hard_limit = _time_limit(timeout, time_limit)
        chosen = _pool(f, pool, soft_time_limit, hard_limit)
        check_schedule(f, repeat_interval, cron, cron_tz)  # every problem at once
        _check_limits(f, queue, rate_limit, concurrency_limit, concurrency_key)
        kept = _result_ttl(result_ttl)
        t = Task(
            fn=f,
            name=name or default_name(f),
            priority=Priority.parse(priority),
            max_retries=max_retries,
            retry_backoff=retry_backoff,
            retry_backoff_max=retry_backoff_max,
            retry_on=tuple(retry_on),
            time_limit=hard_limit,
            repeat_interval=repeat_interval,
            cron=cron,
            cron_tz=cron_tz,
            queue=queue,
            rate_limit=rate_limit,
            concurrency_limit=concurrency_limit,
            concurrency_key=concurrency_key,
            pool=chosen,
            soft_time_limit=soft_time_limit,
            result_ttl=kept,
        )
        (registry if registry is not None else default_registry).add(t)
        return t

    return register(fn) if fn is not None else register


def default_name(fn: Callable[..., Any]) -> str:
    """A task's name when ``@task`` is given none: ``module.qualname``, as Celery's.

    A function defined in a script run as ``__main__`` is named after the module that
    script is when imported (``python -m app.jobs``: ``app.jobs``; ``python jobs.py``:
    ``jobs``), so the script that submits and a subworker that imports the same file as a
    module (``--task-modules jobs``) agree on the name."""
    module = fn.__module__
    if module in _MAIN_NAMES:
        module = _importable_name(getattr(fn, "__globals__", None) or vars(sys.modules[module]))
    return f"{module}.{fn.__qualname__}"


# The script being run, and that script run again in a child process (``multiprocessing``
# and the process pool's children run it as ``__mp_main__``).
_MAIN_NAMES = ("__main__", "__mp_main__")


def _importable_name(namespace: dict[str, Any]) -> str:
    """The name the module whose globals are ``namespace`` is imported by."""
    spec = namespace.get("__spec__")
    if spec is not None and spec.name not in _MAIN_NAMES:
        return str(spec.name)  # ``python -m app.jobs``
    path = namespace.get("__file__")
    return Path(path).stem if path else "__main__"  # a REPL or ``python -c`` has no file


def _time_limit(timeout: float | None, time_limit: float | None) -> float | None:
    if timeout is not None and time_limit is not None and timeout != time_limit:
        raise ValueError("give time_limit or timeout (its older name), not both")
    limit = time_limit if time_limit is not None else timeout
    if limit is not None and limit <= 0:
        raise ValueError("time_limit must be positive")
    return limit


def _result_ttl(ttl: float | timedelta | None) -> float | None:
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
    if seconds is not None and not 0 <= seconds < float("inf"):
        raise ValueError("result_ttl must be 0 (keep no result) or more seconds")
    return None if seconds is None else float(seconds)


def _pool(
    fn: Callable[..., Any],
    pool: Pool | None,
    soft_time_limit: float | None,
    time_limit: float | None,
) -> Pool:
    """The pool a task runs in, checked against its function and its limits."""
    is_async = inspect.iscoroutinefunction(fn)
    chosen: Pool = pool or ("async" if is_async else "thread")
    if chosen not in POOLS:
        raise ValueError(f"pool must be one of {', '.join(POOLS)}, not {chosen!r}")
    if is_async != (chosen == "async"):
        kind = "an async def" if is_async else "a plain def"
        raise ValueError(f"pool={chosen!r} does not fit {fn.__qualname__}, {kind}")
    if soft_time_limit is None:
        return chosen
    if chosen != "process":
        raise ValueError("soft_time_limit needs pool='process' (only a child can be interrupted)")
    if soft_time_limit <= 0:
        raise ValueError("soft_time_limit must be positive")
    if time_limit is not None and soft_time_limit >= time_limit:
        raise ValueError("soft_time_limit must be shorter than time_limit")
    return chosen


def _check_limits(
    fn: Callable[..., Any],
    queue: str,
    rate_limit: str | None,
    concurrency_limit: int | None,
    concurrency_key: str | None,
) -> None:
    check_queue(queue)
    check_rate(rate_limit)
    if concurrency_limit is not None and concurrency_limit < 1:
        raise ValueError("concurrency_limit must be at least 1")
    if concurrency_key is None:
        return
    if concurrency_limit is None:
        raise ValueError("concurrency_key needs a concurrency_limit")
    param = inspect.signature(fn).parameters.get(concurrency_key)
    if param is None or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        raise ValueError(f"concurrency_key {concurrency_key!r} is not a named parameter of {fn}")
