"""A child process of a subworker's process pool: ``python -m fastworker_subworker.child FD``.

It is a fresh interpreter (started with exec, what ``multiprocessing`` calls *spawn*: no
fork after threads), talking to its subworker over the socket ``FD`` (``child_wire``). It
imports the process tasks' modules once, then runs the chunks it is given, one task at a
time on its main thread, and reports each task as it ends.

A second thread reads the socket while a task runs, so a ``Cancel`` is decided here,
under one lock, against what the main thread is doing: a task not started yet is skipped
and never starts (``Skipped``); the running one is ``Halted`` (nothing starts after it,
and the subworker terminates this process). The subworker never has to guess.

The subworker opens each task's ``process`` span and passes its context in the task's
headers, so the spans a task makes here nest under it (exported when the subworker
exports: the ``OTEL_*`` variables are inherited), and a task whose child is killed still
has its span.

``soft_time_limit`` is a ``SIGALRM`` timer: its handler raises ``SoftTimeLimitExceeded``
in the task. The hard limit is the subworker's to enforce, from outside.

The child leads its own process group (the subworker terminates the group, so what a task
started ends with it), so a Ctrl-C in a terminal reaches only the subworker, which drains
and then stops its children; it ignores ``SIGINT`` all the same. It exits at once when its
subworker is gone (end of file on the socket; on Linux also a parent-death signal).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import queue
import runpy
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import structlog

from fastworker import SoftTimeLimitExceeded, Task, TaskRegistry, signals
from fastworker.signal_hooks import worker_event, worker_signal_blocking
from fastworker.tracing import configure_tracing
from fastworker_common.log_setup import configure_logging
from fastworker_protocol import Assignment, Outcome
from fastworker_subworker import child_wire as wire
from fastworker_subworker.executor import Executor, failure
from fastworker_subworker.instrument import TaskInstrument

log = structlog.get_logger(__name__)


class Channel:
    """The child's end of the socket: blocking reads (one reader thread), locked writes."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")
        self._write_lock = threading.Lock()

    def read(self) -> wire.ToChild | None:
        """The next message, or ``None`` once the subworker has gone."""
        header = self._file.read(wire.HEADER.size)
        if len(header) < wire.HEADER.size:
            return None
        message: wire.ToChild = wire.to_child.decode(self._file.read(wire.body_length(header)))
        return message

    def send(self, message: wire.FromChild) -> None:
        data = wire.frame(message)
        with self._write_lock:
            self._sock.sendall(data)


class Child:
    """Runs chunks on the main thread; ``cancel`` (from the reader thread) decides, under
    the lock, whether a task is skipped or the running one halted. The reader thread marks
    a chunk's tasks pending (``expect``) as it reads the chunk, not the main thread as it
    starts it: a cancel read in between would find nothing to cancel, and run the task."""

    def __init__(self, channel: Channel, executor: Executor, registry: TaskRegistry) -> None:
        self._channel = channel
        self._executor = executor
        self._registry = registry
        self._lock = threading.Lock()
        self._pending: set[str] = set()  # of the current chunk, not started
        self._running: str | None = None
        self._halted = False

    def expect(self, chunk: list[Assignment]) -> None:
        """A chunk has arrived: its tasks are pending from now, before ``run`` takes it, so
        a cancel read right behind it skips its task (the reader thread calls this)."""
        with self._lock:
            self._pending.update(a.id for a in chunk)

    def run(self, chunk: list[Assignment]) -> None:
        """Run the tasks of a chunk given to ``expect``, skipping those cancelled since."""
        for assignment in chunk:
            with self._lock:
                if self._halted:
                    return
                if assignment.id not in self._pending:
                    continue  # cancelled while it waited: ``Skipped`` was sent
                self._pending.discard(assignment.id)
                self._running = assignment.id
            outcome = self._run_one(assignment)
            with self._lock:
                self._running = None
            self._channel.send(wire.Done(outcome))

    def _run_one(self, assignment: Assignment) -> Outcome:
        task = self._registry.get(assignment.name)
        soft = task.soft_time_limit if task is not None else None
        started = time.time()
        try:
            with _soft_limit(soft):
                return self._executor.run_sync(assignment)
        except SoftTimeLimitExceeded as exc:  # fired just as the task returned
            return failure(assignment, started, exc, retryable=False)

    def cancel(self, task_id: str) -> None:
        with self._lock:
            if task_id in self._pending:
                self._pending.discard(task_id)
                reply: wire.FromChild | None = wire.Skipped(task_id)
            elif task_id == self._running:
                self._halted = True
                reply = wire.Halted(task_id)
            else:
                reply = None  # done already: its ``Done`` is sent or on its way
        if reply is not None:
            self._channel.send(reply)


