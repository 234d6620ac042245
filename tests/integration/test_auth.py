"""A shared token (``FASTWORKER_AUTH_TOKEN``): requests without it get ``unauthorized`` and
nothing else, on every socket and on the HTTP API; with it everything works; and the
token never appears in a log or in ``--help``."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import aiohttp
import msgspec
import pynng
import pytest
from harness import Cluster
from http_helpers import wait_for_status

from fastworker import Client, TaskStatus, Unauthorized
from fastworker_protocol import Codec, Error, ErrorCode, Get, Register

TOKEN = "s3cr3t-token-for-the-test-only-7f9a"


@pytest.fixture
async def guarded(cluster: Cluster) -> Cluster:
    """A control plane requiring TOKEN (its embedded subworker has it too)."""
    cluster.control_plane(env=cluster.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    async with cluster.client(auth_token=TOKEN) as client:
        await cluster.workers(client, 1)
    return cluster


def raw_request(address: str, payload: bytes) -> Error:
    codec = Codec()
    with pynng.Req0(dial=address, recv_timeout=5000, send_timeout=5000) as sock:
        sock.send(payload)
        reply = codec.decode(sock.recv())
    assert isinstance(reply, Error), reply
    return reply


async def test_with_the_token_tasks_run_and_without_it_every_request_is_unauthorized(
    guarded: Cluster,
) -> None:
    async with guarded.client(auth_token=TOKEN) as client:
        assert (await client.submit_task("add", (2, 3))).result == 5

    for token in (None, "wrong-token"):
        async with Client(guarded.discovery, timeout=10, retries=0, auth_token=token) as intruder:
            with pytest.raises(Unauthorized):
                await intruder.delay("add", 1, 1)
            with pytest.raises(Unauthorized):
                await intruder.list_workers()
            with pytest.raises(Unauthorized):
                await intruder.get_task_result("0" * 32)


def test_a_peer_without_the_token_learns_nothing_on_any_port(guarded: Cluster) -> None:
    codec = Codec()
    requests = {
        guarded.base_port + 2: Register(worker_id="x", name="x", concurrency=1, tasks=[]),
        guarded.base_port + 4: Get(task_ids=["0" * 32]),
        guarded.base_port + 5: Register(worker_id="intruder", name="x", concurrency=1, tasks=[]),
    }
    for port, message in requests.items():
        reply = raw_request(f"tcp://127.0.0.1:{port}", codec.encode(message))
        assert (reply.code, reply.message) == (
            ErrorCode.UNAUTHORIZED,
            "missing or wrong auth token",
        )
        assert reply.detail == {}
    # Not even which ops a port serves: a wrong-port request gets the same answer.
    wrong_port = raw_request(f"tcp://127.0.0.1:{guarded.base_port}", codec.encode(Get(task_ids=[])))
    assert wrong_port.code == ErrorCode.UNAUTHORIZED


def raw_reply(address: str, payload: bytes) -> bytes:
    with pynng.Req0(
        dial=address, recv_timeout=10_000, send_timeout=10_000, recv_max_size=0
    ) as sock:
        sock.send(payload)
        reply: bytes = sock.recv()
        return reply


def test_without_the_token_every_reply_is_unauthorized_whatever_else_is_wrong(
    guarded: Cluster,
) -> None:
    # Given requests wrong in every other way too, with no token or a wrong one
    enc = msgspec.msgpack.encode
    payloads = {
        "garbage": b"\xc1\xc1",
        "empty": b"",
        "truncated": enc({"op": "get", "task_ids": ["a"]})[:-2],
        "not a map": enc([1, 2, 3]),
        "unknown op": enc({"op": "explode"}),
        "missing fields": enc({"op": "submit"}),
        "wrong version": enc({"op": "get", "v": 2, "task_ids": []}),
        "wrong port": enc({"op": "register", "worker_id": "x", "name": "x", "concurrency": 1}),
        "auth not a str": enc({"op": "get", "task_ids": [], "auth": [TOKEN]}),
        "wrong token": enc({"op": "bogus", "auth": TOKEN + "x"}),
        "token one level down": enc({"op": "submit", "tasks": [{"auth": TOKEN}]}),
        "oversize": enc({"op": "submit", "tasks": [], "pad": "x" * (17 * 1024 * 1024)}),
    }
    # When each is sent to every request port
    replies = {
        (name, offset): raw_reply(f"tcp://127.0.0.1:{guarded.base_port + offset}", payload)
        for name, payload in payloads.items()
        for offset in (range(6) if name != "oversize" else (0,))
    }
    # Then every reply is the same bytes: unauthorized, its fixed message, nothing else
    assert len(set(replies.values())) == 1, {k: v[:120] for k, v in replies.items()}
    reply = Codec().decode(next(iter(replies.values())))
    assert isinstance(reply, Error)
    assert (reply.code, reply.message, reply.detail) == (
        ErrorCode.UNAUTHORIZED,
        "missing or wrong auth token",
        {},
    )
    # And with the token, the same kind of bad request is told what is wrong with it
    told = Codec().decode(
        raw_reply(f"tcp://127.0.0.1:{guarded.base_port}", enc({"op": "explode", "auth": TOKEN}))
    )
    assert isinstance(told, Error)
    assert told.code == ErrorCode.UNKNOWN_OP


async def test_a_subworker_needs_the_token_to_register(guarded: Cluster) -> None:
    without = guarded.subworker()
    guarded.subworker(env=guarded.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    async with guarded.client(auth_token=TOKEN) as client:
        await guarded.workers(client, 2)  # the embedded one and the one with the token

        # The one without stops at once, saying why (no traceback), exit code 2
        assert await asyncio.to_thread(without.wait, 30) == 2
        assert "missing or wrong auth token" in without.output()
        assert "Traceback" not in without.output()
        assert len(await client.list_workers()) == 2
        ids = [await client.delay("add", i, 1) for i in range(20)]
        results = await client.wait_results(ids, timeout=20)
        assert {r.status for r in results} == {TaskStatus.SUCCESS}


async def test_a_subworker_with_a_wrong_token_exits_with_an_error_naming_the_setting(
    guarded: Cluster,
) -> None:
    # Given a subworker started with a token the control plane does not accept
    wrong = guarded.subworker(env=guarded.env(FASTWORKER_AUTH_TOKEN="not-" + TOKEN))
    # Then it stops at once with exit code 2, naming the setting to fix, and no traceback
    assert await asyncio.to_thread(wrong.wait, 30) == 2
    assert "missing or wrong auth token (set FASTWORKER_AUTH_TOKEN" in wrong.output()
    assert "Traceback" not in wrong.output()
    assert "registration failed; retrying" not in wrong.output()


async def test_a_subworker_whose_token_is_no_longer_accepted_stops_instead_of_retrying(
    guarded: Cluster,
) -> None:
    # Given a subworker registered with the token
    worker = guarded.subworker(env=guarded.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    async with guarded.client(auth_token=TOKEN) as client:
        await guarded.workers(client, 2)
    # When the control plane comes back on the same ports with another token
    guarded.procs[0].stop()
    guarded.control_plane(env=guarded.env(FASTWORKER_AUTH_TOKEN="new-" + TOKEN))
    # Then the subworker stops with exit code 2, naming the setting, instead of retrying
    assert await asyncio.to_thread(worker.wait, 60) == 2
    assert "set FASTWORKER_AUTH_TOKEN" in worker.output()
    assert "Traceback" not in worker.output()


async def test_the_http_api_and_metrics_need_the_token_but_health_does_not(
    guarded: Cluster,
) -> None:
    base = guarded.http
    # unsafe=True: keep cookies for an IP address, as a browser does
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=10), cookie_jar=jar
    ) as http:
        await wait_for_status(http, f"{base}/readyz", 200)
        for path in ("/api/overview", "/api/tasks", "/metrics", "/"):
            async with http.get(base + path) as response:
                assert response.status == 401, path
                assert (await response.json())["error"] == "unauthorized"
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(f"{base}/api/overview", headers=bearer) as response:
            assert response.status == 200
        async with http.get(f"{base}/metrics", headers=bearer) as response:
            assert "fastworker_tasks_submitted_total" in await response.text()
        # The browser way: the token once in the address, then a cookie
        async with http.get(f"{base}/?token={TOKEN}", allow_redirects=False) as response:
            assert response.status == 302
            assert response.headers["Location"] == "/"
            assert TOKEN not in response.headers["Location"]
        async with http.get(f"{base}/api/workers") as response:  # the session keeps the cookie
            assert response.status == 200


async def test_the_token_never_appears_in_logs_or_help(guarded: Cluster) -> None:
    async with guarded.client(auth_token=TOKEN) as client:
        await client.submit_task("add", (1, 1))
    async with Client(guarded.discovery, timeout=5, retries=0) as intruder:
        with pytest.raises(Unauthorized):
            await intruder.delay("add", 1, 1)
    for proc in guarded.procs:
        proc.stop()
        assert TOKEN not in proc.output(), proc.name
    for command in ("control-plane", "subworker", "submit"):
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "fastworker.cli", command, "--help"],
            env=guarded.env(FASTWORKER_AUTH_TOKEN=TOKEN),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "--auth-token" in done.stdout
        assert TOKEN not in done.stdout + done.stderr
