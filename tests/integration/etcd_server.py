"""Runs Debian's etcd (``/usr/bin/etcd``, 3.4) for one test, on free loopback ports.

``EtcdServer(tmp_path)`` starts a single-member cluster with its data in ``tmp_path``;
``stop()`` and ``start()`` again bring the same member back with its data (leases and keys
survive, as on a real restart). Only 127.0.0.1 is ever contacted, unless ``host`` names
another address to serve on (with ``prefix``, e.g. ``ip netns exec NS``, to run it in the
network namespace that has it); proxies are ignored.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from fastworker.testing import free_port_block

ETCD = Path("/usr/bin/etcd")
READY_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def runnable() -> bool:
    """Installed, or CI (where a missing binary must fail the tests, not skip them)."""
    return ETCD.exists() or bool(os.environ.get("CI"))


class EtcdServer:
    def __init__(
        self, tmp_path: Path, host: str = "127.0.0.1", prefix: tuple[str, ...] = ()
    ) -> None:
        self.host = host
        self.prefix = prefix
        self.data_dir = tmp_path / "etcd-data"
        self.log_path = tmp_path / "etcd.log"
        self.client_port = free_port_block()
        self.peer_port = free_port_block()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    def url(self, prefix: str) -> str:
        return f"etcd://{self.endpoint}/{prefix}"

    def start(self) -> EtcdServer:
        if not ETCD.exists():
            raise RuntimeError(
                f"{ETCD} not found: install Debian's etcd-server (scripts/test does)"
            )
        client = f"http://{self.host}:{self.client_port}"
        peer = f"http://{self.host}:{self.peer_port}"
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [
                    *self.prefix,
                    str(ETCD),
                    "--name=test",
                    f"--data-dir={self.data_dir}",
                    f"--listen-client-urls={client}",
                    f"--advertise-client-urls={client}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=test={peer}",
                    "--log-level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"etcd exited: {self.log_path.read_text()[-3000:]}")
            if self._healthy():
                return self
            time.sleep(0.05)  # polling a condition with a deadline
        self.stop()
        raise RuntimeError(f"etcd not healthy in {READY_TIMEOUT} s: {self.log_path.read_text()}")

    def require_credentials(self) -> None:
        """Turn etcd's auth on (a root user with a password no test offers): from now on
        every request without credentials is refused, as FastWorker's always are."""
        for path, body in (
            ("/v3/auth/role/add", {"name": "root"}),
            ("/v3/auth/user/add", {"name": "root", "password": "no-test-offers-this"}),
            ("/v3/auth/user/grant", {"user": "root", "role": "root"}),
            ("/v3/auth/enable", {}),
        ):
            request = urllib.request.Request(
                f"http://{self.endpoint}{path}", data=json.dumps(body).encode(), method="POST"
            )
            with _OPENER.open(request, timeout=5) as response:
                assert response.status == 200, response.read()

    def _healthy(self) -> bool:
        try:
            with _OPENER.open(f"http://{self.endpoint}/health", timeout=1) as response:
                return b'"true"' in response.read()
        except OSError:
            return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> EtcdServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
