"""The Django app: ``INSTALLED_APPS += ["fastworker.integration.django"]`` (label
``fastworker``).

``ready()`` reads ``settings.FASTWORKER``, sets the options of the process's default
client (the client itself is made on first use, in the process that uses it, so a
prefork server's workers each make their own), imports the project's task modules, and
with ``EAGER`` runs every task inline for the rest of the process (test settings).
It opens no connection: a project starts, and its tests run, with no control plane.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig, apps  # type: ignore[import-untyped]
from django.conf import settings  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

import fastworker
from fastworker.integration.django._process import is_worker
from fastworker.integration.django.conf import FastWorkerSettings, read_settings
from fastworker.integration.django.discovery import autodiscover

if TYPE_CHECKING:
    from fastworker.testing import Eager

__all__ = ["FastWorkerConfig", "eager_runner", "project_settings", "refuse_eager"]


class FastWorkerConfig(AppConfig):  # type: ignore[misc]  # Django ships no type hints
    name = "fastworker.integration.django"
    label = "fastworker"
    verbose_name = "FastWorker"
    default = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task_modules: list[str] = []
        self.eager: Eager | None = None  # with EAGER: what runs the tasks

    def ready(self) -> None:
        options = project_settings()
        try:
            fastworker.configure(**options.client_options)
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(f"FASTWORKER: {exc}") from exc
        self.task_modules = autodiscover(options.task_modules)
        if options.eager and not is_worker():
            from fastworker.testing import eager  # only test settings pay for it

            self.eager = eager()
            self.eager.start()


def eager_runner() -> Eager:
    """The ``fastworker.testing.Eager`` that ``FASTWORKER = {"EAGER": True}`` started, for
    its ``submissions`` (``submitted(task)``, ``clear()``); ``LookupError`` without it."""
    runner = apps.get_app_config("fastworker").eager
    if runner is None:
        raise LookupError('FASTWORKER = {"EAGER": True} is not in these settings')
    return runner  # type: ignore[no-any-return]  # Django's registry is untyped


def project_settings() -> FastWorkerSettings:
    """``settings.FASTWORKER``, checked."""
    return read_settings(getattr(settings, "FASTWORKER", None))


def refuse_eager() -> None:
    """A worker with ``EAGER`` settings would run what it submits inline: refuse."""
    if project_settings().eager:
        raise ImproperlyConfigured(
            "FASTWORKER['EAGER'] is True in these settings: tasks run inline in the "
            "process that submits them, so there is nothing for a worker to do. Run "
            "workers with the settings the web processes use in production."
        )
