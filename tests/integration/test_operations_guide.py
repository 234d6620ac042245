"""docs/guides/operations.md works outside the clone exactly as written: its files
(``tasks.py``, ``charge.py``) in an application directory where FastWorker is installed
from wheels as README's "Your own tasks" says, then every shell command of the guide,
verbatim and in order, each checked for what the guide says it does: the control plane
with a state dir, three charges failing for good, the dead letters listed and shown with
their traceback, replayed one by one and all matching (the replays succeed and name what
they replay), purged, a queue paused and resumed, and a run-time schedule added, listed and
removed. The alerting rule it shows passes ``promtool check rules``. Ports come from
``FASTWORKER_*`` environment variables, so the commands stay as written."""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import aiohttp
import pytest
from guide_harness import guide_lines, install_beside_guide
from http_helpers import wait_for_status
from test_install import (
    ROOT,
    Installed,
    outside_env,
    ports,
    run,
    started,
)

from fastworker import Client, TaskStatus

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

GUIDE = ROOT / "docs" / "guides" / "operations.md"
CUSTOMERS = ("acme", "globex", "initech")


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """README's install, in an application directory holding the guide's files."""
    return install_beside_guide(tmp_path_factory.mktemp("operations-guide"), GUIDE)


def replays(out: str) -> dict[str, str]:
    """``OLD -> NEW`` lines of ``fastworker failed retry``."""
    return dict(re.findall(r"^(\S+) -> (\S+)$", out, flags=re.MULTILINE))


async def test_the_operations_guide_runs_as_written(installed: Installed) -> None:
    app = installed.app
    env, discovery = ports()
    http = f"http://127.0.0.1:{env['FASTWORKER_HTTP_PORT']}"
    client_env = outside_env(**env, FASTWORKER_DISCOVERY_ADDRESS=discovery)
    checked: set[str] = set()
    replayed: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for line in guide_lines(GUIDE):
            argv = shlex.split(line, comments=True)
            if argv[:3] == ["uv", "run", "fastworker"] and argv[3] == "control-plane":
                log = app.parent / "control-plane.log"
                stack.enter_context(started(argv, app, outside_env(**env), log))
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
                    await wait_for_status(s, f"{http}/readyz", 200)
                continue
            if argv[0] in ("touch", "rm"):
                run(argv, app, client_env)
                continue
            out = run(argv, app, client_env, timeout=120)
            replayed |= replays(out)
            checked.add(check(line, out))

        # Every dead letter was replayed once, and each replay succeeded, naming its original
        assert sorted(replayed) == [f"charge-{c}" for c in CUSTOMERS]
        async with Client(discovery, timeout=30) as client:
            for original, new in replayed.items():
                result = await client.wait_result(new, timeout=30)
                assert result.status == TaskStatus.SUCCESS, result
                assert result.retry_of == original
                assert result.result == f"charged {original.removeprefix('charge-')} 1999 cents"
    assert (app / "state").is_dir()  # --state-dir, as the guide says
    assert checked == {
        "charge.py", "failed list", "failed show", "retry one", "retry all matching",
        "purge", "queue", "queues", "schedules add", "schedules list", "schedules remove",
    }  # fmt: skip


def check(line: str, out: str) -> str:
    """What the guide says each command does; returns which command it was."""
    argv = shlex.split(line, comments=True)
    if argv[:3] == ["uv", "run", "python"]:
        assert out.split() == ["failure"] * 3, out
        return "charge.py"
    command = argv[3:6]
    if command[:2] == ["failed", "list"]:
        for customer in CUSTOMERS:
            assert f"charge-{customer}" in out, out
        assert "ConnectionError" in out, out
        return "failed list"
    if command[:2] == ["failed", "show"]:
        assert "payment gateway unreachable" in out, out
        assert "Traceback" in out, out
        assert '"acme"' in out or "'acme'" in out, out  # its arguments
        return "failed show"
    if command == ["failed", "retry", "charge-acme"]:
        assert list(replays(out)) == ["charge-acme"], out
        return "retry one"
    if command[:3] == ["failed", "retry", "--all-matching"]:
        assert sorted(replays(out)) == ["charge-globex", "charge-initech"], out
        return "retry all matching"
    if command[:2] == ["failed", "purge"]:
        return "purge"  # nothing left to purge: every one was replayed
    if command == ["queues"]:
        assert re.search(r"^reports\b.*\bpaused\b", out, flags=re.MULTILINE), out
        return "queues"
    if command[:2] == ["schedules", "list"]:
        assert "weekly-acme" in out, out
        assert "send_report" in out, out
        return "schedules list"
    return " ".join(command[:2]) if command[0] == "schedules" else command[0]


def test_the_alerting_rule_is_valid_for_prometheus(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool comes with Debian's prometheus (scripts/bootstrap.sh)"
    [rules] = re.findall(r"```yaml\n(.*?)```", guide(), flags=re.DOTALL)
    assert "fastworker_dead_letters" in rules
    path = tmp_path / "rules.yml"
    path.write_text(rules, encoding="utf-8")
    done = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
