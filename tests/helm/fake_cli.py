"""A stand-in ``fastworker`` command, to run the rendered `helm test` pod's shell command on
this machine: it parses its argv (and the pod's ``FASTWORKER_*`` environment) with the real
``submit`` parser, records what it got, and answers like the echo task would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from chart_render import Rendering

FAKE_FASTWORKER = """\
#!{python}
# A stand-in for the `fastworker` command: parses its argv with the real `submit` parser,
# records what it got, and answers like the echo task would (or with $FAKE_REPLY).
import argparse, json, os, sys
from fastworker.cli import client_commands
parser = argparse.ArgumentParser(prog="fastworker")
client_commands.add_commands(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
with open(os.environ["FAKE_RECORD"], "w") as f:
    json.dump({{"command": args.command, "address": args.address, "task": args.task_name,
               "args": args.args, "timeout": args.timeout, "tls_ca": args.tls_ca,
               "tls_server_name": args.tls_server_name}}, f)
reply = os.environ.get("FAKE_REPLY")
print(reply if reply is not None else json.dumps(json.loads(args.args[0])))
"""


def install_fake_fastworker(bin_dir: Path) -> Path:
    """Write the stand-in as ``bin_dir/fastworker``; returns ``bin_dir`` (for PATH)."""
    script = bin_dir / "fastworker"
    script.write_text(FAKE_FASTWORKER.format(python=sys.executable))
    script.chmod(0o755)
    return bin_dir


def helm_test_pod(r: Rendering) -> dict[str, Any]:
    [pod] = r.of_kind("Pod")
    return pod


def run_test_pod(
    pod: dict[str, Any], bin_dir: Path, record: Path, reply: str | None
) -> subprocess.CompletedProcess[str]:
    """The pod's command, with the environment values it sets (none of this machine's
    ``FASTWORKER_*``) and the stand-in first on PATH."""
    [container] = pod["spec"]["containers"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
    env |= {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "FAKE_RECORD": str(record)}
    if reply is not None:
        env["FAKE_REPLY"] = reply
    return subprocess.run(
        [*container["command"], *container["args"]],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=30,
    )
