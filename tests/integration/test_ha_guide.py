"""docs/guides/high-availability.md's walkthrough ("Try it on one machine") works as
written, from a fresh directory beside README's install (test_install's wheels and
``.venv``): the guide's ``photos.py`` written there, then every command of the section's
shell blocks, verbatim and in order. The apt-get line, etcd, two replicas elected
through it, a subworker and the command line given both replicas' discovery addresses,
the leader taken away, and brought back.

Servers (etcd, the control planes, the subworker) start in the background, as in the
reader's terminals. Before a ``curl .../readyz`` the test waits, as the reader would, for
the reply to show what the line's comment shows, then runs the line and checks its
output; a ``submit`` must print what its comment says; ``tasks`` must list every task
submitted so far, each a success. The one step the reader does by hand, at the start of
"Take the leader away", is done once each way the guide names: Ctrl-C in the leader's
terminal, and ``kill -9`` (a crash). The guide's ports are fixed (etcd's 2379 and 2380,
7550 to 7661, 7080, 7180), below the range the other tests draw free ports from.

Slow (the install, ~30 s warm, then about 20 s a run)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import etcd_server
import pytest
from harness import wait_until
from test_install import (
    INSTALL_TIMEOUT,
    READY_TIMEOUT,
    ROOT,
    Installed,
    Started,
    installed,
    outside_env,
    run,
    started,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(400),
    pytest.mark.skipif(
        not etcd_server.runnable(), reason="install Debian's etcd-server (scripts/test does it)"
    ),
    pytest.mark.skipif(
        os.geteuid() != 0 and not os.environ.get("CI"),
        reason="the guide's `apt-get install` runs as root",
    ),
]

__all__ = ["installed"]  # test_install's fixture, which pytest finds here by its name

GUIDE = ROOT / "docs" / "guides" / "high-availability.md"
SECTION = "Try it on one machine"
TAKE_AWAY = "Take the leader away"
PORTS = (2379, 2380, 7550, *range(7555, 7562), 7650, *range(7655, 7662), 7080, 7180)
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def walkthrough() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"\n## {SECTION}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def steps(section: str) -> list[tuple[str, list[str]]]:
    """Each ``###`` subsection's title and its shell commands, continuation lines joined
    (comment lines left out, trailing comments kept for the test to read)."""
    found = []
    for part in re.split(r"^### ", section, flags=re.MULTILINE)[1:]:
        title, _, body = part.partition("\n")
        blocks = re.findall(r"```bash\n(.*?)```", body, flags=re.DOTALL)
        lines = [line for b in blocks for line in b.replace("\\\n", " ").splitlines()]
        found.append((title.strip(), [line for line in lines if shlex.split(line, True)]))
    return found


def comment(line: str) -> str:
    found = re.search(r"\s#\s(.*)$", line)
    return "" if found is None else found.group(1).strip()


def shown(text: str) -> dict[str, Any]:
    """The fields a comment shows of a JSON reply: ``"key": "string"`` (``...`` in it
    standing for anything) or ``"key": [list]``."""
    pairs = re.findall(r'"(\w+)": ("(?:[^"\\]|\\.)*"|\[[^\]]*\])', text)
    return {key: json.loads(value) for key, value in pairs}


def matches(reply: dict[str, Any], expected: dict[str, Any]) -> bool:
    for key, value in expected.items():
        if isinstance(value, str):
            pattern = ".*".join(re.escape(piece) for piece in value.split("..."))
            if not re.fullmatch(pattern, str(reply.get(key))):
                return False
        elif reply.get(key) != value:
            return False
    return True


def readyz(url: str) -> dict[str, Any]:
    """The JSON at ``url`` (a 503 is JSON too); {} while nothing answers."""
    try:
        with _OPENER.open(url, timeout=2) as reply:
            return dict(json.load(reply))
    except urllib.error.HTTPError as exc:
        return dict(json.load(exc))
    except (OSError, ValueError):
        return {}


def taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@dataclass
class Walk:
    """What the commands have started and submitted so far."""

    here: Path
    logs: Path
    stack: contextlib.ExitStack
    env: dict[str, str] = field(default_factory=outside_env)
    servers: dict[str, Started] = field(default_factory=dict)
    http: dict[str, str] = field(default_factory=dict)  # replica id -> its /readyz
    submitted: int = 0
    task_ids: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)

    def start(self, name: str, argv: list[str]) -> Started:
        log = self.logs / f"{self.here.name}-{name}-{len(self.ran)}.log"
        self.servers[name] = self.stack.enter_context(started(argv, self.here, self.env, log))
        return self.servers[name]

    async def line(self, line: str) -> None:
        argv = shlex.split(line, comments=True)
        kind = argv[3] if argv[:3] == ["uv", "run", "fastworker"] else argv[0]
        if argv[:2] == ["apt-get", "install"]:
            run(argv, self.here, self.env, INSTALL_TIMEOUT)
        elif argv[0] == "etcd":
            self.start("etcd", argv)
            await self.until(lambda: readyz("http://127.0.0.1:2379/health").get("health"), "etcd")
        elif kind == "control-plane":
            replica = option(argv, "--replica-id")
            self.http[replica] = f"http://127.0.0.1:{option(argv, '--http-port')}/readyz"
            self.start(replica, argv)
        elif kind == "subworker":
            self.start("subworker", argv)
        elif argv[0] == "export":
            name, _, value = argv[1].partition("=")
            self.env[name] = value
        elif argv[:2] == ["curl", "-s"]:
            await self.curl(argv, shown(comment(line)))
        elif kind == "submit":
            self.submit(argv, comment(line))
        elif kind == "tasks":
            self.tasks(argv)
        else:
            pytest.fail(f"this test does not know how to run the guide's {line!r}")
        self.ran.append(kind)

    async def until(self, condition: Any, what: str) -> None:
        async def holds() -> bool:
            for name, server in self.servers.items():
                assert server.popen.poll() is None, f"{name} exited:\n{server.output[-4000:]}"
            return bool(condition())

        await wait_until(holds, READY_TIMEOUT, what)

    async def curl(self, argv: list[str], expected: dict[str, Any]) -> None:
        assert expected, f"{shlex.join(argv)}: its comment shows nothing to check"
        url = argv[-1]
        await self.until(lambda: matches(readyz(url), expected), f"{url} to show {expected}")
        reply = json.loads(run(argv, self.here, self.env))
        assert matches(reply, expected), (reply, expected)

    def submit(self, argv: list[str], said: str) -> None:
        printed = run(argv, self.here, self.env).strip().splitlines()[-1]
        self.submitted += 1
        if said == "prints a task id":
            assert re.fullmatch(r"[0-9a-f]{32}", printed), printed
            self.task_ids.append(printed)
        else:
            assert said.startswith("prints "), said
            assert printed == said.removeprefix("prints "), (printed, said)

    def tasks(self, argv: list[str]) -> None:
        listed = run(argv, self.here, self.env).strip().splitlines()
        rows = [line.split() for line in listed[1:]]
        assert len(rows) == self.submitted, listed
        assert all(row[2] == "success" for row in rows), listed
        assert {row[0] for row in rows} >= set(self.task_ids), listed

    def leader(self) -> str:
        leading = [r for r, url in self.http.items() if readyz(url).get("role") == "leader"]
        assert len(leading) == 1, {r: readyz(url) for r, url in self.http.items()}
        return leading[0]


def test_the_walkthrough_has_the_steps_this_test_knows() -> None:
    titles = [title for title, _ in steps(walkthrough())]

    assert titles == [
        "etcd",
        "Two replicas",
        "A subworker and some tasks",
        TAKE_AWAY,
        "Bring it back",
    ]
    assert re.findall(r'```python title="([^"]+)"', walkthrough()) == ["photos.py"]


@pytest.mark.parametrize("away", ["ctrl-c", "kill -9"])
async def test_the_ha_guide_runs_as_written(installed: Installed, away: str) -> None:
    # Given a new directory beside the install, holding the guide's module, and the
    # guide's ports free
    busy = [port for port in PORTS if taken(port)]
    assert not busy, f"the guide's ports {busy} are in use on 127.0.0.1: stop what holds them"
    here = installed.app / f"ha-{away.replace(' ', '')}"
    here.mkdir()
    section = walkthrough()
    [module] = re.findall(r'```python title="photos.py"\n(.*?)```', section, flags=re.DOTALL)
    (here / "photos.py").write_text(module, encoding="utf-8")

    with contextlib.ExitStack() as stack:
        walk = Walk(here, installed.app.parent, stack)
        for title, lines in steps(section):
            if title == TAKE_AWAY:
                # When the leader is taken away, as the guide says (it is `a`)
                assert walk.leader() == "a"
                if away == "ctrl-c":
                    code = walk.servers["a"].interrupt()
                    assert code == 0, walk.servers["a"].output[-4000:]
                else:
                    walk.servers["a"].kill()
                del walk.servers["a"]
            # Then every command does what the guide says it does
            for line in lines:
                await walk.line(line)
        # And Ctrl-C stops each process, the follower and the leader included
        for name in ("subworker", "a", "b"):
            code = walk.servers.pop(name).interrupt()
            assert code == 0, f"{name} exited {code}"
        walk.servers.pop("etcd").interrupt()

    assert walk.ran == [
        "apt-get",
        "etcd",
        "control-plane",
        "curl",
        "control-plane",
        "curl",
        "curl",
        "subworker",
        "export",
        "submit",
        "submit",
        "curl",
        "submit",
        "tasks",
        "control-plane",
        "curl",
        "curl",
    ]
    assert walk.task_ids, "the guide submits a task without waiting for it"
