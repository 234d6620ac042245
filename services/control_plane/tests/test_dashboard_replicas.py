"""``GET /api/replicas`` and the stream's ``replicas`` event (docs/http-api.md): the document
built from a replica set (pure), the reader of a live leader's replication (a real journal
and tracker, acknowledged as a follower would), and the route behind the token on
aiohttp's in-process test server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from view_world import ME, NOW, FakeClock, is_json, make_engine

from fastworker_common.web import WebServer
from fastworker_control_plane.dashboard import replicas, routes
from fastworker_control_plane.dashboard.routes import DashboardRoutes
from fastworker_control_plane.durability.entries import snapshot
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.ha.leader import (
    FollowerStatus,
    LeaderReplication,
    Leadership,
    ReplicationSettings,
)
from fastworker_control_plane.replication.tracker import Lag, Mode

TOKEN = "test-token-for-the-replica-routes"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CAUGHT_UP = Lag(commits=0, frames=0, bytes=0, seconds=0.0)
BEHIND = Lag(commits=3, frames=120, bytes=48_213, seconds=7.5)


def replica_set(*followers: FollowerStatus, mode: Mode = Mode.REPLICATED) -> replicas.ReplicaSet:
    return replicas.ReplicaSet(
        leader="a",
        candidate="a-5f0c9e1d",
        epoch=3,
        mode=mode,
        sync_replicas=1,
        followers=followers,
    )


# --- the document, pure ---------------------------------------------------------------------


def test_a_control_plane_alone_is_not_replicated() -> None:
    assert replicas.document(None) == {"replicated": False}
    assert replicas.document(replicas.alone()) == {"replicated": False}


def test_a_leader_lists_itself_first_then_its_followers_by_name_with_their_lag() -> None:
    # Given a leader whose follower "c" is behind and "b" has everything
    found = replica_set(
        FollowerStatus("c", in_sync=False, lag=BEHIND, durable=1_000),
        FollowerStatus("b", in_sync=True, lag=CAUGHT_UP, durable=49_213),
    )

    # When its document is built
    document = replicas.document(found)

    # Then it names the term, the mode, and each replica with its role, sync state and lag
    assert document == {
        "replicated": True,
        "epoch": 3,
        "mode": "replicated",
        "sync_replicas": 1,
        "replicas": [
            {"name": "a", "role": "leader", "candidate": "a-5f0c9e1d"},
            {
                "name": "b",
                "role": "follower",
                "in_sync": True,
                "lag_frames": 0,
                "lag_bytes": 0,
                "lag_seconds": 0.0,
            },
            {
                "name": "c",
                "role": "follower",
                "in_sync": False,
                "lag_frames": 120,
                "lag_bytes": 48_213,
                "lag_seconds": 7.5,
            },
        ],
    }
    assert is_json(document)


@pytest.mark.parametrize("mode", list(Mode))
def test_the_mode_is_said_as_the_metrics_say_it(mode: Mode) -> None:
    assert replicas.document(replica_set(mode=mode))["mode"] == mode.value


def test_a_leader_without_followers_lists_only_itself() -> None:
    document = replicas.document(replica_set(mode=Mode.ALONE))

    assert document["replicas"] == [{"name": "a", "role": "leader", "candidate": "a-5f0c9e1d"}]
    assert document["mode"] == "alone"


# --- the reader of a live leader ------------------------------------------------------------


def test_a_control_plane_without_leadership_reads_as_alone() -> None:
    assert replicas.reader("a", None, None)() is None


async def test_the_reader_follows_a_leaders_followers_as_they_acknowledge(tmp_path: Path) -> None:
    # Given a leader's replication over a real journal, no follower heard from yet
    engine = make_engine()
    clock = FakeClock()
    journal = Journal(tmp_path)
    journal.load()
    journal.start(lambda: snapshot(engine.board, NOW))
    settings = ReplicationSettings(sync_replicas=1)
    replication = LeaderReplication(
        journal, 7, lambda: True, settings, on_step_down=lambda epoch: None, clock=clock
    )
    leadership = Leadership(
        candidate_id="a-1234abcd",
        epoch=7,
        leading=lambda: True,
        settings=settings,
        on_step_down=lambda epoch: None,
    )
    read = replicas.reader("a", leadership, replication)
    try:
        alone = replicas.document(read())
        assert alone["mode"] == "alone"
        assert alone["epoch"] == 7
        assert [r["name"] for r in alone["replicas"]] == ["a"]

        # When follower "b" acknowledges the whole journal
        replication.tracker.acked("b", replication.tracker.log_id, journal.size, clock())
        replication.release()

        # Then it is listed in sync with no lag, and writes are replicated
        document = replicas.document(read())
        assert document["mode"] == "replicated"
        assert document["replicas"][1] == {
            "name": "b",
            "role": "follower",
            "in_sync": True,
            "lag_frames": 0,
            "lag_bytes": 0,
            "lag_seconds": 0.0,
        }

        # And once it has been silent past the lag bound, it is out of sync
        clock.now += settings.lag_bound + 1
        replication.release()
        late = replicas.document(read())
        assert late["mode"] == "alone"
        assert late["replicas"][1]["in_sync"] is False
    finally:
        replication.close()
        engine.close()
        await journal.close()


# --- the route and the stream ---------------------------------------------------------------


@pytest.fixture
async def engine(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Engine]:
    monkeypatch.setattr(routes, "FLUSH_INTERVAL", 0.01)  # a snapshot every 0.05 s
    engine = make_engine()
    yield engine
    engine.close()


def serve(engine: Engine, read: replicas.Reader) -> TestClient[Any, Any]:
    web = WebServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        lambda: None,
        DashboardRoutes(engine, ME, read).routes(),
        auth=TOKEN,
    )
    return TestClient(TestServer(web.app))


async def test_get_replicas_answers_the_document_and_needs_the_token(engine: Engine) -> None:
    found = replica_set(FollowerStatus("b", in_sync=True, lag=CAUGHT_UP, durable=10))
    async with serve(engine, lambda: found) as http:
        refused = await http.get("/api/replicas")
        assert refused.status == 401

        answered = await http.get("/api/replicas", headers=AUTH)
        assert answered.status == 200
        assert answered.content_type == "application/json"
        assert await answered.json() == replicas.document(found)


async def test_get_replicas_of_a_control_plane_alone_says_so(engine: Engine) -> None:
    async with serve(engine, replicas.alone) as http:
        answered = await http.get("/api/replicas", headers=AUTH)
        assert await answered.json() == {"replicated": False}


async def stream_events(http: TestClient[Any, Any], snapshots: int) -> list[tuple[str, Any]]:
    """The events of ``/api/events`` until its ``snapshots``-th snapshot's group ends (the
    next snapshot begins), as (kind, data)."""
    seen: list[tuple[str, Any]] = []
    async with (
        asyncio.timeout(10),
        http.get("/api/events", headers=AUTH) as response,
    ):
        kind = ""
        while True:
            line = (await response.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                if kind == "snapshot" and sum(k == "snapshot" for k, _ in seen) == snapshots:
                    return seen
                seen.append((kind, json.loads(line.removeprefix("data: "))))


async def test_the_stream_sends_a_leaders_replicas_after_each_snapshot(engine: Engine) -> None:
    found = replica_set(FollowerStatus("b", in_sync=True, lag=CAUGHT_UP, durable=10))
    async with serve(engine, lambda: found) as http:
        events = await stream_events(http, snapshots=2)

    kinds = [kind for kind, _ in events if kind != "tasks"]
    assert kinds == ["snapshot", "queues", "replicas"] * 2
    assert events[2][1] == replicas.document(found)


async def test_the_stream_of_a_control_plane_alone_sends_no_replicas(engine: Engine) -> None:
    async with serve(engine, replicas.alone) as http:
        events = await stream_events(http, snapshots=2)

    assert [kind for kind, _ in events if kind != "tasks"] == ["snapshot", "queues"] * 2
