"""Parses ``--leader-election`` URLs and checks lease timings; no I/O.

Two forms are accepted::

    etcd://host:2379[,host2:2379...]/prefix
    kubernetes://[namespace/]lease-name

Timings follow client-go's leader election: a leader must renew within ``renew_deadline``
(shorter than ``lease_duration``) or stop leading, and candidates retry every
``retry_period``. Unset, they are 2/3 and 1/5 of the lease duration: 2/3 is client-go's own
ratio (10 s of 15 s), leaving a third of the lease as margin between the moment a leader
fences itself and the moment another candidate may take the lease; 1/5 (1 s for the default
5 s) gives a leader at least three renewal attempts before its deadline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

DEFAULT_LEASE_DURATION = 5.0
RENEW_DEADLINE_RATIO = 2 / 3
RETRY_PERIOD_RATIO = 1 / 5
# client-go requires renew_deadline > JitterFactor * retry_period, with JitterFactor 1.2.
JITTER_FACTOR = 1.2

_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")
# A Kubernetes object name and namespace: DNS-1123 subdomain / label.
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_K8S_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """How long a term lasts unrenewed, when its leader gives up, how often to retry."""

    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_LEASE_DURATION * RENEW_DEADLINE_RATIO
    retry_period: float = DEFAULT_LEASE_DURATION * RETRY_PERIOD_RATIO

    def __post_init__(self) -> None:
        if not self.lease_duration > 0:
            raise ValueError(f"lease duration must be positive, not {self.lease_duration}")
        if not 0 < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"renew deadline ({self.renew_deadline} s) must be positive and shorter than "
                f"the lease duration ({self.lease_duration} s)"
            )
        if not 0 < self.retry_period * JITTER_FACTOR < self.renew_deadline:
            raise ValueError(
                f"retry period ({self.retry_period} s) must be positive and, times "
                f"{JITTER_FACTOR}, shorter than the renew deadline ({self.renew_deadline} s)"
            )

    @classmethod
    def from_lease(
        cls,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float | None = None,
        retry_period: float | None = None,
    ) -> LeaseTiming:
        """Timings with the unset ones proportional to ``lease_duration``."""
        return cls(
            lease_duration=lease_duration,
            renew_deadline=(
                lease_duration * RENEW_DEADLINE_RATIO if renew_deadline is None else renew_deadline
            ),
            retry_period=(
                lease_duration * RETRY_PERIOD_RATIO if retry_period is None else retry_period
            ),
        )


@dataclass(frozen=True, slots=True)
class EtcdTarget:
    """etcd v3 endpoints (``host:port``, tried in order) and the key prefix of the election."""

    endpoints: tuple[str, ...]
    prefix: str

    @property
    def leader_key(self) -> str:
        return f"{self.prefix}/leader"

    @property
    def alone_key(self) -> str:
        """Present while a term may acknowledge writes its followers lack."""
        return f"{self.prefix}/alone"


@dataclass(frozen=True, slots=True)
class KubernetesTarget:
    """A ``coordination.k8s.io/v1`` Lease; namespace None means the pod's own namespace."""

    namespace: str | None
    name: str


ElectionTarget = EtcdTarget | KubernetesTarget


def parse_election_url(url: str) -> ElectionTarget:
    """The coordinator named by ``url``; a ``ValueError`` saying what is wrong otherwise."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(
            f"leader election URL {url!r} has no scheme: use etcd://host:2379/prefix "
            "or kubernetes://[namespace/]lease-name"
        )
    if scheme == "etcd":
        return _parse_etcd(url, rest)
    if scheme == "kubernetes":
        return _parse_kubernetes(url, rest)
    raise ValueError(
        f"leader election URL {url!r}: unknown scheme {scheme!r} (etcd:// or kubernetes://)"
    )


def _parse_etcd(url: str, rest: str) -> EtcdTarget:
    hosts, slash, path = rest.partition("/")
    if "?" in rest or "#" in rest or "@" in hosts:
        raise ValueError(f"etcd URL {url!r}: no user, query or fragment is accepted")
    endpoints = tuple(h.strip() for h in hosts.split(",")) if hosts else ()
    if not endpoints:
        raise ValueError(f"etcd URL {url!r} names no host: etcd://host:2379/prefix")
    for endpoint in endpoints:
        match = _HOST.match(endpoint)
        if match is None:
            raise ValueError(f"etcd URL {url!r}: {endpoint!r} is not host:port")
        if not 0 < int(match.group(2)) < 65536:
            raise ValueError(f"etcd URL {url!r}: port of {endpoint!r} out of range")
    prefix = unquote(path).strip("/")
    if not slash or not prefix:
        raise ValueError(f"etcd URL {url!r} names no key prefix: etcd://host:2379/prefix")
    return EtcdTarget(endpoints=endpoints, prefix="/" + prefix)


def _parse_kubernetes(url: str, rest: str) -> KubernetesTarget:
    parts = rest.split("/")
    if len(parts) == 1:
        namespace, name = None, parts[0]
    elif len(parts) == 2:
        namespace, name = parts[0], parts[1]
        if not _K8S_NAMESPACE.match(namespace):
            raise ValueError(f"kubernetes URL {url!r}: {namespace!r} is not a namespace name")
    else:
        raise ValueError(f"kubernetes URL {url!r}: use kubernetes://[namespace/]lease-name")
    if not name or not _K8S_NAME.match(name):
        raise ValueError(
            f"kubernetes URL {url!r}: {name!r} is not a Lease name "
            "(lower-case letters, digits, '-' and '.')"
        )
    return KubernetesTarget(namespace=namespace, name=name)
