"""The examples of examples/ work as their READMEs say: each runs in a copy of its folder
under ``fastworker dev`` (or Uvicorn, or Compose), and its scripts print what they promise."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
import yaml
from compose_cluster import Images, run, skip_without_docker
from examples_harness import EXAMPLES, clean_env, copy_example, dev_cluster, run_script
from harness import wait_until

from fastworker import Client, TaskStatus
from fastworker.testing import free_port_block

pytestmark = pytest.mark.integration


async def test_quickstart_runs_its_tasks_in_the_background(tmp_path: Path) -> None:
    where = copy_example("quickstart", tmp_path)
    async with dev_cluster(where, "--task-modules", "tasks") as dev:
        assert "running tasks.add, tasks.slugify, tasks.word_count" in dev.output
        out = await run_script(where, "main.py", dev.discovery)
    assert out.splitlines() == [
        "add(2, 3) = 5",
        "slugify -> 'hello-background-tasks' (success)",
        "word counts = [2, 3, 0]",
    ]


async def test_a_package_of_task_modules_is_loaded_by_dotted_names(tmp_path: Path) -> None:
    where = copy_example("task_package", tmp_path)
    async with dev_cluster(where, "--task-modules", "shop.orders", "shop.emails") as dev:
        assert "running shop.emails.send_confirmation, shop.orders.place_order" in dev.output
        out = await run_script(where, "place_order.py", dev.discovery)
    assert out.splitlines() == [
        "order: 5 items, total 9.00",
        "email: to ada: your order of 9.00 EUR is confirmed",
        "rejected: ValueError: unknown items: caviar",
    ]


async def test_the_fastapi_app_serves_under_uvicorn_with_two_workers(tmp_path: Path) -> None:
    where = copy_example("fastapi_app", tmp_path)
    async with dev_cluster(where, "--task-modules", "tasks") as dev:
        port = free_port_block(1)
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "uvicorn.log"
        uvicorn = start_uvicorn(where, port, dev.discovery, log)
        try:
            timeout = aiohttp.ClientTimeout(total=30)
            async with aiohttp.ClientSession(base, timeout=timeout) as http:
                await _serve_requests(http)
            # SIGTERM (what a process manager sends) stops the app and both its workers
            uvicorn.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(uvicorn.wait, 30) == 0
            await wait_until(
                lambda: _no_process_in_group(uvicorn.pid), 10, "uvicorn's workers to exit"
            )
        except BaseException:
            sys.stderr.write(f"\n--- uvicorn ---\n{log.read_text(errors='replace')[-4000:]}\n")
            raise
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(uvicorn.pid, signal.SIGKILL)
            uvicorn.wait()
    output = log.read_text(errors="replace")
    assert output.count("Application startup complete.") == 2  # a client in each worker
    assert output.count("Application shutdown complete.") == 2


def start_uvicorn(where: Path, port: int, discovery: str, log: Path) -> subprocess.Popen[bytes]:
    """``uvicorn app:app --workers 2`` in ``where``, in a process group of its own (its
    worker processes share it, so a test can kill them all with it)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app:app", "--workers", "2", "--port", str(port)],
            cwd=where,
            env=clean_env(FASTWORKER_DISCOVERY_ADDRESS=discovery),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def _serve_requests(http: aiohttp.ClientSession) -> None:
    """~25 requests to the example app: its own endpoints, the router and /health."""

    async def healthy() -> bool:
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get("/health") as reply:
                return reply.status == 200 and (await reply.json())["worker_count"] == 2
        return False

    await wait_until(healthy, 60, "the app to answer /health with 2 workers")

    async def signup(n: int) -> str:
        async with http.post("/signup", params={"email": f"user{n}@example.com"}) as reply:
            assert reply.status == 202, await reply.text()
            task_id: str = (await reply.json())["task_id"]
        async with http.get(f"/signup/{task_id}", params={"wait": "20"}) as reply:
            assert reply.status == 200, await reply.text()
            return str((await reply.json())["result"])

    async def fingerprint(text: str) -> str:
        body = {"args": [text], "kwargs": {"rounds": 100}, "priority": "high"}
        async with http.post("/tasks/fingerprint", json=body) as reply:
            assert reply.status == 202, await reply.text()
            task_id = (await reply.json())["task_id"]
        async with http.get(f"/tasks/{task_id}/result", params={"wait": "20"}) as reply:
            assert reply.status == 200, await reply.text()
            found = await reply.json()
        assert (found["status"], found["priority"]) == ("success", "high")
        return str(found["result"])

    sent = await asyncio.gather(*(signup(n) for n in range(10)))
    assert sent == [f"welcome email sent to user{n}@example.com" for n in range(10)]
    prints = await asyncio.gather(*(fingerprint(t) for t in ("a", "b", "a")))
    assert prints[0] == prints[2] != prints[1]
    assert len(prints[0]) == 16
    async with http.post("/tasks/no_such_task", json={}) as reply:
        assert reply.status == 404


