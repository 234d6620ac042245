"""README's "Your own tasks" works outside the clone, exactly as written: its install block
(wheels built in a copy of the checkout, a fresh ``.venv`` in an application directory that
holds a ``mytasks.py``), then its ``uv run fastworker ...`` lines from that directory, with
this checkout's own environment out of reach (no ``VIRTUAL_ENV``, its ``.venv/bin`` off
``PATH``). Ports come from ``FASTWORKER_*`` variables, so the commands stay verbatim.
README's "Queues and limits" and "CPU-bound work and time limits" sections, and the queues
and concurrency guides, run the same way: their files written, their servers started,
every other command run in order.

Slow (a venv and a pip install from PyPI for the third-party dependencies, ~15 s warm), so
the install runs once for the module."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import wait_until

from fastworker.testing import free_port_block

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = "/path/to/fastworker"
APP = "/path/to/myapp"
INSTALL_TIMEOUT = 240.0
READY_TIMEOUT = 60.0
COMMAND_TIMEOUT = 60.0

MYTASKS = """\
from fastworker import task


@task
def resize(path: str, width: int) -> str:
    return f"{path} resized to {width}px"
"""


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)


def commands(block: str) -> list[list[str]]:
    """Each line of a block as argv, its trailing ``# comment`` dropped."""
    return [argv for line in block.splitlines() if (argv := shlex.split(line, comments=True))]


def outside_env(**extra: str) -> dict[str, str]:
    """This environment as a shell outside the checkout has it: no FastWorker settings, no
    active virtualenv, the checkout's ``.venv/bin`` off ``PATH``."""
    venv_bin = str(ROOT / ".venv" / "bin")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FASTWORKER_", "UV_PROJECT", "PYTHONPATH"))
        and k not in ("VIRTUAL_ENV", "PYTHONHOME", "CONDA_PREFIX")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != Path(venv_bin)
    )
    env.update(extra)
    return env


def copy_checkout(target: Path) -> None:
    """What ``uv build --all-packages`` reads: the workspace's pyproject.toml and lock, and
    each member's pyproject.toml and src/ (a copy, so the build leaves the clone alone)."""
    target.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy2(ROOT / name, target / name)
    for member in sorted((ROOT / "services").iterdir()):
        if not (member / "pyproject.toml").is_file():
            continue
        dest = target / "services" / member.name
        dest.mkdir(parents=True)
        shutil.copy2(member / "pyproject.toml", dest / "pyproject.toml")
        for extra in ("README.md", "PROTOCOL.md"):
            if (member / extra).is_file():
                shutil.copy2(member / extra, dest / extra)
        shutil.copytree(member / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__"))


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = COMMAND_TIMEOUT) -> str:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        check=False,
    )
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}:\n{out[-4000:]}"
    return out


@dataclass
class Installed:
    checkout: Path
    app: Path

    def substitute(self, text: str) -> str:
        return text.replace(CHECKOUT, str(self.checkout)).replace(APP, str(self.app))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("install")
    where = Installed(tmp / "fastworker", tmp / "myapp")
    copy_checkout(where.checkout)
    where.app.mkdir()
    (where.app / "mytasks.py").write_text(MYTASKS, encoding="utf-8")

    blocks = bash_blocks(section("Your own tasks"))
    install = blocks[0]
    assert "uv build" in install, install
    assert "pip install" in install, install
    script = "set -euo pipefail\n" + where.substitute(install)
    run(["bash", "-c", script], tmp, outside_env(), timeout=INSTALL_TIMEOUT)
    return where


def test_the_install_is_ours_not_pypis_fastworker(installed: Installed) -> None:
    probe = (
        "import importlib.metadata as m, fastworker, fastworker_control_plane; "
        "print(fastworker.__file__); "
        "print(*(m.version(n) for n in ('fastworker', 'fastworker-protocol', 'fastworker-common', "
        "'fastworker-subworker', 'fastworker-control-plane')))"
    )
    out = run(["uv", "run", "python", "-c", probe], installed.app, outside_env())
    where, versions = out.strip().splitlines()[-2:]
    assert Path(where).is_relative_to(installed.app / ".venv"), out
    assert versions.split() == ["0.1.0"] * 5, out


