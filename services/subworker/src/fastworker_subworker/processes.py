"""The process pool: child processes that run ``pool="process"`` tasks, and their health.

``ChildProcess`` is one child (``child.py``) seen from the subworker: started, fed
messages, read, stopped between chunks or terminated (``SIGTERM``, then ``SIGKILL``
after a grace). ``ProcessPool`` keeps ``processes`` of them: it hands out idle ones,
recycles a child once it has run ``max_tasks_per_child`` tasks or grown past
``max_memory_per_child``, and replaces one that was terminated or died. Replacing,
recycling and terminating happen in the background: a slot whose child is being killed
takes its next task at once, in another child.

No task is decided here: ``child_run`` reads what a child says about its tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import socket
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from fastworker import TaskRegistry
from fastworker_common.supervision import Policy, Supervisor
from fastworker_subworker import child_wire as wire

log = structlog.get_logger(__name__)

START_TIMEOUT = 120.0  # seconds a child may take to import the task modules
_RESPAWN_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class ChildBroken(RuntimeError):
    """A child could not start: its task modules do not import, or a task is missing."""


@dataclass(frozen=True)
class PoolOptions:
    processes: int
    max_tasks_per_child: int | None = None
    max_memory_per_child: int | None = None  # bytes of resident memory
    kill_grace: float = 2.0  # seconds between SIGTERM and SIGKILL

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError("processes must be at least 1")
        if self.max_tasks_per_child is not None and self.max_tasks_per_child < 1:
            raise ValueError("max_tasks_per_child must be at least 1")
        if self.max_memory_per_child is not None and self.max_memory_per_child < 1:
            raise ValueError("max_memory_per_child must be positive")


def task_refs(registry: TaskRegistry) -> list[wire.TaskRef]:
    """Where a child finds each process task; ``ValueError`` for one it cannot find."""
    refs = []
    for task in registry:
        if task.pool != "process":
            continue
        module, qualname = task.fn.__module__, task.fn.__qualname__
        if "<locals>" in qualname:
            raise ValueError(
                f"process task {task.name!r} is defined inside a function ({qualname}): "
                "a child process can only import tasks defined at a module's top level"
            )
        main_path = None
        main_spec = getattr(sys.modules["__main__"], "__spec__", None)
        if module == "__main__" and main_spec is not None and main_spec.name != "__main__":
            module = main_spec.name  # ``python -m app.jobs``: imported as what it is named by
        elif module == "__main__":
            main_path = getattr(sys.modules["__main__"], "__file__", None)
            if main_path is None:
                raise ValueError(
                    f"process task {task.name!r} is defined in an interactive session: "
                    "define it in a module"
                )
        refs.append(wire.TaskRef(task.name, module, qualname, main_path))
    return refs


def log_settings() -> tuple[str, bool]:
    """The level and format this process logs with, for its children to do the same."""
    root = logging.getLogger()
    level = logging.getLevelName(root.getEffectiveLevel()).lower()
    formatter = root.handlers[0].formatter if root.handlers else None
    processors = getattr(formatter, "processors", ())
    as_json = any(isinstance(p, structlog.processors.JSONRenderer) for p in processors)
    return level, as_json


class ChildProcess:
    def __init__(
        self,
        process: asyncio.subprocess.Process,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self._process = process
        self._reader = reader
        self._writer = writer
        self.pid = process.pid
        self.tasks_run = 0
        self.rss = 0

    @classmethod
    async def spawn(cls, spec: wire.Spec) -> ChildProcess:
        ours, theirs = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "fastworker_subworker.child",
                str(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,  # its own process group: see ``kill``
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        child = cls(process, reader, writer)
        child.send(spec)
        try:
            hello = await asyncio.wait_for(child.receive(), START_TIMEOUT)
        except TimeoutError:
            hello = wire.Broken(f"it did not import its tasks within {START_TIMEOUT:g} s")
        if isinstance(hello, wire.Ready):
            return child
        await child.kill(0.0)
        said = hello.message if isinstance(hello, wire.Broken) else "it exited at start"
        raise ChildBroken(f"a process-pool child could not start: {said}")

    def send(self, message: wire.ToChild) -> None:
        if not self._writer.is_closing():
            self._writer.write(wire.frame(message))

    async def receive(self) -> wire.FromChild | None:
        """The child's next message; ``None`` once it has gone (or said nonsense)."""
        try:
            header = await self._reader.readexactly(wire.HEADER.size)
            body = await self._reader.readexactly(wire.body_length(header))
            message: wire.FromChild = wire.from_child.decode(body)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        except Exception:
            log.exception("unreadable message from a child process", pid=self.pid)
            return None
        return message

    def wants_recycling(self, options: PoolOptions) -> bool:
        most, limit = options.max_tasks_per_child, options.max_memory_per_child
        return (most is not None and self.tasks_run >= most) or (
            limit is not None and self.rss > limit
        )

    def tasks_left(self, options: PoolOptions) -> int | None:
        if options.max_tasks_per_child is None:
            return None
        return max(1, options.max_tasks_per_child - self.tasks_run)

    async def exit_status(self, timeout: float) -> str:
        """How it ended (waiting up to ``timeout`` for it): ``exit code N``, ``signal
        SIGSEGV``..."""
        try:
            code = await asyncio.wait_for(self._process.wait(), timeout)
        except TimeoutError:
            return f"it closed its socket and had not exited {timeout:g} s later"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"signal {signal.Signals(-code).name}"
            return f"signal {-code}"
        return f"exit code {code}"

    async def stop(self, timeout: float) -> None:
        """Between chunks: let it end by itself, or terminate it after ``timeout``."""
        self.send(wire.Stop())
        try:
            await asyncio.wait_for(self._process.wait(), timeout)
        except TimeoutError:
            await self.kill(0.0)
        self._close()

    async def kill(self, grace: float) -> None:
        """``SIGTERM``, then ``SIGKILL`` if it is still there after ``grace`` seconds, to
        its whole process group: what the task started (a ``subprocess``) ends with it."""
        self._signal_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._process.wait(), grace)
        except TimeoutError:
            self._signal_group(signal.SIGKILL)
            await self._process.wait()
        self._signal_group(signal.SIGKILL)  # what is left of the group once it is gone
        self._close()

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def _close(self) -> None:
        self._writer.close()


