"""The client side of ``--check`` (a container healthcheck asking ``/readyz``), and the
error a process raises when its HTTP port is taken. Stdlib only, so ``--check`` starts fast.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class PortInUse(OSError):
    pass


def check(host: str, port: int, timeout: float = 3.0) -> tuple[bool, str]:
    """Ask a process's ``/readyz``: (ready, what it said)."""
    if host in {"0.0.0.0", "::", "*", ""}:
        host = "127.0.0.1"
    url = f"http://{host}:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            status = json.loads(reply.read()).get("status", "?")
            return True, f"{url}: {status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url}: HTTP {exc.code} {exc.read().decode(errors='replace')}"
    except (OSError, ValueError) as exc:
        return False, f"{url}: {exc}"
