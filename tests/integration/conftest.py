"""Fixtures for the integration tests (the harness itself is in harness.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from compose_cluster import Images, engine_problem
from harness import Cluster
from http_helpers import wait_for_status

from fastworker import Client


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.stop()
    reports = [getattr(request.node, f"rep_{when}", None) for when in ("setup", "call")]
    if any(report is not None and report.failed for report in reports):
        for proc in c.procs:
            sys.stderr.write(f"\n--- {proc.name} (pid {proc.pid}) ---\n{proc.output()[-4000:]}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)  # the cluster fixture shows logs on failure
    return report


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[Client]:
    """A started client against a control plane (local concurrency 4) of this test."""
    cluster.control_plane()
    async with cluster.client() as c:
        yield c


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


@pytest.fixture
async def api(client: Client, cluster: Cluster, http: aiohttp.ClientSession) -> str:
    """The base URL of a ready control plane (local concurrency 4), for ``client``'s tests."""
    await wait_for_status(http, f"{cluster.http}/readyz", 200)
    return cluster.http


@pytest.fixture(scope="session")
def images() -> Images:
    """FastWorker's images (and the offline stand-ins where needed), built once."""
    problem = engine_problem()
    assert problem is None, problem
    return Images.build()
