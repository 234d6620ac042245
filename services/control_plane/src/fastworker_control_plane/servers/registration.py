"""Registration server: subworker REQ -> control plane REP on base+5.

Subworkers register, then pull work with ``Fetch`` (held until there is work: the
dispatch channel), push ``Report``s of started and finished tasks, and say ``Drain`` and
``Unregister`` when they stop. See PROTOCOL.md for why this replaces SURVEYOR/RESPONDENT.
"""

from __future__ import annotations

from fastworker_control_plane.engine import Engine
from fastworker_protocol import (
    Ack,
    Drain,
    Fetch,
    Message,
    Register,
    Registered,
    Report,
    Unregister,
)

SERVES: tuple[type[Message], ...] = (Register, Fetch, Report, Drain, Unregister)
MAX_FETCH_WAIT = 5.0


class RegistrationHandler:
    def __init__(
        self,
        engine: Engine,
        instance_id: str,
        local_worker_id: str | None,
        max_fetch_wait: float = MAX_FETCH_WAIT,
    ) -> None:
        self._engine = engine
        self._instance_id = instance_id
        self._local_worker_id = local_worker_id
        self._max_fetch_wait = max_fetch_wait

    async def __call__(self, message: Message, pipe_id: int) -> Message:
        engine = self._engine
        match message:
            case Fetch(worker_id=worker_id, wait=wait, prefetch=prefetch):
                engine.heard(worker_id, pipe_id, message.received)
                if message.started or message.outcomes:
                    engine.report(worker_id, message.started, message.outcomes)
                    await engine.outbox.durable()
                return await engine.assign(worker_id, min(wait, self._max_fetch_wait), prefetch)
            case Report(worker_id=worker_id, started=started, outcomes=outcomes):
                engine.heard(worker_id, pipe_id, message.received)
                engine.report(worker_id, started, outcomes)
                await engine.outbox.durable()
                return Ack()
            case Register(worker_id=worker_id, name=name, concurrency=concurrency, tasks=tasks):
                local = worker_id == self._local_worker_id
                engine.register(
                    worker_id,
                    name,
                    concurrency,
                    tasks,
                    pipe_id,
                    local=local,
                    confirms=message.confirms,
                    queues=message.queues,
                    holding=message.holding,
                )
                return Registered(
                    worker_id=worker_id,
                    control_plane_id=self._instance_id,
                    heartbeat_timeout=engine.heartbeat_timeout,
                )
            case Drain(worker_id=worker_id):
                engine.drain(worker_id)
                return Ack()
            case Unregister(worker_id=worker_id):
                engine.remove_worker(worker_id, "unregistered")
                return Ack()
        raise AssertionError(f"unexpected {message!r}")  # ReplyServer filters by SERVES
