"""Tasks for checking a deployment end to end, e.g. the Helm chart's ``helm test``.

Nothing registers them unless this module is named in ``--task-modules``
(``fastworker.diagnostics``); the Helm chart does so by default.
"""

from __future__ import annotations

from typing import Any

from fastworker._task import task


@task(name="fastworker.echo")
def echo(value: Any) -> Any:
    """Return ``value``: proves a task travels to a subworker and back."""
    return value
