"""The documentation site: it builds with ``mkdocs build --strict``, and its generated pages
match the code they are generated from.

The states page (docs/gen_states.py) and the CLI page (docs/gen_cli.py) are checked in;
when the transition tables or the argparse parsers change, these tests fail until the
page is regenerated with the command in the failure message.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_PAGE_LINES = 600


def load(name: str) -> ModuleType:
    path = DOCS / name
    spec = importlib.util.spec_from_file_location(f"docs_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen_states() -> ModuleType:
    return load("gen_states.py")


@pytest.fixture(scope="module")
def gen_cli() -> ModuleType:
    return load("gen_cli.py")


@pytest.mark.parametrize("name", ["gen_states.py", "gen_cli.py"])
def test_a_generated_page_matches_what_its_generator_renders_now(name: str) -> None:
    generator = load(name)

    checked_in = Path(generator.PAGE).read_text(encoding="utf-8")

    assert checked_in == generator.render(), (
        f"{Path(generator.PAGE).relative_to(ROOT)} is stale: run `{generator.COMMAND}`"
    )


def test_the_states_page_draws_every_transition_of_both_tables(gen_states: ModuleType) -> None:
    from fastworker_protocol import states

    page = gen_states.render()

    for table in (states.TASK_TRANSITIONS, states.WORKER_TRANSITIONS):
        for source, row in table.items():
            for event, target in row.items():
                assert f"    {source} --> {target} : {event}\n" in page
    assert page.count("```mermaid\nstateDiagram-v2\n") == 2


def test_a_changed_transition_table_changes_the_states_page(gen_states: ModuleType) -> None:
    from fastworker_protocol.states import TASK_TRANSITIONS, TaskEvent, TaskState

    changed = dict(TASK_TRANSITIONS)
    changed[TaskState.SUCCESS] = {TaskEvent.RETRY: TaskState.RETRYING}

    page = gen_states.render(task_table=changed)

    assert page != gen_states.render()
    assert "    success --> retrying : retry\n" in page


def test_the_cli_page_lists_every_option_of_every_command(gen_cli: ModuleType) -> None:
    parser = gen_cli.build_parser()
    page = gen_cli.render_parser(parser)

    for name, _, sub in gen_cli._subcommands(parser):
        assert f"\n## {name}\n" in page
        for action in gen_cli._options(sub):
            for flag in action.option_strings:
                assert f"`{flag}" in page, f"fastworker {name} {flag} is not on the CLI page"


def test_the_cli_page_does_not_depend_on_the_environment(
    gen_cli: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FASTWORKER_BASE_PORT", "7000")
    monkeypatch.setenv("FASTWORKER_AUTH_TOKEN", "secret")
    monkeypatch.setattr(os, "cpu_count", lambda: 64)

    page = gen_cli.render()

    assert page == Path(gen_cli.PAGE).read_text(encoding="utf-8")
    assert os.environ["FASTWORKER_BASE_PORT"] == "7000"  # restored afterwards


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(DOCS)))
def test_no_docs_page_is_over_six_hundred_lines(page: Path) -> None:
    lines = len(page.read_text(encoding="utf-8").splitlines())

    assert lines < MAX_PAGE_LINES, f"{page.relative_to(ROOT)} has {lines} lines: split it"


def test_the_site_builds_with_no_warning(tmp_path: Path) -> None:
    """``--strict`` turns every warning into a failure: broken links and anchors, pages
    missing from the nav, stale generated pages, unresolvable API references."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]

    done = subprocess.run(
        [*command, "--config-file", str(ROOT / "mkdocs.yml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )

    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    for page in ("index.html", "concepts/states/index.html", "reference/cli/index.html"):
        assert (tmp_path / page).is_file(), f"{page} was not built"
    protocol = (tmp_path / "reference/protocol/index.html").read_text(encoding="utf-8")
    assert "FastWorker wire protocol" in protocol  # PROTOCOL.md is included, not linked
    assert 'class="mermaid"' in (tmp_path / "concepts/states/index.html").read_text()
