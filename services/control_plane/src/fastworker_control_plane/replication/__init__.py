"""Journal replication between control planes: the stream's rules, pure. ``ha`` drives
them over NNG and files (the leader's ``LeaderReplication``, the follower's link).

A leader ships its journal file, byte for byte, to followers that keep a mirror of it in
their own state dir; a mirror replays to the same board as the leader's file. The pieces:

- ``messages``: the replication stream's wire format (versioned, tagged by ``op``);
- ``follower``: the follower's state machine (pure: messages in, instructions out);
- ``sender``: what the leader answers a follower's position with (pure);
- ``tracker``: the leader's view of its followers: lag, the in-sync set, and which
  group commits are replicated and may be acknowledged (pure);
- ``replica``: a follower's files, carrying out ``follower``'s instructions;
- ``source``: the leader's journal file, read back in whole frames for shipping.

Nothing here opens a socket or reads a clock: the caller passes ``now`` and moves bytes.
"""

from fastworker_control_plane.replication.follower import Follower, Phase
from fastworker_control_plane.replication.messages import (
    STREAM_VERSION,
    Ack,
    Append,
    Hello,
    Refused,
    Snapshot,
    decode,
    encode,
)
from fastworker_control_plane.replication.tracker import Mode, Tracker

__all__ = [
    "STREAM_VERSION",
    "Ack",
    "Append",
    "Follower",
    "Hello",
    "Mode",
    "Phase",
    "Refused",
    "Snapshot",
    "Tracker",
    "decode",
    "encode",
]
