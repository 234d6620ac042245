"""TLS on every NNG socket (``tls+tcp://``): with the control plane's CA, clients and
subworkers work as over TCP; plain TCP, an unknown CA, and (under mutual TLS) a peer
without a certificate are all refused; bad TLS settings are one clear line at start."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pynng
import pytest
import trustme
from harness import Cluster

from fastworker import TLS, Client, ControlPlaneUnavailable, TaskStatus, Unauthorized

TOKEN = "tls-test-token-3c1d"


@dataclass(frozen=True)
class Certs:
    ca: str
    cert: str
    key: str
    client_cert: str
    client_key: str
    other_ca: str


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA, a certificate for 127.0.0.1 it signed, one for a client, and a stranger CA."""
    where = tmp_path_factory.mktemp("certs")
    ca, other = trustme.CA(), trustme.CA()
    server, client = ca.issue_cert("127.0.0.1", "localhost"), ca.issue_cert("client")
    files = {
        "ca": ca.cert_pem,
        "cert": server.cert_chain_pems[0],
        "key": server.private_key_pem,
        "client_cert": client.cert_chain_pems[0],
        "client_key": client.private_key_pem,
        "other_ca": other.cert_pem,
    }
    for name, blob in files.items():
        blob.write_to_path(str(where / f"{name}.pem"))
    return Certs(**{name: str(where / f"{name}.pem") for name in files})


def tls_address(port: int) -> str:
    return f"tls+tcp://127.0.0.1:{port}"


def tls_plane(
    cluster: Cluster,
    certs: Certs,
    *extra: str,
    local_concurrency: int = 4,
    env: dict[str, str] | None = None,
) -> None:
    tls = ("--tls-cert", certs.cert, "--tls-key", certs.key)
    cluster.control_plane(*tls, *extra, local_concurrency=local_concurrency, env=env)


async def test_tasks_flow_over_tls_through_a_subworker(cluster: Cluster, certs: Certs) -> None:
    # Given a TLS control plane that only dispatches, and a subworker that found it over TLS
    tls_plane(cluster, certs, local_concurrency=0)
    discovery = tls_address(cluster.discovery_port)
    worker = cluster.subworker("--discovery-address", discovery, "--tls-ca", certs.ca)
    # When a client with the CA submits a task
    async with Client(discovery, timeout=15, tls=TLS(ca_file=certs.ca)) as client:
        await cluster.workers(client, 1)
        result = await client.submit_task("nap", args=(0,))
    # Then it ran on the subworker
    assert result.status == TaskStatus.SUCCESS
    assert result.result["pid"] == worker.pid


async def test_a_client_dialing_the_submission_port_directly_uses_tls(
    cluster: Cluster, certs: Certs
) -> None:
    tls_plane(cluster, certs)
    direct = tls_address(cluster.base_port)
    async with Client(address=direct, timeout=15, tls=TLS(ca_file=certs.ca)) as client:
        assert (await client.submit_task("add", args=(2, 3))).result == 5


async def test_plain_tcp_and_an_unknown_ca_are_refused(cluster: Cluster, certs: Certs) -> None:
    tls_plane(cluster, certs)
    async with Client(tls_address(cluster.discovery_port), tls=TLS(ca_file=certs.ca)) as client:
        await cluster.workers(client, 1)  # it is up and serving TLS
    # Plain TCP on the TLS discovery and submission ports: never a reply
    await refused(Client(cluster.discovery, timeout=2, retries=0))
    await refused(Client(address=f"tcp://127.0.0.1:{cluster.base_port}", timeout=2, retries=0))
    # TLS, but trusting another CA: the handshake fails, so nothing is exchanged
    stranger = TLS(ca_file=certs.other_ca)
    await refused(Client(tls_address(cluster.discovery_port), timeout=2, tls=stranger))
    await refused(Client(address=tls_address(cluster.base_port), timeout=2, tls=stranger))


async def refused(client: Client) -> None:
    """No request of ``client`` gets through: it cannot even connect."""
    with pytest.raises(ControlPlaneUnavailable):
        async with client:
            await client.delay("add", 1, 1)


def test_a_raw_tcp_peer_gets_no_bytes_from_a_tls_port(cluster: Cluster, certs: Certs) -> None:
    tls_plane(cluster, certs)

    def ask() -> bytes:
        with pynng.Req0(recv_timeout=1500, send_timeout=1500) as sock:
            sock.dial(f"tcp://127.0.0.1:{cluster.base_port}", block=False)
            sock.send(b"\x81\xa2op\xa3get")
            reply: bytes = sock.recv()
            return reply

    with pytest.raises(pynng.Timeout):
        ask()


async def test_mutual_tls_requires_a_client_certificate(cluster: Cluster, certs: Certs) -> None:
    # Given a control plane that requires certificates signed by its CA, and a token
    tls_plane(cluster, certs, "--tls-ca", certs.ca, env=cluster.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    address = tls_address(cluster.base_port)
    with_cert = TLS(ca_file=certs.ca, cert_file=certs.client_cert, key_file=certs.client_key)
    # Then a client with a certificate and the token works
    async with Client(address=address, timeout=15, tls=with_cert, auth_token=TOKEN) as client:
        assert (await client.submit_task("add", args=(1, 2))).result == 3
    # And without a certificate it cannot connect, and without the token it is unauthorized
    await refused(Client(address=address, timeout=2, retries=0, tls=TLS(ca_file=certs.ca)))
    async with Client(address=address, timeout=10, retries=0, tls=with_cert) as c:
        with pytest.raises(Unauthorized):
            await c.delay("add", 1, 1)


async def test_bad_tls_settings_are_one_line_at_start(
    cluster: Cluster, certs: Certs, tmp_path: Path
) -> None:
    missing = str(tmp_path / "missing.pem")
    plane = cluster.control_plane("--tls-cert", missing, "--tls-key", certs.key)
    assert await asyncio.to_thread(plane.wait) == 2
    assert f"cannot read the TLS certificate {missing}" in plane.output()
    assert "Traceback" not in plane.output()

    worker = cluster.subworker("--discovery-address", tls_address(cluster.discovery_port))
    assert await asyncio.to_thread(worker.wait) == 2
    assert "needs the CA" in worker.output() or "give the CA" in worker.output()
    assert "Traceback" not in worker.output()
