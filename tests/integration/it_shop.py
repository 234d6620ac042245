"""The other module defining ``notify`` (see it_billing.py). Its ``notify`` runs in a child
process, so the child's import of this module must name it the same way."""

from __future__ import annotations

import os

from fastworker import task


@task(pool="process")
def notify(user: str) -> dict[str, object]:
    return {"module": __name__, "user": user, "pid": os.getpid()}
