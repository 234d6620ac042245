"""Tasks for the run-time schedule tests: each run notes what it was given, and how."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fastworker import current_task, task


@task
def remember(path: str, customer: str, fmt: str = "pdf") -> str:
    """Appends one JSON line to ``path``: this run's id, its arguments, its priority."""
    context = current_task()
    assert context is not None
    line = {
        "id": context.id,
        "customer": customer,
        "fmt": fmt,
        "priority": str(context.priority),
        "pid": os.getpid(),
    }
    with Path(path).open("a") as out:  # one short write per line: appends do not interleave
        out.write(json.dumps(line) + "\n")
    return context.id
