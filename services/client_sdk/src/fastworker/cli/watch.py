"""``fastworker watch``: task events as they happen, one line each, from the control
plane's event stream (``GET /api/events`` on its HTTP port, see docs/http-api.md).

``--task-id`` follows one task and exits when it is final (0 if it succeeded, 1 if not);
``--name`` keeps one task name (a short one, ``add``, keeps every task whose full name ends
with ``.add``, as a submission by that name would mean); ``--json`` prints the events as
JSON lines. Ctrl-C stops.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from fastworker.cli.common import EXIT_OK, EXIT_TASK_FAILED, CommandError, add_auth_token
from fastworker_common.settings import add_option
from fastworker_protocol import DEFAULT_HTTP_PORT

_FINAL = {"task.success": EXIT_OK, "task.failure": EXIT_TASK_FAILED}
_FINAL["task.cancelled"] = EXIT_TASK_FAILED


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("watch", help="follow task events live")
    add_option(
        p,
        "--http-url",
        default=f"http://127.0.0.1:{DEFAULT_HTTP_PORT}",
        help="the control plane's HTTP port (its dashboard)",
    )
    add_option(p, "--task-id", default=None, help="follow this task; exit when it is final")
    add_option(p, "--name", default=None, help="only tasks with this name")
    add_option(p, "--json", switch=True, help="print each event as a JSON line")
    add_auth_token(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    token = args.auth_token or os.environ.get("FASTWORKER_AUTH_TOKEN")
    base = args.http_url.rstrip("/")
    if args.task_id is not None:
        current = _get_json(f"{base}/api/tasks/{args.task_id}", token)
        _show({"kind": f"task.{current['status']}", **current}, args.json)
        if f"task.{current['status']}" in _FINAL:
            return _FINAL[f"task.{current['status']}"]
    try:
        for event in _events(f"{base}/api/events", token):
            if args.task_id is not None and event.get("task_id") != args.task_id:
                continue
            if args.name is not None and not _named(str(event.get("name", "")), args.name):
                continue
            _show(event, args.json)
            if args.task_id is not None and event.get("kind") in _FINAL:
                return _FINAL[event["kind"]]
    except KeyboardInterrupt:
        return EXIT_OK
    raise CommandError(f"the event stream at {base} ended (the control plane stopped?)")


def _named(name: str, wanted: str) -> bool:
    """Whether a task named ``name`` is one ``wanted`` names: itself, or a dotted suffix."""
    return name == wanted or name.endswith(f".{wanted}")


def _show(event: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(event), flush=True)
        return
    at = datetime.fromtimestamp(event.get("at") or datetime.now().timestamp())
    state = str(event.get("kind", "")).removeprefix("task.")
    worker = f"  on {event['worker_id']}" if event.get("worker_id") else ""
    attempt = f"  attempt {event['attempts']}" if event.get("attempts") else ""
    line = f"{at:%H:%M:%S.%f}"[:-3] + f"  {state:<10} {event.get('name', ''):<20}"
    print(f"{line} {event.get('task_id', '')}{worker}{attempt}", flush=True)


def _events(url: str, token: str | None) -> Iterator[dict[str, Any]]:
    """Every task transition of the stream (``event: tasks`` carries a list of them)."""
    with _open(url, token, timeout=None) as stream:
        yield from _transitions(line.decode(errors="replace").rstrip("\r\n") for line in stream)


def _transitions(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Parse server-sent events: ``event:`` names the next ``data:`` line's kind."""
    kind = "message"
    for line in lines:
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:") and kind == "tasks":
            yield from json.loads(line.removeprefix("data:"))
        elif not line:
            kind = "message"


def _get_json(url: str, token: str | None) -> dict[str, Any]:
    with _open(url, token, timeout=10) as reply:
        value: dict[str, Any] = json.load(reply)
        return value


def _open(url: str, token: str | None, timeout: float | None) -> Any:
    import urllib.error  # urllib.request (http.client, email) only for the command using it
    import urllib.request

    request = urllib.request.Request(url, headers={"Accept": "text/event-stream, */*"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise CommandError(
                "the control plane requires its auth token (--auth-token or FASTWORKER_AUTH_TOKEN)"
            ) from None
        if exc.code == 404 and "/api/tasks/" in url:
            raise CommandError(f"task {url.rsplit('/', 1)[1]} is unknown or expired") from None
        raise CommandError(f"{url} answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CommandError(
            f"nothing answered at {url} ({reason}): is the control plane running, with its "
            "HTTP port on (--http-port)? Start one with `fastworker dev --task-modules "
            "<your module>`"
        ) from None
