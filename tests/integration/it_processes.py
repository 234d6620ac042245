"""Process-pool tasks for the integration tests (loaded only by the tests that use them:
every subworker loading them would start its children)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import structlog
from opentelemetry import trace

from fastworker import SoftTimeLimitExceeded, current_task, retry, task

_held: list[bytes] = []  # memory a task keeps, to grow its child


@task(pool="process")
def pid_of(tag: int = 0) -> int:
    """The pid of the process that ran it."""
    return os.getpid()


@task(pool="process")
def burn(milliseconds: float) -> int:
    """Pure-Python CPU work for about ``milliseconds`` (no sleep: the GIL is held)."""
    until = time.process_time() + milliseconds / 1000
    spins = 0
    while time.process_time() < until:
        spins += 1
    return spins


@task(pool="process", time_limit=1.0)
def late_write(path: str, seconds: float) -> str:
    """Writes ``path`` after ``seconds``: past its 1 s limit, never."""
    time.sleep(seconds)
    Path(path).write_text("written")
    return "written"


@task(pool="process")
def write_after(path: str, seconds: float) -> str:
    """Appends its pid to ``path + '.started'`` at once and writes ``path`` after
    ``seconds`` (no limit: for cancels)."""
    with Path(path + ".started").open("a") as started:
        started.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    Path(path).write_text("written")
    return "written"


@task(pool="process", soft_time_limit=0.5, time_limit=5.0)
def tidy(path: str) -> str:
    """Runs until its soft limit, then cleans up (writes ``path``) and says so."""
    try:
        while True:
            time.sleep(0.01)
    except SoftTimeLimitExceeded:
        Path(path).write_text("cleaned up")
        return "cleaned up"


@task(pool="process")
def crash_once(path: str, how: str) -> str:
    """Dies (``exit`` or ``segv``) the first time, succeeds when run again."""
    marker = Path(path)
    if not marker.exists():
        marker.write_text("crashed")
        if how == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        os._exit(1)
    return "survived"


@task(pool="process")
def always_crash() -> None:
    os._exit(3)


@task(pool="process")
def unportable() -> object:
    return {1, 2, 3}


@task(pool="process")
def grow(mebibytes: int) -> int:
    """Keeps ``mebibytes`` more of memory in its child; returns the child's pid."""
    _held.append(os.urandom(mebibytes << 20))
    return os.getpid()


@task
def thread_pid() -> int:
    return os.getpid()


@task(pool="process")
def chatty_child(word: str) -> int:
    """Logs through the standard library and structlog, from its child; returns its pid."""
    logging.getLogger("it_processes").warning("child stdlib says %s", word)
    structlog.get_logger("it_processes").info("child structlog says", word=word)
    return os.getpid()


@task(pool="process")
def traced_child() -> str:
    """Makes a span of its own inside its child: it must nest under the process span."""
    with trace.get_tracer("it_processes").start_as_current_span("inner work"):
        return "traced"


@task(pool="process", time_limit=0.5)
def stamp_child(path: str, tag: int, seconds: float) -> int:
    """Appends "tag start-time" to a file as it starts, then sleeps past its limit."""
    with Path(path).open("a") as log:
        log.write(f"{tag} {time.time()}\n")
    time.sleep(seconds)
    return tag


@task(pool="process")
def slow_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@task(pool="process", time_limit=0.5)
def stubborn(path: str) -> str:
    """Ignores SIGTERM, notes its pid, and writes ``path`` 5 s later."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Path(path + ".pid").write_text(str(os.getpid()))
    time.sleep(5)
    Path(path).write_text("written")
    return "written"


@task(pool="process", time_limit=0.5)
def with_grandchild(path: str) -> str:
    """Starts a ``sleep`` of its own (pid noted in ``path``), then runs past its limit."""
    sleeper = subprocess.Popen(["sleep", "30"])
    Path(path).write_text(str(sleeper.pid))
    sleeper.wait()
    return "slept"


@task(pool="process")
def hold_the_gil(path: str) -> int:
    """Notes its start, then computes in C for a long time without releasing the GIL."""
    Path(path).write_text("started")
    return sum(range(10**11))


@task(pool="process", max_retries=2, retry_backoff=0.01)
def attempts_seen_in_child(path: str, succeed_on: int) -> str:
    """``current_task()`` in a child process, on each attempt."""
    context = current_task()
    assert context is not None
    with Path(path).open("a") as seen:
        seen.write(f"{context.id} {context.attempt} {context.queue}\n")
    if context.attempt < succeed_on:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return context.id


@task(pool="process", max_retries=2)
def asks_again_in_child() -> int:
    """Asks for a retry from a child process until its third attempt."""
    context = current_task()
    assert context is not None
    if context.attempt < 3:
        retry(f"attempt {context.attempt} asks again", countdown=0.05)
    return context.attempt
