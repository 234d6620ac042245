"""The strongest check of the Helm chart this machine allows (no Kubernetes here): run the
containers the chart renders in Docker, with exactly the rendered image, args, environment
and ports, the control plane reachable under its Service's DNS name (a network alias), and
3 subworker containers standing for ``replicas: 3``. Then tasks must flow through all of
them, and the rendered ``helm test`` pod's own command must pass.

What Docker cannot stand in for (the kubelet's probes, the Service's load balancing,
securityContext enforcement beyond what ``docker run`` flags express) is listed in the
chart's README.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml
from compose_cluster import ROOT, TAG, Images, run, skip_without_docker
from harness import free_port_block, wait_until

from fastworker import Client, TaskStatus

pytestmark = pytest.mark.integration
skip_without_docker()

CHART = ROOT / "deploy" / "helm" / "fastworker"
RELEASE, NAMESPACE = "fw", "jobs"
REPLICAS = 3


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

    @classmethod
    def of(cls, pod: dict[str, Any], config: dict[str, str]) -> Container:
        [spec] = pod["spec"]["containers"]
        env = dict(config) if spec.get("envFrom") else {}
        env.update({e["name"]: e["value"] for e in spec.get("env", []) if "value" in e})
        security = pod["spec"].get("securityContext", {})
        claims = {v["name"] for v in pod["spec"].get("volumes", []) if "persistentVolumeClaim" in v}
        return cls(
            image=spec["image"],
            command=spec.get("command", []),
            args=spec.get("args", []),
            env=env,
            ports=[p["containerPort"] for p in spec.get("ports", [])],
            user=f"{security.get('runAsUser', 10001)}:{security.get('runAsGroup', 10001)}",
            read_only=spec.get("securityContext", {}).get("readOnlyRootFilesystem", False),
            claim_mounts=[
                m["mountPath"] for m in spec.get("volumeMounts", []) if m["name"] in claims
            ],
        )

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


async def test_the_rendered_pods_run_in_docker_and_tasks_flow_through_every_subworker(
    images: Images, network: str, tmp_path: Path
) -> None:
    # Given the chart rendered for these images, with 3 subworkers
    objects = rendered(
        {
            "image": {"tag": TAG, "pullPolicy": "Never"},
            "subworker": {"replicas": REPLICAS, "concurrency": 2},
        }
    )
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
        )
    )
    for index in range(REPLICAS):
        run(*subworker.docker_run(f"sw{index}-{network}", network))

    # Then the 3 subworkers register and every one of them runs tasks
    async with Client(address=f"tcp://127.0.0.1:{base}", timeout=60) as client:

        async def registered() -> bool:
            return len([w for w in await client.list_workers() if not w.local]) == REPLICAS

        await wait_until(registered, 60, f"{REPLICAS} subworkers registered")
        workers = {w.worker_id for w in await client.list_workers() if not w.local}
        ids = await client.submit_batch(("fastworker.echo", (i,)) for i in range(300))
        results = await client.wait_results(ids, timeout=60)
        assert [r.result for r in results] == list(range(300))
        assert {r.status for r in results} == {TaskStatus.SUCCESS}
        assert {r.worker_id for r in results} == workers

    # And the rendered `helm test` pod's own command passes against it
    test = Container.of(test_pod, {})
    name = "test-" + network
    run(*test.docker_run(name, network))
    status = run("docker", "wait", name, timeout=120).strip()
    logs = run("docker", "logs", name)
    assert status == "0", logs
    assert 'result: "helm-test"' in logs
