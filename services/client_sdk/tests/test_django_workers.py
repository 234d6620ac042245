"""What ``manage.py fastworker SERVICE ARGS`` runs (``fastworker.integration.django.workers``):
the ``fastworker`` line, Django's bootstrap module first, and the environment it gets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fastworker import TLS
from fastworker.integration.django.conf import read_settings
from fastworker.integration.django.workers import (
    BOOTSTRAP,
    WorkerUsageError,
    project_root,
    worker_argv,
    worker_env,
)


@pytest.mark.parametrize("service", ["subworker", "control-plane", "dev"])
def test_the_bootstrap_module_comes_before_the_projects_task_modules(service: str) -> None:
    argv = worker_argv(service, ["blog.tasks", "shop.tasks"], ["--concurrency", "4"])

    assert argv == [
        service,
        "--task-modules",
        BOOTSTRAP,
        "blog.tasks",
        "shop.tasks",
        "--concurrency",
        "4",
    ]


def test_a_project_without_tasks_still_sets_django_up() -> None:
    assert worker_argv("subworker", [], []) == ["subworker", "--task-modules", BOOTSTRAP]


def test_djangos_own_options_anywhere_on_the_line_are_not_passed_on() -> None:
    extra = ["--settings", "mysite.prod", "--concurrency", "2", "--pythonpath=/srv", "--help"]

    argv = worker_argv("subworker", ["blog.tasks"], extra)

    assert argv[4:] == ["--concurrency", "2", "--help"]


@pytest.mark.parametrize("flag", [["--task-modules", "other"], ["--task-modules=other"]])
def test_task_modules_on_the_line_are_refused_for_the_setting(flag: list[str]) -> None:
    with pytest.raises(WorkerUsageError, match=r"FASTWORKER\['TASK_MODULES'\]"):
        worker_argv("subworker", ["blog.tasks"], flag)


def test_an_unknown_service_is_refused() -> None:
    with pytest.raises(WorkerUsageError, match="one of subworker, control-plane, dev"):
        worker_argv("worker", [], [])


def test_a_subworker_gets_the_client_settings_it_shares_with_the_project() -> None:
    settings = read_settings(
        {
            "DISCOVERY_ADDRESS": "tls+tcp://cp:5550",
            "AUTH_TOKEN": "secret",
            "MAX_MESSAGE_SIZE": 1024,
            "TLS": TLS(ca_file="ca.pem", server_name="cp.internal"),
            "TIMEOUT": 3,
        }
    )

    env = worker_env("subworker", settings, "mysite.settings", {}, root="/srv/mysite")

    assert env == {
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "PYTHONPATH": "/srv/mysite",
        "FASTWORKER_AUTH_TOKEN": "secret",
        "FASTWORKER_MAX_MESSAGE_SIZE": "1024",
        "FASTWORKER_DISCOVERY_ADDRESS": "tls+tcp://cp:5550",
        "FASTWORKER_TLS_CA": "ca.pem",
        "FASTWORKER_TLS_SERVER_NAME": "cp.internal",
    }


def test_a_control_plane_gets_the_token_but_not_a_clients_tls_or_address() -> None:
    settings = read_settings(
        {"DISCOVERY_ADDRESS": "tcp://cp:5550", "AUTH_TOKEN": "secret", "TLS": TLS("ca.pem")}
    )

    env = worker_env("control-plane", settings, "mysite.settings", {})

    assert env == {"DJANGO_SETTINGS_MODULE": "mysite.settings", "FASTWORKER_AUTH_TOKEN": "secret"}


def test_the_project_directory_goes_first_on_an_existing_pythonpath() -> None:
    existing = os.pathsep.join(["/opt/lib", "/srv/mysite"])

    env = worker_env(
        "dev", read_settings(None), "mysite.settings", {"PYTHONPATH": existing}, "/srv/mysite"
    )

    assert env["PYTHONPATH"] == os.pathsep.join(["/srv/mysite", "/opt/lib"])


def test_the_project_root_is_where_the_settings_package_is_imported_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proj_settings_pkg").mkdir()
    (tmp_path / "proj_settings_pkg" / "__init__.py").write_text("")
    (tmp_path / "proj_settings_pkg" / "settings.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    assert project_root("proj_settings_pkg.settings") == str(tmp_path.resolve())
    assert project_root("no_such_settings_pkg.settings") is None
