"""FastWorker in a Flask application: ``fw = FastWorker(app)``, or ``fw.init_app(app)`` in
an application factory.

Each app gets one blocking :class:`~fastworker.SyncClient` per process, made from the
app's ``FASTWORKER_*`` config keys. It connects on first use, never at start-up, so the
app starts (and serves what does not need FastWorker) with no control plane running; a
prefork server's workers (gunicorn, uWSGI) each connect on their own first use. NNG cannot
be used in a process forked from one that already used it, so a worker forked after the
app's client connected (say, under ``gunicorn --preload`` with a call at import) gets a
``FastWorkerError`` saying so rather than nng's abort. The client is closed at interpreter
exit. While no control plane answers, what needs one raises
``ControlPlaneUnavailable``, which the app answers with HTTP 503 and ``Retry-After``.

In views, use the extension::

    fw = FastWorker()

    def create_app() -> Flask:
        app = Flask(__name__)
        fw.init_app(app)
        return app

    @bp.post("/signup")
    def signup() -> dict[str, str]:
        return {"task_id": fw.delay(send_welcome_email, request.form["email"])}

``FASTWORKER_EAGER = True`` (for tests) runs tasks inline instead, through
:func:`fastworker.testing.eager`, which is process-wide: every client of the process runs
tasks inline until ``fw.close(app)``.

``fw.blueprint()`` is a ready-made, opt-in API (submit any registered task by name, read
its status and result, cancel it): mount it behind your own authentication.

Needs ``flask`` (``pip install 'fastworker[flask]'``). This module must never connect at
import or at ``init_app``: only a request (or an explicit call) may wait for the network.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, overload

from flask import Blueprint, Flask, current_app, has_app_context
from flask.typing import ResponseReturnValue

from fastworker._calls import TaskRef, delay_options
from fastworker._default import configure
from fastworker._task import Task
from fastworker.errors import ControlPlaneUnavailable, FastWorkerError
from fastworker.integration._flask_api import task_api
from fastworker.sync_client import SyncClient
from fastworker_common import local
from fastworker_protocol import Priority, TaskResult

if TYPE_CHECKING:
    from fastworker.testing import Eager

__all__ = ["CONFIG_KEYS", "FastWorker", "client_options", "eager_setting"]

P = ParamSpec("P")

# The app.config keys the extension reads, and the client option each one sets.
CONFIG_KEYS: Mapping[str, str] = {
    "FASTWORKER_DISCOVERY_ADDRESS": "discovery_address",
    "FASTWORKER_ADDRESS": "address",
    "FASTWORKER_TIMEOUT": "timeout",
    "FASTWORKER_CONNECT_TIMEOUT": "connect_timeout",
    "FASTWORKER_AUTH_TOKEN": "auth_token",
}
_NUMBERS = {"timeout", "connect_timeout"}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

# After a failed connection, calls fail at once for this long instead of each waiting
# ``connect_timeout`` again: threads queued behind a failed attempt answer 503 together.
RETRY_PAUSE = 1.0


def client_options(config: Mapping[str, Any], explicit: Mapping[str, Any]) -> dict[str, Any]:
    """The options of an app's client: ``explicit`` ones (given to ``FastWorker()``) win
    over ``config`` keys; a key absent or ``None`` is left out, so the SDK's own default
    (from the environment) applies. ``ValueError`` names a key whose value is no use."""
    options: dict[str, Any] = {}
    for key, option in CONFIG_KEYS.items():
        value = config.get(key)
        if value is None or option in explicit:
            continue
        if option in _NUMBERS:
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"{key} must be a number of seconds, not {value!r}") from None
        elif not isinstance(value, str):
            raise ValueError(f"{key} must be a string, not {value!r}")
        options[option] = value
    options.update(explicit)
    return options


def eager_setting(config: Mapping[str, Any]) -> bool:
    """``FASTWORKER_EAGER``: a bool, or a string such as ``"1"``/``"false"`` (as read
    from an environment variable); absent is ``False``."""
    value = config.get("FASTWORKER_EAGER", False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"FASTWORKER_EAGER must be true or false, not {value!r}")


class _Connection:
    """One app's client in this process: made on first use (again in a forked child, and
    when a test backend such as ``eager()`` comes or goes), closed at interpreter exit."""

    def __init__(
        self, options: Mapping[str, Any], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.options = dict(options)
        SyncClient(**self.options)  # bad options fail at init_app (it connects on start only)
        self.eager: Eager | None = None
        self._clock = clock
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._client: SyncClient | None = None
        self._backend: local.Backend | None = None  # the test backend it was made under
        self._failed: tuple[float, str] | None = None  # when the last start failed, and why
        self._connected_in: int | None = None  # the process where it used the network
        self._inherited: list[SyncClient] = []  # clients of parent processes (see below)
        self._at_exit = False

    def client(self) -> SyncClient:
        """This process's started client; ``ControlPlaneUnavailable`` if it cannot connect
        (at once, within ``RETRY_PAUSE`` of a failed attempt)."""
        self._forget_parent()
        backend, replaced = local.installed(), None
        with self._lock:
            if self._client is None or self._backend is not backend:
                replaced, self._client = self._client, SyncClient(**self.options)
                self._backend, self._failed = backend, None
                if not self._at_exit:
                    atexit.register(self.close)
                    self._at_exit = True
            client = self._client
            parent = self._connected_in
            if backend is None and parent is not None and parent != self._pid:
                raise FastWorkerError(_forked(parent))
            if self._failed is not None:
                failed_at, reason = self._failed
                if self._clock() - failed_at < RETRY_PAUSE:
                    raise ControlPlaneUnavailable(reason)
            try:
                client.start()  # idempotent: returns at once once connected
            except ControlPlaneUnavailable as exc:
                self._failed = (self._clock(), str(exc))
                raise
            self._failed = None
            if backend is None:
                self._connected_in = self._pid
        if replaced is not None:
            replaced.close()
        return client

    def _forget_parent(self) -> None:
        """In a forked child, set the parent's client aside, never closed nor freed: its
        sockets are the parent's, and nng aborts a child that frees one (their finalizers
        close them). Its lock may have been held at the fork. (If the parent used the
        network, ``client`` refuses: see ``_forked``.)"""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._lock = threading.Lock()
            if self._client is not None:
                self._inherited.append(self._client)
            self._client = None
            self._failed = None

    def start_eager(self) -> None:
        from fastworker.testing import eager  # test machinery, loaded only when asked for

        self.eager = eager().start()

    def close(self) -> None:
        """Close the client (and end eager mode); the next use makes a new one."""
        self._forget_parent()
        with self._lock:
            client, self._client = self._client, None
            eager, self.eager = self.eager, None
        if client is not None:
            client.close()
        if eager is not None:
            eager.stop()
        if self._at_exit:
            atexit.unregister(self.close)
            self._at_exit = False


class FastWorker:
    """The Flask extension: ``FastWorker(app)``, or ``FastWorker()`` then ``init_app``."""

    def __init__(self, app: Flask | None = None, **client_options: Any) -> None:
        """``client_options`` go to :class:`fastworker.SyncClient` (``discovery_address``,
        ``address``, ``timeout``, ``connect_timeout``, ``auth_token``, ``tls``...) and win
        over the app's ``FASTWORKER_*`` config keys."""
        self._options = client_options
        self._connections: weakref.WeakKeyDictionary[Flask, _Connection] = (
            weakref.WeakKeyDictionary()
        )
        self._app = app
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read ``app``'s config, register in ``app.extensions["fastworker"]`` and answer
        ``ControlPlaneUnavailable`` with 503 (unless the app has its own handler for it).
        The same options configure the process's default client (``add.delay()`` on an
        ``@task`` object), so the app initialised last sets it. Connects to nothing: each
        client connects on first use."""
        options = client_options(app.config, self._options)
        connection = _Connection(options)
        configure(**options)
        if eager_setting(app.config):
            connection.start_eager()
        self._connections[app] = connection
        app.extensions["fastworker"] = self
        if ControlPlaneUnavailable not in app.error_handler_spec[None][None]:
            app.register_error_handler(ControlPlaneUnavailable, _unavailable)

    def _connection(self, app: Flask | None = None) -> _Connection:
        if app is None:
            if has_app_context():
                app = current_app._get_current_object()  # type: ignore[attr-defined]
            elif self._app is not None:
                app = self._app
            else:
                raise RuntimeError(
                    "no Flask application: use FastWorker in a request or inside "
                    "`with app.app_context():`"
                )
        connection = self._connections.get(app)
        if connection is None:
            raise RuntimeError(f"FastWorker.init_app was not called for the app {app.name!r}")
        return connection

    # --- what views use ------------------------------------------------------------------

    @property
    def client(self) -> SyncClient:
        """The current app's :class:`~fastworker.SyncClient` in this process, connected
        (raises ``ControlPlaneUnavailable`` if it cannot connect), for everything else:
        ``submit_task``, ``submit_batch``, ``cancel_task``, ``list_tasks``..."""
        return self._connection().client()

    @property
    def eager(self) -> Eager | None:
        """The current app's :class:`fastworker.testing.Eager` under
        ``FASTWORKER_EAGER`` (its ``submissions`` list what ran), else ``None``."""
        return self._connection().eager

    @overload
    def delay(self, task: Task[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> str: ...

    @overload
    def delay(
        self,
        task: str,
        /,
        *args: Any,
        priority: Priority | str | None = None,
        countdown: float | None = None,
        eta: datetime | float | None = None,
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> str: ...

    def delay(self, task: TaskRef, /, *args: Any, **kwargs: Any) -> str:
        """Queue ``task`` (an ``@task`` function or a name) and return its id at once;
        the keyword arguments are those of :meth:`fastworker.SyncClient.delay`."""
        options = delay_options(kwargs)
        return self.client.apply_async(task, args, kwargs, **options)

    def apply_async(
        self,
        task: TaskRef,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """As :meth:`fastworker.SyncClient.apply_async` (``priority``, ``countdown``,
        ``eta``, ``max_retries``, ``time_limit``, ``idempotency_key``, ``queue``...)."""
        return self.client.apply_async(task, args, kwargs, **options)

    def result(self, task_id: str, timeout: float | None = None) -> TaskResult:
        """The task's result once it is final, waiting up to ``timeout`` seconds (the
        client's ``timeout`` by default; raises ``Timeout``). It holds the request's
        thread meanwhile: keep it short in a view."""
        return self.client.wait_result(task_id, timeout)

    def status(self, task_id: str) -> TaskResult | None:
        """The task as it is now (``None`` if unknown or expired)."""
        return self.client.get_task_result(task_id)

    def close(self, app: Flask | None = None) -> None:
        """Close the app's client in this process and end its eager mode (the current
        app, or the one given to ``FastWorker(app)``). A later call makes a new client."""
        self._connection(app).close()

    # --- the opt-in API ----------------------------------------------------------------

    def blueprint(self, url_prefix: str = "/tasks", name: str = "fastworker") -> Blueprint:
        """Submit any task by name, its status, its result and cancel, under
        ``url_prefix``; register it with ``app.register_blueprint``."""
        return task_api(lambda: self.client, name, url_prefix)


def _forked(parent: int) -> str:
    # nng cannot run in a process forked after it was initialised there, whether or not
    # the parent's sockets are still open: a new socket aborts the child (nng panics), and
    # nng_fini, which pynng runs at exit, hangs. Say so at the first use instead.
    return (
        f"this process was forked from process {parent} after this app's FastWorker client "
        "had connected there, and NNG cannot be used in a process forked after it was "
        "used: use FastWorker only after the fork (with gunicorn --preload, not at import "
        "or in create_app)"
    )


def _unavailable(exc: ControlPlaneUnavailable) -> ResponseReturnValue:
    """``ControlPlaneUnavailable`` out of any view: 503, so callers retry later."""
    return {"detail": str(exc)}, 503, {"Retry-After": "1"}
