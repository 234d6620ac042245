"""What this process is to the integration: a web (or script) process, or a worker.

A process becomes a worker when ``manage.py fastworker`` runs one, or when a worker
started by the ``fastworker`` commands imports :mod:`.bootstrap` as its first task
module. Only a worker refreshes Django's database connections around tasks (in a web
process the caller owns the connection, and may be inside a transaction), and a worker
never runs tasks eagerly (``EAGER`` would make the tasks it submits run inline instead of
on the cluster).
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

_worker = False  # set once, when this process becomes a worker; never unset


def become_worker() -> None:
    global _worker
    _worker = True


def is_worker() -> bool:
    return _worker


def django_loaded() -> bool:
    """Whether Django is set up in this process, or being set up (an import from
    ``AppConfig.ready``, which loads the task modules)."""
    from django.apps import apps  # type: ignore[import-untyped]

    return bool(apps.ready or apps.loading)


def setup_django() -> None:
    """``django.setup()``, unless :func:`django_loaded`."""
    if django_loaded():
        return
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise ImproperlyConfigured(
            "a FastWorker worker of a Django project needs DJANGO_SETTINGS_MODULE "
            "(manage.py fastworker sets it; elsewhere, export it)"
        )
    import django  # type: ignore[import-untyped]

    django.setup()
