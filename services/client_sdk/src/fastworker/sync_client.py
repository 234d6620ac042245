"""The blocking client, for scripts and WSGI apps: the async client run on a private loop.

Every method forwards to :class:`~fastworker.client.Client` on an event loop that lives in
a daemon thread owned by this object, so there is exactly one implementation of each call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from fastworker._callbacks import Callback
from fastworker.client import BatchItem, Client, TaskPage, TaskRef
from fastworker_protocol import (
    DEFAULT_DISCOVERY_ADDRESS,
    Priority,
    ScheduleInfo,
    TaskResult,
    TaskState,
    WorkerInfo,
)

T = TypeVar("T")


class SyncClient:
    """Blocking FastWorker client; same arguments and methods as :class:`Client`."""

    def __init__(
        self,
        discovery_address: str = DEFAULT_DISCOVERY_ADDRESS,
        timeout: float = 30.0,
        retries: int = 3,
        **options: Any,
    ) -> None:
        self._client = Client(discovery_address, timeout, retries, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("SyncClient is not started: call start() or use `with`")
        if threading.current_thread() is self._thread:
            # Blocking here would stop the very loop that must answer: a deadlock.
            coro.close()
            raise RuntimeError(
                "a SyncClient cannot be called from its own callbacks (they run on its "
                "event loop thread): make the callback async and await "
                "`sync_client.async_client` there, or hand the work to another thread"
            )
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def async_client(self) -> Client:
        """The async :class:`Client` underneath, for async callbacks, which run on this
        client's loop and cannot call its blocking methods."""
        return self._client

    def start(self) -> None:
        if self._loop is not None:
            return
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="fastworker-client", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._run(self._client.start())
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._client.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        self._loop = self._thread = None

    close = stop

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def delay(
        self,
        task: TaskRef,
        *args: Any,
        priority: Priority | str | None = None,
        countdown: float | None = None,
        eta: datetime | float | None = None,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> str:
        return self._run(
            self._client.delay(
                task,
                *args,
                priority=priority,
                countdown=countdown,
                eta=eta,
                idempotency_key=idempotency_key,
                **kwargs,
            )
        )

    def apply_async(
        self,
        task: TaskRef,
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
    ) -> str:
        return self._run(
            self._client.apply_async(
                task,
                args,
                kwargs,
                priority=priority,
                task_id=task_id,
                countdown=countdown,
                eta=eta,
                max_retries=max_retries,
                time_limit=time_limit,
                idempotency_key=idempotency_key,
            )
        )

    def delay_with_callback(
        self,
        task: TaskRef,
        callback: Callback,
        *args: Any,
        priority: Priority | str | None = None,
        **kwargs: Any,
    ) -> str:
        """As :meth:`Client.delay_with_callback`; the callback runs on this client's thread."""
        return self._run(
            self._client.delay_with_callback(task, callback, *args, priority=priority, **kwargs)
        )

    def submit_task(
        self,
        task_name: TaskRef,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        priority: Priority | str | None = None,
        timeout: float | None = None,
    ) -> TaskResult:
        return self._run(self._client.submit_task(task_name, args, kwargs, priority, timeout))

    def submit_batch(
        self, items: Iterable[BatchItem | Mapping[str, Any] | tuple[Any, ...]]
    ) -> list[str]:
        return self._run(self._client.submit_batch(list(items)))

    def get_task_result(self, task_id: str) -> TaskResult | None:
        return self._run(self._client.get_task_result(task_id))

    def wait_result(self, task_id: str, timeout: float | None = None) -> TaskResult:
        return self._run(self._client.wait_result(task_id, timeout))

    def wait_results(
        self, task_ids: Sequence[str], timeout: float | None = None
    ) -> list[TaskResult]:
        return self._run(self._client.wait_results(task_ids, timeout))

    def wait(self, task_id: str, timeout: float | None = None) -> Any:
        return self._run(self._client.wait(task_id, timeout))

    def get_result(self, task_id: str) -> TaskResult | None:
        return self._client.get_result(task_id)

    def get_status(self, task_id: str) -> TaskState | None:
        return self._client.get_status(task_id)

    def cancel_task(self, task_id: str) -> bool:
        return self._run(self._client.cancel_task(task_id))

    def list_tasks(self, status: TaskState | str | None = None, limit: int = 100) -> TaskPage:
        return self._run(self._client.list_tasks(status, limit))

    def list_schedules(self) -> list[ScheduleInfo]:
        return self._run(self._client.list_schedules())

    def list_workers(self) -> list[WorkerInfo]:
        return self._run(self._client.list_workers())
