"""docs/guides/signals.md works as written: its files (``tasks.py``, ``worker_hooks.py``,
``checkout.py``, ``test_worker_hooks.py``) in an application directory where FastWorker is
installed from wheels as README's "Your own tasks" says, then every shell command of the
guide, verbatim and in order: ``fastworker dev`` (whose workers print what the handlers
say), the checkout script (which must print what the guide shows), ``pip install pytest``
and pytest on the guide's tests. Its Django and Sentry snippets run around real task
attempts under ``eager()``, with Django configured and a stand-in ``sentry_sdk``.

Slow (wheels, a venv and installs from PyPI: ~30 s warm), so the commands run in one test."""

from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from examples_harness import clean_env
from guide_harness import guide_lines, install_beside_guide
from harness import wait_until
from test_flask_guide import said_ready
from test_install import (
    INSTALL_TIMEOUT,
    ROOT,
    Installed,
    Started,
    outside_env,
    ports,
    run,
    started,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

GUIDE = ROOT / "docs" / "guides" / "signals.md"
HANDLERS_SAID = ("charge: success in", "charge failed: order 2: nothing to charge")


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """README's install, in an application directory holding the guide's files."""
    return install_beside_guide(tmp_path_factory.mktemp("signals-guide"), GUIDE)


def printed() -> str:
    text: str
    [text] = re.findall(r"```text\n(.*?)```", guide(), flags=re.DOTALL)
    return text


async def test_the_signals_guide_runs_as_written(installed: Installed) -> None:
    app = installed.app
    env, discovery = ports()
    client_env = outside_env(FASTWORKER_DISCOVERY_ADDRESS=discovery)
    ran: list[str] = []
    with contextlib.ExitStack() as stack:
        for line in guide_lines(GUIDE):
            argv = shlex.split(line, comments=True)
            if argv[:2] == [".venv/bin/pip", "install"]:
                run(argv, app, outside_env(), INSTALL_TIMEOUT)
            elif argv[:4] == ["uv", "run", "fastworker", "dev"]:
                log = app.parent / "dev.log"
                dev = stack.enter_context(started(argv, app, outside_env(**env), log))
                await said_ready(dev)
            elif argv[:3] == ["uv", "run", "python"]:
                assert run(argv, app, client_env) == printed()
                await said_by_handlers(dev)
            elif argv[:3] == ["uv", "run", "pytest"]:
                out = run(argv, app, outside_env(), timeout=120)
                assert "2 passed" in out.splitlines()[-1], out
            else:
                pytest.fail(f"this test does not know how to run the guide's {line!r}")
            ran.append(argv[2] if argv[0] == "uv" else "pip")
        assert dev.interrupt() == 0, dev.output[-4000:]
    assert ran == ["fastworker", "python", "pip", "pytest"]


async def said_by_handlers(dev: Started) -> None:
    async def said() -> bool:
        return all(line in dev.output for line in HANDLERS_SAID)

    await wait_until(said, 10, "the workers to print the handlers' lines")


DJANGO = """
import django
import django.db
from django.conf import settings

settings.configure(
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
)
django.setup()
closed = []
django.db.close_old_connections = lambda **kwargs: closed.append(1)
exec(SNIPPET)

from fastworker import task
from fastworker.testing import eager


@task
def work() -> int:
    return 1


with eager():
    work.delay()
assert len(closed) == 2, closed  # before and after the attempt
"""

SENTRY = """
import sys
import types

calls = []
sentry_sdk = types.ModuleType("sentry_sdk")
sentry_sdk.init = lambda **kwargs: calls.append(("init", kwargs["dsn"]))
sentry_sdk.capture_exception = lambda exc, **kw: calls.append((type(exc).__name__, kw["tags"]))
sentry_sdk.capture_message = lambda message, **kw: calls.append((message, kw["tags"]))
sys.modules["sentry_sdk"] = sentry_sdk
exec(SNIPPET)

from fastworker import signals, task
from fastworker.testing import eager

for handler in signals.worker_process_init.handlers:
    handler(signals.WorkerProcess(worker_id="w", pid=1, child=False))


@task(name="fails", max_retries=1)
def fails() -> None:
    raise ValueError("no")


@task(name="unsendable")
def unsendable() -> object:
    return object()


with eager(propagate=False):
    fails.delay()
    unsendable.delay()
assert calls[:3] == [
    ("init", "https://key@sentry.example.com/1"),
    ("ValueError", {"task": "fails", "attempt": 1}),
    ("ValueError", {"task": "fails", "attempt": 2}),
], calls
message, tags = calls[3]
assert message.startswith("TypeError: result of type object cannot be sent"), message
assert tags == {"task": "unsendable", "attempt": 1}
"""


@pytest.mark.parametrize(
    ("snippet", "driver"), [(0, DJANGO), (1, SENTRY)], ids=["django", "sentry"]
)
def test_the_guides_snippets_run_around_task_attempts(
    snippet: int, driver: str, tmp_path: Path
) -> None:
    snippets = re.findall(r"```python\n(.*?)```", guide(), flags=re.DOTALL)
    assert len(snippets) == 2, snippets
    done = subprocess.run(
        [sys.executable, "-c", f"SNIPPET = {snippets[snippet]!r}\n{driver}"],
        cwd=tmp_path,
        env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
