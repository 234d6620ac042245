"""Sets Django up in a worker process: the first task module ``manage.py fastworker``
passes to the FastWorker commands.

Importing modules is the one thing a control plane or subworker does with the project
before it runs tasks, so this module's import is the hook: in a process where Django is
not set up yet, it marks the process as a worker and calls ``django.setup()``
(``DJANGO_SETTINGS_MODULE`` must be set); the project's task modules, which may import
models, are imported after it. Imported where Django is set up already, or being set up
(a web process autodiscovering its task modules), it does nothing.

A module of process tasks (``@task(pool="process")``) imports it before its models: a
subworker's child process imports only that module, so Django gets set up there too.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

from fastworker.integration.django._process import become_worker, django_loaded, setup_django
from fastworker.integration.django.apps import refuse_eager

if not django_loaded():
    become_worker()
    try:
        setup_django()
        refuse_eager()
    except ImproperlyConfigured as exc:  # the workers' loaders report an ImportError
        raise ImportError(str(exc)) from exc
