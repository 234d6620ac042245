"""The strongest check of the Helm chart this machine allows (no Kubernetes here): run the
containers the chart renders in Docker, with exactly the rendered image, args, environment
and ports, the control plane reachable under its Service's DNS name (a network alias), and
3 subworker containers standing for ``replicas: 3``. Then tasks must flow through all of
them, and the rendered ``helm test`` pod's own command must pass. Once over plain TCP, once
with ``tls.enabled``: a certificate for the Service's name, and each pod's Secret volume
projected (every key, or only its ``items``) into a read-only bind mount where the pod
mounts it.

What Docker cannot stand in for (the kubelet's probes, the Service's load balancing,
securityContext enforcement beyond what ``docker run`` flags express) is listed in the
chart's README.
"""

from __future__ import annotations

import os
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
from harness import free_port_block, wait_until

from fastworker import TLS, Client, TaskStatus

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
    def of(cls, pod: dict[str, Any], config: dict[str, str]) -> Container:
        [spec] = pod["spec"]["containers"]
        env = dict(config) if spec.get("envFrom") else {}
        env.update({e["name"]: e["value"] for e in spec.get("env", []) if "value" in e})
        security = pod["spec"].get("securityContext", {})
        volumes = pod["spec"].get("volumes", [])
        claims = {v["name"] for v in volumes if "persistentVolumeClaim" in v}
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
    logs = run("docker", "logs", name)
    assert status == "0", logs
    assert 'result: "helm-test"' in logs
