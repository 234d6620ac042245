"""What /proc says of processes, for tests of process lifetimes (Linux)."""

from __future__ import annotations

from pathlib import Path


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Running or sleeping: not gone, and not a zombie waiting to be reaped."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except OSError:
        return False


def children_of(pid: int) -> set[int]:
    """The pids whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int(_stat_fields(int(entry.name))[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            found.add(int(entry.name))
    return found
