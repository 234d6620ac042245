"""When each control plane last answered this process, and what to say once it does not.

A connection that cannot be made has two very different causes. A control plane this
process never reached is most likely somewhere else than where it was looked for (an
announced Compose name seen from the host, a wrong port): the advice is about addresses.
A control plane that was answering a moment ago and now refuses connections was stopped,
restarted or crashed: sending the operator after a network problem then wastes their
time. Telling the two apart needs only a memory of the last reply from each control
plane (a monotonic time per address), which the channels keep here.

The rules (``unreachable``) are pure: the address, the times and the fallback message
in, the message out. Nothing here changes how long a call waits or whether a client
follows a new leader: the message is chosen once the call has already failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastworker_common.errors import stopped_answering


class Sightings:
    """The monotonic time of the last reply from each control plane, by address.

    Shared by every channel of one client (and by the channels it opens for a new
    leader), so any lane's reply counts for the control plane. Recording is one dict
    store, atomic under the GIL: it is on every reply's path, so it takes no lock."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def answered(self, address: str, now: float) -> None:
        self._last[address] = now

    def last(self, address: str) -> float | None:
        """When ``address`` last answered, or ``None``: never (by this process)."""
        return self._last.get(address)

    def latest(self) -> tuple[str, float] | None:
        """The address that answered most recently, and when; ``None``: none ever did."""
        seen = list(self._last.items())
        return max(seen, key=lambda item: item[1]) if seen else None


@dataclass(frozen=True)
class Peer:
    """The control plane behind a channel, as its messages name it (its first submission
    address, whatever lane the channel serves), where its replies are recorded, and
    whether it is one of replicas the client follows."""

    address: str
    sightings: Sightings = field(default_factory=Sightings)
    replicas: bool = False

    def answered(self, now: float) -> None:
        self.sightings.answered(self.address, now)

    def unreachable(self, never: str, now: float) -> str:
        """The message for a failed connection at ``now`` (``never``: the one for a
        control plane never reached)."""
        return unreachable(never, self.address, self.sightings, now, replicas=self.replicas)


def unreachable(
    never: str, address: str, sightings: Sightings, now: float, *, replicas: bool = False
) -> str:
    """What to say when ``address`` cannot be connected to at ``now``.

    Never answered: ``never`` (the advice about addresses). Answered before: it stopped
    answering, with how long ago it was last seen. Of replicas, the client has looked for
    a new leader until its deadline before anyone sees this, so no other replica answered
    either; the last seen is then the most recent reply of any replica, since the leader
    that failed may be a successor this client never reached."""
    last = sightings.last(address)
    if last is None and replicas:
        latest = sightings.latest()
        if latest is not None:
            address, last = latest
    if last is None:
        return never
    return stopped_answering(address, max(0.0, now - last), replicas=replicas)
