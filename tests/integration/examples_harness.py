"""Running the examples of examples/ as their READMEs say: ``fastworker dev`` in a copy of
the example's folder (so nothing is left behind in the repository), on free ports, and the
example's scripts as subprocesses pointed at it with ``FASTWORKER_DISCOVERY_ADDRESS``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from harness import wait_until

from fastworker.testing import free_ports_apart

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
SCRIPT_TIMEOUT = 60.0


def copy_example(name: str, tmp: Path) -> Path:
    """A copy of ``examples/NAME`` in ``tmp``, without bytecode."""
    target = tmp / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without FastWorker's settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
    env.update(extra)
    return env


class Dev:
    """``fastworker dev ARGS`` started in ``where``, on free ports, its output in a file."""

    def __init__(self, where: Path, *args: str, http_port: int | None = None) -> None:
        base, self.discovery_port, http = free_ports_apart(6, 1, 1)
        self.http_port = http_port or http
        self.log = where.parent / f"{where.name}-dev.log"
        ports = ["--base-port", str(base), "--discovery-port"]
        ports += [str(self.discovery_port), "--http-port", str(self.http_port)]
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "fastworker.cli", "dev", *ports, *args],
                cwd=where,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=clean_env(),
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def discovery(self) -> str:
        return f"tcp://127.0.0.1:{self.discovery_port}"

    async def ready(self) -> None:
        async def said_ready() -> bool:
            assert self.popen.poll() is None, self.output
            return "ready:" in self.output

        await wait_until(said_ready, READY_TIMEOUT, "fastworker dev to say it is ready")

    def children(self) -> list[int]:
        """Its control plane and subworkers still running (found by the discovery port)."""
        marker = str(self.discovery_port).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self.popen.pid:
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"fastworker.cli" in cmdline and marker in cmdline:
                    found.append(int(entry.name))
        return found

    async def interrupt(self) -> None:
        """Ctrl-C, as a user stops it: it exits 0 and leaves nothing running."""
        self.popen.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(self.popen.wait, STOP_TIMEOUT)
        assert code == 0, self.output[-3000:]
        assert self.children() == []

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        for pid in self.children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def dev_cluster(where: Path, *args: str) -> AsyncIterator[Dev]:
    """A ready ``fastworker dev``, stopped with Ctrl-C after the block (killed on error)."""
    dev = Dev(where, *args)
    try:
        await dev.ready()
        yield dev
        await dev.interrupt()
    except BaseException:
        sys.stderr.write(f"\n--- fastworker dev ({where.name}) ---\n{dev.output[-4000:]}\n")
        raise
    finally:
        dev.kill()


async def run_script(where: Path, script: str, discovery: str) -> str:
    """Run ``python SCRIPT`` in ``where`` against ``discovery``; its output (it must exit 0)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        cwd=where,
        env=clean_env(FASTWORKER_DISCOVERY_ADDRESS=discovery),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), SCRIPT_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = out.decode(errors="replace")
    assert process.returncode == 0, f"{script} exited {process.returncode}:\n{text}"
    return text
