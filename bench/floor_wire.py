"""Messages of the floor relay (see floor.py): msgspec Structs encoded as msgpack maps,
the same codec FastWorker uses, with nothing but what the relay needs to route."""

from __future__ import annotations

import msgspec


class Job(msgspec.Struct, frozen=True):
    id: str
    args: list[int]


class Done(msgspec.Struct, frozen=True):
    id: str
    result: int


class Ask(msgspec.Struct, frozen=True):
    """client -> relay: run these jobs; the reply is their ``Answer``."""

    jobs: list[Job]


class Answer(msgspec.Struct, frozen=True):
    """relay -> client."""

    results: list[Done]


class Parcel(msgspec.Struct, frozen=True):
    """One held client request, as handed to the worker; ``ref`` names it in the relay."""

    ref: int
    jobs: list[Job]


class Finished(msgspec.Struct, frozen=True):
    ref: int
    results: list[Done]


class Pull(msgspec.Struct, frozen=True):
    """worker -> relay: the results of the last ``Hand``, and a held request for more."""

    finished: list[Finished]


class Hand(msgspec.Struct, frozen=True):
    """relay -> worker: every parcel that arrived since the worker's last pull."""

    parcels: list[Parcel]


MAX_MESSAGE_SIZE = 32 * 1024 * 1024
encoder = msgspec.msgpack.Encoder()
