"""docs/guides/django.md works outside the clone, exactly as written: README's install (a
fresh ``.venv`` with the wheels, as test_install.py does), then every command of the guide
in order, from its ``pip install`` line and ``django-admin startproject`` on, with the
guide's files written as it says once ``startapp`` made the app (each in full, and
``mysite/settings.py``'s lines added at its end): the migrations, ``fastworker dev`` while
``runserver`` answers the guide's two ``curl`` lines (the post stored, a subworker counting
its words), the same on the control plane and a subworker, and the test suite. The
cluster's ports come from ``FASTWORKER_*`` variables; the web server's ``8000`` is the one
thing changed, to a free port, in the ``runserver`` and ``curl`` lines. The guide's whole
files are also examples/django_project's own.

Slow (the install, ~30 s warm), so one test runs the whole guide."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from harness import wait_until
from test_install import (
    INSTALL_TIMEOUT,
    READY_TIMEOUT,
    Installed,
    bash_blocks,
    commands,
    installed,
    outside_env,
    ports,
    run,
    started,
    titled_blocks,
    workers_seen,
)

from fastworker.testing import free_port_block

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

__all__ = ["installed"]  # test_install's fixture, which pytest finds here by its name

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "django.md"
EXAMPLE = ROOT / "examples" / "django_project"
WEB_PORT = "8000"  # the guide's runserver port, swapped for a free one
APPENDED = " (add at the end)"


def test_the_guides_whole_files_are_the_example_projects() -> None:
    titled = titled_blocks(GUIDE.read_text(encoding="utf-8"))

    assert "mysite/settings.py" + APPENDED in titled
    whole = {name: text for name, text in titled.items() if not name.endswith(APPENDED)}
    assert {"blog/models.py", "blog/tasks.py", "blog/views.py", "mysite/urls.py"} <= set(whole)
    for name, text in whole.items():
        assert text == (EXAMPLE / name).read_text(encoding="utf-8"), f"{name} differs"


def write_the_guides_files(app: Path, guide: str) -> None:
    """Each titled file where the guide says: whole, or added at the end of what
    ``startproject`` wrote."""
    for title, text in titled_blocks(guide).items():
        path = app / title.removesuffix(APPENDED)
        if title.endswith(APPENDED):
            text = path.read_text(encoding="utf-8") + "\n" + text
        path.write_text(text, encoding="utf-8")


def on_free_port(argv: list[str], port: str) -> list[str]:
    return [arg.replace(WEB_PORT, port) for arg in argv]


def says(line: str) -> dict[str, object]:
    """What a ``curl`` line's comment says it prints."""
    [printed] = re.findall(r"#\s*(\{.*\})\s*$", line)
    shown: dict[str, object] = json.loads(printed)
    return shown


async def a_post_gets_its_words_counted(app: Path, web_block: str, discovery: str) -> int:
    """The guide's ``runserver`` line, and its ``curl`` lines against it: the first stores
    a post, the second shows it once a worker has counted its words. Returns the post's id
    (the guide's is the first post; a later round's is the next)."""
    lines = [line for line in web_block.splitlines() if line.strip()]
    runserver, create, show = commands(web_block)
    port = str(free_port_block(1))
    env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    log = app.parent / f"django-web-{port}.log"
    with started(on_free_port(runserver, port), app, env, log) as web:

        async def answering() -> bool:
            assert web.popen.poll() is None, web.output[-4000:]
            url = f"http://127.0.0.1:{port}/posts/0/"
            try:
                await asyncio.to_thread(urllib.request.urlopen, url, timeout=5)
            except urllib.error.HTTPError as exc:
                return exc.code == 404
            except OSError:
                return False
            return False

        await wait_until(answering, READY_TIMEOUT, "runserver to answer")
        created = json.loads(run(on_free_port(create, port), app, env).strip().splitlines()[-1])
        assert created.keys() == {"id"}, created
        post = created["id"]
        expected = {**says(lines[2]), "id": post}  # the guide's, for this round's post
        shown = [arg.replace("/posts/1/", f"/posts/{post}/") for arg in on_free_port(show, port)]

        async def counted() -> bool:
            return bool(json.loads(run(shown, app, env).strip().splitlines()[-1]) == expected)

        await wait_until(counted, 30, f"post {post}'s words to be counted")
    return int(post)


async def test_the_django_guide_runs_as_written(installed: Installed) -> None:
    # Given the wheels with the django extra, a project from startproject, and the guide's files
    guide = GUIDE.read_text(encoding="utf-8")
    install, dev_block, web_block, servers_block, tests_block = bash_blocks(guide)
    app = installed.app
    for line in install.splitlines():
        if "pip install" in line:  # its glob needs a shell
            run(["bash", "-c", installed.substitute(line)], app, outside_env(), INSTALL_TIMEOUT)
        elif command := commands(line):
            run(command[0], app, outside_env())
    write_the_guides_files(app, guide)
    *migrations, dev = commands(dev_block)
    for argv in migrations:
        run(argv, app, outside_env())

    # When dev runs, and the web server: then the guide's post has its words counted
    env, discovery = ports()
    with started(dev, app, outside_env(**env), app.parent / "django-dev.log") as process:

        async def ready() -> bool:
            assert process.popen.poll() is None, process.output[-4000:]
            return "ready:" in process.output

        await wait_until(ready, READY_TIMEOUT, "manage.py fastworker dev to say it is ready")
        assert "running blog.tasks.count_words" in process.output
        assert await a_post_gets_its_words_counted(app, web_block, discovery) == 1
        assert process.interrupt() == 0, process.output[-4000:]

    # When its production commands run: then the same, on a control plane and a subworker
    control_plane, subworker = commands(servers_block)
    env, discovery = ports()
    client_env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    with (
        started(control_plane, app, outside_env(**env), app.parent / "django-cp.log") as cp,
        started(subworker, app, client_env, app.parent / "django-sw.log") as sw,
    ):
        await workers_seen(app, discovery, 2, task="count_words")
        assert await a_post_gets_its_words_counted(app, web_block, discovery) == 2
        assert sw.interrupt() == 0, sw.output[-4000:]
        assert cp.interrupt() == 0, cp.output[-4000:]

    # When its test command runs: then the guide's eager tests pass
    [test] = commands(tests_block)
    out = run(test, app, outside_env())
    assert "Ran 4 tests" in out
