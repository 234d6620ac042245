"""The blocking floor's server process: ``python -m bench.floor_blocking_server PORT``.

One blocking REP socket, no asyncio, no contexts, no threads of ours: receive one ``Ask``,
answer x+y for its jobs, repeat. It exits on SIGTERM (Python leaves SIGTERM's default
action in place, which ends the process even while it blocks in ``recv``).
"""

from __future__ import annotations

import sys

import msgspec
import pynng

from bench.floor_wire import MAX_MESSAGE_SIZE, Answer, Ask, Done, encoder


def serve(port: int) -> None:
    decoder = msgspec.msgpack.Decoder(Ask)
    with pynng.Rep0(recv_max_size=MAX_MESSAGE_SIZE) as sock:
        sock.listen(f"tcp://127.0.0.1:{port}")
        while True:
            ask = decoder.decode(sock.recv())
            done = [Done(job.id, job.args[0] + job.args[1]) for job in ask.jobs]
            sock.send(encoder.encode(Answer(done)))


if __name__ == "__main__":
    serve(int(sys.argv[1]))
