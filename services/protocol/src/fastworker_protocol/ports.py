"""The port map: every FastWorker address derives from a base port and a discovery address.

Submission ports are ``base + priority.rank`` (5555..5558 by default), results are
``base + 4`` (5559) and subworker registration ``base + 5`` (5560). Discovery is a separate
address (``tcp://127.0.0.1:5550`` by default) because it is the one thing a peer must be told.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastworker_protocol.priority import Priority

DEFAULT_BASE_PORT = 5555
DEFAULT_DISCOVERY_PORT = 5550
DEFAULT_DISCOVERY_ADDRESS = f"tcp://127.0.0.1:{DEFAULT_DISCOVERY_PORT}"
DEFAULT_HTTP_PORT = 8080
RESULTS_OFFSET = 4
REGISTRATION_OFFSET = 5


@dataclass(frozen=True, slots=True)
class PortMap:
    """The REQ/REP ports one control plane serves, computed from its base port."""

    base: int = DEFAULT_BASE_PORT

    def __post_init__(self) -> None:
        if not 0 < self.base <= 65535 - REGISTRATION_OFFSET:
            raise ValueError(f"base port {self.base} leaves no room for its 6 ports in 1..65535")

    def submission(self, priority: Priority) -> int:
        return self.base + priority.rank

    @property
    def results(self) -> int:
        return self.base + RESULTS_OFFSET

    @property
    def registration(self) -> int:
        return self.base + REGISTRATION_OFFSET


def tcp_address(host: str, port: int, *, tls: bool = False) -> str:
    """``tcp://host:port`` (``tls+tcp://`` with ``tls``), bracketing IPv6 literals."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{'tls+tcp' if tls else 'tcp'}://{host}:{port}"
