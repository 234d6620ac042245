"""The floor's relay process: ``python -m bench.floor_relay CLIENT_PORT WORKER_PORT``.

Two REP sockets served through NNG contexts, elastic like the control plane's: clients'
requests are held (one context each) until the worker's results for them come back; the
worker's held pull is answered with every request that arrived meanwhile. No queues by
priority, no task state, no result cache: only routing. It exits on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import Awaitable, Callable

import msgspec
import pynng

from bench.floor_wire import MAX_MESSAGE_SIZE, Answer, Ask, Done, Hand, Parcel, Pull, encoder

_MIN_IDLE = 4
_MAX_IDLE = 16


class Router:
    """Held client requests by ref, and the parcels the worker has not pulled yet."""

    def __init__(self) -> None:
        self._parcels: list[Parcel] = []
        self._held: dict[int, asyncio.Future[list[Done]]] = {}
        self._arrived = asyncio.Event()
        self._refs = itertools.count()
        self._ask = msgspec.msgpack.Decoder(Ask)
        self._pull = msgspec.msgpack.Decoder(Pull)

    async def client_request(self, data: bytes) -> bytes:
        ask = self._ask.decode(data)
        ref = next(self._refs)
        answered = asyncio.get_running_loop().create_future()
        self._held[ref] = answered
        self._parcels.append(Parcel(ref, ask.jobs))
        self._arrived.set()
        return encoder.encode(Answer(await answered))

    async def worker_request(self, data: bytes) -> bytes:
        for finished in self._pull.decode(data).finished:
            self._held.pop(finished.ref).set_result(finished.results)
        while not self._parcels:
            self._arrived.clear()
            await self._arrived.wait()
        parcels, self._parcels = self._parcels, []
        return encoder.encode(Hand(parcels))


class ElasticServer:
    """Serves one REP socket, one context per request, always a few idle contexts."""

    def __init__(self, sock: pynng.Socket, handle: Callable[[bytes], Awaitable[bytes]]) -> None:
        self._sock = sock
        self._handle = handle
        self._idle = 0
        self._loops: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        for _ in range(_MIN_IDLE):
            self._spawn()

    def _spawn(self) -> None:
        loop = asyncio.get_running_loop().create_task(self._serve())
        self._loops.add(loop)
        loop.add_done_callback(self._loops.discard)

    async def _serve(self) -> None:
        context = self._sock.new_context()
        try:
            while True:
                self._idle += 1
                try:
                    data = await context.arecv()
                finally:
                    self._idle -= 1
                if self._idle < _MIN_IDLE:
                    self._spawn()
                await context.asend(await self._handle(data))
                if self._idle >= _MAX_IDLE:
                    return
        finally:
            with contextlib.suppress(pynng.NNGException):
                context.close()


async def serve(client_port: int, worker_port: int) -> None:
    router = Router()
    with (
        pynng.Rep0(recv_max_size=MAX_MESSAGE_SIZE) as clients,
        pynng.Rep0(recv_max_size=MAX_MESSAGE_SIZE) as worker,
    ):
        clients.listen(f"tcp://127.0.0.1:{client_port}")
        worker.listen(f"tcp://127.0.0.1:{worker_port}")
        servers = [
            ElasticServer(clients, router.client_request),
            ElasticServer(worker, router.worker_request),
        ]
        for server in servers:  # held here: the event loop keeps only weak task references
            server.start()
        await asyncio.Event().wait()  # until SIGTERM ends the process


def main(argv: list[str]) -> None:
    client_port, worker_port = (int(a) for a in argv)
    asyncio.run(serve(client_port, worker_port))


if __name__ == "__main__":
    main(sys.argv[1:])
