"""The strongest check of the Helm chart this machine allows (no Kubernetes here): run the
containers the chart renders in Docker, with exactly the rendered image, args, environment
and ports, the control plane reachable under its Service's DNS name (a network alias), and
3 subworker containers standing for ``replicas: 3``. Then tasks must flow through all of
them, and the rendered ``helm test`` pod's own command must pass. Once over plain TCP, once
with ``tls.enabled``: a certificate for the Service's name, and each pod's Secret volume
projected (every key, or only its ``items``) into a read-only bind mount where the pod
mounts it. And with ``controlPlane.replicas: 2`` elected through etcd: both rendered
StatefulSet pods (each under its stable name, its pod name filled in as the downward API
would) next to an etcd container, where exactly one must be ready, tasks must flow through
it, and killing its container must hand over to the other.

What Docker cannot stand in for (the kubelet's probes, the Service's load balancing and
its routing to the ready replica alone, securityContext enforcement beyond what ``docker
run`` flags express) is listed in the chart's README.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import pytest
import trustme
import yaml
from compose_cluster import ROOT, TAG, Images, run, skip_without_docker
from harness import wait_until

from fastworker import TLS, Client, TaskStatus
from fastworker.testing import free_port_block, free_ports_apart

pytestmark = pytest.mark.integration
skip_without_docker()

CHART = ROOT / "deploy" / "helm" / "fastworker"
RELEASE, NAMESPACE = "fw", "jobs"
REPLICAS = 3
SECRET = f"{RELEASE}-fastworker-tls"


def rendered(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The chart's objects by ``Kind/name``, rendered by real Helm."""
    manifests = helm_python.Chart.load(CHART).render(values, name=RELEASE, namespace=NAMESPACE)
    objects = {}
    for path, text in manifests.items():
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                objects[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return objects


def kubelet_expand(value: str, env: dict[str, str]) -> str:
    """``$(VAR)`` references to variables defined before, expanded as the kubelet does."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), value)


@dataclass(frozen=True)
class Container:
    """What a rendered pod's container says to run."""

    image: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    ports: list[int]
    user: str
    read_only: bool
    # Where the pod mounts its PersistentVolumeClaims (the control plane's state dir).
    claim_mounts: list[str]
    # Where it mounts Secret volumes, with each volume's ``secret`` (name, items, mode).
    secret_mounts: list[tuple[str, dict[str, Any]]]
    fs_group: int

    @classmethod
    def of(
        cls,
        pod: dict[str, Any],
        config: dict[str, str],
        pod_name: str = "",
        claim_templates: tuple[str, ...] = (),
    ) -> Container:
        """``pod_name`` fills in the downward API's metadata.name; ``claim_templates`` are
        the volumes a StatefulSet's volumeClaimTemplates give the pod."""
        [spec] = pod["spec"]["containers"]
        env = dict(config) if spec.get("envFrom") else {}
        for entry in spec.get("env", []):
            if "value" in entry:
                env[entry["name"]] = kubelet_expand(entry["value"], env)
            elif entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                assert pod_name, f"{entry['name']} needs the pod's name"
                env[entry["name"]] = pod_name
        security = pod["spec"].get("securityContext", {})
        volumes = pod["spec"].get("volumes", [])
        claims = {v["name"] for v in volumes if "persistentVolumeClaim" in v} | set(claim_templates)
        secrets = {v["name"]: v["secret"] for v in volumes if "secret" in v}
        mounts = spec.get("volumeMounts", [])
        assert all(m.get("readOnly") for m in mounts if m["name"] in secrets), mounts
        return cls(
            image=spec["image"],
            command=spec.get("command", []),
            args=spec.get("args", []),
            env=env,
            ports=[p["containerPort"] for p in spec.get("ports", [])],
            user=f"{security.get('runAsUser', 10001)}:{security.get('runAsGroup', 10001)}",
            read_only=spec.get("securityContext", {}).get("readOnlyRootFilesystem", False),
            claim_mounts=[m["mountPath"] for m in mounts if m["name"] in claims],
            secret_mounts=[
                (m["mountPath"], secrets[m["name"]]) for m in mounts if m["name"] in secrets
            ],
            fs_group=security.get("fsGroup", 10001),
        )

    def secret_binds(self, secrets: dict[str, dict[str, bytes]], where: Path) -> list[str]:
        """What the kubelet does for the pod's Secret volumes, as ``docker run`` flags: a
        directory per volume holding the keys it projects (all, or its ``items``), with its
        mode and the pod's fsGroup as their group, bind-mounted read-only."""
        flags = []
        for index, (path, secret) in enumerate(self.secret_mounts):
            data = secrets[secret["secretName"]]
            directory = where / f"secret-{index}"
            directory.mkdir(parents=True)
            directory.chmod(0o755)
            for item in secret.get("items") or [{"key": k, "path": k} for k in data]:
                file = directory / item["path"]
                file.write_bytes(data[item["key"]])
                mode = item.get("mode", secret.get("defaultMode", 0o644))
                try:
                    os.chown(file, 0, self.fs_group)
                except PermissionError:  # not root here: no fsGroup to hand out
                    mode |= 0o444
                file.chmod(mode)
            flags += ["--mount", f"type=bind,source={directory},target={path},readonly"]
        return flags

    def docker_run(self, name: str, network: str, *extra: str) -> list[str]:
        """``docker run`` with this container's settings (Kubernetes ``command`` replaces
        the image's entrypoint, ``args`` its CMD, as with Docker's flags)."""
        argv = ["docker", "run", "-d", "--name", name, "--network", network, "--user", self.user]
        argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        if self.read_only:
            argv += ["--read-only", "--tmpfs", "/tmp"]
        # A PVC becomes an anonymous volume: initialised from the image's directory (owned
        # by 10001), as fsGroup makes the claim writable; removed with the container (-v).
        for path in self.claim_mounts:
            argv += ["--mount", f"type=volume,target={path}"]
        for key, value in sorted(self.env.items()):
            argv += ["-e", f"{key}={value}"]
        if self.command:
            argv += ["--entrypoint", self.command[0]]
        argv += [*extra, self.image, *self.command[1:], *self.args]
        return argv


@pytest.fixture
def network() -> Iterator[str]:
    name = f"fwhelm-{uuid.uuid4().hex[:8]}"
    run("docker", "network", "create", name)
    try:
        yield name
    finally:
        containers = run("docker", "ps", "-aq", "--filter", f"network={name}").split()
        if containers:
            run("docker", "rm", "-f", "-v", *containers)
        run("docker", "network", "rm", name)


def certificate_secret(host: str) -> dict[str, bytes]:
    """The Secret a cert-manager Certificate for ``host`` fills: tls.crt, tls.key, ca.crt."""
    ca = trustme.CA()
    cert = ca.issue_cert(host)
    return {
        "tls.crt": cert.cert_chain_pems[0].bytes(),
        "tls.key": cert.private_key_pem.bytes(),
        "ca.crt": ca.cert_pem.bytes(),
    }


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
async def test_the_rendered_pods_run_in_docker_and_tasks_flow_through_every_subworker(
    images: Images, network: str, tmp_path: Path, tls: bool
) -> None:
    # Given the chart rendered for these images, with 3 subworkers (and TLS, or not)
    values: dict[str, Any] = {
        "image": {"tag": TAG, "pullPolicy": "Never"},
        "subworker": {"replicas": REPLICAS, "concurrency": 2},
    }
    if tls:
        values["tls"] = {"enabled": True, "existingSecret": SECRET}
    objects = rendered(values)
    config = objects[f"ConfigMap/{RELEASE}-fastworker"]["data"]
    control_plane = Container.of(
        objects[f"Deployment/{RELEASE}-fastworker-control-plane"]["spec"]["template"], config
    )
    subworker = Container.of(
        objects[f"Deployment/{RELEASE}-fastworker-subworker"]["spec"]["template"], config
    )
    test_pod = objects[f"Pod/{RELEASE}-fastworker-test-submit"]
    service = objects[f"Service/{RELEASE}-fastworker-control-plane"]
    service_host = f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert f"--advertise-host={service_host}" in control_plane.args
    assert objects[f"Deployment/{RELEASE}-fastworker-subworker"]["spec"]["replicas"] == REPLICAS
    scheme = "tls+tcp" if tls else "tcp"
    assert f"--discovery-address={scheme}://{service_host}:5550" in subworker.args
    # The certificate names the Service, as the chart's README asks; the pods get the
    # Secret's files where they mount it (the subworkers and the test pod: ca.crt only).
    secrets = {SECRET: certificate_secret(service_host)} if tls else {}
    assert bool(control_plane.secret_mounts) == bool(subworker.secret_mounts) == tls

    # When they run in Docker, the control plane under the Service's DNS name
    base = free_port_block(6)
    published = [f"127.0.0.1:{base + i}:{5555 + i}" for i in range(6)]
    run(
        *control_plane.docker_run(
            "cp-" + network,
            network,
            "--network-alias",
            service_host,
            *(flag for p in published for flag in ("-p", p)),
            *control_plane.secret_binds(secrets, tmp_path / "control-plane"),
        )
    )
    for index in range(REPLICAS):
        binds = subworker.secret_binds(secrets, tmp_path / f"sw{index}")
        run(*subworker.docker_run(f"sw{index}-{network}", network, *binds))

    # Then the 3 subworkers register and every one of them runs tasks (the test's own
    # client dials 127.0.0.1 with the CA, checking the certificate names the Service)
    client_tls = None
    if tls:
        (tmp_path / "ca.crt").write_bytes(secrets[SECRET]["ca.crt"])
        client_tls = TLS(ca_file=str(tmp_path / "ca.crt"), server_name=service_host)
    address = f"{scheme}://127.0.0.1:{base}"
    async with Client(address=address, timeout=60, tls=client_tls) as client:

        async def registered() -> bool:
            return len([w for w in await client.list_workers() if not w.local]) == REPLICAS

        await wait_until(registered, 60, f"{REPLICAS} subworkers registered")
        workers = {w.worker_id for w in await client.list_workers() if not w.local}
        ids = await client.submit_batch(("fastworker.echo", (i,)) for i in range(300))
        results = await client.wait_results(ids, timeout=60)
        assert [r.result for r in results] == list(range(300))
        assert {r.status for r in results} == {TaskStatus.SUCCESS}
        ran = {r.worker_id for r in results}
        assert ran <= workers

        # Every pod runs tasks. One batch of trivial tasks need not reach all three: a
        # subworker asks for hundreds at once when its tasks take microseconds, so the
        # first two to fetch can take them all. Small batches, sent while all three wait
        # for work, go to the least loaded.
        async def every_pod_ran_one() -> bool:
            few = [("fastworker.echo", (i,)) for i in range(REPLICAS)]
            done = await client.wait_results(await client.submit_batch(few), timeout=60)
            ran.update(r.worker_id for r in done if r.status == TaskStatus.SUCCESS)
            return ran == workers

        await wait_until(every_pod_ran_one, 60, "tasks ran on every subworker")

    # And the rendered `helm test` pod's own command passes against it
    test = Container.of(test_pod, {})
    name = "test-" + network
    run(*test.docker_run(name, network, *test.secret_binds(secrets, tmp_path / "test")))
    status = run("docker", "wait", name, timeout=120).strip()
    logs = container_output(name)
    assert status == "0", logs
    assert 'result: "helm-test"' in logs


# --- replicated control planes (controlPlane.replicas 2, elected through etcd) ---------------

ETCD_URL = "etcd://etcd:2379/fastworker-jobs"


def etcd_image(images: Images) -> str:
    """The etcd of deploy/compose/etcd.Dockerfile (Debian's etcd-server), on the tests' base."""
    image = f"fastworker-etcd:{TAG}"
    compose = ROOT / "deploy" / "compose"
    run(
        "docker",
        "build",
        "-q",
        "--build-arg",
        f"BASE_IMAGE={images.base}",
        "-f",
        str(compose / "etcd.Dockerfile"),
        "-t",
        image,
        str(compose),
        timeout=900,
    )
    return image


@dataclass(frozen=True)
class Replica:
    """One rendered control-plane pod of the StatefulSet, running as a container."""

    name: str  # the pod's name, <statefulset>-<ordinal>
    container: str
    http: int  # its HTTP port, as published on 127.0.0.1
    base: int  # its first submission port, as published

    def readyz(self) -> tuple[int, dict[str, Any]]:
        """``/readyz``'s status and JSON detail (0 when nothing answers)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/readyz", timeout=2) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
        except (OSError, ValueError):
            return 0, {}


def container_output(name: str, tail: int | None = None) -> str:
    """What a container wrote, its stderr included (``docker logs`` passes the container's
    stderr on as its own)."""
    since = ["--tail", str(tail)] if tail is not None else []
    done = subprocess.run(
        ["docker", "logs", *since, name], capture_output=True, text=True, check=False
    )
    return done.stdout + done.stderr


def show_logs(containers: list[str]) -> None:
    """The last lines each container logged, on stderr (pytest shows it on failure)."""
    for name in containers:
        sys.stderr.write(f"\n--- {name} ---\n{container_output(name, tail=40)}")


async def one_leader(replicas: list[Replica], timeout: float) -> Replica:
    """Wait until exactly one of ``replicas`` is ready, as the leader, and every other one
    answers as a follower; that leader."""
    found: list[Replica] = []

    async def settled() -> bool:
        answers = [await asyncio.to_thread(r.readyz) for r in replicas]
        found[:] = [r for r, (status, _) in zip(replicas, answers, strict=True) if status == 200]
        roles = [str(detail.get("role")) for _, detail in answers]
        return len(found) == 1 and sorted(roles) == ["follower"] * (len(roles) - 1) + ["leader"]

    await wait_until(settled, timeout, "exactly one ready control plane, the others followers")
    return found[0]


async def run_tasks(replica: Replica, count: int, subworkers: int) -> None:
    """Through the leader's published ports: once the subworkers have registered with it,
    ``count`` tasks, every one of which must succeed."""
    async with Client(address=f"tcp://127.0.0.1:{replica.base}", timeout=60) as client:

        async def registered() -> bool:
            return len([w for w in await client.list_workers() if not w.local]) == subworkers

        await wait_until(registered, 60, f"{subworkers} subworker(s) registered with the leader")
        ids = await client.submit_batch(("fastworker.echo", (i,)) for i in range(count))
        results = await client.wait_results(ids, timeout=60)
    assert [r.result for r in results] == list(range(count))
    assert {r.status for r in results} == {TaskStatus.SUCCESS}


async def test_two_rendered_control_plane_replicas_elect_through_etcd_and_hand_over_in_docker(
    images: Images, network: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the chart rendered with 2 control-plane replicas elected through etcd, and an
    # etcd container under the URL's host name
    values: dict[str, Any] = {
        "image": {"tag": TAG, "pullPolicy": "Never"},
        "controlPlane": {"replicas": 2, "ha": {"leaderElection": ETCD_URL}},
        "subworker": {"replicas": 1, "concurrency": 2},
    }
    objects = rendered(values)
    config = objects[f"ConfigMap/{RELEASE}-fastworker"]["data"]
    statefulset = objects[f"StatefulSet/{RELEASE}-fastworker-control-plane"]
    peers = objects[f"Service/{RELEASE}-fastworker-control-plane-peers"]["metadata"]["name"]
    service_host = f"{RELEASE}-fastworker-control-plane.{NAMESPACE}.svc"
    assert statefulset["spec"]["replicas"] == 2
    assert "Lease/fw-fastworker-control-plane" not in objects  # etcd elects instead
    claims = tuple(t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"])
    subworker = Container.of(
        objects[f"Deployment/{RELEASE}-fastworker-subworker"]["spec"]["template"], config
    )
    etcd = etcd_image(images)
    run(
        "docker",
        "run",
        "-d",
        "--name",
        f"etcd-{network}",
        "--network",
        network,
        "--network-alias",
        "etcd",
        etcd,
    )

    # When each replica runs with its pod's settings, under its stable name (and the
    # Service's: Docker cannot route it to the ready one alone, so discovery leads a peer
    # that lands on a follower to the leader), and a subworker joins
    replicas = []
    for ordinal in range(2):
        name = f"{statefulset['metadata']['name']}-{ordinal}"
        pod = Container.of(statefulset["spec"]["template"], config, name, claims)
        host = pod.env["FASTWORKER_ADVERTISE_HOST"]
        assert host == f"{name}.{peers}.{NAMESPACE}.svc"
        assert pod.env["FASTWORKER_REPLICA_ID"] == name
        assert pod.claim_mounts == ["/var/lib/fastworker"]
        base, http = free_ports_apart(6, 1)
        published = [f"127.0.0.1:{base + i}:{5555 + i}" for i in range(6)]
        published.append(f"127.0.0.1:{http}:8080")
        container = f"{name}-{network}"
        aliases = ("--network-alias", host, "--network-alias", service_host)
        ports = [flag for p in published for flag in ("-p", p)]
        run(*pod.docker_run(container, network, *aliases, *ports))
        replicas.append(Replica(name, container, http, base))
    run(*subworker.docker_run(f"sw-{network}", network))

    try:
        # Then exactly one replica is ready, and tasks flow through it
        leader = await one_leader(replicas, 60)
        await run_tasks(leader, 100, 1)

        # And when the leader's container is killed, the other takes over, and tasks
        # submitted afterwards succeed (the subworker followed it through discovery)
        killed_at = time.monotonic()
        run("docker", "kill", leader.container)
        [survivor] = [r for r in replicas if r is not leader]
        successor = await one_leader([survivor], 30)
        failover = time.monotonic() - killed_at
        await run_tasks(successor, 100, 1)
    except BaseException:
        show_logs([r.container for r in replicas] + [f"sw-{network}", f"etcd-{network}"])
        raise
    with capsys.disabled():
        print(
            f"\nhelm-in-docker HA: {leader.name} killed, {successor.name} ready in {failover:.1f} s"
        )
