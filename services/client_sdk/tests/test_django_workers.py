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


def test_a_control_plane_gets_the_token_and_its_ports_but_not_a_clients_tls() -> None:
    settings = read_settings(
        {"DISCOVERY_ADDRESS": "tcp://cp:5550", "AUTH_TOKEN": "secret", "TLS": TLS("ca.pem")}
    )

    env = worker_env("control-plane", settings, "mysite.settings", {})

    assert env == {
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "FASTWORKER_AUTH_TOKEN": "secret",
        "FASTWORKER_DISCOVERY_PORT": "5550",
        "FASTWORKER_BASE_PORT": "5555",
    }


@pytest.mark.parametrize("service", ["control-plane", "dev"])
def test_a_control_plane_listens_where_the_settings_discovery_address_points(
    service: str,
) -> None:
    # Given settings whose clients look for the control plane on port 7100
    settings = read_settings({"DISCOVERY_ADDRESS": "tcp://127.0.0.1:7100"})

    # When the command's environment is made
    env = worker_env(service, settings, "mysite.settings", {})

    # Then discovery is on that port, and the six request ports follow it as 5555 follows 5550
    assert env["FASTWORKER_DISCOVERY_PORT"] == "7100"
    assert env["FASTWORKER_BASE_PORT"] == "7105"
    assert "FASTWORKER_DISCOVERY_ADDRESS" not in env  # a control plane has no such option


def test_a_base_port_already_in_the_environment_keeps_its_value() -> None:
    settings = read_settings({"DISCOVERY_ADDRESS": "tls+tcp://[::1]:7100"})

    env = worker_env("dev", settings, "mysite.settings", {"FASTWORKER_BASE_PORT": "9000"})

    assert env["FASTWORKER_DISCOVERY_PORT"] == "7100"
    assert "FASTWORKER_BASE_PORT" not in env  # the environment's 9000 stays


def test_without_a_discovery_address_a_control_plane_keeps_the_default_ports() -> None:
    env = worker_env("control-plane", read_settings({"TIMEOUT": 3}), "mysite.settings", {})

    assert not {"FASTWORKER_DISCOVERY_PORT", "FASTWORKER_BASE_PORT"} & set(env)


def test_a_list_of_replicas_addresses_sets_no_port() -> None:
    settings = read_settings({"DISCOVERY_ADDRESS": "tcp://cp-0:5550,tcp://cp-1:5550"})

    env = worker_env("control-plane", settings, "mysite.settings", {})

    assert not {"FASTWORKER_DISCOVERY_PORT", "FASTWORKER_BASE_PORT"} & set(env)


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("ipc:///tmp/cp", "listens on tcp://host:port"),
        ("tcp://cp", "listens on tcp://host:port"),
        ("cp:5550", "listens on tcp://host:port"),
        ("tcp://cp:65534", "set FASTWORKER_BASE_PORT or pass --base-port"),
    ],
)
def test_a_discovery_address_a_control_plane_cannot_listen_on_is_refused(
    address: str, says: str
) -> None:
    settings = read_settings({"DISCOVERY_ADDRESS": address})

    with pytest.raises(WorkerUsageError, match=says):
        worker_env("control-plane", settings, "mysite.settings", {})


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
