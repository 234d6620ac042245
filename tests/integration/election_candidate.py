"""A leader-election candidate in its own process, for tests that pause or kill it.

Usage: python election_candidate.py URL ID LEASE_SECONDS

Prints one JSON line per election event ({"t", "event", "epoch", "leader"}) and, every
50 ms, a tick ({"t", "tick": epoch or null}) saying whether it would act as leader right
now (``leading()``), as a control plane checks before every acknowledgement. ``t`` is
``time.monotonic()``, which is system-wide, so the test can compare it with its own.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from fastworker_control_plane.election import (
    BecameLeader,
    LostLeadership,
    ObservedLeader,
    elector_from_url,
)


def emit(**fields: object) -> None:
    print(json.dumps({"t": time.monotonic(), **fields}), flush=True)


async def main(url: str, candidate_id: str, lease: float) -> None:
    elector = elector_from_url(url, candidate_id, (f"{candidate_id}:5555",), lease_duration=lease)

    async def ticks() -> None:
        while True:
            term = elector.leading()
            emit(tick=None if term is None else term.epoch)
            await asyncio.sleep(0.05)

    ticker = asyncio.create_task(ticks())
    await elector.start()
    async for event in elector.events():
        if isinstance(event, BecameLeader):
            emit(event="elected", epoch=event.term.epoch, leader=event.term.leader_id)
        elif isinstance(event, LostLeadership):
            emit(event="lost", epoch=event.term.epoch, reason=event.reason)
        elif isinstance(event, ObservedLeader):
            term = event.term
            emit(
                event="observed",
                epoch=None if term is None else term.epoch,
                leader=None if term is None else term.leader_id,
            )
    ticker.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
