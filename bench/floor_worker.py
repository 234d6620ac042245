"""The floor's worker process: ``python -m bench.floor_worker ADDRESS``.

Pulls from the relay with one held REQ (like a subworker's ``fetch``), computes x+y for
every job it was handed, and returns the results in its next pull. It exits on SIGTERM.
"""

from __future__ import annotations

import sys

import msgspec
import pynng

from bench.floor_wire import MAX_MESSAGE_SIZE, Done, Finished, Hand, Pull, encoder

_NO_RESEND = -1


def run(address: str) -> None:
    decoder = msgspec.msgpack.Decoder(Hand)
    with pynng.Req0(recv_max_size=MAX_MESSAGE_SIZE) as sock:
        sock.resend_time = _NO_RESEND
        sock.dial(address, block=False)
        finished: list[Finished] = []
        while True:
            sock.send(encoder.encode(Pull(finished)))
            hand = decoder.decode(sock.recv())
            finished = [
                Finished(p.ref, [Done(j.id, j.args[0] + j.args[1]) for j in p.jobs])
                for p in hand.parcels
            ]


if __name__ == "__main__":
    run(sys.argv[1])
