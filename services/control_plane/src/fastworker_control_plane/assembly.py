"""The control plane's composition root: its engine, the handlers behind its sockets and its
upkeep, built from one ``ControlPlaneConfig``.

``ControlPlane`` (``app``) puts the endpoints on NNG sockets; the test ``Cluster``
(``testing.cluster``) puts the same endpoints behind in-memory wires on a skipping clock.
Both build them here, so the harness runs what production runs and cannot drift from it.
The clock and the instance id are injected; what differs between the two is only the pace
of the periodic work (``Pace``), which a cluster whose clock skips days must keep sparse.

This module binds no socket and starts no task: the caller runs ``upkeep`` under its own
supervision.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

from fastworker import TaskRegistry
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflows import WorkflowBook
from fastworker_control_plane.engine import Clock, Engine
from fastworker_control_plane.servers import registration, results, submission
from fastworker_control_plane.servers.responder import Handler
from fastworker_protocol import Message, Priority


class BadTaskSchedules(ValueError):
    """This process's own tasks declare schedules that cannot run; ``problems`` has one
    line for each. Raised before any socket is bound, so the process exits saying so."""

    def __init__(self, problems: list[str]) -> None:
        lines = ["the tasks of this process declare schedules that cannot run:", *problems]
        super().__init__("\n  ".join(lines))
        self.problems = problems


@dataclass(frozen=True)
class Pace:
    """How often the periodic work runs: the upkeep every ``upkeep_interval`` seconds (a
    result-cache sweep every ``sweep_every`` of them) and a subworker's fetch held at most
    ``max_fetch_wait`` seconds."""

    upkeep_interval: float = 1.0
    sweep_every: int = 30
    max_fetch_wait: float = registration.MAX_FETCH_WAIT


@dataclass(frozen=True)
class Endpoint:
    """One request handler and the messages it serves (a socket's worth)."""

    name: str
    handler: Handler
    serves: tuple[type[Message], ...]


@dataclass(frozen=True)
class Endpoints:
    """Every endpoint of a control plane: one submission endpoint per priority, results,
    and registration (subworkers)."""

    submission: Mapping[Priority, Endpoint]
    results: Endpoint
    registration: Endpoint


def board_config(config: ControlPlaneConfig) -> BoardConfig:
    return BoardConfig(
        max_redeliveries=config.max_redeliveries,
        max_queued=config.max_queued,
        result_max_size=config.result_max_size,
        result_max_bytes=config.result_max_bytes,
        result_keep_arguments=config.result_keep_arguments,
        result_ttl=config.result_ttl,
        dead_letter_max=config.dead_letter_max,
        dead_letter_ttl=config.dead_letter_ttl,
        dead_letter_max_bytes=config.dead_letter_max_bytes,
        max_message_size=config.max_message_size,
    )


class Assembly:
    """The engine of one control plane, and what serves and maintains it."""

    def __init__(
        self,
        config: ControlPlaneConfig,
        registry: TaskRegistry,
        *,
        instance_id: str,
        clock: Clock = time.time,
        pace: Pace | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.instance_id = instance_id
        self.pace = pace or Pace()
        book = WorkflowBook(  # final workflows outlive their steps' results
            ttl=max(config.workflow_ttl, config.result_ttl),
            max_finished=config.workflow_max_finished,
            max_live_bytes=config.workflow_max_live_bytes,
        )
        self.engine = Engine(
            TaskBoard(board_config(config)),
            heartbeat_timeout=config.heartbeat_timeout,
            clock=clock,
            workflows=book,
            max_held_waits=config.max_held_waits,
            max_event_streams=config.max_event_streams,
        )

    def open(self, local_worker_id: str | None = None) -> Endpoints:
        """Learn the tasks (and their schedules) of this process before any subworker
        registers, arm the timer, and return the endpoints to serve. ``local_worker_id``:
        the embedded subworker's id, if there is one."""
        engine, max_wait = self.engine, self.config.max_wait
        own = [t.signature() for t in self.registry]
        engine.board.learn_tasks(own)
        try:
            engine.board.learn_schedules(own, engine.clock())
        except Rejected as exc:  # a registry filled by hand: @task would have refused them
            raise BadTaskSchedules(exc.message.splitlines()) from None
        engine.arm_timer()
        return Endpoints(
            submission={
                priority: Endpoint(
                    f"submit-{priority}",
                    submission.SubmissionHandler(engine, priority, max_wait),
                    submission.SERVES,
                )
                for priority in Priority.by_rank()
            },
            results=Endpoint("results", results.ResultsHandler(engine, max_wait), results.SERVES),
            registration=Endpoint(
                "registration",
                registration.RegistrationHandler(
                    engine, self.instance_id, local_worker_id, self.pace.max_fetch_wait
                ),
                registration.SERVES,
            ),
        )

    async def upkeep(self) -> None:
        """The periodic maintenance, forever (silent subworkers, expired results...)."""
        tick = 0
        while True:
            await asyncio.sleep(self.pace.upkeep_interval)
            tick += 1
            self.engine.maintain(sweep=tick % self.pace.sweep_every == 0)
