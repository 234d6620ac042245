"""The control plane's settings: each field with a ``setting`` is also a flag of
``fastworker-control-plane`` and a ``FASTWORKER_<NAME>`` variable (see
``fastworker_common.settings``), declared here and nowhere else."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from fastworker.options import AUTH_TOKEN_HELP, queue_weights
from fastworker.tls import TLS
from fastworker_common.settings import setting
from fastworker_common.tokens import Tokens
from fastworker_control_plane.core.board_types import DEFAULT_MAX_QUEUED
from fastworker_control_plane.core.dead_letters import (
    DEFAULT_DEAD_LETTER_MAX,
    DEFAULT_DEAD_LETTER_MAX_BYTES,
    DEFAULT_DEAD_LETTER_TTL,
)
from fastworker_control_plane.core.result_cache import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SIZE,
    DEFAULT_TTL,
)
from fastworker_control_plane.core.workflows import DEFAULT_MAX_LIVE_BYTES
from fastworker_control_plane.events import DEFAULT_MAX_SUBSCRIPTIONS
from fastworker_control_plane.waiters import DEFAULT_MAX_HELD_WAITS
from fastworker_protocol import (
    DEFAULT_BASE_PORT,
    DEFAULT_DISCOVERY_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_MAX_MESSAGE_SIZE,
    PortMap,
    tcp_address,
)
from fastworker_subworker.config import RECYCLE_AFTER_TASKS, RECYCLE_OVER_MEMORY
from fastworker_subworker.processes import cpu_count

_WILDCARDS = {"0.0.0.0", "::", "*", ""}
REPLICATION_OFFSET = 6  # the replication port is the base port + 6 unless set


@dataclass(frozen=True)
class ControlPlaneConfig:
    host: str = field(
        default="127.0.0.1",
        metadata=setting("address to bind (0.0.0.0 for every interface)"),
    )
    advertise_host: str | None = field(
        default=None,
        metadata=setting(
            "host peers should dial, announced on discovery (default: --host, or "
            "this machine's hostname when binding 0.0.0.0)"
        ),
    )
    base_port: int = field(
        default=DEFAULT_BASE_PORT,
        metadata=setting("first submission port; the next five follow it"),
    )
    discovery_port: int = field(
        default=DEFAULT_DISCOVERY_PORT, metadata=setting("discovery BUS port")
    )
    local_concurrency: int = field(
        default_factory=lambda: os.cpu_count() or 1,
        metadata=setting("tasks the control plane runs itself at once (0: only subworkers run)"),
    )
    local_queues: dict[str, int] | None = field(  # None: every queue its tasks name
        default=None,
        metadata=setting(
            "queues the control plane takes the tasks it runs itself from, as a "
            "subworker's --queues (default: every queue its --task-modules' tasks name)",
            metavar="QUEUE[:WEIGHT],...",
            parse=queue_weights,
        ),
    )
    # Its own process pool (for pool="process" tasks it runs), as a subworker's.
    local_processes: int = field(
        default_factory=lambda: cpu_count(),  # looked up when called: docs/gen_cli.py hides it
        metadata=setting(
            'child processes for the @task(pool="process") tasks the control plane runs '
            "itself, as a subworker's --processes"
        ),
    )
    max_tasks_per_child: int | None = field(default=None, metadata=RECYCLE_AFTER_TASKS)
    max_memory_per_child: int | None = field(default=None, metadata=RECYCLE_OVER_MEMORY)
    shutdown_timeout: float = field(
        default=30.0,
        metadata=setting("seconds in-flight local tasks get to finish on SIGTERM"),
    )
    result_ttl: float = field(
        default=DEFAULT_TTL, metadata=setting("seconds a final result is kept")
    )
    result_max_size: int = field(
        default=DEFAULT_MAX_SIZE,
        metadata=setting("results kept at most (least recently used go first)"),
    )
    result_max_bytes: int = field(
        default=DEFAULT_MAX_BYTES,
        metadata=setting(
            "bytes of results kept at most, counted encoded (least recently used go first)"
        ),
    )
    result_keep_arguments: bool = field(
        default=False,
        metadata=setting(
            "keep finished tasks' arguments in the result cache, for the dashboard and API "
            "(default: dropped when a task finishes)"
        ),
    )
    # Tasks failed for good, kept with their arguments to be run again.
    dead_letter_max: int = field(
        default=DEFAULT_DEAD_LETTER_MAX,
        metadata=setting(
            "tasks failed for good kept in the dead-letter store at most (oldest go first)"
        ),
    )
    dead_letter_ttl: float = field(
        default=DEFAULT_DEAD_LETTER_TTL,
        metadata=setting(
            "seconds a dead letter (a task failed for good) is kept (default: 7 days)"
        ),
    )
    dead_letter_max_bytes: int = field(
        default=DEFAULT_DEAD_LETTER_MAX_BYTES,
        metadata=setting(
            "bytes of dead letters kept at most, counted encoded with their arguments "
            "(oldest go first)"
        ),
    )
    # Final workflows are kept this long (at least result_ttl) and at most this many.
    workflow_ttl: float = field(
        default=3600.0,
        metadata=setting("seconds a finished workflow's state is kept (at least --result-ttl)"),
    )
    workflow_max_finished: int = field(
        default=10_000, metadata=setting("finished workflows kept at most (oldest go first)")
    )
    workflow_max_live_bytes: int = field(
        default=DEFAULT_MAX_LIVE_BYTES,
        metadata=setting(
            "bytes unfinished workflows may hold; new ones are refused (queue_full) past it"
        ),
    )
    max_redeliveries: int = field(
        default=3,
        metadata=setting("times a task whose subworker was lost is delivered again"),
    )
    heartbeat_timeout: float = field(
        default=10.0,
        metadata=setting("seconds of silence after which a subworker is dropped"),
    )
    max_message_size: int = field(
        default=DEFAULT_MAX_MESSAGE_SIZE, metadata=setting("largest message accepted, in bytes")
    )
    max_wait: float = field(
        default=3600.0,
        metadata=setting("longest a client may ask a result request to be held, in seconds"),
    )
    max_held_waits: int = field(
        default=DEFAULT_MAX_HELD_WAITS,
        metadata=setting(
            "requests held at once waiting for tasks or workflows (about 7 KiB each); "
            "past it a wait is answered at once with what is known, and the client asks again"
        ),
    )
    max_event_streams: int = field(
        default=DEFAULT_MAX_SUBSCRIPTIONS,
        metadata=setting(
            "dashboard event streams open at once (each may queue 10,000 events, about "
            "2.5 MiB); past it a new one is refused with 503"
        ),
    )
    announce_interval: float = field(
        default=2.0, metadata=setting("seconds between discovery announcements")
    )
    max_queued: int = field(
        default=DEFAULT_MAX_QUEUED,
        metadata=setting("live tasks each priority may hold; past it submissions get queue_full"),
    )
    state_dir: str | None = field(  # the journal's directory; None keeps everything in memory
        default=None,
        metadata=setting(
            "keep tasks, results and schedules in a journal here, so they survive a "
            "restart or crash (default: in memory only)",
            metavar="PATH",
        ),
    )
    salvage_journal: bool = field(
        default=False,
        metadata=setting(
            "start even though the journal is damaged before its end: replay every intact "
            "frame, skip the damage (its tasks are lost) and keep the damaged file aside; "
            "without it such a journal is refused, untouched"
        ),
    )
    http_port: int = field(
        default=DEFAULT_HTTP_PORT,
        metadata=setting(
            "dashboard, JSON API, /metrics, /healthz and /readyz (0: off); binds --host"
        ),
    )
    # Replicated control planes (see ``ha``): None runs this one alone.
    leader_election: str | None = field(
        default=None,
        metadata=setting(
            "run as one of 2 or 3 replicas: etcd://host:2379[,host:2379]/prefix or "
            "kubernetes://[namespace/]lease-name elects the leader; followers keep a copy of "
            "its journal (needs --state-dir; default: run alone)",
            metavar="URL",
        ),
    )
    lease_duration: float = field(
        default=5.0,
        metadata=setting(
            "how long a leader's term lasts unrenewed: how soon a follower takes over "
            "from a leader that died",
            metavar="SECONDS",
        ),
    )
    sync_replicas: int = field(
        default=1,
        metadata=setting(
            "followers that must have a write on disk before it is acknowledged", metavar="N"
        ),
    )
    require_sync: bool = field(
        default=False,
        metadata=setting(
            "refuse writes while fewer than --sync-replicas followers are in sync "
            "(default: go on alone, and say so in logs, metrics and /readyz)"
        ),
    )
    replication_port: int = field(
        default=0,
        metadata=setting(
            "where a leader serves its journal to followers (0: the base port + 6)",
            metavar="PORT",
        ),
    )
    replica_id: str | None = field(
        default=None,
        metadata=setting(
            "this replica's name in metrics and the dashboard, unique among the replicas "
            "(default: host name:replication port)",
            metavar="NAME",
        ),
    )
    # Every request must carry it when set; compared in constant time, never shown.
    auth_token: str | None = field(default=None, repr=False, metadata=setting(AUTH_TOKEN_HELP))
    # Also accepted while rotating the token (never sent): the token everyone moves to.
    next_auth_token: str | None = field(
        default=None,
        repr=False,
        metadata=setting("while rotating the token: the new one, accepted as well as --auth-token"),
    )
    tls: TLS | None = None  # with a certificate and key: every TCP socket is tls+tcp://

    def __post_init__(self) -> None:
        if self.next_auth_token and not self.auth_token:
            raise ValueError("--next-auth-token is for rotating a token: set --auth-token too")
        PortMap(self.base_port)  # validates the range
        if not 0 < self.discovery_port <= 65535:
            raise ValueError(f"discovery port {self.discovery_port} is outside 1..65535")
        if self.base_port <= self.discovery_port <= PortMap(self.base_port).registration:
            raise ValueError(
                f"discovery port {self.discovery_port} collides with the "
                f"{self.base_port}..{PortMap(self.base_port).registration} range"
            )
        if not 0 <= self.http_port <= 65535:
            raise ValueError(f"HTTP port {self.http_port} is outside 0..65535")
        if self.result_max_bytes < 1:
            raise ValueError("result max bytes must be at least 1")
        if self.dead_letter_max < 1:
            raise ValueError("--dead-letter-max must be at least 1")
        if not self.dead_letter_ttl > 0:
            raise ValueError("--dead-letter-ttl must be a positive number of seconds")
        if self.dead_letter_max_bytes < 1:
            raise ValueError("--dead-letter-max-bytes must be at least 1")
        if self.max_held_waits < 0:
            raise ValueError("--max-held-waits must be >= 0")
        if self.max_event_streams < 0:
            raise ValueError("--max-event-streams must be >= 0")
        if self.max_queued < 1:
            raise ValueError("max queued must be at least 1")
        if self.local_concurrency < 0:
            raise ValueError("local concurrency must be >= 0")
        if self.leader_election is not None:
            if self.state_dir is None:
                raise ValueError(
                    "--leader-election needs --state-dir: a replica keeps the leader's "
                    "journal there"
                )
            if self.sync_replicas < 1:
                raise ValueError("sync replicas must be at least 1")
            if not 0 < self.replication_port_number <= 65535:
                raise ValueError(
                    f"replication port {self.replication_port_number} is outside 1..65535"
                )
            if self.tls is not None and self.tls.ca_file is None:
                raise ValueError(
                    "replicas with TLS need --tls-ca: a follower dials its leader's "
                    "replication port and must verify its certificate"
                )
            if self.base_port <= self.replication_port_number <= self.ports.registration:
                raise ValueError(
                    f"replication port {self.replication_port_number} collides with the "
                    f"{self.base_port}..{self.ports.registration} range"
                )

    @property
    def replication_port_number(self) -> int:
        return self.replication_port or self.base_port + REPLICATION_OFFSET

    @property
    def replica_name(self) -> str:
        """``replica_id``, else the host name and replication port (unique on a host)."""
        return self.replica_id or f"{socket.gethostname()}:{self.replication_port_number}"

    @property
    def tokens(self) -> Tokens | None:
        """The tokens requests may carry: ``auth_token``, and ``next_auth_token`` if set."""
        return None if not self.auth_token else Tokens(self.auth_token, self.next_auth_token)

    @property
    def ports(self) -> PortMap:
        return PortMap(self.base_port)

    @property
    def advertised(self) -> str:
        """The host peers should dial: never a wildcard bind address."""
        if self.advertise_host:
            return self.advertise_host
        return socket.gethostname() if self.host in _WILDCARDS else self.host

    @property
    def bind_host(self) -> str:
        return "0.0.0.0" if self.host in {"*", ""} else self.host

    def bind(self, port: int) -> str:
        return tcp_address(self.bind_host, port, tls=self.tls is not None)

    def advertise(self, port: int) -> str:
        return tcp_address(self.advertised, port, tls=self.tls is not None)
