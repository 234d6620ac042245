"""``fastworker journal dump PATH``: one JSON object per entry, the damage by offset, a
summary line, and an exit code that says whether a control plane would start on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
import pytest

from fastworker.cli import main
from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.encoding import snapshot_file
from fastworker_control_plane.durability.schema import Put, StoredTask
from fastworker_protocol import Priority, TaskState

GOLDEN = Path(__file__).parent / "data" / "journal" / "format-2.journal"


def dumped(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["journal", "dump", str(path)])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def test_an_intact_journal_is_dumped_entry_by_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "journal").write_bytes(GOLDEN.read_bytes())

    code, lines, err = dumped(tmp_path, capsys)  # the state dir, as --state-dir names it

    assert code == 0
    assert [(line["frame"], line["type"]) for line in lines] == [
        (0, "put"),
        (0, "put"),
        (1, "step"),
        (1, "step"),
        (2, "done"),
        (2, "done"),
        (3, "tick"),
    ]
    assert lines[0]["offset"] == len(frames.MAGIC)
    assert lines[0]["task"]["id"] == "t-every-field"
    assert lines[2] == {
        "frame": 1,
        "offset": lines[2]["offset"],
        "type": "step",
        "task_id": "t-minimal",
        "state": "assigned",
        "attempts": 1,
        "worker_id": "w-1",
    }
    assert err.strip().endswith("4 intact frames, 1344 bytes; intact")


def test_damage_is_shown_where_it_is_and_the_exit_code_says_a_start_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = bytearray(GOLDEN.read_bytes())
    second = frames.read(bytes(data)).frames[1]
    data[second.offset + frames.HEADER.size] ^= 0x01
    (tmp_path / "journal").write_bytes(bytes(data))

    code, lines, err = dumped(tmp_path / "journal", capsys)

    assert code == 1
    [damage] = [line for line in lines if "damage" in line]
    assert damage == {
        "damage": "skipped",
        "offset": second.offset,
        "bytes": second.end - second.offset,
        "intact_frames_after": 2,
    }
    assert sum(1 for line in lines if "type" in line) == 5  # both steps are lost
    assert f"DAMAGED at byte {second.offset}" in err
    assert "--salvage-journal" in err


def test_a_torn_last_write_is_shown_and_is_no_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "journal").write_bytes(GOLDEN.read_bytes()[:-5])

    code, lines, err = dumped(tmp_path, capsys)

    assert code == 0
    assert lines[-1]["damage"] == "torn"
    assert "torn last write" in err


def test_what_is_not_a_journal_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "journal").write_bytes(b"FWJRNL01" + b"\x00" * 8)

    code = main(["journal", "dump", str(tmp_path)])

    assert code == 2
    assert "format 1, written by an older FastWorker" in capsys.readouterr().err


def test_arguments_of_registered_types_are_shown_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a journal holding a task whose arguments are extension values (a UUID, a
    # Decimal, an application's type the dump knows nothing of)
    ext = msgspec.msgpack.Ext
    args = [ext(1, UUID(int=3).bytes), ext(2, b"1.10"), ext(40, b"\x00\x01")]
    task = StoredTask(id="t", name="n", priority=Priority.NORMAL, state=TaskState.QUEUED, args=args)
    (tmp_path / "journal").write_bytes(snapshot_file([Put(task=task)]))
    # When it is dumped
    code, lines, _ = dumped(tmp_path, capsys)
    # Then each shows, as the dashboard shows it
    assert code == 0
    assert lines[0]["task"]["args"] == [str(UUID(int=3)), "1.10", "ext(40, 2 bytes)"]
