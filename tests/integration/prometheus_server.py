"""Runs Debian's real Prometheus server (``/usr/bin/prometheus``) for one test.

``PrometheusServer`` writes a ``prometheus.yml`` with one scrape job per entry of
``targets``, starts Prometheus on a free 127.0.0.1 port with its data and log in the
test's ``tmp_path``, waits until it is ready, and stops it afterwards::

    with PrometheusServer(tmp_path, {"control-plane": [f"127.0.0.1:{port}"]}) as prom:
        prom.wait_for_targets_up(30)
        assert prom.query("fastworker_tasks_total")[0]["value"][1] == "3"

Prometheus 2.42 (Debian bookworm) is ready in about 0.1 s, but hands newly discovered
targets to its scrape loops on a fixed 5 s tick (not configurable by flag in this version),
so the first scrape lands about 5 s after start: keep target timeouts well above that.
No console flags are needed: Debian's defaults point at /etc/prometheus/consoles.

Only the standard library is used, and only 127.0.0.1 is ever contacted (proxy
settings from the environment are ignored).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from fastworker.testing import free_port_block

PROMETHEUS = Path("/usr/bin/prometheus")
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
POLL_INTERVAL = 0.1
REQUEST_TIMEOUT = 10.0
START_ATTEMPTS = 3
LOG_TAIL = 4000

# No ProxyHandler settings: a test must never route 127.0.0.1 traffic through a proxy.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _check_target(target: str) -> None:
    host, sep, port = target.rpartition(":")
    if host != "127.0.0.1" or not sep or not port.isdigit():
        raise ValueError(f"scrape targets must be '127.0.0.1:PORT', not {target!r}")


class PrometheusServer:
    """A Prometheus server scraping loopback targets, for the duration of a ``with`` block."""

    def __init__(
        self, tmp_path: Path, targets: dict[str, list[str]], scrape_interval: str = "1s"
    ) -> None:
        for addresses in targets.values():
            for target in addresses:
                _check_target(target)
        self.tmp_path = tmp_path
        self.targets = {job: list(addresses) for job, addresses in targets.items()}
        self.scrape_interval = scrape_interval
        self.config_path = tmp_path / "prometheus.yml"
        self.data_path = tmp_path / "prometheus-data"
        self.log_path = tmp_path / "prometheus.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    # lifecycle

    def _write_config(self) -> None:
        config = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "evaluation_interval": self.scrape_interval,
            },
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": addresses}]}
                for job, addresses in self.targets.items()
            ],
        }
        # JSON is valid YAML, so no YAML library is needed.
        self.config_path.write_text(json.dumps(config, indent=2) + "\n")

    def log_tail(self, limit: int = LOG_TAIL) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return "(no log written)"

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.port = free_port_block()
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                [
                    str(PROMETHEUS),
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.data_path}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.tmp_path,
            )

    def _ready(self) -> bool:
        try:
            with _OPENER.open(f"{self.url}/-/ready", timeout=REQUEST_TIMEOUT) as response:
                return int(response.status) == 200
        except urllib.error.HTTPError as err:
            err.close()  # 503 while starting up
            return False
        except OSError:  # not listening yet
            return False

    def start(self, timeout: float = READY_TIMEOUT) -> PrometheusServer:
        """Start Prometheus and wait until ``/-/ready`` answers 200."""
        if self._proc is not None:
            raise RuntimeError("PrometheusServer already started")
        if not PROMETHEUS.exists():
            raise RuntimeError(
                f"{PROMETHEUS} not found: "
                "install Debian's prometheus package (scripts/test does it)"
            )
        self._write_config()
        try:
            for attempt in range(1, START_ATTEMPTS + 1):
                if self._wait_ready(attempt, timeout):
                    return self
        except BaseException:
            self.stop()
            raise
        raise AssertionError(f"prometheus could not bind a free port in {START_ATTEMPTS} tries")

    def _wait_ready(self, attempt: int, timeout: float) -> bool:
        """Spawn once; True when ready, False when the port was taken (try again)."""
        self._proc = proc = self._spawn()
        deadline = time.monotonic() + timeout
        while not self._ready():
            code = proc.poll()
            if code is not None:
                self._proc = None
                # Another process may have taken the free port between probe and bind.
                if "address already in use" in self.log_tail() and attempt < START_ATTEMPTS:
                    return False
                raise AssertionError(
                    f"prometheus exited with code {code} during startup; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"prometheus not ready after {timeout} s on {self.url}; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(POLL_INTERVAL)
        return True

    def stop(self) -> None:
        """SIGTERM, wait up to 10 s, then SIGKILL."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # HTTP API

    def _api(self, path: str, params: dict[str, str] | None = None) -> Any:
        """GET an /api/v1 endpoint and return its ``data``; raise with Prometheus's error."""
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with _OPENER.open(url, timeout=REQUEST_TIMEOUT) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            with err:
                body = err.read()  # Prometheus explains 400/422/503 in the JSON body
            if not body:
                raise RuntimeError(f"GET {url}: HTTP {err.code} {err.reason}") from None
        try:
            reply = json.loads(body)
        except ValueError:
            raise RuntimeError(f"GET {url}: not JSON: {body[:200]!r}") from None
        if reply.get("status") != "success":
            raise RuntimeError(
                f"GET {url}: {reply.get('errorType', 'error')}: {reply.get('error', reply)}"
            )
        return reply["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query; each result is ``{"metric": {...}, "value": [ts, "text"]}``."""
        data = self._api("/api/v1/query", {"query": expr})
        result: list[dict[str, Any]] = data["result"]
        return result

    def targets_status(self) -> list[dict[str, Any]]:
        """The active scrape targets as Prometheus reports them."""
        data = self._api("/api/v1/targets", {"state": "active"})
        active: list[dict[str, Any]] = data["activeTargets"]
        return active

    # waiting

    def wait_for_targets_up(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until every configured target has been scraped successfully."""
        expected = {
            (job, address) for job, addresses in self.targets.items() for address in addresses
        }
        deadline = time.monotonic() + timeout
        while True:
            active = self.targets_status()
            health = {
                (t["labels"].get("job", ""), t["labels"].get("instance", "")): t for t in active
            }
            if expected <= health.keys() and all(health[key]["health"] == "up" for key in expected):
                return active
            if time.monotonic() > deadline:
                lines = []
                for job, address in sorted(expected):
                    target = health.get((job, address))
                    if target is None:
                        lines.append(f"  {job} {address}: not discovered")
                    else:
                        lines.append(
                            f"  {job} {address}: {target['health']}"
                            f" (lastError: {target.get('lastError') or '-'})"
                        )
                raise AssertionError(
                    f"timed out after {timeout} s waiting for scrape targets to be up:\n"
                    + "\n".join(lines)
                )
            time.sleep(POLL_INTERVAL)

    def wait_for(
        self,
        expr: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 30.0,
        what: str | None = None,
    ) -> list[dict[str, Any]]:
        """Poll ``query(expr)`` until ``predicate(result)`` holds; return that result."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {what or expr}; "
                    f"query {expr!r} returned: {json.dumps(result)[:2000]}"
                )
            time.sleep(POLL_INTERVAL)


def runnable() -> bool:
    """Whether tests needing Prometheus should run: it is installed, or this is CI, where
    a missing binary must fail the tests rather than skip them."""
    return PROMETHEUS.exists() or bool(os.environ.get("CI"))
