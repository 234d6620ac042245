"""The Compose cluster of deploy/compose/compose.yaml, driven from a test with the real
Docker engine and ``docker compose``: images built once per session, one project per test
on free host ports, and everything (containers, networks, volumes) removed afterwards.

Where the official images cannot be pulled (no registry), the Python base is built from
Debian packages (deploy/build-base-image.sh) and Jaeger and Prometheus are replaced by the
stand-ins of deploy/compose/compose.offline.yaml (the README's offline path).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fastworker.testing import free_ports_apart

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "deploy" / "compose" / "compose.yaml"
OFFLINE_FILE = ROOT / "deploy" / "compose" / "compose.offline.yaml"
OFFICIAL_BASE = "python:3.11-slim-bookworm"
LOCAL_BASE = "fastworker-base:bookworm"
TAG = "test"
PORT_ATTEMPTS = 3  # a first `up` that finds a host port taken starts again on fresh ones


def engine_problem() -> str | None:
    """Why no Docker engine with compose v2 can be used here, or ``None`` if one can."""
    for command, what in (
        (["docker", "info"], "no Docker engine answers `docker info`"),
        (["docker", "compose", "version"], "the compose v2 plugin is missing"),
    ):
        try:
            done = subprocess.run(command, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{what} ({exc})"
        if done.returncode != 0:
            return f"{what}: {done.stderr.decode(errors='replace').strip()[:300]}"
    return None


def skip_without_docker() -> None:
    """Skip the calling test module, saying why, when no engine is reachable; under CI the
    tests run and fail instead."""
    problem = engine_problem()
    if problem is not None and not os.environ.get("CI"):
        pytest.skip(f"container tests need Docker: {problem}", allow_module_level=True)


def _port_taken(output: str) -> bool:
    return "port is already allocated" in output or "address already in use" in output


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    return done.stdout


def _pulls(image: str) -> bool:
    done = subprocess.run(["docker", "pull", image], capture_output=True, timeout=300, check=False)
    return done.returncode == 0


def _exists(image: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False)
    return done.returncode == 0


@dataclass(frozen=True)
class Images:
    base: str
    offline: bool  # Jaeger and Prometheus replaced by local stand-ins

    @classmethod
    def build(cls) -> Images:
        """Pick a base (the official one if it can be pulled), then build every image."""
        offline = not _pulls(OFFICIAL_BASE)
        base = OFFICIAL_BASE
        if offline:
            base = LOCAL_BASE
            if not _exists(LOCAL_BASE):
                run(str(ROOT / "deploy" / "build-base-image.sh"), LOCAL_BASE, timeout=900)
        images = cls(base, offline)
        compose = images.compose_command("fastworker-build")
        env = images.env({})
        # Offline, the stand-ins are built too (on the base, in any order).
        run(*compose, "build", env=env, timeout=1800)
        return images

    def compose_command(self, project: str) -> list[str]:
        files = ["-f", str(COMPOSE_FILE)]
        if self.offline:
            files += ["-f", str(OFFLINE_FILE)]
        return ["docker", "compose", "-p", project, *files]

    def env(self, ports: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
        env.update(BASE_IMAGE=self.base, FASTWORKER_TAG=TAG, **ports)
        return env


@dataclass
class ComposeCluster:
    """One ``docker compose`` project of this test, on free host ports."""

    images: Images
    project: str = field(default_factory=lambda: f"fwtest-{uuid.uuid4().hex[:8]}")
    # Host ports, none inside another's block: 5550..5560, then one each
    base: int = field(init=False)
    http_port: int = field(init=False)
    otlp_port: int = field(init=False)
    otlp_grpc_port: int = field(init=False)
    prometheus_port: int = field(init=False)
    jaeger_ui_port: int = field(init=False)

    def __post_init__(self) -> None:
        self._pick_ports()

    def _pick_ports(self) -> None:
        (
            self.base,
            self.http_port,
            self.otlp_port,
            self.otlp_grpc_port,
            self.prometheus_port,
            self.jaeger_ui_port,
        ) = free_ports_apart(11, 1, 1, 1, 1, 1)

    @property
    def env(self) -> dict[str, str]:
        return self.images.env(
            {
                "FASTWORKER_PORTS": f"{self.base}-{self.base + 10}",
                "FASTWORKER_HTTP_PORT": str(self.http_port),
                "JAEGER_UI_PORT": str(self.jaeger_ui_port),
                "OTLP_GRPC_PORT": str(self.otlp_grpc_port),
                "OTLP_HTTP_PORT": str(self.otlp_port),
                "PROMETHEUS_PORT": str(self.prometheus_port),
            }
        )

    @property
    def submission_base(self) -> str:
        """The control plane's first submission port (5555 inside), as mapped on the host."""
        return f"tcp://127.0.0.1:{self.base + 5}"

    def compose(self, *args: str, timeout: float = 300) -> str:
        return run(*self.images.compose_command(self.project), *args, env=self.env, timeout=timeout)

    def up(self, *args: str) -> float:
        """Start (or change) the cluster and wait for it to be healthy; returns seconds.

        A first start that finds a host port taken (by a server that bound it after it was
        picked) starts again on fresh ports."""
        started = time.monotonic()
        first = not self.compose("ps", "-q", "--all").split()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self.compose("up", "-d", "--no-build", "--wait", "--wait-timeout", "120", *args)
                break
            except AssertionError as exc:
                if not (first and attempt < PORT_ATTEMPTS and _port_taken(str(exc))):
                    raise
                self.down()
                self._pick_ports()
        return time.monotonic() - started

    def containers(self, service: str) -> list[str]:
        out = self.compose("ps", "-q", service)
        return sorted(line for line in out.split() if line)

    def hostname(self, container: str) -> str:
        return run("docker", "inspect", "--format", "{{.Config.Hostname}}", container).strip()

    def logs(self) -> str:
        try:
            return self.compose("logs", "--no-color", "--tail", "60", timeout=60)
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            return f"(no logs: {exc})"

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "-t", "10", timeout=180)

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes of this project still on the engine."""
        label = f"label=com.docker.compose.project={self.project}"
        found = []
        for kind in ("container", "network", "volume"):
            listing = ["docker", kind, "ls", "-q", "--filter", label]
            if kind == "container":
                listing.insert(3, "-a")
            found += [f"{kind} {x}" for x in run(*listing).split()]
        return found

    def span_names(self, task_id: str) -> set[str]:
        """Names of the spans of one task the trace backend has: the stand-in receiver's
        list, or Jaeger's query API."""
        if self.images.offline:
            spans = self.http_json(self.otlp_port, "/spans")
            return {s["name"] for s in spans if _is_of(s["attributes"], task_id)}
        names = set()
        for service in ("fastworker-control-plane", "fastworker-subworker"):
            found = self.http_json(self.jaeger_ui_port, f"/api/traces?service={service}&limit=50")
            for trace in found.get("data") or []:
                for span in trace["spans"]:
                    tags = {t["key"]: t["value"] for t in span["tags"]}
                    if _is_of(tags, task_id):
                        names.add(span["operationName"])
        return names

    def http_json(self, port: int, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return json.loads(reply.read())


def _is_of(attributes: dict[str, Any], task_id: str) -> bool:
    return bool(attributes.get("messaging.message.id") == task_id)
