"""mypy sees the tests' bare imports as pytest resolves them.

Each stub in tests/pythonpath stands for a name the tests import bare (``from harness import
Cluster``) and re-exports one file under its path name (pyproject.toml's [tool.mypy] says why).
That file must be the one pytest imports: the first of that name along its pythonpath.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STUBS = sorted((ROOT / "tests" / "pythonpath").glob("*.pyi"))
PYTHONPATH = [
    ROOT / entry
    for entry in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"
    ]["pythonpath"]
]
# Not on the pythonpath: test_processes.py and test_child.py put its directory on sys.path.
ADDED_BY_ITS_TESTS = {"process_tasks": [ROOT / "services" / "subworker" / "tests"]}


def reexported(stub: Path) -> Path:
    module: str
    [module] = re.findall(r"^from ([\w.]+) import \*", stub.read_text(), flags=re.MULTILINE)
    return ROOT / (module.replace(".", "/") + ".py")


def imported(name: str) -> Path | None:
    files = (d / f"{name}.py" for d in [*PYTHONPATH, *ADDED_BY_ITS_TESTS.get(name, [])])
    return next((file for file in files if file.is_file()), None)


def test_the_stubs_are_found() -> None:
    assert len(STUBS) > 20


@pytest.mark.parametrize("stub", STUBS, ids=[s.stem for s in STUBS])
def test_each_stub_reexports_the_file_pytest_imports_under_its_name(stub: Path) -> None:
    assert reexported(stub) == imported(stub.stem)
