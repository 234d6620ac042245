"""docs/guides/fastapi.md works outside the clone exactly as written: its files
(``tasks.py``, ``app.py``) in an application directory where FastWorker is installed from
wheels as README's "Your own tasks" says, then every shell command of the guide, verbatim
and in order: its ``pip install`` line (the ``fastapi`` extra and Uvicorn), ``fastworker
dev``, then ``uvicorn app:app`` and its four workers (each serving signups whose tasks
finish, then stopped with Ctrl-C). Ports come from environment variables
(``FASTWORKER_*``, ``UVICORN_PORT``), so the commands stay as written.

Slow (wheels, a venv and installs from PyPI: ~30 s warm), so the commands run in one test.
test_flask_guide.py runs the Flask guide the same way."""

from __future__ import annotations

import contextlib
import shlex

import aiohttp
import pytest
from guide_harness import guide_lines, install_beside_guide
from harness import wait_until
from test_install import (
    INSTALL_TIMEOUT,
    READY_TIMEOUT,
    ROOT,
    Installed,
    Started,
    outside_env,
    ports,
    run,
    started,
    titled_blocks,
)

from fastworker.testing import free_port_block

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

GUIDE = ROOT / "docs" / "guides" / "fastapi.md"
SIGNUPS = 12  # per server: enough for each of the 4 workers to serve some


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """README's install, in an application directory holding the guide's files."""
    return install_beside_guide(tmp_path_factory.mktemp("fastapi-guide"), GUIDE)


async def test_the_fastapi_guide_runs_as_written(installed: Installed) -> None:
    app = installed.app
    env, discovery = ports()
    ran: list[str] = []
    with contextlib.ExitStack() as stack:
        for line in guide_lines(GUIDE):
            argv = shlex.split(line, comments=True)
            if argv[:2] == [".venv/bin/pip", "install"]:  # its glob needs a shell
                run(["bash", "-c", installed.substitute(line)], app, outside_env(), INSTALL_TIMEOUT)
            elif argv[:4] == ["uv", "run", "fastworker", "dev"]:
                log = app.parent / "dev.log"
                dev = stack.enter_context(started(argv, app, outside_env(**env), log))
                await said_ready(dev)
            elif argv[:3] == ["uv", "run", "uvicorn"]:
                port = free_port_block(1)
                server_env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
                server_env["UVICORN_PORT"] = str(port)
                log = app.parent / f"uvicorn-{len(ran)}.log"
                with started(argv, app, server_env, log) as web:
                    await serve_signups(f"http://127.0.0.1:{port}", web)
                    assert web.interrupt() == 0, web.output[-4000:]
                if "--workers" in argv:
                    assert web.output.count("Started server process") == 4, web.output
            else:
                pytest.fail(f"this test does not know how to run the guide's {line!r}")
            ran.append(argv[2] if argv[0] == "uv" else "pip")
        # Ctrl-C, as the guide's reader stops it: the dev cluster's processes run in
        # sessions of their own, which a SIGKILL of the group would leave running
        assert dev.interrupt() == 0, dev.output[-4000:]
    assert ran == ["pip", "fastworker", "uvicorn", "uvicorn"]


async def said_ready(dev: Started) -> None:
    async def ready() -> bool:
        assert dev.popen.poll() is None, dev.output[-4000:]
        return "ready:" in dev.output

    await wait_until(ready, READY_TIMEOUT, "fastworker dev to say it is ready")


async def serve_signups(base: str, web: Started) -> None:
    """Wait for the server, then sign up ``SIGNUPS`` users: each answers with a task id,
    and each task ends ``success`` with the guide's welcome."""
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(base, timeout=timeout) as http:

        async def answering() -> bool:
            assert web.popen.poll() is None, web.output[-4000:]
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get("/signup/none") as reply:
                    return reply.status == 404
            return False

        await wait_until(answering, READY_TIMEOUT, f"{base} to answer")
        for n in range(SIGNUPS):
            email = f"user{n}@example.com"
            async with http.post("/signup", json={"email": email}) as reply:
                assert reply.status == 200, await reply.text()
                task_id = (await reply.json())["task_id"]
            await finished(http, task_id, f"welcome email sent to {email}")


async def finished(http: aiohttp.ClientSession, task_id: str, expected: str) -> None:
    async def success() -> bool:
        async with http.get(f"/signup/{task_id}") as reply:
            assert reply.status == 200, await reply.text()
            body = await reply.json()
        return bool(body == {"status": "success", "result": expected})

    await wait_until(success, 30, f"task {task_id} to succeed")


def test_the_guides_python_files_are_the_ones_this_test_writes() -> None:
    assert set(titled_blocks(GUIDE.read_text(encoding="utf-8"))) == {"tasks.py", "app.py"}
