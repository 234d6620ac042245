"""FastWorker in a Django project.

Add the app and, if the defaults (``FASTWORKER_*`` variables) do not fit, a setting::

    INSTALLED_APPS = [..., "fastworker.integration.django"]
    FASTWORKER = {"DISCOVERY_ADDRESS": "tcp://10.0.0.5:5550", "TIMEOUT": 30}

Each installed app's ``tasks`` module is imported at start (its ``@task`` functions are
registered); views call ``some_task.delay(...)``, or ``some_task.delay_on_commit(...)``
inside ``transaction.atomic()`` to submit only once the transaction commits. Workers run
with the project's settings and tasks: ``manage.py fastworker subworker`` (and
``control-plane``, ``dev``). Test settings set ``FASTWORKER = {"EAGER": True}``: every
task then runs inline, in the test's own transaction.

Needs ``django`` (``pip install 'fastworker[django]'``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastworker.integration.django.apps import eager_runner
    from fastworker.integration.django.db import db_task
    from fastworker.integration.django.transactions import (
        apply_async_on_commit,
        delay_on_commit,
    )

__all__ = ["apply_async_on_commit", "db_task", "delay_on_commit", "eager_runner"]

_HOMES = {
    "apply_async_on_commit": "fastworker.integration.django.transactions",
    "db_task": "fastworker.integration.django.db",
    "delay_on_commit": "fastworker.integration.django.transactions",
    "eager_runner": "fastworker.integration.django.apps",
}


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: the package's modules import one another,
    never this package's whole face (no import cycle through it)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