class ProcessPool:
    def __init__(self, spec: wire.Spec, options: PoolOptions) -> None:
        self.options = options
        self._spec = spec
        self._idle: asyncio.Queue[ChildProcess] = asyncio.Queue()
        self._children: set[ChildProcess] = set()
        self._endings: set[asyncio.Task[None]] = set()  # children being stopped or killed
        self._respawns: set[asyncio.Task[None]] = set()
        # A chore that fails is logged; the pool goes on (a respawn is tried again later).
        self._chores = Supervisor()
        self._closed = False
        self.recycled = 0  # children retired by --max-tasks/--max-memory-per-child
        self.crashed = 0  # children that died under a task
        self.terminated = 0  # children ended for a time limit, a cancel or a drain

    @property
    def alive(self) -> int:
        return len(self._children)

    async def start(self) -> None:
        """Start every child; ``ChildBroken`` (after stopping the others) if one cannot."""
        spawned = await asyncio.gather(
            *(ChildProcess.spawn(self._spec) for _ in range(self.options.processes)),
            return_exceptions=True,
        )
        children = [c for c in spawned if isinstance(c, ChildProcess)]
        failures = [e for e in spawned if isinstance(e, BaseException)]
        for child in children:
            self._children.add(child)
            self._idle.put_nowait(child)
        if failures:
            await self.close()
            raise failures[0]
        log.info("process pool started", processes=self.alive, pids=sorted(c.pid for c in children))

    async def acquire(self) -> ChildProcess:
        """An idle child (waiting for one: that wait is not any task's run time)."""
        return await self._idle.get()

    def release(self, child: ChildProcess) -> None:
        """A child back from a chunk it finished: idle again, or recycled."""
        if not child.wants_recycling(self.options):
            self._idle.put_nowait(child)
            return
        self.recycled += 1
        log.info("recycling a child process", pid=child.pid, tasks=child.tasks_run, rss=child.rss)
        self._replace(child, child.stop(self.options.kill_grace + 5.0))

    def discard(self, child: ChildProcess, *, crashed: bool, why: str) -> None:
        """A child that died (``crashed``) or must be terminated: replaced by a new one."""
        if crashed:
            self.crashed += 1
            log.warning("a child process died", pid=child.pid, why=why)
        else:
            self.terminated += 1
            log.info("terminating a child process", pid=child.pid, why=why)
        self._replace(child, child.kill(self.options.kill_grace))

    def _replace(self, child: ChildProcess, ending: Coroutine[Any, Any, None]) -> None:
        self._children.discard(child)
        self._chore("ending a child process", self._endings, ending)
        if not self._closed:
            self._chore("starting a child process", self._respawns, self._respawn())

    def _chore(
        self, name: str, chores: set[asyncio.Task[None]], work: Coroutine[Any, Any, None]
    ) -> None:
        task = self._chores.spawn(name, work, policy=Policy.LOG)
        chores.add(task)
        task.add_done_callback(chores.discard)

    async def _respawn(self) -> None:
        """Start a replacement, retrying with a growing pause while it cannot start."""
        attempt = 0
        while not self._closed:
            try:
                child = await ChildProcess.spawn(self._spec)
            except (ChildBroken, OSError) as exc:
                delay = _RESPAWN_DELAYS[min(attempt, len(_RESPAWN_DELAYS) - 1)]
                attempt += 1
                log.error("cannot start a child process; retrying", error=str(exc), delay=delay)
                await asyncio.sleep(delay)
                continue
            if self._closed:
                await child.stop(self.options.kill_grace)
                return
            self._children.add(child)
            self._idle.put_nowait(child)
            return

    async def close(self) -> None:
        """Stop every child (an idle one ends by itself, a busy one is terminated)."""
        self._closed = True
        for respawn in list(self._respawns):
            respawn.cancel()
        await asyncio.gather(*self._respawns, return_exceptions=True)
        idle = set()
        while not self._idle.empty():
            idle.add(self._idle.get_nowait())
        endings = [
            c.stop(self.options.kill_grace) if c in idle else c.kill(self.options.kill_grace)
            for c in self._children
        ]
        self._children.clear()
        await asyncio.gather(*endings, *self._endings, return_exceptions=True)


