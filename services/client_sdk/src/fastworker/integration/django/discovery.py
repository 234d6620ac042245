"""Finding the project's tasks: the ``tasks`` module of every installed app, as Celery's
``autodiscover_tasks()`` does, then ``FASTWORKER['TASK_MODULES']``.

Importing them registers their ``@task`` functions; the names, in import order, are what
``manage.py fastworker`` hands the workers as ``--task-modules``. Called from
``AppConfig.ready``, when every app's models are loaded, so a ``tasks`` module may import
its app's models at its top.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module

from django.apps import apps  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.utils.module_loading import module_has_submodule  # type: ignore[import-untyped]

__all__ = ["autodiscover"]


def autodiscover(extra: Iterable[str] = ()) -> list[str]:
    """Import every installed app's ``tasks`` module, then each of ``extra``; returns the
    names of the modules imported, in order, each once."""
    found: list[str] = []
    for config in apps.get_app_configs():
        if module_has_submodule(config.module, "tasks"):
            name = f"{config.name}.tasks"
            import_module(name)  # its own ImportError shows: it is the app's module
            found.append(name)
    for name in extra:
        try:
            import_module(name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if name == missing or name.startswith(f"{missing}."):  # the module itself
                raise ImproperlyConfigured(
                    f"FASTWORKER['TASK_MODULES'] names {name!r}, which is not importable"
                ) from exc
            raise
        found.append(name)
    return list(dict.fromkeys(found))