def test_the_fastapi_line_adds_the_extra_to_our_fastworker(installed: Installed) -> None:
    text = section("FastAPI")
    [line] = [m for m in re.findall(r"`([^`]*pip install[^`]*)`", text)]
    run(["bash", "-c", installed.substitute(line)], installed.app, outside_env(), INSTALL_TIMEOUT)
    probe = (
        "import importlib.metadata as m, fastapi, fastworker.integration.fastapi; "
        "print(m.version('fastworker'))"
    )
    out = run(["uv", "run", "python", "-c", probe], installed.app, outside_env())
    assert out.strip().splitlines()[-1] == "0.1.0", out


class Started:
    """One README command started in the application directory, its output in a file."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def interrupt(self) -> int:
        """SIGINT to ``uv run``, which hands it to the command: its exit code, once every
        process it started has gone. (A terminal's Ctrl-C reaches uv too, which then exits
        130 whatever the command did; uv's behaviour, not FastWorker's.)"""
        self.popen.send_signal(signal.SIGINT)
        try:
            code = self.popen.wait(30)
        except subprocess.TimeoutExpired:  # say what is stuck, for whoever reads the failure
            ps = ["ps", "-o", "pid,stat,wchan:24,args", "-g", str(self.popen.pid)]
            left = subprocess.run(ps, capture_output=True, text=True, check=False).stdout
            raise AssertionError(
                f"still running 30 s after SIGINT:\n{left}\noutput:\n{self.output[-4000:]}"
            ) from None

        def group_alive() -> bool:
            try:
                os.killpg(self.popen.pid, 0)
            except ProcessLookupError:
                return False
            return True

        deadline = time.monotonic() + 10
        while group_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(), "processes left running after Ctrl-C"
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()


@contextlib.contextmanager
def started(argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> Iterator[Started]:
    process = Started(argv, cwd, env, log)
    try:
        yield process
    except BaseException:
        print(f"\n--- {shlex.join(argv)} ---\n{process.output[-4000:]}")
        raise
    finally:
        process.kill()


def ports() -> tuple[dict[str, str], str]:
    discovery = free_port_block(1)
    env = {
        "FASTWORKER_BASE_PORT": str(free_port_block(6)),
        "FASTWORKER_DISCOVERY_PORT": str(discovery),
        "FASTWORKER_HTTP_PORT": str(free_port_block(1)),
    }
    return env, f"tcp://127.0.0.1:{discovery}"


def submit_resize(app: Path, discovery: str) -> str:
    argv = ["uv", "run", "fastworker", "submit", "--task-name", "resize"]
    argv += ["--args", "photo.png", "640"]
    env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    return run(argv, app, env).strip().splitlines()[-1]


async def workers_seen(app: Path, discovery: str, count: int, task: str = "resize") -> None:
    env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)

    async def listed() -> bool:
        done = await asyncio.to_thread(
            subprocess.run,
            ["uv", "run", "fastworker", "workers"],
            cwd=app,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        rows = [line for line in done.stdout.decode().splitlines()[1:] if "running" in line]
        return done.returncode == 0 and len(rows) >= count and task in rows[0]

    await wait_until(listed, READY_TIMEOUT, f"{count} workers running {task}")


async def test_fastworker_dev_runs_mytasks_from_the_application_directory(
    installed: Installed,
) -> None:
    [dev] = commands(bash_blocks(section("Your own tasks"))[1])
    assert dev[:4] == ["uv", "run", "fastworker", "dev"], dev
    env, discovery = ports()
    log = installed.app.parent / "dev.log"
    with started(dev, installed.app, outside_env(**env), log) as process:

        async def ready() -> bool:
            assert process.popen.poll() is None, process.output[-4000:]
            return "ready:" in process.output

        await wait_until(ready, READY_TIMEOUT, "fastworker dev to say it is ready")
        assert "running mytasks.resize" in process.output  # module-qualified
        assert submit_resize(installed.app, discovery) == '"photo.png resized to 640px"'
        assert process.interrupt() == 0, process.output[-4000:]


async def test_a_control_plane_and_a_subworker_run_mytasks(installed: Installed) -> None:
    control_plane, subworker = commands(bash_blocks(section("Your own tasks"))[2])
    assert control_plane[:4] == ["uv", "run", "fastworker", "control-plane"], control_plane
    assert subworker[:4] == ["uv", "run", "fastworker", "subworker"], subworker
    env, discovery = ports()
    app = installed.app
    with (
        started(control_plane, app, outside_env(**env), app.parent / "cp.log") as cp,
        started(
            subworker,
            app,
            outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery),
            app.parent / "subworker.log",
        ) as sw,
    ):
        await workers_seen(app, discovery, 2)  # the control plane's own and the subworker
        for _ in range(3):
            assert submit_resize(app, discovery) == '"photo.png resized to 640px"'
        assert sw.interrupt() == 0, sw.output[-4000:]
        assert cp.interrupt() == 0, cp.output[-4000:]


def test_getting_started_documents_the_same_install() -> None:
    readme = bash_blocks(section("Your own tasks"))[0].splitlines()
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    lines = [line.strip() for line in page.splitlines()]
    for line in readme:
        assert line.strip() in lines, f"docs/getting-started.md lacks README's {line!r}"


async def test_the_queues_and_limits_section_runs_as_written(installed: Installed) -> None:
    # Given README's shop.py in the application directory
    text = section("Queues and limits")
    [shop] = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    app = installed.app
    (app / "shop.py").write_text(shop, encoding="utf-8")
    servers, calls = (commands(block) for block in bash_blocks(text))
    control_plane, subworker = servers
    env, discovery = ports()
    client_env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    # When its control plane and pool run, and every command of the section is run in order
    with (
        started(control_plane, app, outside_env(**env), app.parent / "shop-cp.log") as cp,
        started(subworker, app, client_env, app.parent / "shop-sw.log") as sw,
    ):
        await workers_seen(app, discovery, 2, task="export_orders")
        printed = [run(argv, app, client_env).strip() for argv in calls]
        assert sw.interrupt() == 0, sw.output[-4000:]
        assert cp.interrupt() == 0, cp.output[-4000:]
    # Then each did what its comment says
    assert printed[0] == '"report 2026-11 for c-42"'
    assert printed[1] == '"orders of c-42 as csv"'
    assert "reports" in printed[2]
    assert "exports" in printed[2]
    assert printed[5] == "queue reports paused"
    limits = {line.split()[1]: line for line in printed[6].splitlines()[1:]}
    assert "rate 60/m" in limits["shop.build_report"]  # set as build_report: its full name
    assert "5 at once" in limits["exports"]
    assert "1 at once per customer_id" in limits["shop.export_orders"]


async def test_the_queues_guide_runs_as_written(installed: Installed) -> None:
    # Given the guide's shop.py and tasks.jsonl in the application directory
    guide = (ROOT / "docs" / "guides" / "queues.md").read_text(encoding="utf-8")
    shop, *programs = re.findall(r"```python[^\n]*\n(.*?)```", guide, flags=re.DOTALL)
    [jsonl] = re.findall(r'```text title="tasks.jsonl"\n(.*?)```', guide, flags=re.DOTALL)
    app = installed.app
    (app / "shop.py").write_text(shop, encoding="utf-8")
    (app / "tasks.jsonl").write_text(jsonl, encoding="utf-8")
    blocks = bash_blocks(guide)
    [servers] = [commands(b) for b in blocks if "control-plane" in b]
    calls = [argv for b in blocks if "control-plane" not in b for argv in commands(b)]
    env, discovery = ports()
    client_env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    # When its control plane and pools run, and every other command and program of the
    # guide runs in the order the guide gives them
    with contextlib.ExitStack() as stack:
        for index, argv in enumerate(servers):
            server_env = outside_env(**env) if "control-plane" in argv else client_env
            log = app.parent / f"guide-server-{index}.log"
            stack.enter_context(started(argv, app, server_env, log))
        await workers_seen(app, discovery, len(servers), task="export_orders")
        # Then every one of them succeeds
        for argv in calls:
            run(argv, app, client_env)
        for index, program in enumerate(programs):
            path = app / f"guide_program_{index}.py"
            path.write_text(program, encoding="utf-8")
            run(["uv", "run", "python", path.name], app, client_env)


def titled_blocks(text: str) -> dict[str, str]:
    """The ``python title="NAME"`` blocks of a page, by title."""
    found = re.findall(r'```python title="([^"]+)"\n(.*?)```', text, flags=re.DOTALL)
    return dict(found)


async def test_the_cpu_bound_section_runs_as_written(installed: Installed) -> None:
    # Given README's crunch.py in the application directory
    text = section("CPU-bound work and time limits")
    [crunch] = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    app = installed.app
    (app / "crunch.py").write_text(crunch, encoding="utf-8")
    servers, calls = (commands(block) for block in bash_blocks(text))
    control_plane, subworker = servers
    assert "--processes" in subworker, subworker
    env, discovery = ports()
    client_env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    # When its control plane and subworker run, and its commands are run in order
    with (
        started(control_plane, app, outside_env(**env), app.parent / "crunch-cp.log") as cp,
        started(subworker, app, client_env, app.parent / "crunch-sw.log") as sw,
    ):
        await workers_seen(app, discovery, 1, task="count_primes")
        printed = [run(argv, app, client_env).strip().splitlines()[-1] for argv in calls]
        assert sw.interrupt() == 0, sw.output[-4000:]  # its children gone with it
        assert cp.interrupt() == 0, cp.output[-4000:]
    # Then the first finished and the second was cut short by its soft time limit
    assert json.loads(printed[0]) == {"below": 100000, "primes": 9592, "complete": True}
    cut = json.loads(printed[1])
    assert cut["below"] == 100000000
    assert cut["complete"] is False
    assert 9592 < cut["primes"] < 5761455


async def test_the_concurrency_guide_runs_as_written(installed: Installed) -> None:
    # Given the guide's work.py and limits.py in the application directory
    guide = (ROOT / "docs" / "guides" / "concurrency.md").read_text(encoding="utf-8")
    files = titled_blocks(guide)
    app = installed.app
    for name in ("work.py", "limits.py"):
        (app / name).write_text(files[name], encoding="utf-8")
    blocks = bash_blocks(guide)
    [servers] = [commands(b) for b in blocks if "control-plane" in b]
    calls = [argv for b in blocks if "control-plane" not in b for argv in commands(b)]
    control_plane, subworker = servers
    env, discovery = ports()
    client_env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    # When its control plane and subworker run, and every other command runs in order
    with (
        started(control_plane, app, outside_env(**env), app.parent / "work-cp.log") as cp,
        started(subworker, app, client_env, app.parent / "work-sw.log") as sw,
    ):
        await workers_seen(app, discovery, 1, task="count_primes")
        printed = [run(argv, app, client_env).strip() for argv in calls]
        assert sw.interrupt() == 0, sw.output[-4000:]
        assert cp.interrupt() == 0, cp.output[-4000:]
    # Then each printed what its comment says
    assert json.loads(printed[0].splitlines()[-1])["complete"] is True
    assert json.loads(printed[1].splitlines()[-1])["complete"] is False
    assert printed[2].splitlines()[-2:] == ["failure timeout", "cancelled"]
