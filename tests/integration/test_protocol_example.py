"""PROTOCOL.md's worked example (section 16), run as written against a real control plane:
its task module, its request bytes, its `nngcat` commands (when nngcat is installed) and
its Python client, whose replies must be the ones the spec shows."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pynng
import pytest
from harness import Cluster, wait_until

pytestmark = pytest.mark.integration

SPEC = Path(__file__).resolve().parents[2] / "services" / "protocol" / "PROTOCOL.md"
# The Python example uses the msgpack package; where it is not installed, this stands in
# for the two functions it calls (same wire bytes: both write the shortest forms).
MSGPACK_SHIM = """\
import msgspec


def packb(value):
    return msgspec.msgpack.encode(value)


def unpackb(data, strict_map_key=True):
    return msgspec.msgpack.decode(data)
"""


def example() -> str:
    text = SPEC.read_text(encoding="utf-8")
    start = text.index("\n## 16. Worked example")
    return text[start : text.index("\n## ", start + 1)]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", example(), flags=re.DOTALL)


def request_bytes() -> bytes:
    return bytes.fromhex("".join(blocks("text")[0].split()))


def shown_reply() -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(blocks("json")[0])
    return reply


def start_as_documented(cluster: Cluster) -> None:
    """Write the example's demotasks.py and start the control plane as it says (on this
    test's free ports)."""
    console = blocks("console")[0]
    module = console.split("$ cat demotasks.py\n", 1)[1].split("\n$ ", 1)[0]
    (cluster.tmp / "demotasks.py").write_text(module + "\n")
    command = re.search(r"^\$ fastworker (control-plane .*)$", console, flags=re.MULTILINE)
    assert command is not None
    cluster.spawn(
        "control-plane",
        *command.group(1).split(),
        "--base-port",
        str(cluster.base_port),
        "--discovery-port",
        str(cluster.discovery_port),
    )


async def send(port: int, data: bytes) -> bytes:
    def call() -> bytes:
        with pynng.Req0(recv_timeout=20_000) as sock:
            sock.dial(f"tcp://127.0.0.1:{port}", block=True)
            sock.send(data)
            return bytes(sock.recv())

    return await asyncio.to_thread(call)


async def ready(cluster: Cluster) -> None:
    async def registered() -> bool:
        try:
            asked = msgspec.msgpack.encode({"op": "list_workers"})
            reply = await send(cluster.base_port + 4, asked)
        except pynng.NNGException:
            return False
        return bool(msgspec.msgpack.decode(reply)["workers"])

    await wait_until(registered, 20, "the control plane's own subworker")


def same_as_shown(reply: dict[str, Any]) -> None:
    """Equal to the spec's reply but for what it says varies (times and worker id)."""
    shown = shown_reply()
    varying = {"submitted_at", "started_at", "finished_at", "worker_id"}
    assert list(reply) == list(shown)
    (got,), (expected,) = reply["results"], shown["results"]
    assert list(got) == list(expected)
    assert {k: v for k, v in got.items() if k not in varying} == {
        k: v for k, v in expected.items() if k not in varying
    }
    assert got["submitted_at"] <= got["started_at"] <= got["finished_at"]
    assert re.fullmatch(r"local-[0-9a-f]{12}", got["worker_id"])


async def test_the_worked_example_gets_the_reply_the_spec_shows(cluster: Cluster) -> None:
    start_as_documented(cluster)
    await ready(cluster)

    # The request bytes, sent to the NORMAL submission port
    raw = await send(cluster.base_port + 2, request_bytes())
    said = re.search(r"the msgpack reply, (\d+) bytes, .*? starts `([0-9a-f\s]+)`", example(), re.S)
    assert said is not None
    assert len(raw) == int(said.group(1))
    assert raw.startswith(bytes.fromhex("".join(said.group(2).split())))
    same_as_shown(msgspec.msgpack.decode(raw))

    # The same bytes again: the same answer at once, the task not run again
    again = await send(cluster.base_port + 2, request_bytes())
    assert again == raw

    # To the results port: wrong_port
    wrong = msgspec.msgpack.decode(await send(cluster.base_port + 4, request_bytes()))
    assert (wrong["op"], wrong["code"]) == ("error", "wrong_port")

    # With "wait": 0 (a new id): results at once, the task as it was just queued
    zero = (
        request_bytes()
        .replace(b"example-1", b"example-2")
        .replace(bytes.fromhex("cb4014000000000000"), b"\x00")
    )
    reply = msgspec.msgpack.decode(await send(cluster.base_port + 2, zero))
    assert reply["op"] == "results"
    assert reply["results"][0]["status"] in ("queued", "assigned", "running", "success")


@pytest.mark.skipif(
    shutil.which("nngcat") is None and not os.environ.get("CI"),
    reason="nngcat (nng-utils) is not installed (scripts/bootstrap.sh installs it; CI fails)",
)
async def test_the_worked_examples_nngcat_commands_work_as_written(cluster: Cluster) -> None:
    start_as_documented(cluster)
    await ready(cluster)
    commands = [line[2:] for line in blocks("console")[1].splitlines() if line.startswith("$ ")]
    commands = [c.replace(":5557", f":{cluster.base_port + 2}") for c in commands]

    for command in commands:
        done = await asyncio.to_thread(
            subprocess.run, command, shell=True, cwd=cluster.tmp, capture_output=True, timeout=30
        )
        assert done.returncode == 0, done.stderr

    same_as_shown(msgspec.msgpack.decode((cluster.tmp / "rep.bin").read_bytes()))


async def test_the_worked_examples_python_client_prints_what_it_says(cluster: Cluster) -> None:
    start_as_documented(cluster)
    await ready(cluster)
    (program,) = blocks("python")
    expected = re.search(r"# (success 5 None)$", program, flags=re.MULTILINE)
    assert expected is not None
    for port in (5557, 5559):
        program = program.replace(f":{port}", f":{cluster.base_port + port - 5555}")
    (cluster.tmp / "example.py").write_text(program)
    env = cluster.env()
    if importlib.util.find_spec("msgpack") is None:
        shim = cluster.tmp / "shim"
        shim.mkdir()
        (shim / "msgpack.py").write_text(MSGPACK_SHIM)
        env["PYTHONPATH"] = f"{env['PYTHONPATH']}:{shim}"

    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "example.py"],
        cwd=cluster.tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == expected.group(1) + "\n"
