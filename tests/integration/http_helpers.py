"""HTTP helpers for the tests of the control plane's and subworkers' HTTP ports."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import aiohttp
from harness import Cluster, wait_until


async def get_json(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as response:
        assert response.content_type == "application/json", url
        return response.status, await response.json()


async def wait_for_status(http: aiohttp.ClientSession, url: str, status: int) -> None:
    """Poll ``url`` (not listening yet counts as not yet) until it answers ``status``."""

    async def answers() -> bool:
        try:
            async with http.get(url) as response:
                return response.status == status
        except aiohttp.ClientConnectionError:
            return False

    await wait_until(answers, 20, f"{url} to answer {status}")


async def fastworker(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fastworker.cli",
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cluster.env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())
