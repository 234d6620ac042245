"""docs/guides/testing.md and examples/testing work as written: the example's own tests pass
when pytest runs from its folder (with this checkout's environment, warnings as errors);
every Python block of the guide is the example's code (a whole file, or an excerpt of one);
the guide's commands, run verbatim in a fresh install (README's wheels and ``.venv``, as
test_install.py does) where the example's files were copied, install what they say and
pass the number of tests they say. README's "Testing your code" test passes too.

The fresh install is slow (~30 s warm), so the guide's commands run in one test."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from examples_harness import EXAMPLES, clean_env
from test_install import (
    INSTALL_TIMEOUT,
    Installed,
    bash_blocks,
    installed,
    outside_env,
    run,
    section,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

__all__ = ["installed"]  # test_install's fixture, which pytest finds here by its name

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "testing.md"
EXAMPLE = EXAMPLES / "testing"
EXAMPLE_TESTS = {
    "test_app.py": [
        "test_an_order_is_charged_and_followed_up",
        "test_an_unknown_charge_is_404",
        "test_the_follow_up_goes_out_six_hours_after_the_order",
    ],
    "test_real_cluster.py": [
        "test_an_order_is_charged_by_a_real_subworker",
        "test_the_follow_up_waits_on_the_control_plane",
    ],
    "test_tasks.py": [
        "test_placing_an_order_charges_the_card",
        "test_eager_does_not_wait_for_a_countdown",
        "test_a_declined_card_raises_out_of_delay",
        "test_the_client_fixture_alone_is_eager",
        "test_the_follow_up_goes_out_six_hours_later_not_before",
        "test_a_dropped_connection_is_retried_after_a_backoff",
        "test_a_declined_card_is_not_retried",
        "test_a_wait_for_a_result_lets_the_clock_skip",
        "test_the_daily_report_runs_at_eight_in_berlin_across_the_clock_change",
    ],
}


# Quiet, each passed test listed, no cache written, pytest-asyncio (installed here, not in
# the example's environment) left out, and warnings as errors.
STRICT = ["-q", "-rA", "-p", "no:cacheprovider", "-p", "no:asyncio", "-W", "error"]


def passed(output: str) -> set[str]:
    """The ``file::test`` ids pytest's ``-rA`` summary reports as passed."""
    return set(re.findall(r"^PASSED (\S+)", output, flags=re.MULTILINE))


def test_the_examples_tests_pass_from_its_folder() -> None:
    """As its README runs them, from its folder (which pytest.ini makes pytest's root);
    nothing is written there."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *STRICT],
        cwd=EXAMPLE,
        env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    expected = {f"{file}::{name}" for file, names in EXAMPLE_TESTS.items() for name in names}
    assert passed(done.stdout) == expected, done.stdout[-4000:]
    assert done.stdout.splitlines()[-1].startswith(f"{len(expected)} passed"), done.stdout


def test_the_readmes_test_passes_beside_the_readmes_mytasks(tmp_path: Path) -> None:
    """README's "Testing your code": its test file, beside "Your own tasks"' mytasks.py."""
    mytasks = re.findall(r"```python\n(.*?)```", section("Your own tasks"), flags=re.DOTALL)[0]
    [test] = re.findall(r"```python\n(.*?)```", section("Testing your code"), flags=re.DOTALL)
    assert mytasks.startswith("# mytasks.py\n"), mytasks
    assert test.startswith("# test_mytasks.py"), test
    (tmp_path / "mytasks.py").write_text(mytasks, encoding="utf-8")
    (tmp_path / "test_mytasks.py").write_text(test, encoding="utf-8")

    out = run([sys.executable, "-m", "pytest", *STRICT], tmp_path, clean_env())

    assert out.strip().splitlines()[-1].startswith("1 passed"), out


def test_every_python_block_of_the_guide_is_the_examples_code() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python([^\n]*)\n(.*?)```", guide, flags=re.DOTALL)

    assert blocks, "the guide shows no code of the example"
    for header, text in blocks:
        title = re.fullmatch(r' title="([^"]+)"', header)
        assert title, f"an untitled Python block: {text[:80]!r}"
        name = title[1].removesuffix(" (excerpt)")
        source = (EXAMPLE / name).read_text(encoding="utf-8")
        if name == title[1]:
            assert text == source, f"{name} differs from the example's"
        else:
            assert text in source, f"an excerpt of {name} is not in the example's:\n{text}"


def test_the_testing_guide_runs_as_written(installed: Installed) -> None:
    # Given README's install, with the example's files in the application directory
    app = installed.app
    shutil.copytree(EXAMPLE, app, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    ran: list[str] = []
    # When each command of the guide runs there, in order
    for block in bash_blocks(GUIDE.read_text(encoding="utf-8")):
        for line in block.splitlines():
            argv = shlex.split(line, comments=True)
            if not argv:
                continue
            if argv[:2] == [".venv/bin/pip", "install"]:  # its glob needs a shell
                script = installed.substitute(line)
                run(["bash", "-c", script], app, outside_env(), INSTALL_TIMEOUT)
            elif argv[:3] == ["uv", "run", "pytest"]:
                # Then each passes the number of tests its comment says
                [count] = re.findall(r"# (\d+ passed)", line)
                out = run(argv, app, outside_env(), timeout=180)
                summary = out.strip().splitlines()[-1]
                assert re.fullmatch(rf"=+ {count} in [\d.]+s =+", summary), out[-4000:]
            else:
                pytest.fail(f"this test does not know how to run the guide's {line!r}")
            ran.append(argv[2] if argv[0] == "uv" else "pip")
    assert ran == ["pip", "pytest", "pytest"]
