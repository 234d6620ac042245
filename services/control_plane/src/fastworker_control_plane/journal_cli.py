"""``fastworker journal dump PATH``: read a control plane's journal without starting one.

Prints one JSON object per entry on stdout and a one-line summary on stderr; exits 0 if
a control plane would replay the journal as it is (a torn last write included), 1 if it
is damaged before its end (a control plane refuses it without ``--salvage-journal``),
2 if it cannot be read at all. It never writes, so it is safe beside a running one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fastworker.cli.common import EXIT_OK, EXIT_TASK_FAILED, CommandError
from fastworker_control_plane.durability import dump, frames
from fastworker_control_plane.durability.journal import FILE_NAME


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The options of ``fastworker journal`` (see ``fastworker_control_plane.commands``)."""
    actions = parser.add_subparsers(dest="journal_command", required=True, metavar="ACTION")
    dumping = actions.add_parser(
        "dump",
        help="print every entry as a JSON object per line, and where any damage is",
    )
    dumping.add_argument(
        "path", metavar="PATH", help="the control plane's --state-dir, or the journal file in it"
    )
    dumping.set_defaults(run=run_dump)


def run_dump(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.is_dir():
        path = path / FILE_NAME
    try:
        data = path.read_bytes()
        reading = frames.read(data)
    except (OSError, frames.NotAJournal, frames.WrongVersion) as exc:
        raise CommandError(f"cannot read the journal {path}: {exc}") from None
    for line in dump.lines(reading):
        print(dump.as_json(line))
    print(dump.summary(path, reading, len(data)), file=sys.stderr)
    return EXIT_TASK_FAILED if reading.gaps else EXIT_OK
