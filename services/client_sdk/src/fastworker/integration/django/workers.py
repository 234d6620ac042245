"""What ``manage.py fastworker SERVICE [ARGS]`` runs: the ``fastworker`` command line for
the service, and the environment its processes need.

The line is ``fastworker SERVICE --task-modules BOOTSTRAP TASK_MODULES... ARGS``:
:mod:`.bootstrap` first, so every process that imports the task modules (the command
itself, ``dev``'s children, a restarted one) sets Django up before them. The environment
carries ``DJANGO_SETTINGS_MODULE`` and the project's directory on ``PYTHONPATH`` for the
processes ``dev`` starts, and the ``FASTWORKER`` settings a worker shares with the
project's clients (discovery address, auth token, TLS, message size) as the
``FASTWORKER_*`` variables the commands read, so a flag on the line still wins. A control
plane (or ``dev``) listens where the clients' discovery address points: its port, and the
submission ports after it as 5555 follows 5550.

Pure: names and strings in, argv and variables out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path

from fastworker.integration.django.conf import FastWorkerSettings
from fastworker.tls import TLS
from fastworker_protocol import DEFAULT_BASE_PORT, DEFAULT_DISCOVERY_PORT, PortMap

__all__ = [
    "BOOTSTRAP",
    "SERVICES",
    "WorkerUsageError",
    "listening_ports",
    "project_root",
    "worker_argv",
    "worker_env",
]

SERVICES = ("subworker", "control-plane", "dev")
BOOTSTRAP = "fastworker.integration.django.bootstrap"
# Django's own options, applied by manage.py whatever their place on the line.
_DJANGO_OPTIONS = ("--settings", "--pythonpath")
# The submission ports follow the discovery port as in the default layout (5550, then
# 5555..5560), so one setting moves a project's whole cluster off another's ports.
_BASE_AFTER_DISCOVERY = DEFAULT_BASE_PORT - DEFAULT_DISCOVERY_PORT


class WorkerUsageError(ValueError):
    """A ``manage.py fastworker`` line that cannot work; the message says why."""


def worker_argv(service: str, task_modules: Sequence[str], extra: Sequence[str]) -> list[str]:
    """The ``fastworker`` arguments that run ``service`` with the project's tasks."""
    if service not in SERVICES:
        raise WorkerUsageError(f"unknown service {service!r}: use one of {', '.join(SERVICES)}")
    rest = _without_django_options(extra)
    if any(arg == "--task-modules" or arg.startswith("--task-modules=") for arg in rest):
        raise WorkerUsageError(
            "the task modules are the installed apps' tasks modules and "
            "FASTWORKER['TASK_MODULES']: add modules there, not with --task-modules"
        )
    modules = [BOOTSTRAP, *(m for m in task_modules if m != BOOTSTRAP)]
    return [service, "--task-modules", *modules, *rest]


def _without_django_options(args: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in _DJANGO_OPTIONS:
            skip_value = True
        elif not arg.startswith(tuple(f"{o}=" for o in _DJANGO_OPTIONS)):
            kept.append(arg)
    return kept


def worker_env(
    service: str,
    options: FastWorkerSettings,
    settings_module: str,
    environ: Mapping[str, str],
    root: str | None = None,
) -> dict[str, str]:
    """The variables to set (over ``environ``) before running ``service``."""
    env = {"DJANGO_SETTINGS_MODULE": settings_module}
    if root is not None:
        path = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in path if p != root)])
    client = options.client_options
    if "auth_token" in client:
        env["FASTWORKER_AUTH_TOKEN"] = str(client["auth_token"])
    if "max_message_size" in client:
        env["FASTWORKER_MAX_MESSAGE_SIZE"] = str(client["max_message_size"])
    if service != "subworker":
        # A control plane's TLS is its own certificate, not a client's; but it must listen
        # where the project's clients look for it.
        if "discovery_address" in client:
            env.update(listening_ports(str(client["discovery_address"]), environ))
        return env
    if "discovery_address" in client:
        env["FASTWORKER_DISCOVERY_ADDRESS"] = str(client["discovery_address"])
    tls = client.get("tls")
    if isinstance(tls, TLS):
        for name, value in (
            ("CA", tls.ca_file),
            ("CERT", tls.cert_file),
            ("KEY", tls.key_file),
            ("SERVER_NAME", tls.server_name),
        ):
            if value is not None:
                env[f"FASTWORKER_TLS_{name}"] = value
    return env


def listening_ports(address: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The port variables that make a control plane (or ``dev``) answer at ``address``,
    the discovery address the project's clients dial: its discovery port, and the base
    port 5 above it (``FASTWORKER_BASE_PORT`` in ``environ`` keeps its own). A list of
    replicas' addresses sets none: which one is this process is not known here."""
    if "," in address:
        return {}
    scheme, sep, rest = address.strip().partition("://")
    port = rest.rpartition(":")[2]
    if scheme not in {"tcp", "tls+tcp"} or not sep or not port.isdigit() or int(port) == 0:
        raise WorkerUsageError(
            f"FASTWORKER['DISCOVERY_ADDRESS'] is {address!r}: a control plane listens on "
            "tcp://host:port (or tls+tcp://host:port)"
        )
    env = {"FASTWORKER_DISCOVERY_PORT": port}
    if "FASTWORKER_BASE_PORT" not in environ:
        base = int(port) + _BASE_AFTER_DISCOVERY
        try:
            PortMap(base)
        except ValueError as exc:
            raise WorkerUsageError(
                f"FASTWORKER['DISCOVERY_ADDRESS'] is {address!r}: the submission ports after "
                f"it do not fit ({exc}); set FASTWORKER_BASE_PORT or pass --base-port"
            ) from None
        env["FASTWORKER_BASE_PORT"] = str(base)
    return env


def project_root(settings_module: str) -> str | None:
    """The directory the settings module's top-level package is imported from (the one
    holding ``manage.py``), or ``None`` if it cannot be found."""
    top = settings_module.partition(".")[0]
    try:
        spec = find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))).resolve().parent)
    if spec.origin is None or not Path(spec.origin).is_file():
        return None
    return str(Path(spec.origin).resolve().parent)
