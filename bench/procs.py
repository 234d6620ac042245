"""Child processes of the benchmark: starting, RSS, and stopping every one.

A :class:`Supervisor` records every process it starts, so whatever happens to the run
(a scenario error, a timeout, Ctrl-C, SIGTERM) the ``finally`` of the run stops them all:
SIGTERM first, SIGKILL after a deadline. Children also get SIGTERM from the kernel if the
benchmark itself dies without cleaning up (``PR_SET_PDEATHSIG``). It must never signal a
process it did not start.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
STOP_DEADLINE = 15.0
_PR_SET_PDEATHSIG = 1


def child_env() -> dict[str, str]:
    """Our environment without FASTWORKER_* settings, with bench/ (for ``bench_tasks``) and
    the repository root (for ``python -m bench.floor_*``) on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
    paths = [str(BENCH_DIR), str(REPO_ROOT), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def rss_mib(pid: int) -> float:
    """Resident set size of a process in MiB, from /proc/<pid>/status (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, chars: int = 800) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:].strip()
        except OSError:
            return ""

    def describe_exit(self) -> str:
        return f"{self.name} (pid {self.pid}) exited with code {self.popen.returncode}: " + (
            self.tail() or "no output"
        )


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGTERM the child when we die (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the child
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))

    return preexec


@dataclass
class Supervisor:
    """Starts processes (logs under ``log_dir``) and guarantees they are stopped."""

    log_dir: Path
    procs: list[Proc] = field(default_factory=list)
    spawned: int = 0
    _preexec: Callable[[], None] | None = field(default_factory=_parent_death_signal)

    def spawn(self, name: str, argv: list[str]) -> Proc:
        self.spawned += 1  # a log of its own, whatever was stopped (and forgotten) before
        log = self.log_dir / f"{self.spawned - 1:03d}-{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env(),
                cwd=self.log_dir,
                start_new_session=True,  # Ctrl-C reaches us only; we stop children in order
                preexec_fn=self._preexec,  # only a prctl call, resolved in the parent
            )
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def python_module(self, name: str, module: str, *args: str) -> Proc:
        return self.spawn(name, [sys.executable, "-m", module, *args])

    def stop(self, procs: Iterable[Proc], deadline: float = STOP_DEADLINE) -> None:
        """SIGTERM each process, wait for all until ``deadline`` seconds, then SIGKILL."""
        targets = [p for p in procs if p in self.procs]
        for proc in targets:
            if proc.alive():
                proc.popen.send_signal(signal.SIGTERM)
        end = time.monotonic() + deadline
        for proc in targets:
            try:
                proc.popen.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
            self.procs.remove(proc)

    def stop_all(self) -> None:
        self.stop(list(reversed(self.procs)))
