"""Pieces of command-line options the SDK's commands and the services' settings share.

Flags and their ``FASTWORKER_<NAME>`` variables are made by ``fastworker_common.settings``.
"""

from __future__ import annotations

import argparse

from fastworker_protocol import check_queue, parse_queues

# Every command's ``--auth-token`` (the services' is a field of their configs).
AUTH_TOKEN_HELP = "the shared token every request must carry (prefer the environment variable)"


def queue_name(text: str) -> str:
    """A queue name, or a usage error saying the rule."""
    try:
        return check_queue(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def queue_weights(text: str) -> dict[str, int]:
    """``--queues reports:1,default:4``: queue -> weight, or a usage error saying why."""
    try:
        return parse_queues(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
