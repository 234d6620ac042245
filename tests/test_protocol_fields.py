"""Every field on the wire is in PROTOCOL.md's tables, so the spec cannot drift from the code.

The test walks every message of ``fastworker_protocol`` (``ALL_MESSAGES``), every record
they carry (found by following their fields' types, so a new record is walked as soon as a
message holds it), the top-level envelope, and the replication stream's messages, and
checks each field's **wire name** (``msgspec.field(name=...)`` applied: ``timeout``, not
``time_limit``) against the spec. Where the spec documents a field:

* **a record** ``R``: the first table after a line that starts with ``**R**`` (bold, the
  class name exactly), its rows' first-column backticked names. The reverse holds too:
  every name in that table is a field of ``R``, so a renamed field cannot linger.
* **a message** with op ``X``: the union of
  (a) the first table under each heading that names `` `X` `` (any level; the table must
  come before any ``**Record**`` line of that section), its first-column names; and
  (b) every row, of any table, whose first cell is `` `X` ``: the backticked names in its
  other cells (the replies table of §8, the replication messages of §19).
  The inherited ``v`` and ``auth`` are the envelope's, checked once.
* **the envelope** (``op``, ``v``, ``auth``): the first table of §3.

Enumerations an implementer must handle are checked the same way: every ``ErrorCode`` is a
row of §10's table, every ``FailureReason`` is named in the ``reason`` row of TaskError.

A failure names each missing field and where it was looked for: add a row for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import msgspec.inspect as mi
import pytest

from fastworker_control_plane.replication import messages as replication
from fastworker_protocol import ALL_MESSAGES, ErrorCode, FailureReason, Message

SPEC = Path(__file__).resolve().parents[1] / "services" / "protocol" / "PROTOCOL.md"
TEXT = SPEC.read_text(encoding="utf-8")
LINES = TEXT.splitlines()
ENVELOPE = ("v", "auth")  # inherited by every Message; checked in the envelope table
RECORD_LINE = re.compile(r"^\*\*(\w+)\*\*")
TICKED = re.compile(r"`([^`]+)`")


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def ticked(cell: str) -> set[str]:
    return set(TICKED.findall(cell))


def first_table(lines: list[str], stop_at_record: bool = False) -> list[list[str]]:
    """The rows (header and separator left out) of the first table in ``lines``."""
    rows: list[list[str]] = []
    for line in lines:
        if line.startswith("|"):
            rows.append(cells(line))
        elif rows or line.startswith("#") or (stop_at_record and RECORD_LINE.match(line)):
            break  # the table ended, or the section (or the message's part of it) did
    return rows[2:]


def first_column(rows: list[list[str]]) -> set[str]:
    return set().union(*(ticked(row[0]) for row in rows)) if rows else set()


def sections(name: str) -> Iterator[list[str]]:
    """The body of each section whose heading names `` `name` ``, up to the next heading."""
    for i, line in enumerate(LINES):
        if line.startswith("#") and f"`{name}`" in line:
            end = next((j for j in range(i + 1, len(LINES)) if LINES[j].startswith("#")), None)
            yield LINES[i + 1 : end]


def record_table(name: str) -> set[str] | None:
    for i, line in enumerate(LINES):
        match = RECORD_LINE.match(line)
        if match and match[1] == name:
            return first_column(first_table(LINES[i + 1 :]))
    return None


def message_fields_documented(op: str) -> set[str]:
    names: set[str] = set()
    for body in sections(op):
        names |= first_column(first_table(body, stop_at_record=True))
    for line in LINES:
        if line.startswith("|") and cells(line)[0] == f"`{op}`":
            names |= set().union(*(ticked(c) for c in cells(line)[1:]))
    return names


def wire_names(cls: type[msgspec.Struct]) -> list[str]:
    return [f.encode_name for f in msgspec.structs.fields(cls)]


def records_in(types: tuple[type[msgspec.Struct], ...]) -> set[type[msgspec.Struct]]:
    """Every struct type reachable from the fields of ``types`` (the messages left out)."""
    found: set[type[msgspec.Struct]] = set()

    def walk(node: object) -> None:
        if isinstance(node, mi.StructType):
            if node.cls in found:
                return
            found.add(node.cls)
            for field in node.fields:
                walk(field.type)
        elif isinstance(node, mi.Type):
            for value in msgspec.structs.astuple(node):
                for item in value if isinstance(value, tuple) else (value,):
                    walk(item)

    for info in mi.multi_type_info(types):
        walk(info)
    return found - set(types)


def all_message_classes(base: type[Message]) -> set[type[Message]]:
    below = set(base.__subclasses__())
    return below.union(*(all_message_classes(c) for c in below)) if below else below


RECORDS = sorted(records_in(ALL_MESSAGES), key=lambda c: c.__name__)
REPLICATION = replication.AnyMessage.__args__


def op_of(cls: type[msgspec.Struct]) -> str:
    return str(cls.__struct_config__.tag)


def test_the_walk_covers_every_message_class_the_protocol_defines() -> None:
    defined = {c for c in all_message_classes(Message) if c.__struct_config__.tag is not None}

    assert defined == set(ALL_MESSAGES)


def test_the_envelope_fields_are_in_the_framing_table() -> None:
    body = TEXT[TEXT.index("\n## 3. Framing and types") :].splitlines()[2:]

    documented = first_column(first_table(body))

    assert {"op", *ENVELOPE} <= documented
    assert [n for n in wire_names(Message) if n not in ENVELOPE] == []


@pytest.mark.parametrize("record", RECORDS, ids=lambda c: c.__name__)
def test_every_field_of_a_record_is_in_its_table(record: type[msgspec.Struct]) -> None:
    documented = record_table(record.__name__)
    assert documented is not None, f"PROTOCOL.md has no line starting **{record.__name__}**"

    fields = wire_names(record)

    assert [n for n in fields if n not in documented] == [], f"{record.__name__}: add rows"
    assert sorted(documented - set(fields)) == [], f"{record.__name__}: rows of no field"


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=op_of)
def test_every_field_of_a_message_is_in_the_spec(message: type[msgspec.Struct]) -> None:
    documented = message_fields_documented(op_of(message))

    missing = [n for n in wire_names(message) if n not in ENVELOPE and n not in documented]

    assert missing == [], f"`{op_of(message)}` fields not in PROTOCOL.md: {missing}"


@pytest.mark.parametrize("message", REPLICATION, ids=op_of)
def test_every_field_of_a_replication_message_is_in_section_19(
    message: type[msgspec.Struct],
) -> None:
    stream = TEXT[TEXT.index("\n### Messages") :]
    envelope = {"v", "epoch"} & ticked(stream[: stream.index("\n|")])  # said in prose
    documented = message_fields_documented(op_of(message)) | envelope

    missing = [n for n in wire_names(message) if n not in documented]

    assert missing == [], f"replication `{op_of(message)}` fields not in §19: {missing}"


def test_every_error_code_is_a_row_of_section_10() -> None:
    body = TEXT[TEXT.index("\n## 10. Error codes") :].splitlines()[2:]

    documented = first_column(first_table(body))

    assert [c.value for c in ErrorCode if c.value not in documented] == []


def test_every_failure_reason_is_named_in_the_task_error_table() -> None:
    start = LINES.index("**TaskError**")
    row = next(r for r in first_table(LINES[start + 1 :]) if r[0] == "`reason`")

    assert [r.value for r in FailureReason if r.value not in ticked(row[3])] == []
