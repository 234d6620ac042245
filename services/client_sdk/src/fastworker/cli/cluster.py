"""The local cluster ``fastworker dev`` runs: a control plane and subworkers as child
processes, their logs prefixed, reloads, and an orderly stop.

Imported only when ``fastworker dev`` runs, so the other commands never pay for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fastworker.cli.common import EXIT_OK, EXIT_TASK_FAILED, CommandError
from fastworker.cli.lifetime import PARENT_ENV
from fastworker.client import Client
from fastworker.errors import FastWorkerError
from fastworker_protocol import (
    DEFAULT_BASE_PORT,
    DEFAULT_DISCOVERY_PORT,
    DEFAULT_HTTP_PORT,
    tcp_address,
)

READY_TIMEOUT = 60.0  # seconds for the cluster to come up
SHUTDOWN_TIMEOUT = 5.0  # a dev subworker's drain: short, so reloads and Ctrl-C are quick
_KILL_AFTER = 10.0  # seconds past the drain before a child is killed
_COLORS = ("36", "33", "35", "32", "34", "31")


@dataclass(frozen=True)
class DevSettings:
    task_modules: tuple[str, ...]
    subworkers: int = 2
    concurrency: int | None = None  # per subworker (or the control plane's, alone)
    reload: bool = False
    host: str = "127.0.0.1"
    base_port: int = DEFAULT_BASE_PORT
    discovery_port: int = DEFAULT_DISCOVERY_PORT
    http_port: int = DEFAULT_HTTP_PORT

    @property
    def discovery(self) -> str:
        return tcp_address(self.host, self.discovery_port)

    def control_plane_args(self) -> list[str]:
        args = ["control-plane", "--host", self.host, "--base-port", str(self.base_port)]
        args += ["--discovery-port", str(self.discovery_port), "--http-port", str(self.http_port)]
        args += ["--shutdown-timeout", str(SHUTDOWN_TIMEOUT)]
        if self.subworkers:  # it only dispatches: the subworkers import the task code
            return [*args, "--local-concurrency", "0"]
        args += ["--task-modules", *self.task_modules]
        if self.concurrency is not None:
            args += ["--local-concurrency", str(self.concurrency)]
        return args

    def subworker_args(self) -> list[str]:
        args = ["subworker", "--discovery-address", self.discovery]
        args += ["--task-modules", *self.task_modules, "--shutdown-timeout", str(SHUTDOWN_TIMEOUT)]
        if self.concurrency is not None:
            args += ["--concurrency", str(self.concurrency)]
        return args


class Child:
    """One process of the cluster, its output copied line by line under its name."""

    def __init__(self, name: str, args: list[str], color: str, out: TextIO) -> None:
        self.name = name
        self._argv = [sys.executable, "-m", "fastworker.cli", *args]
        self._prefix = _paint(f"{name:>15} |", color, out)
        self._out = out
        self.process: asyncio.subprocess.Process | None = None
        self._copier: asyncio.Task[None] | None = None

    async def start(self, env: dict[str, str]) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,  # the terminal's Ctrl-C is ours to pass on, in order
        )
        self._copier = asyncio.get_running_loop().create_task(self._copy())

    async def _copy(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            self._out.write(f"{self._prefix} {line.decode(errors='replace').rstrip()}\n")
            self._out.flush()

    @property
    def exited(self) -> int | None:
        return None if self.process is None else self.process.returncode

    async def stop(self) -> None:
        """SIGTERM (a graceful drain), then SIGKILL if it outlives the drain."""
        if self.process is None:
            return
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), SHUTDOWN_TIMEOUT + _KILL_AFTER)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()
        if self._copier is not None:
            await self._copier


class DevCluster:
    def __init__(self, settings: DevSettings, out: TextIO = sys.stdout) -> None:
        self.settings = settings
        self._out = out
        self._env = _child_env(out)
        self.control_plane = Child("control-plane", settings.control_plane_args(), _COLORS[0], out)
        self.subworkers: list[Child] = []
        self._generation = 0
        self._prefix = _paint(f"{'dev':>15} |", "1", out)

    def say(self, message: str) -> None:
        self._out.write(f"{self._prefix} {message}\n")
        self._out.flush()

    async def start(self) -> None:
        await self.control_plane.start(self._env)
        self.subworkers = await self._start_subworkers()
        await self._wait_ready()

    async def _start_subworkers(self) -> list[Child]:
        self._generation += 1
        children = []
        for index in range(1, self.settings.subworkers + 1):
            name = f"subworker-{index}" + (f".{self._generation}" if self._generation > 1 else "")
            color = _COLORS[index % len(_COLORS)]
            child = Child(name, self.settings.subworker_args(), color, self._out)
            await child.start(self._env)
            children.append(child)
        return children

    async def _wait_ready(self) -> None:
        """Until the control plane has every subworker (or its own worker) registered."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT
        while loop.time() < deadline:
            self._check_alive()
            with contextlib.suppress(FastWorkerError):
                async with Client(self.settings.discovery, timeout=1.0, retries=0) as client:
                    while loop.time() < deadline:
                        self._check_alive()
                        tasks = await self._ready_tasks(client)
                        if tasks is not None:
                            self._banner(tasks)
                            return
                        await asyncio.sleep(0.1)  # polling while the subworkers register
        raise CommandError(f"the cluster was not ready within {READY_TIMEOUT:g} s")

    async def _ready_tasks(self, client: Client) -> list[str] | None:
        """The task names, once the workers that should run them have registered."""
        workers = await client.list_workers()
        running = [w for w in workers if w.local != bool(self.settings.subworkers)]
        if len(running) < max(1, self.settings.subworkers):
            return None
        return sorted({name for w in running for name in w.tasks})

    def _check_alive(self) -> None:
        for child in [self.control_plane, *self.subworkers]:
            if child.exited is not None:
                raise CommandError(f"{child.name} exited with code {child.exited} (see above)")

    def _banner(self, tasks: list[str]) -> None:
        s = self.settings
        workers = f"{s.subworkers} subworkers" if s.subworkers else "its own worker"
        self.say(f"ready: a control plane and {workers}, running {', '.join(tasks) or 'no tasks'}")
        self.say(f"  dashboard   http://{s.host}:{s.http_port}/")
        self.say(f"  discovery   {s.discovery}   (Client() and subworkers find it here)")
        self.say(f"  submit      {tcp_address(s.host, s.base_port)}")
        if s.reload:
            self.say(f"  reload      on: watching {Path.cwd()} for .py changes")
        self.say("Ctrl-C stops everything.")

    async def reload(self, changed: Sequence[str]) -> None:
        """Restart whatever imports task code: new subworkers first, then the old drain."""
        self.say(f"changed: {', '.join(changed)}: reloading")
        if not self.settings.subworkers:
            await self.control_plane.stop()
            self.control_plane = Child(
                "control-plane", self.settings.control_plane_args(), _COLORS[0], self._out
            )
            await self.control_plane.start(self._env)
            return
        old, self.subworkers = self.subworkers, await self._start_subworkers()
        await asyncio.gather(*(child.stop() for child in old))

    async def stop(self) -> None:
        self.say("stopping: subworkers drain, then the control plane")
        await asyncio.gather(*(child.stop() for child in self.subworkers))
        await self.control_plane.stop()
        self.say("stopped")

    async def run(self, stop: asyncio.Event) -> int:
        """Start, serve until ``stop`` (or a crash without ``--reload``), stop everything."""
        started = asyncio.Event()
        watcher = asyncio.ensure_future(self._watch(started)) if self.settings.reload else None
        try:
            if watcher is not None:
                await asyncio.sleep(0)  # its first step installs the watches: none is missed
            await self.start()
            started.set()
            return await self._supervise(stop)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await self.stop()

    async def _supervise(self, stop: asyncio.Event) -> int:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)
            if self.control_plane.exited is not None:
                self.say(f"the control plane exited with code {self.control_plane.exited}")
                return EXIT_TASK_FAILED
            crashed = [c for c in self.subworkers if c.exited not in (None, 0)]
            if crashed and not self.settings.reload:
                self.say(f"{crashed[0].name} exited with code {crashed[0].exited}")
                return EXIT_TASK_FAILED
        return EXIT_OK

    async def _watch(self, started: asyncio.Event) -> None:
        """Reload on every change of a ``.py`` file, from before the processes start: a
        change saved while they start (or just after "ready") is applied once all are up."""
        from watchfiles import PythonFilter, awatch  # imported only with --reload

        here = Path.cwd()
        async for changes in awatch(here, watch_filter=PythonFilter()):
            changed = sorted({str(Path(path).relative_to(here)) for _, path in changes})
            await started.wait()
            await self.reload(changed)


def _child_env(out: TextIO) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("FASTWORKER_LOG_FORMAT", "console" if out.isatty() else "json")
    # Each child runs in a session of its own (Ctrl-C is passed on in order), so no signal
    # to this process's group reaches it: it stops itself when this process dies.
    env[PARENT_ENV] = str(os.getpid())
    # ``python -m`` puts the working directory on sys.path: task modules resolve from here.
    return env


def _paint(text: str, color: str, out: TextIO) -> str:
    return f"\033[{color}m{text}\033[0m" if out.isatty() else text
