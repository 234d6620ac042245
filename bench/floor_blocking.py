"""The blocking floor: what one blocking round trip costs on the wire, with nothing else.

Two processes, as a ``SyncClient`` and the control plane it calls: a worker thread of this
(benchmark) process sends with a blocking ``pynng.Req0`` (no context, no asyncio on its
path; the benchmark's loop idles meanwhile, as in the ``sync`` scenario), and
``bench.floor_blocking_server`` answers on a blocking ``Rep0``. One task per message, same
codec (msgspec msgpack) and ids (uuid4 hex) as the other floor, sequential round trips.
The ``sync`` scenario's figures divided by these say how far the blocking client is from
the wire.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from time import perf_counter

import msgspec
import pynng

from bench.blocking import in_thread, steps
from bench.config import Sizes
from bench.floor import READY_TIMEOUT, REQUEST_TIMEOUT, FloorError, check_answer
from bench.floor_wire import MAX_MESSAGE_SIZE, Answer, Ask, Job, encoder
from bench.procs import Proc, Supervisor
from bench.stats import latency_summary_ms
from fastworker.testing import free_port_block

BLOCKING_FLOOR_UNITS = {
    "blocking_rt_p50_ms": "ms",
    "blocking_rt_p99_ms": "ms",
    "blocking_rt_per_s": "tasks/s",
}
_NO_RESEND = -1
_decoder = msgspec.msgpack.Decoder(Answer)


@dataclass
class BlockingFloor:
    sock: pynng.Socket  # used by one worker thread at a time
    server: Proc

    def ask(self, i: int) -> None:
        """One blocking round trip for the job (i, 1); checks the answer is i+1."""
        jobs = [Job(uuid.uuid4().hex, [i, 1])]
        try:
            self.sock.send(encoder.encode(Ask(jobs)))
            reply = self.sock.recv()
        except pynng.Timeout:
            dead = "" if self.server.alive() else f" [{self.server.describe_exit()}]"
            raise FloorError(f"no blocking floor reply in time{dead}") from None
        check_answer(jobs, _decoder.decode(reply))

    async def measure(self, sizes: Sizes) -> dict[str, float]:
        """One repeat: untimed warm-up round trips, then the timed ones."""
        return await in_thread(lambda abandoned: self._round_trips(sizes, abandoned))

    def _round_trips(self, sizes: Sizes, abandoned: threading.Event) -> dict[str, float]:
        for i in steps(sizes.latency_warmup, abandoned):
            self.ask(i)
        samples: list[float] = []
        began = perf_counter()
        for i in steps(sizes.floor_blocking, abandoned):
            start = perf_counter()
            self.ask(i)
            samples.append(perf_counter() - start)
        per_s = sizes.floor_blocking / (perf_counter() - began)
        summary = latency_summary_ms(samples)
        return {
            "blocking_rt_p50_ms": summary["p50_ms"],
            "blocking_rt_p99_ms": summary["p99_ms"],
            "blocking_rt_per_s": per_s,
        }


def _timeout_ms(seconds: float) -> int:
    return int(seconds * 1000)


@asynccontextmanager
async def blocking_floor_session(supervisor: Supervisor) -> AsyncIterator[BlockingFloor]:
    """The server process on a free port, and a client socket that got a first answer.

    Closing the socket on exit also ends a round trip a cancelled repeat left blocked."""
    port = free_port_block(1)
    server = supervisor.python_module("floor-blocking", "bench.floor_blocking_server", str(port))
    try:
        with pynng.Req0(recv_max_size=MAX_MESSAGE_SIZE) as sock:
            sock.resend_time = _NO_RESEND
            sock.send_timeout = sock.recv_timeout = _timeout_ms(READY_TIMEOUT)
            sock.dial(f"tcp://127.0.0.1:{port}", block=False)
            floor = BlockingFloor(sock, server)
            await in_thread(lambda _: floor.ask(0))
            sock.send_timeout = sock.recv_timeout = _timeout_ms(REQUEST_TIMEOUT)
            yield floor
    finally:
        supervisor.stop([server])
