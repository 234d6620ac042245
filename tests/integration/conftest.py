"""Fixtures for the integration tests (the harness itself is in harness.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Cluster

from fastworker import Client


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for proc in c.procs:
            sys.stderr.write(f"\n--- {proc.name} (pid {proc.pid}) ---\n{proc.output()[-4000:]}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[Client]:
    """A started client against a control plane (local concurrency 4) of this test."""
    cluster.control_plane()
    async with cluster.client() as c:
        yield c
