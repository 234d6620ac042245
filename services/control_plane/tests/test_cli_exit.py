"""How ``fastworker control-plane`` ends when something it cannot run without dies: one
line on stderr and exit code 1 (a refused journal is a usage error: exit 2)."""

from __future__ import annotations

import pytest

from fastworker_common.supervision import TaskDied
from fastworker_control_plane import cli
from fastworker_control_plane.app import ControlPlane
from fastworker_control_plane.durability.journal import JournalError


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TaskDied("stopped: the journal writer failed: RuntimeError: a bug"), 1),
        (JournalError("the journal is damaged at byte 8"), 2),
    ],
)
def test_a_control_plane_that_stops_on_an_error_exits_non_zero_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
    code: int,
) -> None:
    async def run(self: ControlPlane) -> None:
        raise error

    monkeypatch.setattr(ControlPlane, "run", run)

    assert cli.main(["--http-port", "0", "--local-concurrency", "0"]) == code

    said = capsys.readouterr().err
    assert said == f"fastworker-control-plane: {error}\n"