async def _no_process_in_group(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_periodic_and_cron_tasks_are_scheduled_and_listed(tmp_path: Path) -> None:
    where = copy_example("scheduling", tmp_path)
    async with dev_cluster(where, "--task-modules", "tasks") as dev:
        async with Client(dev.discovery, timeout=20) as client:

            async def heartbeat_ran_twice() -> bool:
                schedules = {s.name: s for s in await client.list_schedules()}
                return (
                    "tasks.heartbeat" in schedules and schedules["tasks.heartbeat"].times_run >= 2
                )

            await wait_until(heartbeat_ran_twice, 15, "the 1 s heartbeat to run twice")
            before = time.time()
            schedules = {s.name: s for s in await client.list_schedules()}
            runs = [t for t in await client.list_tasks(limit=100) if t.name == "tasks.heartbeat"]
        out = await run_script(where, "schedules.py", dev.discovery)

    # Periodic tasks are named by their (module-qualified) task names
    assert set(schedules) == {
        "tasks.heartbeat",
        "tasks.purge_expired_sessions",
        "tasks.morning_report",
    }
    assert schedules["tasks.heartbeat"].spec == "every 1 s"
    assert any(r.status == TaskStatus.SUCCESS for r in runs)
    # The cron tasks are due at their next matching minute (in a few seconds of test, they
    # ran at most once: only if a tick fell in them)
    purge, report = schedules["tasks.purge_expired_sessions"], schedules["tasks.morning_report"]
    assert (purge.spec, report.spec) == ("cron */5 * * * *", "cron 0 7 * * mon-fri")
    assert purge.times_run <= 1
    assert report.times_run <= 1
    assert before - 5 < purge.next_run <= before + 5 * 60 + 1
    assert datetime.fromtimestamp(purge.next_run, UTC).minute % 5 == 0
    due = datetime.fromtimestamp(report.next_run, UTC)
    assert (due.hour, due.minute, due.second, due.weekday() < 5) == (7, 0, 0, True)
    # And the example's script lists all three, with their runs and next run
    assert out.splitlines()[0] == "3 periodic tasks"
    line = r", run \d+ times, last (never|20\S+), next 20\S+"
    expected = [
        r"tasks\.heartbeat: every 1 s",
        r"tasks\.morning_report: cron 0 7 \* \* mon-fri",
        r"tasks\.purge_expired_sessions: cron \*/5 \* \* \* \*",
    ]
    for start, got in zip(expected, out.splitlines()[1:], strict=True):
        assert re.fullmatch(start + line, got), got


async def test_callbacks_are_called_with_each_final_result(tmp_path: Path) -> None:
    where = copy_example("callbacks", tmp_path)
    async with dev_cluster(where, "--task-modules", "tasks") as dev:
        out = await run_script(where, "main.py", dev.discovery)
    lines = out.splitlines()
    assert sorted(lines) == sorted(
        [
            "queued 4 tasks; doing other work while they run",
            "callback: tasks.resize_image -> success: cat.png@300px",
            "callback: tasks.resize_image -> success: cat.png@200px",
            "callback: tasks.resize_image -> success: cat.png@100px",
            "callback: tasks.corrupt_image -> failure: OSError: cannot decode dog.png",
            "all 4 callbacks called",
        ]
    )
    assert lines[-1] == "all 4 callbacks called"


async def test_a_busy_worker_takes_the_most_urgent_task_first(tmp_path: Path) -> None:
    where = copy_example("priorities", tmp_path)
    args = ("--task-modules", "tasks", "--subworkers", "0", "--concurrency", "1")
    async with dev_cluster(where, *args) as dev:
        assert "a control plane and its own worker" in dev.output
        out = await run_script(where, "main.py", dev.discovery)
    assert out.splitlines() == [
        "worker busy; queueing low, normal, high, critical",
        "ran in order: critical, high, normal, low",
        "paged: disk full (priority critical)",
    ]


# --- examples/compose-custom-image ---------------------------------------------------------

COMPOSE_EXAMPLE = EXAMPLES / "compose-custom-image" / "compose.yaml"


def test_the_compose_example_builds_the_custom_image_from_examples_custom_image() -> None:
    spec = yaml.safe_load(COMPOSE_EXAMPLE.read_text())
    control_plane, shop = spec["services"]["control-plane"], spec["services"]["shop-subworker"]
    assert control_plane["image"].startswith("fastworker-control-plane:")
    context = (COMPOSE_EXAMPLE.parent / shop["build"]["context"]).resolve()
    assert context == EXAMPLES / "custom-image"
    dockerfile = (context / "Dockerfile").read_text()
    assert "ARG FASTWORKER_IMAGE=" in dockerfile
    assert shop["build"]["args"]["FASTWORKER_IMAGE"].startswith("fastworker-subworker:")
    assert shop["environment"]["FASTWORKER_DISCOVERY_ADDRESS"] == "tcp://control-plane:5550"


@pytest.fixture
def docker_images(request: pytest.FixtureRequest) -> Images:
    """FastWorker's images (the session's ``images``); skipped without Docker, except
    under CI, where the test fails instead, as the other container tests do."""
    skip_without_docker()
    images: Images = request.getfixturevalue("images")
    return images


async def test_compose_runs_the_control_plane_with_subworkers_of_the_custom_image(
    docker_images: Images,
) -> None:
    # Given the example's Compose project on free host ports, with the session's images
    project = f"fwexample-{uuid.uuid4().hex[:8]}"
    ports = free_port_block(11)
    env = docker_images.env(
        {
            "FASTWORKER_PORTS": f"{ports}-{ports + 10}",
            "FASTWORKER_HTTP_PORT": str(free_port_block(1)),
        }
    )
    compose = ["docker", "compose", "-p", project, "-f", str(COMPOSE_EXAMPLE)]
    try:
        # When it is started as its header says (building the shop image on the way)
        up = [*compose, "up", "-d", "--build", "--wait", "--wait-timeout", "120"]
        await asyncio.to_thread(run, *up, env=env, timeout=170)
        async with Client(address=f"tcp://127.0.0.1:{ports + 5}", timeout=30) as client:

            async def two_shop_subworkers() -> bool:
                remote = [w for w in await client.list_workers() if not w.local]
                return len(remote) == 2 and all(
                    any(name.endswith(".describe_upload") for name in w.tasks) for w in remote
                )

            await wait_until(two_shop_subworkers, 30, "the 2 shop subworkers to register")
            # Then the custom image's task runs, with the package the image installed
            result = await client.submit_task("describe_upload", (3_000_000,))
        assert (result.status, result.result) == (TaskStatus.SUCCESS, "received 3.0 MB")
    except BaseException:
        logs = await asyncio.to_thread(
            subprocess.run,
            [*compose, "logs", "--no-color", "--tail", "40"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        sys.stderr.write(f"\n--- docker compose logs ({project}) ---\n{logs.stdout}\n")
        raise
    finally:
        await asyncio.to_thread(
            run, *compose, "down", "-v", "--remove-orphans", "-t", "10", env=env, timeout=120
        )
    label = f"label=com.docker.compose.project={project}"
    assert run("docker", "ps", "-aq", "--filter", label).split() == []
