"""Reading a journal back at start: which frames replay, and what damage means.

A torn last write (damage with nothing intact after it) is what a crash leaves: it was
never acknowledged, so it is dropped. Damage *followed by* intact frames is not a crash:
replaying up to it would silently lose every later frame, so the control plane refuses
to start, says where the damage is, and leaves the file exactly as it found it. With
``salvage`` the operator has decided: every intact frame replays, before and after the
damage, and what was skipped is logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import structlog

from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.entries import Recovered
from fastworker_control_plane.durability.errors import JournalError
from fastworker_control_plane.durability.frames import Gap
from fastworker_control_plane.durability.schema import Entry

log = structlog.get_logger(__name__)

SALVAGE_FLAG = "--salvage-journal"


@dataclass
class Replayed:
    recovered: Recovered = field(default_factory=Recovered)
    frames: int = 0
    entries: int = 0
    good: int = 0  # where the intact part ends (appending resumes there)
    torn: int = 0  # bytes of a torn last write, dropped
    skipped: list[Gap] = field(default_factory=list)  # damage skipped by salvage


def replay(path: Path, data: bytes, *, salvage: bool = False) -> Replayed:
    """Replay ``data`` (the journal at ``path``); raises ``JournalError`` if it cannot."""
    try:
        reading = frames.read(data)
    except (frames.NotAJournal, frames.WrongVersion) as exc:
        raise JournalError(f"cannot read the journal {path}: {exc}") from exc
    if reading.gaps and not salvage:
        raise JournalError(refusal(path, reading, len(data)))
    replayed = Replayed(frames=len(reading.frames), good=reading.good, torn=reading.torn)
    replayed.skipped = reading.gaps
    decoder = msgspec.msgpack.Decoder(list[Entry])
    for index, found in enumerate(reading.frames):
        try:
            entries = decoder.decode(found.payload)
        except msgspec.DecodeError as exc:
            raise JournalError(
                f"the journal {path} has an intact frame ({index}, at byte {found.offset}) "
                f"this version cannot read ({exc}): was it written by a newer FastWorker?"
            ) from exc
        for entry in entries:
            replayed.recovered.apply(entry)
        replayed.entries += len(entries)
    for gap in reading.gaps:
        log.warning(
            "journal: damaged bytes skipped (salvaged)",
            path=str(path),
            offset=gap.offset,
            bytes=gap.size,
            intact_frames_after=reading.frames_after(gap),
        )
    return replayed


def refusal(path: Path, reading: frames.Reading, size: int) -> str:
    """One line: where the damage is, what follows it, and what the operator can do."""
    gap = reading.gaps[0]
    after = size - gap.offset - gap.size
    more = f" (and {len(reading.gaps) - 1} more damaged spans)" if len(reading.gaps) > 1 else ""
    return (
        f"the journal {path} is damaged at byte {gap.offset} ({gap.size} bytes unreadable), "
        f"and {after} bytes in {reading.frames_after(gap)} intact frames follow it{more}: "
        "this is not a torn last write, so nothing was replayed or changed. Start with "
        f"{SALVAGE_FLAG} to replay every intact frame and skip the damage (what it held is "
        "lost), or restore the state dir from a backup"
    )
