"""Periodic tasks whose schedules cannot run stop a worker at its start with a short
message, one line per problem and every problem at once, never a traceback: in a control
plane, a subworker, and a subworker whose registry ``@task`` never checked (filled by
hand), which a running control plane refuses while it keeps serving."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness import Cluster

from fastworker import TaskStatus

GUIDE = Path(__file__).resolve().parents[2] / "docs/guides/scheduling.md"
GUIDE_SECTION = "### A schedule that cannot run is refused where it is declared"


def guide_example() -> tuple[str, list[str]]:
    """The guide's ``tasks.py`` with bad schedules, and what it says a control plane
    started with it prints: the test holds the page to what really happens."""
    section = GUIDE.read_text(encoding="utf-8").split(GUIDE_SECTION, 1)[1]
    source = section.split("```python\n", 1)[1].split("```", 1)[0]
    said = section.split("```text\n", 1)[1].split("```", 1)[0]
    return source, said.splitlines()


# A registry filled by hand, as code older than @task's checks could: only the control
# plane can tell, when the subworker registers.
HAND_FILLED = """from fastworker import Task, default_registry


def tick() -> None: ...


def needs(x: int) -> int:
    return x


default_registry.add(Task(fn=tick, name="hand_tick", cron="0 25 * * *"))
default_registry.add(Task(fn=needs, name="hand_needs", repeat_interval=60))
"""

EXIT_USAGE = 2
DEADLINE = 30.0  # seconds to exit: it must not even bind its ports


def assert_told_every_problem(output: str, problems: list[str]) -> None:
    lines = output.splitlines()
    for problem in problems:
        assert any(problem in line for line in lines), f"{problem!r} not in:\n{output}"
    assert "Traceback" not in output


async def test_a_control_plane_with_bad_schedules_exits_saying_what_the_guide_says(
    cluster: Cluster,
) -> None:
    # Given the guide's task module, with three periodic tasks that cannot run
    source, said = guide_example()
    (cluster.tmp / "tasks.py").write_text(source)
    # When a control plane starts with it
    proc = cluster.spawn(
        "control-plane",
        "control-plane",
        "--task-modules",
        "tasks",
        "--base-port",
        str(cluster.base_port),
        "--discovery-port",
        str(cluster.discovery_port),
    )
    # Then it exits at once with a usage error, saying what the guide shows: one line per
    # problem, and no traceback
    assert await asyncio.to_thread(proc.wait, DEADLINE) == EXIT_USAGE
    assert len(said) == 4
    assert [line for line in proc.output().splitlines() if not line.startswith("{")] == said


async def test_a_subworker_with_bad_schedules_exits_naming_each_one(cluster: Cluster) -> None:
    source, said = guide_example()
    (cluster.tmp / "tasks.py").write_text(source)
    proc = cluster.spawn(
        "subworker",
        "subworker",
        "--task-modules",
        "tasks",
        "--discovery-address",
        cluster.discovery,
    )
    assert await asyncio.to_thread(proc.wait, DEADLINE) == EXIT_USAGE
    problems = said[1:]  # the first line names the command
    assert_told_every_problem(proc.output(), ["fastworker-subworker: cannot load", *problems])


async def test_the_control_plane_refuses_a_subworker_with_unchecked_bad_schedules(
    cluster: Cluster,
) -> None:
    # Given a running control plane
    cluster.control_plane()
    (cluster.tmp / "hand_filled.py").write_text(HAND_FILLED)
    # When a subworker whose registry holds two bad schedules registers
    worker = cluster.spawn(
        "subworker",
        "subworker",
        "--task-modules",
        "hand_filled",
        "--discovery-address",
        cluster.discovery,
    )
    # Then it is refused and exits saying both, and the control plane keeps serving
    assert await asyncio.to_thread(worker.wait, DEADLINE) == EXIT_USAGE
    assert_told_every_problem(
        worker.output(),
        [
            "fastworker-subworker: the control plane refused this subworker:",
            "hand_tick: bad cron expression '0 25 * * *': Bad hour",
            "hand_needs: a periodic task is called without arguments",
        ],
    )
    async with cluster.client() as client:
        result = await client.submit_task("add", args=(2, 3))
        assert (result.status, result.result) == (TaskStatus.SUCCESS, 5)
        started = [s.name for s in await client.list_schedules()]
        assert not [name for name in started if name.startswith("hand_")]
