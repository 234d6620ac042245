"""Whether a leader's process is gone, as seen from a follower: proof, or nothing.

A follower's connection to its leader drops when the leader's process dies (``kill -9``,
a crash, an OOM kill): its kernel closes the sockets, and a new connection to the same
port is then *refused*, since nothing listens there. A leader that is merely
unreachable (a partition, a paused process, a host that is down) does not refuse: the
attempt times out, or the connection is made. So only refusals, seen twice a moment
apart, count as proof; anything else proves nothing, and the term ends with its lease.
The first attempt waits a moment too: a process being killed closes its connections
before its listening sockets, and a connection made in between proves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

ATTEMPTS = 2
APART = 0.05  # seconds before each attempt
TIMEOUT = 0.25  # seconds an attempt may take: longer is no refusal


def host_and_port(address: str) -> tuple[str, int] | None:
    """``tcp://host:port`` or ``tls+tcp://host:port`` as (host, port); None otherwise."""
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("tcp", "tls+tcp", "tcp4", "tcp6") or not parts.hostname:
        return None
    return (parts.hostname, port) if port else None


async def nothing_listens(address: str) -> bool:
    """True only if every attempt to connect to ``address`` is refused."""
    target = host_and_port(address)
    if target is None:
        return False
    for _ in range(ATTEMPTS):
        await asyncio.sleep(APART)  # a dying process closes its connections, then listeners
        if not await _refused(*target):
            return False
    return True


async def _refused(host: str, port: int) -> bool:
    try:
        async with asyncio.timeout(TIMEOUT):
            _, writer = await asyncio.open_connection(host, port)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return False
