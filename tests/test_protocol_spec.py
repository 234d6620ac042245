"""PROTOCOL.md's worked examples and rules, checked against the code they describe (no
processes: the control plane's board decides sizes, ids and error details on its own; the
worked example's run on a real control plane is tests/integration/test_protocol_example.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    Codec,
    ErrorCode,
    Param,
    Priority,
    Results,
    Submit,
    TaskResult,
    TaskSignature,
    TaskSpec,
)

SPEC = Path(__file__).resolve().parents[1] / "services" / "protocol" / "PROTOCOL.md"
NOW = 1000.0
ANY = Param(name="args", kind="VAR_POSITIONAL")


def section(title: str) -> str:
    """The text of the section whose heading starts with ``title``, up to the next one."""
    text = SPEC.read_text(encoding="utf-8")
    start = text.index(f"\n{title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def hex_bytes(block: str) -> bytes:
    return bytes.fromhex("".join(block.split()))


def size_text() -> str:
    text = section("## 11. Size limits")
    return text[text.index("**How big a task is.**") :]


def board(max_message_size: int) -> TaskBoard:
    b = TaskBoard(BoardConfig(max_message_size=max_message_size))
    b.learn_tasks([TaskSignature(name=n, params=[ANY]) for n in ("add", "echo")])
    return b


def worked_request() -> bytes:
    return hex_bytes(blocks(section("## 16. Worked example"), "text")[0])


def test_the_worked_request_is_the_message_the_spec_says_it_is() -> None:
    data = worked_request()

    message = Codec().decode(data)

    assert len(data) == 66
    assert "is 66 bytes" in section("## 16. Worked example")
    assert message == Submit(tasks=[TaskSpec(name="add", id="example-1", args=[2, 3])], wait=5.0)


def test_the_size_example_is_the_encoding_the_control_plane_measures() -> None:
    # Given the bytes the spec shows for the worked example's TaskSpec
    shown = hex_bytes(blocks(size_text(), "text")[0])
    submit = Codec().decode(worked_request())
    assert isinstance(submit, Submit)

    # Then they are how the control plane encodes that spec, 99 bytes as the spec says
    assert msgspec.msgpack.encode(submit.tasks[0]) == shown
    assert len(shown) == 99
    assert "has size 99, so it counts 131" in size_text()


@pytest.mark.parametrize(("counted", "accepted"), [(131, True), (132, False)])
def test_a_task_is_refused_exactly_when_its_size_plus_32_passes_the_limit_less_1024(
    counted: int, accepted: bool
) -> None:
    submit = Codec().decode(worked_request())
    assert isinstance(submit, Submit)
    b = board(max_message_size=1024 + 131 if accepted else 1024 + 130)

    if accepted:
        assert b.submit(submit.tasks, Priority.NORMAL, NOW)[0] == ["example-1"]
    else:
        with pytest.raises(Rejected) as refused:
            b.submit(submit.tasks, Priority.NORMAL, NOW)
        assert refused.value.code == ErrorCode.OVERSIZE
        assert refused.value.message.startswith("task of 131 bytes ")


def test_the_second_size_example_is_refused_with_the_message_the_spec_quotes() -> None:
    text = " ".join(size_text().split())
    quoted = re.search(r"with the message `(task of \d+ bytes [^`]*)`", text)
    assert quoted is not None
    spec = TaskSpec(name="echo", args=["z" * 3500])

    with pytest.raises(Rejected) as refused:
        board(max_message_size=4096).submit([spec], Priority.NORMAL, NOW)

    assert len(msgspec.msgpack.encode(spec)) == 3592
    assert "size 75 + 5" in text
    assert "= 3592" in text
    assert refused.value.message == quoted.group(1)
    assert refused.value.detail == {"index": 0, "task_name": "echo"}


def test_sizes_count_the_shortest_forms_whatever_form_was_sent() -> None:
    # "name" as str 8, args [2, 3.0] with a float 32 and the ints as uint 8, eta as an int
    sent = bytes.fromhex("84a46e616d65d903616464a461726773920fca40400000a3657461cd03e8a26964a0")
    spec = msgspec.msgpack.decode(sent, type=TaskSpec)

    encoded = msgspec.msgpack.encode(spec)

    assert spec == TaskSpec(name="add", args=[15, 3.0], eta=1000.0)
    # 75 + "add" 4 + "" 1 + [15, 3.0] 1+1+9 + {} 1 + {} 1 + eta 9 + null 4
    assert len(encoded) == 75 + 4 + 1 + 11 + 1 + 1 + 9 + 4


def test_a_periodic_run_id_is_the_name_and_its_due_time_with_three_decimals() -> None:
    b = TaskBoard()
    b.learn_schedules([TaskSignature(name="every_second", repeat_interval=1.0)], NOW + 0.2356)
    due = b.schedules.active["every_second"].next_run

    b.release_due(due + 0.4)  # runs late: the id still has the time it was due

    (run,) = b.list_tasks(None, 10, due + 0.4)
    printf = "every_second@%.3f" % due  # noqa: UP031 -- the spec says printf's %.3f
    assert run.task_id == printf == "every_second@1001.236"
    text = " ".join(section("### `register`").split())
    assert re.search(r"`every_second@\d+\.\d{3}`", text)
    assert 'printf("%.3f")' in text


def test_queue_full_has_the_detail_the_spec_lists() -> None:
    b = TaskBoard(BoardConfig(max_queued=1))
    b.learn_tasks([TaskSignature(name="add", params=[ANY])])

    with pytest.raises(Rejected) as refused:
        b.submit([TaskSpec(name="add"), TaskSpec(name="add")], Priority.NORMAL, NOW)

    assert refused.value.code == ErrorCode.QUEUE_FULL
    assert refused.value.detail == {"priority": "normal", "live": 0, "bound": 1}
    replies = " ".join(section("## 8. Shared records and replies").split())
    assert '`queue_full`: `{"priority": <e.g. "normal">, "live": <int>, "bound": <int>}`' in (
        replies
    )


def test_the_worked_reply_shows_every_field_a_results_reply_carries() -> None:
    shown = json.loads(blocks(section("## 16. Worked example"), "json")[0])

    (result,) = shown["results"]

    assert set(shown) == {"op", *Results.__struct_fields__}
    assert set(result) == set(TaskResult.__struct_fields__)
    assert msgspec.convert(result, TaskResult).truncated is False
