"""``delay`` with a ``@task`` object is type-checked against the task's parameters: mypy
(the real one, ``--strict``) rejects wrong arguments, and only those."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

CASES = Path(__file__).parent / "typing_cases" / "delay_calls.py"


def test_mypy_rejects_wrong_arguments_to_delay_and_only_those() -> None:
    stdout, stderr, status = api.run(["--strict", "--no-incremental", str(CASES)])
    flagged = {int(n) for n in re.findall(rf"{re.escape(CASES.name)}:(\d+): error", stdout)}
    lines = CASES.read_text().splitlines()
    wrong = {n for n, line in enumerate(lines, 1) if line.endswith("# wrong")}
    assert status == 1, stdout + stderr
    assert flagged == wrong, stdout
