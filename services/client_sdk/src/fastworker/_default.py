"""The process's default client: what ``add.delay(...)`` on a ``@task`` object uses.

``configure(...)`` sets its options once per process (a web framework's integration does it
at start); unconfigured, it is ``SyncClient()`` with its defaults, which read the
``FASTWORKER_*`` environment variables. The client itself is made on first use, in the
process that uses it: a process forked after that (gunicorn's and uwsgi's prefork workers)
makes its own, never sharing its parent's sockets. (NNG itself cannot be used in a process
forked after it opened a socket: a child of a process whose default client had connected
gets a clear error instead of NNG's abort.) Under ``fastworker.testing`` the
default client talks to the eager runner or the test cluster, like any other client.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from fastworker.errors import FastWorkerError
from fastworker.sync_client import SyncClient
from fastworker_common import local

_lock = threading.Lock()
_options: dict[str, Any] = {}
_current: tuple[int, local.Backend | None, SyncClient] | None = None
_inherited: list[SyncClient] = []  # a parent process's clients, kept: never to be freed
_parent_connected = False  # a parent process's default client had connected over NNG


def configure(**client_options: Any) -> None:
    """Set the options of the default client (those of :class:`fastworker.SyncClient`:
    ``discovery_address``, ``address``, ``timeout``, ``auth_token``, ...). A client made
    with the old options is closed; the next ``delay`` makes one with the new."""
    SyncClient(**client_options)  # bad options fail here, not at the first delay
    global _current
    with _lock:
        _options.clear()
        _options.update(client_options)
        _leave_parents_client()
        previous, _current = _current, None
    if previous is not None:
        previous[2].stop()


def default_client() -> SyncClient:
    """The default client of this process, started; made on first use (and again in a
    forked child, or when a test backend is installed or removed)."""
    global _current
    pid, backend = os.getpid(), local.installed()
    replaced = None
    with _lock:
        _leave_parents_client()
        if backend is None and _parent_connected:
            raise FastWorkerError(
                "this process was forked from one whose default client had connected, and "
                "NNG cannot open sockets in a process forked after it started (it aborts): "
                "submit only after the fork (gunicorn: no --preload of code that submits)"
            )
        if _current is None or _current[1] is not backend:
            # One made before a test backend came or went is closed.
            replaced = None if _current is None else _current[2]
            _current = (pid, backend, SyncClient(**_options))
        client = _current[2]
    if replaced is not None:
        replaced.stop()
    client.start()  # idempotent; a failed start is tried again by the next call
    return client


def _leave_parents_client() -> None:
    """In a forked child: put the client inherited from the parent aside, never closed nor
    freed (closing or freeing a parent's NNG socket aborts a forked child), and remember
    whether the parent had connected over the network (then NNG cannot be used here)."""
    global _current, _parent_connected
    if _current is None or _current[0] == os.getpid():
        return
    _inherited.append(_current[2])
    _parent_connected = _parent_connected or (_current[1] is None and _current[2].started)
    _current = None


def _close() -> None:
    with _lock:
        current = _current
    if current is not None and current[0] == os.getpid():
        current[2].stop()


atexit.register(_close)
