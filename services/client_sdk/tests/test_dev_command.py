"""``fastworker dev --reload`` without the ``dev`` extra says which extra to install."""

from __future__ import annotations

import importlib.util

import pytest

from fastworker.cli import main
from fastworker.cli.common import EXIT_USAGE


def test_reload_without_watchfiles_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an environment where watchfiles is not installed
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "watchfiles" else find_spec(name, *a),
    )

    # When `fastworker dev --reload` starts
    code = main(["dev", "--task-modules", "tasks", "--reload"])

    # Then it starts nothing and names the extra
    assert code == EXIT_USAGE
    assert "fastworker[dev]" in capsys.readouterr().err
