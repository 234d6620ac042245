"""Fuzzing a live control plane: 100,000 random and mutated frames over every REP port (the
four submission ports, results, registration) and a few thousand on the discovery bus.
Every request gets a reply, the reply is the one PROTOCOL.md section 4 calls for, and
afterwards the control plane still serves: every listing, a delayed task, the bus, a task
through the SDK, and nothing logged at level error. A second test puts edge values (0, -1,
2**64 - 1, 5e-324, 1e300, inf, NaN, ...) in every number of every request.

Each frame is judged locally first with the real codec (same size limit as the control
plane): a frame that does not decode must get an ``error`` with the codec's code, a message
the port does not serve gets ``wrong_port``, and a request the port serves gets its reply op
or an ``error`` that is not ``internal``. A failure names the port and the frame in hex.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pynng
import pytest
from fuzz_port_frames import (
    CODEC,
    LIMIT,
    REGISTER_SEED,
    REPLY_OPS,
    SEED_MESSAGES,
    next_frame,
)
from harness import Cluster, Proc

import fastworker_protocol as fp

pytestmark = pytest.mark.integration

SEED = 7_700_777
MAX_WAIT = 1.0  # the control plane's --max-wait: no held submit or get outlives it
FETCH_HOLD = 5.0  # PROTOCOL.md section 7: a fetch is held at most 5 s, whatever --max-wait
REPLY_TIMEOUT = FETCH_HOLD + 5.0  # so a reply later than this is a request left unanswered
FRAMES_PER_PORT = 16_700  # six ports: 100,200 frames
CONTEXTS_PER_PORT = 5  # requests in flight per port
BUS_FRAMES = 3_000
MAX_REPORTED = 20

SUBMIT_OPS = frozenset({"submit"})
RESULTS_OPS = frozenset({"get", "cancel", "list_tasks", "list_workers", "list_schedules"})
REGISTRATION_OPS = frozenset({"register", "fetch", "report", "drain", "unregister"})
# PROTOCOL.md section 8: the reply op of each request (besides `error`)

# Nesting near Python's recursion limit: where decoding gives up depends on how deep the
# caller's own stack already is, so the control plane may say `invalid_message` (it got
# past the nesting) where this test's deeper stack says `malformed`, or the other way
# round. PROTOCOL.md section 4 allows either code for such frames.
RECURSION = "maximum recursion depth exceeded"
NEAR_THE_LIMIT = 500  # levels of nesting from which a receiver may give up
DEPTH_CODES = frozenset({"malformed", "invalid_message"})

# --- judging replies ---------------------------------------------------------------------------


def nesting_depth_at_least(frame: bytes, levels: int) -> bool:
    """Whether the frame opens ``levels`` one-element arrays or maps in a row somewhere
    (how the fuzzer nests: ``0x91`` or ``0x81 0xa1 k`` repeated), without decoding it."""
    return b"\x91" * levels in frame or b"\x81\xa1k" * levels in frame


def expected_reply(frame: bytes, serves: frozenset[str]) -> tuple[set[str], set[str]]:
    """(the error codes one of which must come back, or none; the reply ops allowed)."""
    try:
        message = CODEC.decode(frame)
    except fp.DecodeError as exc:
        if RECURSION in str(exc):
            return set(DEPTH_CODES), set()
        return {str(exc.code)}, set()
    op = fp.message_op(message)
    if op not in serves:
        return {str(fp.ErrorCode.WRONG_PORT)}, set()
    return set(), REPLY_OPS[op]


@dataclass
class Barrage:
    sent: Counter[str] = field(default_factory=Counter)  # by port name
    families: Counter[str] = field(default_factory=Counter)
    replies: Counter[str] = field(default_factory=Counter)  # by error code or reply op
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    slowest: float = 0.0

    def problem(self, port: str, frame: bytes, what: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_REPORTED:
            shown = frame.hex() if len(frame) <= 4096 else f"{frame[:64].hex()}... ({len(frame)} B)"
            self.problems.append(f"{port}: {what}; frame {shown}")

    def judge(self, port: str, serves: frozenset[str], frame: bytes, data: bytes) -> None:
        codes, ops = expected_reply(frame, serves)
        try:
            reply = CODEC.decode(data)
        except fp.DecodeError as exc:
            self.problem(port, frame, f"the reply does not decode ({exc}): {data[:200].hex()}")
            return
        got = reply.code if isinstance(reply, fp.Error) else fp.message_op(reply)
        self.replies[str(got)] += 1
        if (
            isinstance(reply, fp.Error)
            and RECURSION in reply.message
            and reply.code in DEPTH_CODES
            and nesting_depth_at_least(frame, NEAR_THE_LIMIT)
        ):
            # The control plane gave up on the nesting where we did not: PROTOCOL.md §4
            # rule 2 lets a receiver reject such a frame before reading its op.
            return
        if codes:
            if not (isinstance(reply, fp.Error) and reply.code in codes):
                self.problem(port, frame, f"expected error {sorted(codes)}, got {reply!r:.300}")
        elif isinstance(reply, fp.Error):
            if reply.code == fp.ErrorCode.INTERNAL:
                self.problem(port, frame, f"internal error: {reply.message}")
        elif got not in ops:
            self.problem(port, frame, f"expected {sorted(ops)}, got {reply!r:.300}")


async def hammer(
    socket: pynng.Req0,
    port: str,
    serves: frozenset[str],
    frames: Iterator[tuple[str, bytes]],
    barrage: Barrage,
) -> None:
    """Send frames, one request at a time on one context, until ``frames`` (shared with
    the port's other contexts) runs out."""
    context = socket.new_context()
    try:
        for family, frame in frames:
            barrage.sent[port] += 1
            barrage.families[family] += 1
            started = time.monotonic()
            try:
                await context.asend(frame)
                data = await context.arecv()
            except pynng.Timeout:
                barrage.problem(port, frame, f"no reply within {REPLY_TIMEOUT} s")
                continue
            except pynng.NNGException as exc:
                barrage.problem(port, frame, f"no reply: {type(exc).__name__}: {exc}")
                continue
            barrage.slowest = max(barrage.slowest, time.monotonic() - started)
            barrage.judge(port, serves, frame, data)
    finally:
        with contextlib.suppress(pynng.NNGException):
            context.close()


async def fire(
    cluster: Cluster, frames: Mapping[str, Iterator[tuple[str, bytes]]], barrage: Barrage
) -> list[Any]:
    """Send each port its frames over ``CONTEXTS_PER_PORT`` contexts of one socket, all ports
    at once; returns what the jobs returned (exceptions included, never cancelled).

    A ``register`` of ``fuzz-worker`` goes first on the registration socket, so that the
    fetches and reports after it come from a registered worker on a live connection."""
    ports = ports_of(cluster)
    sockets = {port: req_socket(number) for port, (number, _) in ports.items()}
    try:
        with sockets["registration"].new_context() as context:
            await context.asend(CODEC.encode(SEED_MESSAGES[REGISTER_SEED]))
            assert isinstance(CODEC.decode(await context.arecv()), fp.Registered)
        jobs = [
            hammer(sockets[port], port, ports[port][1], frames[port], barrage)
            for port in frames
            for _ in range(CONTEXTS_PER_PORT)
        ]
        return await asyncio.gather(*jobs, return_exceptions=True)
    finally:
        for socket in sockets.values():
            socket.close()


async def bus_noise(address: str, rng: random.Random, count: int) -> int:
    """Random and mutated frames on the discovery bus, where nothing is ever answered."""
    sent = 0
    with pynng.Bus0(dial=address, send_timeout=2_000, async_backend="asyncio") as bus:
        for _ in range(count):
            _, frame = next_frame(rng)
            if len(frame) > LIMIT:
                continue  # the bus has no error reply; oversize frames are just dropped
            await bus.asend(frame)
            sent += 1
    return sent


async def answers_on_the_bus(address: str) -> bool:
    """A probe on a fresh bus connection brings an announcement (within a deadline)."""
    deadline = time.monotonic() + 10.0
    with pynng.Bus0(dial=address, recv_timeout=250, async_backend="asyncio") as bus:
        while time.monotonic() < deadline:
            await bus.asend(CODEC.encode(fp.Probe(role="client")))
            try:
                data = await bus.arecv()
            except pynng.Timeout:
                continue
            try:
                if isinstance(CODEC.decode(data), fp.Announce):
                    return True
            except fp.DecodeError:
                return False
    return False


def start_control_plane(cluster: Cluster) -> Proc:
    return cluster.control_plane(
        "--max-message-size",
        str(LIMIT),
        "--max-wait",
        str(MAX_WAIT),
        "--announce-interval",  # announcements only answer probes: the bus must keep serving
        "3600",
    )


def ports_of(cluster: Cluster) -> dict[str, tuple[int, frozenset[str]]]:
    """Every REP port: name -> (port number, ops it serves), from PROTOCOL.md section 2."""
    ports = {f"submit-{p}": (cluster.base_port + p.rank, SUBMIT_OPS) for p in fp.Priority}
    ports["results"] = (cluster.base_port + 4, RESULTS_OPS)
    ports["registration"] = (cluster.base_port + 5, REGISTRATION_OPS)
    return ports


def req_socket(port: int) -> pynng.Req0:
    socket = pynng.Req0(
        dial=f"tcp://127.0.0.1:{port}",
        recv_timeout=int(REPLY_TIMEOUT * 1000),
        send_timeout=int(REPLY_TIMEOUT * 1000),
        recv_max_size=2 * LIMIT,
        async_backend="asyncio",
    )
    socket.resend_time = -1  # never send a frame twice on our behalf
    return socket


async def ask(port: int, message: fp.Message) -> fp.Message:
    with req_socket(port) as socket:
        await socket.asend(CODEC.encode(message))
        return CODEC.decode(await socket.arecv())


def logged_errors(proc: Proc) -> list[str]:
    """The control plane's log lines at level error or worse (it logs one JSON object a
    line; anything else that names a traceback counts too)."""
    errors = []
    for line in proc.output().splitlines():
        try:
            level = json.loads(line).get("level")
        except (ValueError, AttributeError):
            level = "error" if "Traceback" in line else None
        if level in ("error", "critical"):
            errors.append(line[:2000])
    return errors


async def assert_still_serving(cluster: Cluster, proc: Proc) -> None:
    """Alive; every listing answered with its reply; the scheduler releases a delayed task;
    the bus answers a probe; the SDK runs ``add``; nothing logged at level error."""
    assert proc.popen.poll() is None, "the control plane died"
    results_port = cluster.base_port + 4
    for request, reply in [
        (fp.ListWorkers(), fp.WorkerList),
        (fp.ListTasks(limit=5), fp.TaskList),
        (fp.ListSchedules(), fp.ScheduleList),
    ]:
        answer = await ask(results_port, request)
        assert isinstance(answer, reply), f"{request!r} got {answer!r}"
    delayed = fp.TaskSpec(name="add", args=[20, 22], eta=time.time() + 0.2)
    accepted = await ask(cluster.base_port + 2, fp.Submit(tasks=[delayed]))
    assert isinstance(accepted, fp.Accepted), accepted
    deadline = time.monotonic() + 15.0
    while True:
        answer = await ask(results_port, fp.Get(task_ids=accepted.task_ids, wait=MAX_WAIT))
        assert isinstance(answer, fp.Results), answer
        result = answer.results[0]
        assert result is not None
        if result.status == fp.TaskState.SUCCESS:
            assert result.result == 42
            break
        assert time.monotonic() < deadline, f"the delayed task never ran: {result!r}"
    assert await answers_on_the_bus(cluster.discovery), "the discovery bus stopped answering"
    async with cluster.client(max_message_size=LIMIT) as client:
        assert (await client.submit_task("add", [2, 3])).result == 5
    assert proc.popen.poll() is None, "the control plane died"
    assert not logged_errors(proc), "\n".join(logged_errors(proc)[:5])


def check_jobs(outcomes: list[Any]) -> None:
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


async def test_a_hundred_thousand_fuzzed_frames_on_every_port_are_all_answered(
    cluster: Cluster,
) -> None:
    proc = start_control_plane(cluster)
    async with cluster.client(max_message_size=LIMIT) as client:
        await cluster.workers(client, 1)
    barrage = Barrage()
    seeds = random.Random(SEED)
    frames = {
        port: (next_frame(rng) for _ in range(FRAMES_PER_PORT))
        for port, rng in ((p, random.Random(seeds.random())) for p in ports_of(cluster))
    }
    started = time.monotonic()
    bus_sent, jobs = await asyncio.gather(
        bus_noise(cluster.discovery, random.Random(seeds.random()), BUS_FRAMES),
        fire(cluster, frames, barrage),
    )
    elapsed = time.monotonic() - started
    check_jobs(jobs)
    total = sum(barrage.sent.values())
    print(f"\nport fuzz: {total} frames on {len(frames)} REP ports in {elapsed:.1f} s")
    print(f"  ({total / elapsed:.0f}/s, slowest reply {barrage.slowest:.2f} s), seed {SEED}")
    print(f"  per port:   {dict(barrage.sent)}")
    print(f"  by family:  {dict(barrage.families)}")
    print(f"  replies:    {dict(barrage.replies.most_common())}")
    print(f"  bus frames: {bus_sent}")
    assert total >= 100_000
    assert barrage.problem_count == 0, "\n".join(
        [f"{barrage.problem_count} problems, the first ones:", *barrage.problems]
    )
    assert sum(barrage.replies.values()) == total
    await assert_still_serving(cluster, proc)


INT_EDGES = [0, 1, -1, 2**31 - 1, 2**63 - 1, -(2**63), 2**64 - 1]
FLOAT_EDGES = [0.0, -0.0, -1.0, 5e-324, 1e-300, 1e300, math.inf, -math.inf, math.nan]


def numeric_leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every int or float inside a decoded message, but ``v``."""
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items() if path or k != "v"]
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        return [path] if is_number else []
    return [leaf for key, item in items for leaf in numeric_leaves(item, (*path, key))]


def edge_frames(schedules: bool) -> list[tuple[str, bytes]]:
    """Every request seed with each number in it replaced by each edge value in turn (ints
    and floats both: a float where an int belongs is invalid). Each ``register`` names its
    tasks afresh, so that every schedule in it starts."""
    frames: list[tuple[str, bytes]] = []
    for message in SEED_MESSAGES:
        op = fp.message_op(message)
        if op not in REPLY_OPS:
            continue
        original = msgspec.msgpack.decode(CODEC.encode(message))
        for path in numeric_leaves(original):
            if (path[-1] == "repeat_interval") != schedules:
                continue
            for edge in [*INT_EDGES, *FLOAT_EDGES]:
                obj = msgspec.msgpack.decode(CODEC.encode(message))
                box = obj
                for key in path[:-1]:
                    box = box[key]
                box[path[-1]] = edge
                if op == "register":
                    for signature in obj["tasks"]:
                        signature["name"] = f"fuzz_edge_{len(frames)}"
                frames.append((op, msgspec.msgpack.encode(obj)))
    return frames


async def sweep_edges(cluster: Cluster, schedules: bool) -> None:
    proc = start_control_plane(cluster)
    async with cluster.client(max_message_size=LIMIT) as client:
        await cluster.workers(client, 1)
    by_port: dict[str, list[tuple[str, bytes]]] = {port: [] for port in ports_of(cluster)}
    for op, frame in edge_frames(schedules):
        port = next(p for p, (_, serves) in ports_of(cluster).items() if op in serves)
        by_port[port].append((op, frame))
    barrage = Barrage()
    check_jobs(await fire(cluster, {p: iter(f) for p, f in by_port.items()}, barrage))
    total = sum(barrage.sent.values())
    print(f"\nedge values: {total} frames, replies {dict(barrage.replies.most_common())}")
    assert barrage.problem_count == 0, "\n".join(
        [f"{barrage.problem_count} problems, the first ones:", *barrage.problems]
    )
    await assert_still_serving(cluster, proc)


async def test_edge_values_in_every_number_of_every_request_leave_the_control_plane_serving(
    cluster: Cluster,
) -> None:
    await sweep_edges(cluster, schedules=False)


async def test_edge_values_of_repeat_interval_leave_the_control_plane_serving(
    cluster: Cluster,
) -> None:
    await sweep_edges(cluster, schedules=True)
