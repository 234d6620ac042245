"""Bad input on every port gets a clear error reply, and the control plane keeps serving."""

from __future__ import annotations

import asyncio
import math
import struct
from typing import Any

import aiohttp
import msgspec
import pynng
import pytest
from harness import Cluster

from fastworker import Client, InvalidArguments, UnknownTask
from fastworker_protocol import MAX_NESTING, Codec, Error, Get, Submit, TaskSpec

GARBAGE = [
    b"",
    b"\xc1",
    b"\x81\xa2op",
    b"not msgpack at all",
    b"\x93\x01\x02\x03",
    msgspec.msgpack.encode({"op": "submit", "tasks": "nope"}),
    msgspec.msgpack.encode({"no": "op"}),
]


async def _ask(address: str, payload: bytes) -> Error:
    with pynng.Req0(dial=address, recv_timeout=10_000, send_timeout=10_000) as req:
        await req.asend(payload)
        reply = Codec().decode(await req.arecv())
    assert isinstance(reply, Error), reply
    return reply


@pytest.fixture
def ports(cluster: Cluster) -> list[int]:
    return [cluster.base_port + offset for offset in range(6)]


async def test_garbage_on_every_request_port_gets_an_error_reply(
    cluster: Cluster, client: Client, ports: list[int]
) -> None:
    for port in ports:
        for payload in GARBAGE:
            error = await _ask(f"tcp://127.0.0.1:{port}", payload)
            assert error.code in {"malformed", "invalid_message"}, (port, payload, error)
            assert error.message
    assert (await client.submit_task("add", args=(1, 1))).result == 2


async def test_unknown_ops_versions_and_wrong_ports_get_their_own_codes(
    cluster: Cluster, client: Client
) -> None:
    submit_port = f"tcp://127.0.0.1:{cluster.base_port}"
    results_port = f"tcp://127.0.0.1:{cluster.base_port + 4}"
    unknown = await _ask(submit_port, msgspec.msgpack.encode({"op": "explode", "v": 1}))
    assert unknown.code == "unknown_op"
    future = await _ask(submit_port, msgspec.msgpack.encode({"op": "get", "v": 2, "task_ids": []}))
    assert future.code == "unsupported_version"
    misplaced = await _ask(submit_port, Codec().encode(Get(task_ids=["x"])))
    assert misplaced.code == "wrong_port"
    misplaced = await _ask(results_port, Codec().encode(Submit(tasks=[])))
    assert misplaced.code == "wrong_port"
    assert (await client.submit_task("add", args=(2, 2))).result == 4


async def test_an_oversize_frame_gets_an_oversize_error(cluster: Cluster) -> None:
    cluster.control_plane("--max-message-size", "4096")
    big = Codec().encode(Submit(tasks=[TaskSpec(name="echo", args=["x" * 5000])]))
    error = await _ask(f"tcp://127.0.0.1:{cluster.base_port + 2}", big)
    assert error.code == "oversize"
    async with cluster.client(max_message_size=4096) as client:
        assert (await client.submit_task("add", args=(3, 3))).result == 6


async def test_unknown_task_names_and_wrong_arguments_are_rejected_before_queueing(
    client: Client,
) -> None:
    with pytest.raises(UnknownTask, match="no_such_task"):
        await client.delay("no_such_task", 1)
    with pytest.raises(InvalidArguments, match="missing a required argument: 'y'"):
        await client.delay("add", 1)
    with pytest.raises(InvalidArguments, match="unexpected keyword argument 'z'"):
        await client.delay("add", 1, 2, z=3)
    assert await client.list_tasks() == []


async def test_garbage_on_the_discovery_bus_is_ignored(cluster: Cluster, client: Client) -> None:
    with pynng.Bus0(dial=cluster.discovery) as bus:
        for payload in GARBAGE:
            bus.send(payload)
    async with cluster.client() as another:
        assert (await another.submit_task("add", args=(4, 4))).result == 8


async def test_a_batch_with_one_bad_task_is_rejected_whole(client: Client) -> None:
    with pytest.raises(UnknownTask):
        await client.submit_batch([("add", (1, 2)), ("nope", ()), ("add", (3, 4))])
    assert await client.list_tasks() == []
    assert len(await asyncio.gather(client.delay("add", 1, 2))) == 1


