"""One of two modules defining a task named ``notify`` (tests/integration/test_task_names.py):
with module-qualified names both register, as ``it_billing.notify`` and ``it_shop.notify``."""

from __future__ import annotations

import os

from fastworker import task


@task
def notify(user: str) -> dict[str, object]:
    return {"module": __name__, "user": user, "pid": os.getpid()}


@task
def monthly_invoice(customer: str) -> str:
    """A name no other module uses: submitted by its bare name, it resolves."""
    return f"invoice for {customer}"
