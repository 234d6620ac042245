"""The floor: what the same building blocks cost with no task queue around them.

Three processes, as in a FastWorker deployment: this (benchmark) process is the client;
``bench.floor_relay`` holds each client request on an NNG context and hands it to
``bench.floor_worker``, which pulls with one held REQ like a subworker's ``fetch``, adds
x+y and returns the results in its next pull. Same NNG patterns (REQ/REP through
contexts), same codec (msgspec msgpack), same ids (uuid4 hex) and a new context per
request like the SDK; no priorities, task states, result cache, validation or
idempotency. FastWorker's figures divided by these say what the queue itself costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from time import perf_counter

import msgspec
import pynng

from bench.config import FLOOR_BATCH, FLOOR_BATCHES_IN_FLIGHT, PIPELINE_DEPTH, Sizes
from bench.floor_wire import MAX_MESSAGE_SIZE, Answer, Ask, Job, encoder
from bench.procs import Proc, Supervisor
from bench.scenarios import WrongResult
from bench.stats import latency_summary_ms
from fastworker.testing import free_port_block

FLOOR_UNITS = {
    "latency.p50_ms": "ms",
    "latency.p99_ms": "ms",
    "latency.p999_ms": "ms",
    "tasks_per_s.batched": "tasks/s",
    "tasks_per_s.single": "tasks/s",
}
READY_TIMEOUT = 30.0
REQUEST_TIMEOUT = 60.0
_NO_RESEND = -1
_decoder = msgspec.msgpack.Decoder(Answer)


class FloorError(RuntimeError):
    pass


@dataclass
class FloorClient:
    sock: pynng.Socket
    procs: list[Proc]

    async def ask(self, jobs: list[Job], timeout: float = REQUEST_TIMEOUT) -> None:
        """One round trip through relay and worker; checks every result is x+y."""
        context = self.sock.new_context()
        exchange = asyncio.ensure_future(_exchange(context, encoder.encode(Ask(jobs))))
        try:
            await asyncio.wait((exchange,), timeout=timeout)
        finally:
            if not exchange.done():
                exchange.add_done_callback(_discard_outcome)
            with contextlib.suppress(pynng.NNGException):
                context.close()  # aborts a pending exchange (cancelling is unreliable)
        if not exchange.done():
            raise FloorError(f"no floor reply within {timeout:g} s{self._dead()}")
        check_answer(jobs, _decoder.decode(exchange.result()))

    def _dead(self) -> str:
        dead = [p.describe_exit() for p in self.procs if not p.alive()]
        return f" [{'; '.join(dead)}]" if dead else ""


async def _exchange(context: pynng.Context, data: bytes) -> bytes:
    await context.asend(data)
    reply: bytes = await context.arecv()
    return reply


def _discard_outcome(exchange: asyncio.Future[bytes]) -> None:
    if not exchange.cancelled():
        exchange.exception()


def check_answer(jobs: list[Job], answer: Answer) -> None:
    if len(answer.results) != len(jobs):
        raise WrongResult(f"floor: {len(answer.results)} results for {len(jobs)} jobs")
    for job, done in zip(jobs, answer.results, strict=True):
        if done.id != job.id or done.result != job.args[0] + job.args[1]:
            raise WrongResult(f"floor: job {job.id} {job.args} came back as {done}")


def _jobs(start: int, count: int) -> list[Job]:
    return [Job(uuid.uuid4().hex, [i, 1]) for i in range(start, start + count)]


@asynccontextmanager
async def floor_session(supervisor: Supervisor) -> AsyncIterator[FloorClient]:
    """Relay and worker processes on free ports, and a client that got a first answer."""
    client_port = free_port_block(1)
    worker_port = free_port_block(1)
    relay = supervisor.python_module(
        "floor-relay", "bench.floor_relay", str(client_port), str(worker_port)
    )
    worker = supervisor.python_module(
        "floor-worker", "bench.floor_worker", f"tcp://127.0.0.1:{worker_port}"
    )
    procs = [relay, worker]
    try:
        with pynng.Req0(recv_max_size=MAX_MESSAGE_SIZE) as sock:
            sock.resend_time = _NO_RESEND
            sock.dial(f"tcp://127.0.0.1:{client_port}", block=False)
            client = FloorClient(sock, procs)
            await client.ask(_jobs(0, 1), timeout=READY_TIMEOUT)
            yield client
    finally:
        supervisor.stop(procs)


async def _latency(client: FloorClient, sizes: Sizes) -> dict[str, float]:
    for i in range(sizes.latency_warmup):
        await client.ask(_jobs(i, 1))
    samples: list[float] = []
    for i in range(sizes.floor_latency):
        jobs = _jobs(i, 1)
        start = perf_counter()
        await client.ask(jobs)
        samples.append(perf_counter() - start)
    return {f"latency.{k}": v for k, v in latency_summary_ms(samples).items()}


async def _throughput(client: FloorClient, total: int, per_message: int, depth: int) -> float:
    """Tasks/s for ``total`` tasks sent ``per_message`` to a message, ``depth`` in flight."""
    messages = [_jobs(i, min(per_message, total - i)) for i in range(0, total, per_message)]
    gate = asyncio.Semaphore(depth)

    async def send(jobs: list[Job]) -> None:
        async with gate:
            await client.ask(jobs)

    start = perf_counter()
    await asyncio.gather(*(send(m) for m in messages))
    return total / (perf_counter() - start)


async def measure_floor(client: FloorClient, sizes: Sizes) -> dict[str, float]:
    """One repeat of every floor metric on running relay and worker processes."""
    metrics = await _latency(client, sizes)
    metrics["tasks_per_s.batched"] = await _throughput(
        client, sizes.floor_batched, FLOOR_BATCH, FLOOR_BATCHES_IN_FLIGHT
    )
    metrics["tasks_per_s.single"] = await _throughput(client, sizes.floor_single, 1, PIPELINE_DEPTH)
    return metrics
