"""PROTOCOL.md's small per-operation examples (the ```json title="example: <op> request"```
and ``... reply`` blocks), each request sent as written, in raw pynng + msgpack, to one
real control plane, and each shown reply compared with the real one: the same `op`, the
same keys, and values of the same msgpack type (maps recursively, arrays item by item).
Values themselves vary (ids, times) and are not compared; section 16's worked example,
whose values are, is tests/integration/test_protocol_example.py."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import msgspec
import pynng
import pytest
from harness import Cluster, wait_until

pytestmark = pytest.mark.integration

SPEC = Path(__file__).resolve().parents[2] / "services" / "protocol" / "PROTOCOL.md"
EXAMPLE = re.compile(r'```json title="example: (\w+) (request|reply)[^"]*"\n(.*?)```', re.DOTALL)

# Every operation a client or subworker sends, in the order the test sends them: later
# examples build on earlier ones (the schedule listed is the one added, the dead letter the
# task the raw worker fetched and failed).
CLIENT_OPS = [
    "submit",
    "get",
    "cancel",
    "list_tasks",
    "add_schedule",
    "list_schedules",
    "remove_schedule",
    "queue_action",
    "list_queues",
    "set_limit",
    "list_limits",
    "submit_workflow",
    "get_workflow",
    "cancel_workflow",
]
WORKER_OPS = ["register", "fetch", "report", "drain", "unregister"]
DEAD_LETTER_OPS = ["list_failed", "retry_failed", "purge_failed"]
SUBMISSION_OPS = {"submit", "submit_workflow"}  # to the NORMAL port; the rest: results port
ORDER = [
    "register",
    *CLIENT_OPS[:7],
    "list_workers",
    *CLIENT_OPS[7:11],
    "fetch",
    "report",
    *DEAD_LETTER_OPS,
    "drain",
    "unregister",
    *CLIENT_OPS[11:],
    "probe",
]

Examples = dict[str, dict[str, dict[str, Any]]]


def examples() -> Examples:
    """``{op: {"request": ..., "reply": ...}}`` from every example block of the spec."""
    found: Examples = {}
    for op, which, body in EXAMPLE.findall(SPEC.read_text(encoding="utf-8")):
        pair = found.setdefault(op, {})
        assert which not in pair, f"two example {which}s for {op}"
        pair[which] = json.loads(body)
    return found


def kind(value: Any) -> str:
    """A value's msgpack type, as a reader would see it (int and float apart)."""
    for python, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if isinstance(value, python):
            return name
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "map"
    assert value is None, f"not a msgpack value: {value!r}"
    return "nil"


def differences(shown: Any, real: Any, where: str) -> list[str]:
    """Where the shown value's shape differs from the real one's."""
    if kind(shown) != kind(real):
        return [f"{where}: shown {kind(shown)} {shown!r}, real {kind(real)} {real!r}"]
    if isinstance(shown, dict):
        if set(shown) != set(real):
            only_shown, only_real = sorted(set(shown) - set(real)), sorted(set(real) - set(shown))
            return [f"{where}: keys only shown {only_shown}, only in the real reply {only_real}"]
        return [d for key in shown for d in differences(shown[key], real[key], f"{where}.{key}")]
    if isinstance(shown, list) and shown:
        if not real:
            return [f"{where}: shown {len(shown)} items, the real array is empty"]
        # item i against the real item i, or the first one when the real array is shorter
        pairs = [(item, real[i] if i < len(real) else real[0]) for i, item in enumerate(shown)]
        return [d for i, (a, b) in enumerate(pairs) for d in differences(a, b, f"{where}[{i}]")]
    return []


class Peer:
    """Raw REQ calls to one control plane; the worker's calls share one connection (a
    worker whose connection closes is removed)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.worker = pynng.Req0(recv_timeout=20_000)

    def address(self, offset: int) -> str:
        return f"tcp://127.0.0.1:{self.cluster.base_port + offset}"

    async def call(self, offset: int, request: dict[str, Any]) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            with pynng.Req0(recv_timeout=20_000) as sock:
                sock.dial(self.address(offset), block=True)
                sock.send(msgspec.msgpack.encode(request))
                reply: dict[str, Any] = msgspec.msgpack.decode(sock.recv())
                return reply

        return await asyncio.to_thread(call)

    async def as_worker(self, request: dict[str, Any]) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            self.worker.send(msgspec.msgpack.encode(request))
            reply: dict[str, Any] = msgspec.msgpack.decode(self.worker.recv())
            return reply

        return await asyncio.to_thread(call)

    async def probe(self, request: dict[str, Any], timeout: float = 20.0) -> dict[str, Any]:
        """Send the probe on the discovery bus until an announcement comes back."""

        def call() -> dict[str, Any]:
            deadline = time.monotonic() + timeout
            with pynng.Bus0(recv_timeout=250) as bus:
                bus.dial(self.cluster.discovery, block=True)
                while time.monotonic() < deadline:
                    bus.send(msgspec.msgpack.encode(request))
                    try:
                        heard: dict[str, Any] = msgspec.msgpack.decode(bus.recv())
                    except pynng.Timeout:
                        continue
                    if heard.get("op") == "announce":
                        return heard
            raise AssertionError(f"no announce within {timeout} s of probing")

        return await asyncio.to_thread(call)

    async def send(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        if op == "probe":
            return await self.probe(request)
        if op in WORKER_OPS:
            return await self.as_worker(request)
        return await self.call(2 if op in SUBMISSION_OPS else 4, request)

    async def submit(self, spec: dict[str, Any]) -> None:
        reply = await self.call(2, {"op": "submit", "tasks": [spec]})
        assert reply["op"] == "accepted", reply

    async def ready(self) -> None:
        async def registered() -> bool:
            try:
                reply = await self.call(4, {"op": "list_workers"})
            except pynng.NNGException:
                return False
            return bool(reply.get("workers"))

        await wait_until(registered, 20, "the control plane's own subworker")
        self.worker.dial(self.address(5), block=True)


def fetched_spec() -> dict[str, Any]:
    """The task the fetch example's lead says a client submitted first."""
    text = SPEC.read_text(encoding="utf-8")
    lead = re.search(
        r"after a client submitted `(\{[^`]*\})`:\n\n```json title=\"example: fetch", text
    )
    assert lead is not None, "the fetch example no longer says which task it fetches"
    spec: dict[str, Any] = json.loads(lead.group(1))
    return spec


def test_every_operation_has_one_example_request_and_reply() -> None:
    found = examples()

    assert sorted(found) == sorted(ORDER)
    for op, pair in found.items():
        assert set(pair) == {"request", "reply"}, op
        assert pair["request"]["op"] == op


async def test_every_example_reply_has_the_keys_and_types_of_the_real_reply(
    cluster: Cluster,
) -> None:
    found = examples()
    cluster.control_plane()
    peer = Peer(cluster)
    problems: list[str] = []
    try:
        await peer.ready()
        for op in ORDER:
            # Given what the example's lead says came before it
            if op == "cancel":
                await peer.submit(
                    {"name": "add", "id": "ex-later", "args": [1, 1], "eta": time.time() + 3600}
                )
            if op == "fetch":
                await peer.submit(fetched_spec())

            # When the example request is sent as written
            real = await peer.send(op, found[op]["request"])

            # Then the real reply has the example reply's op, keys and value types
            shown = found[op]["reply"]
            if real.get("op") != shown["op"]:
                problems.append(f"{op}: shown op {shown['op']!r}, real reply {real!r}")
            else:
                problems += differences(shown, real, op)
    finally:
        peer.worker.close()

    assert not problems, "\n".join(problems)
