"""docs/guides/workflows.md works outside the clone exactly as written: its files
(``tasks.py``, ``pipeline.py``, ``test_pipeline.py``, which are examples/workflows') in an
application directory where FastWorker is installed from wheels as README's "Your own
tasks" says, then every shell command of the guide, verbatim and in order: ``fastworker
dev``, the pipeline script (which must print what the guide shows), ``pip install pytest``
and pytest on ``test_pipeline.py``, and each snippet of the guide, run against the example.
Ports come from ``FASTWORKER_*`` environment variables, so the commands stay as written.

Slow (wheels, a venv and installs from PyPI: ~30 s warm), so the commands run in one test.
The helpers are test_install's and test_flask_guide's."""

from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
import sys

import pytest
from examples_harness import EXAMPLES, clean_env
from guide_harness import guide_lines, install_beside_guide
from test_flask_guide import said_ready
from test_install import (
    INSTALL_TIMEOUT,
    ROOT,
    Installed,
    outside_env,
    ports,
    run,
    started,
    titled_blocks,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

GUIDE = ROOT / "docs" / "guides" / "workflows.md"
EXAMPLE = EXAMPLES / "workflows"


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """README's install, in an application directory holding the guide's files."""
    return install_beside_guide(tmp_path_factory.mktemp("workflows-guide"), GUIDE)


def printed() -> str:
    """The guide's ``text`` block: what pipeline.py prints."""
    text: str
    [text] = re.findall(r"```text\n(.*?)```", guide(), flags=re.DOTALL)
    return text


async def test_the_workflows_guide_runs_as_written(installed: Installed) -> None:
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
            elif argv[:3] == ["uv", "run", "pytest"]:
                out = run(argv, app, outside_env(), timeout=120)
                assert "1 passed" in out.splitlines()[-1], out
            else:
                pytest.fail(f"this test does not know how to run the guide's {line!r}")
            ran.append(argv[2] if argv[0] == "uv" else "pip")
        # Ctrl-C, as the guide's reader stops it (its processes run in sessions of their own)
        assert dev.interrupt() == 0, dev.output[-4000:]
    assert ran == ["fastworker", "python", "pip", "pytest"]


def test_the_guides_python_files_are_the_examples() -> None:
    files = titled_blocks(guide())
    assert set(files) == {"tasks.py", "pipeline.py", "test_pipeline.py"}
    for name, text in files.items():
        assert text == (EXAMPLE / name).read_text(encoding="utf-8"), name


def test_every_snippet_of_the_guide_runs_beside_the_examples_tasks() -> None:
    snippets = re.findall(r"```python\n(.*?)```", guide(), flags=re.DOTALL)
    assert len(snippets) == 2, snippets
    for snippet in snippets:
        done = subprocess.run(
            [sys.executable, "-c", snippet],
            cwd=EXAMPLE,
            env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, snippet + done.stderr[-4000:]
