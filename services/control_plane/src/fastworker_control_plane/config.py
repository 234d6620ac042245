"""The control plane's settings; every one is also a CLI flag and a FASTWORKER_ variable."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from fastworker.tls import TLS
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
from fastworker_subworker.processes import cpu_count

_WILDCARDS = {"0.0.0.0", "::", "*", ""}
REPLICATION_OFFSET = 6  # the replication port is the base port + 6 unless set


@dataclass(frozen=True)
class ControlPlaneConfig:
    host: str = "127.0.0.1"
    advertise_host: str | None = None
    base_port: int = DEFAULT_BASE_PORT
    discovery_port: int = DEFAULT_DISCOVERY_PORT
    local_concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    local_queues: dict[str, int] | None = None  # what it runs itself (None: all its tasks name)
    # Its own process pool (for pool="process" tasks it runs), as a subworker's.
    local_processes: int = field(default_factory=cpu_count)
    max_tasks_per_child: int | None = None
    max_memory_per_child: int | None = None  # MiB
    shutdown_timeout: float = 30.0
    result_ttl: float = DEFAULT_TTL
    result_max_size: int = DEFAULT_MAX_SIZE
    result_max_bytes: int = DEFAULT_MAX_BYTES
    result_keep_arguments: bool = False  # finished tasks keep their args/kwargs in the cache
    # Tasks failed for good, kept with their arguments to be run again.
    dead_letter_max: int = DEFAULT_DEAD_LETTER_MAX
    dead_letter_ttl: float = DEFAULT_DEAD_LETTER_TTL
    dead_letter_max_bytes: int = DEFAULT_DEAD_LETTER_MAX_BYTES
    max_redeliveries: int = 3
    # Final workflows are kept this long (at least result_ttl) and at most this many.
    workflow_ttl: float = 3600.0
    workflow_max_finished: int = 10_000
    # Workflows not final may hold this many bytes; new ones are refused (queue_full) past it.
    workflow_max_live_bytes: int = DEFAULT_MAX_LIVE_BYTES
    max_queued: int = DEFAULT_MAX_QUEUED  # live tasks per priority before queue_full
    heartbeat_timeout: float = 10.0
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_wait: float = 3600.0
    # Requests held at once (task and workflow waits); past it a wait is answered at once.
    max_held_waits: int = DEFAULT_MAX_HELD_WAITS
    max_event_streams: int = DEFAULT_MAX_SUBSCRIPTIONS  # dashboard event streams at once
    announce_interval: float = 2.0
    # Every request must carry it when set; compared in constant time, never shown.
    auth_token: str | None = field(default=None, repr=False)
    # Also accepted while rotating the token (never sent): the token everyone moves to.
    next_auth_token: str | None = field(default=None, repr=False)
    http_port: int = DEFAULT_HTTP_PORT  # dashboard, API, /metrics, health; 0 turns it off
    state_dir: str | None = None  # the journal's directory; None keeps everything in memory
    # Replay a journal damaged mid-file (skipping the damage) instead of refusing to start.
    salvage_journal: bool = False
    tls: TLS | None = None  # with a certificate and key: every TCP socket is tls+tcp://
    # Replicated control planes (see ``ha``): None runs this one alone.
    leader_election: str | None = None  # etcd://host:2379/prefix, kubernetes://[ns/]lease
    lease_duration: float = 5.0
    sync_replicas: int = 1  # followers whose fsync an acknowledgement waits for
    require_sync: bool = False  # refuse writes (not go on alone) with too few in sync
    replication_port: int = 0  # 0: base port + 6
    replica_id: str | None = None  # this replica's name (default: host:replication port)

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
