"""The replication link between control plane replicas is only for replicas: real
processes elected through a real etcd, with mutual TLS or a shared token.

With mutual TLS (a CA of the test, a certificate per replica) replicas elect, replicate and
fail over as over TCP. A peer without a certificate of that CA, dialing the replication
port, gets nothing of the journal (the handshake fails), a follower trusting another CA
never follows, and a replica given a certificate but no CA refuses to start. With a token,
a replication request without it is answered with a refusal that carries no journal data.
A raw dialer that does hold the credentials gets the journal: the refusals are the
credentials' doing, not the dialer's.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pynng
import pytest
import trustme
from etcd_server import EtcdServer, runnable
from ha_cluster import Replica, Replicas
from harness import Cluster, Proc, wait_until

from fastworker import TLS, Client, TaskStatus
from fastworker_control_plane.config import REPLICATION_OFFSET
from fastworker_control_plane.replication import messages as m

pytestmark = pytest.mark.skipif(not runnable(), reason="etcd-server is not installed")

TOKEN = "ha-security-token-8e2f"
MARKER = "journal-marker-5b7c91"  # an argument of a task: in the journal's bytes once acked
NAMES = ("a", "b")


@dataclass(frozen=True)
class Pair:
    cert: str
    key: str


@dataclass(frozen=True)
class Certs:
    ca: str
    replicas: dict[str, Pair]  # one per replica, for 127.0.0.1 (it listens and dials)
    peer: Pair  # subworkers and clients (mutual TLS)
    stranger_ca: str
    stranger: Pair  # for 127.0.0.1, signed by the stranger CA


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    where = tmp_path_factory.mktemp("certs")
    ca, stranger_ca = trustme.CA(), trustme.CA()

    def pair(name: str, issued: trustme.LeafCert) -> Pair:
        cert, key = where / f"{name}.pem", where / f"{name}.key"
        issued.cert_chain_pems[0].write_to_path(str(cert))
        issued.private_key_pem.write_to_path(str(key))
        return Pair(str(cert), str(key))

    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    stranger_ca.cert_pem.write_to_path(str(where / "stranger-ca.pem"))
    return Certs(
        ca=str(where / "ca.pem"),
        replicas={n: pair(n, ca.issue_cert("127.0.0.1", "localhost")) for n in NAMES},
        peer=pair("peer", ca.issue_cert("peer")),
        stranger_ca=str(where / "stranger-ca.pem"),
        stranger=pair("stranger", stranger_ca.issue_cert("127.0.0.1", "localhost")),
    )


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    with EtcdServer(tmp_path) as server:
        yield server


@pytest.fixture
def replicas(cluster: Cluster, etcd: EtcdServer) -> Replicas:
    return Replicas(cluster, etcd, NAMES)  # ``cluster`` stops them and shows logs on failure


def mutual_tls(certs: Certs, name: str, *, ca: str | None = None) -> tuple[str, ...]:
    own = certs.replicas[name]
    return ("--tls-cert", own.cert, "--tls-key", own.key, "--tls-ca", ca or certs.ca)


def peer_tls(certs: Certs) -> TLS:
    return TLS(ca_file=certs.ca, cert_file=certs.peer.cert, key_file=certs.peer.key)


def tls_discovery(replicas: Replicas) -> str:
    return replicas.discovery.replace("tcp://", "tls+tcp://")


def replication_port(replica: Replica) -> int:
    return replica.base_port + REPLICATION_OFFSET  # the default: none is given


def tls_client(replicas: Replicas, certs: Certs) -> Client:
    return Client(tls_discovery(replicas), timeout=20, connect_timeout=20, tls=peer_tls(certs))


def tls_subworker(replicas: Replicas, certs: Certs) -> Proc:
    return replicas.cluster.spawn(
        "subworker",
        "subworker",
        "--task-modules",
        "it_tasks",
        "--discovery-address",
        tls_discovery(replicas),
        "--concurrency",
        "8",
        "--tls-ca",
        certs.ca,
        "--tls-cert",
        certs.peer.cert,
        "--tls-key",
        certs.peer.key,
    )


def fetch(address: str, said: m.AnyMessage, tls: pynng.TLSConfig | None = None) -> bytes:
    """One raw replication request, as a follower sends it; the leader's answer's bytes.
    Raises ``pynng.Timeout`` when nothing comes back within 3 s."""
    with pynng.Req0(recv_timeout=3000, send_timeout=3000, tls_config=tls) as sock:
        sock.dial(address, block=False)
        sock.send(m.encode(said))
        answer: bytes = sock.recv()
        return answer


def empty_follower(auth: str = "") -> m.Ack:
    """What a follower that holds nothing asks: the whole journal from its start."""
    return m.Ack(epoch=0, log_id=b"", durable=0, replica="intruder", auth=auth)


async def submit_marker(client: Client) -> None:
    await client.apply_async("echo", (MARKER,))  # acknowledged: in the leader's journal


async def test_replicas_with_mutual_tls_elect_replicate_and_fail_over(
    replicas: Replicas, certs: Certs
) -> None:
    # Given two replicas with mutual TLS, each with its own certificate of the test's CA
    for name in NAMES:
        replicas.start(name, *mutual_tls(certs, name))
    leader = await replicas.leader()
    await replicas.in_sync(leader)
    follower = next(r for r in replicas.replicas.values() if r is not leader)
    assert follower.readyz().get("phase") == "in_sync"
    # And a subworker and a client presenting certificates of that CA too
    tls_subworker(replicas, certs)
    ids = [f"mtls-{n:04d}" for n in range(300)]
    async with tls_client(replicas, certs) as client:
        await replicas.cluster.workers(client, 1, timeout=20)
        # When tasks are acknowledged, then the leader is killed (kill -9)
        await asyncio.gather(
            *(client.apply_async("add", (n, 1), task_id=i) for n, i in enumerate(ids))
        )
    assert leader.proc is not None
    killed_at = time.monotonic()
    leader.proc.signal(signal.SIGKILL)
    # Then the follower leads, with every acknowledged task, and takes new ones
    new = await replicas.leader(timeout=30, other_than=leader.name)
    print(f"mutual TLS: the follower led {time.monotonic() - killed_at:.2f} s after kill -9")
    assert new is follower
    async with tls_client(replicas, certs) as client:
        results = await client.wait_results(ids, timeout=20)
        assert [(r.task_id, r.status, r.result) for r in results] == [
            (i, TaskStatus.SUCCESS, n + 1) for n, i in enumerate(ids)
        ]
        assert (await client.submit_task("add", args=(20, 22))).result == 42


async def test_a_peer_without_a_certificate_of_the_ca_gets_nothing_of_the_journal(
    replicas: Replicas, certs: Certs
) -> None:
    # Given a leader with mutual TLS whose journal holds an acknowledged task
    leader = replicas.start("a", *mutual_tls(certs, "a"))
    await replicas.leader()
    async with tls_client(replicas, certs) as client:
        await submit_marker(client)
    tls_port = f"tls+tcp://127.0.0.1:{replication_port(leader)}"
    trusting = TLS(ca_file=certs.ca)
    # When peers without a certificate of its CA ask for the journal from its start
    no_cert = trusting.dialing(tls_port)
    strangers = TLS(certs.ca, certs.stranger.cert, certs.stranger.key).dialing(tls_port)
    plain = f"tcp://127.0.0.1:{replication_port(leader)}"
    asked = (
        asyncio.to_thread(fetch, address, empty_follower(), config)
        for address, config in ((tls_port, no_cert), (tls_port, strangers), (plain, None))
    )
    outcomes = await asyncio.gather(*asked, return_exceptions=True)
    # Then the handshake fails: not one byte comes back to any of them
    assert [type(outcome) for outcome in outcomes] == [pynng.Timeout] * 3, outcomes
    # While the same request with a certificate of the CA gets the journal, marker included
    ours = TLS(certs.ca, certs.peer.cert, certs.peer.key).dialing(tls_port)
    answer = m.decode(await asyncio.to_thread(fetch, tls_port, empty_follower(), ours))
    assert isinstance(answer, m.Snapshot), answer
    assert MARKER.encode() in answer.data


async def follower_trusting_another_ca(replicas: Replicas, certs: Certs) -> Replica:
    """Leader ``a`` with mutual TLS, and ``b`` following it: ``b``'s certificate is of the
    leader's CA, but ``b`` trusts another CA (so not the leader's certificate)."""
    replicas.start("a", *mutual_tls(certs, "a"))
    await replicas.leader()
    follower = replicas.start("b", *mutual_tls(certs, "b", ca=certs.stranger_ca))

    async def following() -> bool:
        return follower.readyz().get("role") == "follower"

    await wait_until(following, 20, "the replica to follow")
    return follower


async def test_a_follower_trusting_another_ca_never_gets_in_sync_and_logs_why(
    replicas: Replicas, certs: Certs
) -> None:
    # Given a follower trusting another CA than the one of its leader's certificate
    follower = await follower_trusting_another_ca(replicas, certs)
    leader = replicas.replicas["a"]
    assert follower.proc is not None
    proc = follower.proc

    # Then its log soon says why it cannot follow: the leader's certificate (it says so
    # once it has had no connection for 3 s, far longer than a follower takes to sync)
    async def said_why() -> bool:
        return "certificate" in proc.output().lower()

    await wait_until(said_why, 10, "the follower to log why it cannot follow")
    # And by then it has received nothing: the leader counts no follower in sync
    assert follower.readyz().get("phase") == "catching_up"
    assert leader.readyz().get("replication") == "alone"
    assert not leader.readyz().get("in_sync")
    assert proc.popen.poll() is None  # it keeps trying, as for a lost leader


async def test_a_replication_request_without_the_token_is_refused_with_no_journal_data(
    replicas: Replicas,
) -> None:
    # Given a leader with a token, over plain TCP, whose journal holds an acknowledged task
    leader = replicas.start("a", env=replicas.cluster.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    await replicas.leader()
    async with replicas.client(auth_token=TOKEN) as client:
        await submit_marker(client)
    address = f"tcp://127.0.0.1:{replication_port(leader)}"
    epoch = leader.readyz()["epoch"]
    # When a peer asks for the journal without the token, or with another one
    for auth in ("", "not-the-token"):
        raw = await asyncio.to_thread(fetch, address, empty_follower(auth))
        # Then it is told it is unauthorized, and sent nothing of the journal
        answer = m.decode(raw)
        assert answer == m.Hello(epoch=epoch, log_id=b"", size=0, refused=m.UNAUTHORIZED)
        assert MARKER.encode() not in raw
    # And a peer without the token claiming a newer term does not depose the leader
    deposing = m.Refused(epoch=epoch + 1000, reason=m.STALE_EPOCH, replica="intruder")
    answer = m.decode(await asyncio.to_thread(fetch, address, deposing))
    assert isinstance(answer, m.Hello)
    assert answer.refused == m.UNAUTHORIZED
    assert answer.log_id == b""
    said = leader.readyz()
    assert (said.get("role"), said.get("status"), said.get("epoch")) == ("leader", "ready", epoch)
    # While the same request with the token gets the journal, marker included
    answer = m.decode(await asyncio.to_thread(fetch, address, empty_follower(TOKEN)))
    assert isinstance(answer, m.Snapshot), answer
    assert MARKER.encode() in answer.data


async def test_a_replica_with_a_certificate_but_no_ca_refuses_to_start(
    replicas: Replicas, certs: Certs
) -> None:
    # Given a replica given a certificate and its key, but no --tls-ca
    own = certs.replicas["a"]
    replica = replicas.start("a", "--tls-cert", own.cert, "--tls-key", own.key)
    assert replica.proc is not None
    # Then it exits at once with a usage error saying it needs --tls-ca, and why
    assert await asyncio.to_thread(replica.proc.wait, 30) == 2
    output = replica.proc.output()
    assert "replicas with TLS need --tls-ca" in output
    assert "verify its certificate" in output
    assert "Traceback" not in output
    assert replica.readyz() == {}  # it never served
