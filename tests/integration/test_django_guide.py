"""docs/guides/django.md works outside the clone, exactly as written: README's install (a
fresh ``.venv`` with the wheels, as test_install.py does), the guide's ``pip install``
line for the ``django`` extra, then, in the example project copied into the application
directory, every command of the guide in order (``fastworker dev``, the control plane and
a subworker, the test suite) with the view's task run by the workers each time. The
guide's titled files are the example's own.

Slow (the install, ~30 s warm), so one test runs the whole guide."""

from __future__ import annotations

import json
import re
import shutil
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
    workers_seen,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

__all__ = ["installed"]  # test_install's fixture, which pytest finds here by its name

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "django.md"
EXAMPLE = ROOT / "examples" / "django_project"
SCENARIOS = Path(__file__).resolve().parent / "django_scenarios.py"


def test_the_guides_titled_files_are_the_example_projects() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    titled = re.findall(r'```python title="([^"]+)"\n(.*?)```', guide, flags=re.DOTALL)

    assert titled, "the guide shows no file of the example"
    for name, text in titled:
        assert text == (EXAMPLE / name).read_text(encoding="utf-8"), f"{name} differs"


def view_submits_and_a_worker_counts(app: Path, discovery: str) -> None:
    """The example's view, through the application's own Python: its task runs."""
    env = outside_env(
        FASTWORKER_DISCOVERY_ADDRESS=discovery,
        DJANGO_SETTINGS_MODULE="mysite.settings",
        PYTHONPATH=str(app),
    )
    out = run([str(app / ".venv" / "bin" / "python"), str(SCENARIOS), "view"], app, env)
    seen = json.loads(out.strip().splitlines()[-1])
    assert (seen["status_code"], seen["status"], seen["result"]) == (201, "success", 5), seen


async def test_the_django_guide_runs_as_written(installed: Installed) -> None:
    # Given the wheels with the django extra, and the example project as the application
    guide = GUIDE.read_text(encoding="utf-8")
    install, dev_block, servers_block, tests_block = bash_blocks(guide)
    [pip_line] = [line for line in install.splitlines() if "pip install" in line]
    app = installed.app
    run(["bash", "-c", installed.substitute(pip_line)], app, outside_env(), INSTALL_TIMEOUT)
    shutil.copytree(
        EXAMPLE, app, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3")
    )
    migrate, dev = commands(dev_block)

    # When the guide's development commands run: then the view's task runs on dev's workers
    run(migrate, app, outside_env())
    env, discovery = ports()
    with started(dev, app, outside_env(**env), app.parent / "django-dev.log") as process:

        async def ready() -> bool:
            assert process.popen.poll() is None, process.output[-4000:]
            return "ready:" in process.output

        await wait_until(ready, READY_TIMEOUT, "manage.py fastworker dev to say it is ready")
        assert "running count_words" in process.output
        view_submits_and_a_worker_counts(app, discovery)
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
        view_submits_and_a_worker_counts(app, discovery)
        assert sw.interrupt() == 0, sw.output[-4000:]
        assert cp.interrupt() == 0, cp.output[-4000:]

    # When its test command runs: then the example's eager tests pass
    [test] = commands(tests_block)
    out = run(test, app, outside_env())
    assert "Ran 4 tests" in out
