"""Health on the HTTP ports of real control planes and subworkers: ``/healthz``,
``/readyz``, the ``--check`` healthcheck, and a taken HTTP port."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest
from harness import Cluster
from http_helpers import fastworker, get_json, wait_for_status

from fastworker.testing import free_port_block

pytestmark = pytest.mark.integration


# --- health -----------------------------------------------------------------------------------


async def test_a_ready_control_plane_answers_healthz_and_readyz(
    api: str, http: aiohttp.ClientSession
) -> None:
    assert await get_json(http, f"{api}/healthz") == (200, {"status": "ok"})
    assert await get_json(http, f"{api}/readyz") == (200, {"status": "ready"})


async def test_a_subworker_is_starting_until_a_control_plane_registers_it(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given a subworker with a metrics port and no control plane yet
    port = free_port_block(1)
    cluster.subworker("--metrics-port", str(port))
    base = f"http://127.0.0.1:{port}"
    await wait_for_status(http, f"{base}/healthz", 200)

    # Then it is alive but not ready, and its healthcheck says so
    assert await get_json(http, f"{base}/readyz") == (503, {"status": "starting"})
    check = ("subworker", "--check", "--metrics-port", str(port))
    not_ready = await fastworker(cluster, *check)
    assert not_ready.returncode == 1
    assert "503" in not_ready.stdout
    assert "starting" in not_ready.stdout

    # When a control plane starts where the subworker looks for one
    cluster.control_plane()

    # Then the subworker registers and becomes ready
    await wait_for_status(http, f"{base}/readyz", 200)
    assert await get_json(http, f"{base}/readyz") == (200, {"status": "ready"})
    ready = await fastworker(cluster, *check)
    assert (ready.returncode, ready.stdout.strip()) == (0, f"{base}/readyz: ready")


async def test_check_exits_0_when_ready_1_when_nothing_listens_and_2_without_a_port(
    api: str, cluster: Cluster
) -> None:
    ready = await fastworker(
        cluster, "control-plane", "--check", "--http-port", str(cluster.http_port)
    )
    assert (ready.returncode, ready.stdout.strip()) == (0, f"{api}/readyz: ready")

    nobody = free_port_block(1)
    refused = await fastworker(cluster, "control-plane", "--check", "--http-port", str(nobody))
    assert refused.returncode == 1
    assert f"127.0.0.1:{nobody}/readyz" in refused.stdout

    no_port = await fastworker(cluster, "subworker", "--check")
    assert no_port.returncode == 2
    assert "--metrics-port" in no_port.stderr
    http_off = await fastworker(cluster, "control-plane", "--check", "--http-port", "0")
    assert http_off.returncode == 2


async def test_a_taken_http_port_makes_the_control_plane_exit_2_naming_the_port(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given another process listening on the HTTP port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", free_port_block()))
        squatter.listen()
        port = squatter.getsockname()[1]

        # When a control plane is told to serve HTTP there
        refused = cluster.control_plane("--http-port", str(port))

        # Then it exits 2, saying which port it could not have
        assert await asyncio.to_thread(refused.wait, 20) == 2
    output = refused.output()
    assert f"127.0.0.1:{port}" in output
    assert "already in use" in output.lower()
    assert "Traceback" not in output

    # And it left its NNG ports free: a control plane can start on them at once
    cluster.control_plane()
    await wait_for_status(http, f"{cluster.http}/readyz", 200)
    async with cluster.client() as client:
        assert (await client.submit_task("add", args=(2, 3))).result == 5
