"""The journal as JSON lines, for people: every entry of every intact frame, and where
the damage is. Pure: bytes in, dicts and a summary out (``fastworker journal dump``).
It never changes a journal, and shows damaged bytes only by offset and size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.replay import SALVAGE_FLAG
from fastworker_control_plane.durability.schema import Entry
from fastworker_protocol import describe_ext

Line = dict[str, Any]


def lines(reading: frames.Reading) -> Iterator[Line]:
    """One dict per entry (``frame``, ``offset``, ``type`` and its fields), and one per
    damaged span (``damage``: ``skipped`` before intact frames, ``torn`` at the end)."""
    decoder = msgspec.msgpack.Decoder(list[Entry])
    gaps = list(reading.gaps)
    for index, found in enumerate(reading.frames):
        while gaps and gaps[0].offset < found.offset:
            yield _gap(gaps.pop(0), reading)
        try:
            entries = decoder.decode(found.payload)
        except msgspec.DecodeError as exc:
            yield {"frame": index, "offset": found.offset, "error": f"cannot decode: {exc}"}
            continue
        for entry in entries:
            shown = msgspec.to_builtins(entry, enc_hook=_shown)
            yield {"frame": index, "offset": found.offset, **shown}
    if reading.torn:
        yield {"damage": "torn", "offset": reading.good, "bytes": reading.torn}


def _shown(value: Any) -> str:
    """An argument or result JSON has no form for: an extension value (a UUID, a Decimal,
    an application's type) as ``describe_ext`` says it, anything else as its ``repr``."""
    if isinstance(value, msgspec.msgpack.Ext):
        return describe_ext(value)
    return repr(value)


def _gap(gap: frames.Gap, reading: frames.Reading) -> Line:
    return {
        "damage": "skipped",
        "offset": gap.offset,
        "bytes": gap.size,
        "intact_frames_after": reading.frames_after(gap),
    }


def as_json(line: Line) -> str:
    try:
        return msgspec.json.encode(line, enc_hook=repr).decode()
    except (TypeError, ValueError) as exc:  # a value JSON cannot key or hold: say so
        shown = {k: line[k] for k in ("frame", "offset", "type") if k in line}
        return msgspec.json.encode({**shown, "error": f"cannot show as JSON: {exc}"}).decode()


def summary(path: Path, reading: frames.Reading, size: int) -> str:
    """One line on what the journal holds and whether a control plane would start on it."""
    said = f"{path}: format {frames.VERSION}, {len(reading.frames)} intact frames, {size} bytes"
    if reading.gaps:
        first = reading.gaps[0]
        return (
            f"{said}; DAMAGED at byte {first.offset} ({first.size} bytes, "
            f"{len(reading.gaps)} damaged spans in all) with "
            f"{reading.frames_after(first)} intact frames after it: a control plane refuses "
            f"to start on it without {SALVAGE_FLAG}"
        )
    if reading.torn:
        return (
            f"{said}; a torn last write of {reading.torn} bytes at byte {reading.good} "
            "(dropped on start: it was never acknowledged)"
        )
    return f"{said}; intact"
