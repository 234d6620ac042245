"""The Prometheus test helper, proved by scraping a tiny loopback /metrics endpoint."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import prometheus_server
import pytest
from prometheus_server import PrometheusServer

from fastworker.testing import free_port_block

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not prometheus_server.runnable(),
        reason="install Debian's prometheus package (scripts/test does it)",
    ),
]

METRICS = b"# TYPE demo_requests_total counter\ndemo_requests_total 7\n"


class _MetricsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # close after each scrape: nothing lingers at shutdown

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet."""

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(METRICS)))
        self.end_headers()
        self.wfile.write(METRICS)


@contextmanager
def _metrics_endpoint() -> Iterator[str]:
    """Serve METRICS on a free 127.0.0.1 port; yields the scrape target "127.0.0.1:PORT"."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MetricsHandler)
    try:
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        try:
            yield f"127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join()
    finally:
        server.server_close()


def _closed_port() -> int:
    return free_port_block()


def _single_value(result: list[dict[str, Any]]) -> str:
    assert len(result) == 1, result
    value: str = result[0]["value"][1]
    return value


def test_a_scraped_counter_can_be_queried(tmp_path: Path) -> None:
    with _metrics_endpoint() as target, PrometheusServer(tmp_path, {"demo": [target]}) as prom:
        targets = prom.wait_for_targets_up(30)
        assert [(t["labels"]["job"], t["health"]) for t in targets] == [("demo", "up")]

        result = prom.wait_for(
            "demo_requests_total", lambda result: len(result) == 1, 30, "the demo counter"
        )
        assert _single_value(result) == "7"
        assert _single_value(prom.query("demo_requests_total")) == "7"
        assert result[0]["metric"] == {
            "__name__": "demo_requests_total",
            "instance": target,
            "job": "demo",
        }
        assert prom.query("demo_requests_total{job='elsewhere'}") == []

        with pytest.raises(RuntimeError, match="bad_data"):
            prom.query("sum(")
    assert not prom.running
    assert "See you next time" in prom.log_tail()


def test_a_target_that_is_down_is_reported_with_its_error(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{_closed_port()}"
    with (
        _metrics_endpoint() as alive,
        PrometheusServer(tmp_path, {"alive": [alive], "dead": [dead]}) as prom,
    ):
        # Both targets have been scraped once when each has an `up` sample (0 for the dead one).
        up = prom.wait_for("up", lambda result: len(result) == 2, 30, "a scrape of both targets")
        assert {r["metric"]["job"]: r["value"][1] for r in up} == {"alive": "1", "dead": "0"}
        with pytest.raises(AssertionError, match="waiting for scrape targets") as info:
            prom.wait_for_targets_up(0.5)
    message = str(info.value)
    assert f"alive {alive}: up" in message
    assert f"dead {dead}: " in message
    assert "connection refused" in message


def test_targets_must_be_on_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'127\.0\.0\.1:PORT'"):
        PrometheusServer(tmp_path, {"remote": ["example.com:9090"]})


def test_a_missing_binary_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus_server, "PROMETHEUS", tmp_path / "no-prometheus")
    with (
        pytest.raises(RuntimeError, match="install Debian's prometheus package"),
        PrometheusServer(tmp_path, {}),
    ):
        pass
