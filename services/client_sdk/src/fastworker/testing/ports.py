"""Free loopback ports for tests that start real servers: picked where no one else will
take them between the pick and the server's bind.

A port the kernel hands out (bind to port 0) is free when checked, but it lies in the
kernel's ephemeral range, where any process's next outgoing connection may take it before
the server under test binds it. So every port here comes from below that range (read from
``/proc/sys/net/ipv4/ip_local_port_range``, else 20000-32000), where only servers that
choose their own port ever bind. Under pytest-xdist each worker picks from its own slice of
that span, so two workers never hand out the same port either; and within a process a port
is not handed out again until hundreds of others were, so two picks of one test (a control
plane's block, then its HTTP port) never overlap.

The pick is still only a probe: a server that then fails to bind (someone else's server
took the port) should be started again on a fresh block, which is what the callers do.
This module never binds for longer than the probe, and does no I/O besides.
"""

from __future__ import annotations

import os
import random
import socket
from collections import deque
from pathlib import Path

__all__ = ["EphemeralRange", "ephemeral_range", "free_port_block", "free_ports_apart"]

_LOWEST = 20_000  # above the well-known and most registered service ports
_FALLBACK = (32_000, 60_999)  # what we assume is ephemeral when /proc cannot say
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_ATTEMPTS = 500
_MIN_ROOM = 2_000  # ports below the ephemeral range worth picking from; else above it
_RECENT = 512  # ports handed out lately, never handed out again until this many more were
_recent: deque[int] = deque(maxlen=_RECENT)
_picks = random.Random()  # its own: a test seeding the global one must not pin the ports

EphemeralRange = tuple[int, int]


def ephemeral_range(text: str | None = None) -> EphemeralRange:
    """The kernel's ephemeral port range, first and last port included.

    ``text`` is the content of ``ip_local_port_range`` (read from /proc when None); when it
    cannot be read or parsed, the range is taken to start at 32000.
    """
    try:
        raw = _RANGE_FILE.read_text() if text is None else text
        first, last = (int(part) for part in raw.split())
    except (OSError, ValueError):
        return _FALLBACK
    if not 0 < first <= last <= 65_535:
        return _FALLBACK
    return first, last


def _span(size: int, worker: str | None, workers: int, ephemeral: EphemeralRange) -> range:
    """Where a block of ``size`` may start: below the ephemeral range (above it, if the
    range starts too low to leave room) and, under xdist, within this worker's slice of
    that span (``gw1`` of 3 workers has the second third), so that the whole block stays
    inside the slice."""
    low, high = _LOWEST, ephemeral[0]  # the ports [low, high)
    if high - low < _MIN_ROOM:
        low, high = ephemeral[1] + 1, 65_536
    if worker and worker.startswith("gw") and worker[2:].isdigit() and workers > 1:
        width = (high - low) // workers
        low += int(worker[2:]) % workers * width
        high = low + width
    if high - low < size:
        raise RuntimeError(f"no room for {size} ports outside the ephemeral range {ephemeral}")
    return range(low, high - size + 1)


def _all_free(ports: range) -> bool:
    held: list[socket.socket] = []
    try:
        for port in ports:
            probe = socket.socket()
            held.append(probe)
            # No SO_REUSEADDR: a port a closed connection still holds (TIME_WAIT) is skipped
            # too, so the block binds for servers with the option and without it.
            probe.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for probe in held:
            probe.close()


def _recent_free(block: range) -> bool:
    # Picks are not bound until their server starts: two picks of one test (a control
    # plane's block, then its HTTP port) must not overlap although both probe free.
    return not any(port in block for port in _recent)


def free_port_block(size: int = 1, *, avoid: set[int] | frozenset[int] = frozenset()) -> int:
    """A port p such that p..p+size-1 are free on 127.0.0.1 now, lie outside the kernel's
    ephemeral range, include none of ``avoid``, and none this process was given by one of
    its last few hundred picks."""
    if size < 1:
        raise ValueError(f"a block has at least one port, not {size}")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    starts = _span(size, worker, workers, ephemeral_range())
    for _ in range(_ATTEMPTS):
        start = _picks.choice(starts)
        block = range(start, start + size)
        if avoid.isdisjoint(block) and _recent_free(block) and _all_free(block):
            _recent.extend(block)
            return start
    raise RuntimeError(f"no block of {size} free ports found in {starts}")


def free_ports_apart(*sizes: int) -> list[int]:
    """The first ports of free blocks of these sizes, no two overlapping: none is bound
    until its server starts, so each block must also avoid the others."""
    taken: set[int] = set()
    starts = []
    for size in sizes:
        start = free_port_block(size, avoid=taken)
        taken.update(range(start, start + size))
        starts.append(start)
    return starts