async def test_one_bad_delay_among_concurrent_ones_fails_alone(client: Client) -> None:
    # Concurrent delay calls travel together in one message; each gets its own answer.
    outcomes = await asyncio.gather(
        client.delay("add", 1, 2),
        client.delay("nope"),
        client.delay("add", 1),
        client.delay("add", 3, 4),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], UnknownTask)
    assert isinstance(outcomes[2], InvalidArguments)
    good = [outcomes[0], outcomes[3]]
    assert all(isinstance(t, str) and len(t) == 32 for t in good)
    assert [r.result for r in await client.wait_results(good)] == [3, 7]  # type: ignore[arg-type]


def submit_with_arg(raw_arg: bytes, task_id: str = "") -> bytes:
    """A submit of ``echo`` whose one argument is ``raw_arg``, msgpack written by hand (the
    test's own encoder would recurse on the deep ones)."""
    frame = msgspec.msgpack.encode(
        {"op": "submit", "tasks": [{"name": "echo", "id": task_id, "args": [None]}]}
    )
    return frame.replace(b"\x91\xc0", b"\x91" + raw_arg)


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


async def test_arguments_nested_too_deep_are_invalid_arguments_and_never_run(
    cluster: Cluster, client: Client, api: str, http: aiohttp.ClientSession
) -> None:
    # Given arguments 900 arrays deep (msgpack takes them; encoders recursing may not)
    deep_id = "d" * 32
    frame = submit_with_arg(b"\x91" * 900 + b"\x00", deep_id)
    refused = await _ask(f"tcp://127.0.0.1:{cluster.base_port + 2}", frame)
    # Then they are refused as the caller's mistake, with the rule, and never queued
    assert (refused.code, refused.detail) == (
        "invalid_arguments",
        {"index": 0, "task_name": "it_tasks.echo"},  # the name it stands for
    )
    assert f"more than {MAX_NESTING} arrays and maps deep" in refused.message
    assert await client.get_task_result(deep_id) is None
    # (the SDK refuses them itself, before sending, naming the same rule)
    with pytest.raises(InvalidArguments, match=f"{MAX_NESTING} arrays and maps"):
        await client.delay("echo", nested(MAX_NESTING))
    # And the deepest arguments admitted run, and their dashboard page renders
    deepest = nested(MAX_NESTING - 1)  # the args array is the first level
    done = await client.submit_task("echo", (deepest,))
    assert done.result == deepest
    async with http.get(f"{api}/api/tasks/{done.task_id}") as response:
        assert response.status == 200
        assert (await response.json())["result"] == deepest


async def test_numbers_and_timestamps_out_of_range_are_invalid_messages_naming_the_field(
    cluster: Cluster, client: Client
) -> None:
    submit_port = f"tcp://127.0.0.1:{cluster.base_port + 2}"
    results_port = f"tcp://127.0.0.1:{cluster.base_port + 4}"
    year_10000 = b"\xc7\x0c\xff" + struct.pack(">I", 0) + struct.pack(">q", 253_402_300_800)

    def spec(**fields: Any) -> bytes:
        return Codec().encode(Submit(tasks=[TaskSpec(name="add", args=[1, 2], **fields)]))

    cases = [
        (submit_port, submit_with_arg(year_10000), "$.tasks[0].args[0]"),
        (submit_port, spec(eta=math.nan), "$.tasks[0].eta"),
        (submit_port, spec(eta=math.inf), "$.tasks[0].eta"),
        (submit_port, spec(time_limit=-1.0), "$.tasks[0].timeout"),
        (submit_port, Codec().encode(Submit(tasks=[], wait=math.nan)), "$.wait"),
        (results_port, Codec().encode(Get(task_ids=[], wait=-1.0)), "$.wait"),
    ]
    for port, frame, field in cases:
        error = await _ask(port, frame)
        assert error.code == "invalid_message", (field, error)
        assert f"at `{field}`" in error.message
    assert await client.list_tasks() == []
