"""``manage.py fastworker subworker|control-plane|dev [ARGS]``: FastWorker's services,
running this project's tasks with its settings.

It runs the ``fastworker`` command in this process, Django set up, with the project's
task modules (``.workers`` says what it adds); ``ARGS`` go to that command unchanged
(``manage.py fastworker subworker --concurrency 8``, ``... subworker --help``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.apps import apps  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.core.management.base import (  # type: ignore[import-untyped]
    BaseCommand,
    CommandError,
)

from fastworker.integration.django._process import become_worker
from fastworker.integration.django.apps import project_settings, refuse_eager
from fastworker.integration.django.workers import (
    SERVICES,
    WorkerUsageError,
    project_root,
    worker_argv,
    worker_env,
)


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type hints
    help = (
        "Run FastWorker's control plane, a subworker, or a local dev cluster with this "
        "project's settings and task modules; further arguments go to that command."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("service", choices=SERVICES, help="what to run")
        parser.add_argument(
            "args",
            nargs=argparse.REMAINDER,
            metavar="ARGS",
            help="options of `fastworker SERVICE` (see `manage.py fastworker SERVICE --help`)",
        )

    def handle(self, *args: str, **options: Any) -> None:
        service: str = options["service"]
        settings_module = os.environ.get("DJANGO_SETTINGS_MODULE", "")
        if not settings_module:
            raise CommandError("DJANGO_SETTINGS_MODULE is not set (manage.py sets it)")
        try:
            refuse_eager()
            settings = project_settings()
            task_modules = apps.get_app_config("fastworker").task_modules
            argv = worker_argv(service, task_modules, args)
            root = project_root(settings_module)
            env = worker_env(service, settings, settings_module, os.environ, root)
        except (ImproperlyConfigured, WorkerUsageError) as exc:
            raise CommandError(str(exc)) from exc
        os.environ.update(env)
        become_worker()
        from fastworker.cli import main  # the commands, and their plugins, only now

        code = main(argv)
        if code:
            sys.exit(code)