@contextlib.contextmanager
def _soft_limit(seconds: float | None) -> Iterator[None]:
    """Raise ``SoftTimeLimitExceeded`` in this (main) thread after ``seconds``."""
    if seconds is None:
        yield
        return

    def fire(signum: int, frame: FrameType | None) -> None:
        raise SoftTimeLimitExceeded(f"the task ran past its {seconds:g} s soft time limit")

    signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def resident_memory() -> int:
    """This process's resident set, in bytes (``/proc``; the peak where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def resolve(refs: list[wire.TaskRef]) -> TaskRegistry:
    """The process tasks, found where the subworker found them. Raises ``LookupError``
    or ``ImportError`` with what is missing."""
    namespaces: dict[str, Any] = {}
    registry = TaskRegistry()
    for ref in refs:
        key = ref.main_path or ref.module
        if key not in namespaces:
            namespaces[key] = _namespace(ref)
        found: Any = namespaces[key]
        for part in ref.qualname.split("."):
            found = found.get(part) if isinstance(found, dict) else getattr(found, part, None)
        if not isinstance(found, Task) or found.name != ref.name:
            raise LookupError(
                f"process task {ref.name!r}: {ref.module}.{ref.qualname} is not that task "
                "here (define process tasks at the top level of an importable module)"
            )
        registry.add(found)
    return registry


def _namespace(ref: wire.TaskRef) -> Any:
    if ref.main_path is not None:
        return runpy.run_path(ref.main_path, run_name="__mp_main__")
    return importlib.import_module(ref.module)


def _die_with_parent() -> None:
    """On Linux, have the kernel end this process when its subworker dies."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _messages(channel: Channel) -> Iterator[wire.ToChild]:
    while (message := channel.read()) is not None:
        yield message


def _read_commands(channel: Channel, child: Child, chunks: queue.SimpleQueue[Any]) -> None:
    """The reader thread: chunks to the main thread, cancels decided at once. When the
    subworker goes away, so does this process, whatever it is running."""
    try:
        for message in _messages(channel):
            if isinstance(message, wire.Run):
                child.expect(message.assignments)
                chunks.put(message.assignments)
            elif isinstance(message, wire.Cancel):
                child.cancel(message.task_id)
            elif isinstance(message, wire.Stop):
                chunks.put(None)
                return
    except Exception:  # a frame that does not decode: the subworker is not one we know
        log.exception("child: unreadable message from the subworker")
    os._exit(1)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    channel = Channel(socket.socket(fileno=int(argv[1])))
    spec = channel.read()
    if not isinstance(spec, wire.Spec):
        return 2
    sys.path[:] = spec.sys_path
    configure_logging(spec.log_level, json=spec.log_json)
    structlog.contextvars.bind_contextvars(child_pid=os.getpid())
    try:
        registry = resolve(spec.tasks)
        for module in spec.hook_modules:  # handlers connected beside no process task
            importlib.import_module(module)
    except Exception as exc:  # whatever importing the user's modules raised
        channel.send(wire.Broken(f"{type(exc).__name__}: {exc}"))
        return 1
    provider = configure_tracing("fastworker-subworker")  # if the inherited OTEL_* ask
    instrument = TaskInstrument(spec.worker_id, adopt_context=True)
    child = Child(channel, Executor(registry, instrument), registry)
    chunks: queue.SimpleQueue[list[Assignment] | None] = queue.SimpleQueue()
    threading.Thread(
        target=_read_commands, args=(channel, child, chunks), name="commands", daemon=True
    ).start()
    this_process = worker_event(spec.worker_id, child=True)
    worker_signal_blocking(signals.worker_process_init, this_process)
    try:
        channel.send(wire.Ready(os.getpid()))
        while (chunk := chunks.get()) is not None:
            child.run(chunk)
            channel.send(wire.Idle(resident_memory()))
    except (BrokenPipeError, ConnectionResetError):
        return 0  # the subworker is gone (it stopped as this child started): no one to tell
    worker_signal_blocking(signals.worker_shutdown, this_process)
    if provider is not None:
        provider.shutdown()  # the spans the tasks made, flushed before a graceful exit
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
