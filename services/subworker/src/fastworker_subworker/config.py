"""The subworker's settings: each field with a ``setting`` is also a flag of
``fastworker-subworker`` and a ``FASTWORKER_<NAME>`` variable (see
``fastworker_common.settings``), declared here and nowhere else."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from fastworker.options import AUTH_TOKEN_HELP, queue_weights
from fastworker.tls import TLS
from fastworker_common.settings import setting
from fastworker_protocol import DEFAULT_DISCOVERY_ADDRESS, DEFAULT_MAX_MESSAGE_SIZE
from fastworker_subworker.processes import PoolOptions, cpu_count

# When a process pool's children are replaced: the control plane's own pool takes the same.
RECYCLE_AFTER_TASKS = setting(
    "replace a child process after it has run N tasks (none: never)", metavar="N"
)
RECYCLE_OVER_MEMORY = setting(
    "replace a child process, between tasks, once its resident memory is over MIB "
    "mebibytes (none: never)",
    metavar="MIB",
)


def _default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class SubworkerConfig:
    discovery_address: str = field(
        default=DEFAULT_DISCOVERY_ADDRESS,
        metadata=setting(
            "the control plane's discovery BUS (the only setting a subworker needs); "
            "replicated control planes: each replica's, comma-separated"
        ),
    )
    concurrency: int = field(
        default_factory=lambda: os.cpu_count() or 1, metadata=setting("tasks run at once")
    )
    # The process pool (started only when a task has pool="process"): its children, and
    # when one is recycled: after this many tasks, or past this resident memory (MiB).
    processes: int = field(
        default_factory=lambda: cpu_count(),  # looked up when called: docs/gen_cli.py hides it
        metadata=setting(
            'child processes for tasks declared @task(pool="process"), started only if '
            "there are some (the CPU count by default)"
        ),
    )
    max_tasks_per_child: int | None = field(default=None, metadata=RECYCLE_AFTER_TASKS)
    max_memory_per_child: int | None = field(default=None, metadata=RECYCLE_OVER_MEMORY)
    # Queues served, -> weight in the fair share (None: every queue its tasks name).
    queues: dict[str, int] | None = field(
        default=None,
        metadata=setting(
            "queues to take tasks from, with their weights in its fair share "
            "(e.g. reports:1,default:4; default: every queue its tasks name)",
            metavar="QUEUE[:WEIGHT],...",
            parse=queue_weights,
        ),
    )
    shutdown_timeout: float = field(
        default=30.0,
        metadata=setting("seconds in-flight tasks get to finish on SIGTERM before cancellation"),
    )
    name: str = field(
        default_factory=_default_name,
        metadata=setting("display name (default host:pid)", late=True),
    )
    max_message_size: int = field(
        default=DEFAULT_MAX_MESSAGE_SIZE, metadata=setting("largest message accepted, in bytes")
    )
    metrics_port: int | None = field(
        default=None,
        metadata=setting("serve /metrics, /healthz and /readyz on this HTTP port (default: off)"),
    )
    metrics_host: str = field(
        default="127.0.0.1",
        metadata=setting("address the HTTP port binds (0.0.0.0 in a container)"),
    )
    # The control plane's shared token, when it requires one (never shown in a repr).
    auth_token: str | None = field(default=None, repr=False, metadata=setting(AUTH_TOKEN_HELP))
    tls: TLS | None = None  # for tls+tcp:// control planes: the CA (and own certificate)
    fetch_wait: float = 1.0
    request_timeout: float = 10.0

    def pool_options(self) -> PoolOptions:
        memory = self.max_memory_per_child
        return PoolOptions(
            self.processes, self.max_tasks_per_child, None if memory is None else memory << 20
        )