def cpu_count() -> int:
    """The CPUs this process may use: its affinity, capped by a cgroup CPU limit (a
    container's ``--cpus`` or a pod's ``limits.cpu``, rounded up), where there is one. A
    pool the size of the host's CPU count in a one-CPU container would only add memory."""
    affinity = getattr(os, "sched_getaffinity", None)
    count = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    for path in (_CGROUP_V2_CPU, *_CGROUP_V1_CPU):
        try:
            limit = cgroup_cpu_limit(path.read_text(), path)
        except (OSError, ValueError):
            continue
        if limit is not None:
            return max(1, min(count, limit))
    return max(1, count)


_CGROUP_V2_CPU = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1_CPU = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),)


def cgroup_cpu_limit(text: str, path: Path) -> int | None:
    """Whole CPUs (rounded up) a cgroup's CPU quota allows; ``None`` for no limit.
    ``cpu.max`` (v2) reads ``QUOTA PERIOD`` or ``max PERIOD``; v1's ``cpu.cfs_quota_us``
    is ``-1`` or the quota, its period beside it in ``cpu.cfs_period_us``."""
    fields = text.split()
    if path.name == "cpu.max":
        quota, period = fields[0], fields[1]
    else:
        quota, period = fields[0], (path.parent / "cpu.cfs_period_us").read_text().strip()
    if quota in ("max", "-1"):
        return None
    return max(1, math.ceil(int(quota) / int(period)))
