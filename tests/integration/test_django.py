"""``fastworker.integration.django`` with real processes, in a copy of
examples/django_project: its own test suite under the eager settings, and a control plane
and subworker started by ``manage.py fastworker`` that run its tasks against the SQLite
database, while ``django_scenarios.py`` plays the web side (transactions, the view, a
fork)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from examples_harness import EXAMPLES, clean_env
from harness import Cluster, Proc, wait_until

from fastworker.testing import free_port_block

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
COMMAND_TIMEOUT = 60.0
READY_TIMEOUT = 30.0

# A process task using the ORM: its module sets Django up before importing models, since a
# subworker's child process imports only this module.
PROCESS_TASKS = """\
import fastworker.integration.django.bootstrap  # noqa: F401  (Django set up first)

from blog.models import Post
from fastworker import task


@task(pool="process")
def count_posts() -> int:
    return Post.objects.count()
"""

SETTINGS = {
    "settings_it": 'FASTWORKER = {**FASTWORKER, "TASK_MODULES": ["blog.process_tasks"]}\n',
    "settings_typo": 'FASTWORKER = {"DISCOVERY_ADRESS": "tcp://127.0.0.1:5550"}\n',
}


class Project:
    """The copy of the example project, and ``manage.py`` run in it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def env(self, settings: str = "mysite.settings_it", **extra: str) -> dict[str, str]:
        return clean_env(DJANGO_SETTINGS_MODULE=settings, PYTHONPATH=str(self.root), **extra)

    def run(
        self, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *argv],
            cwd=self.root,
            env=env or self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )

    def manage(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.run("manage.py", *args, env=env)

    def start(self, cluster: Cluster, name: str, *args: str, **env: str) -> Proc:
        """``manage.py fastworker ARGS`` in the background, stopped with the cluster."""
        log = cluster.tmp / f"{name}-{len(cluster.procs)}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "manage.py", "fastworker", *args],
                cwd=self.root,
                env=self.env(**env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        proc = Proc(name, popen, log)
        cluster.procs.append(proc)
        return proc

    def scenario(self, name: str, discovery: str) -> dict[str, object]:
        done = self.run(
            str(HERE / "django_scenarios.py"),
            name,
            env=self.env(FASTWORKER_DISCOVERY_ADDRESS=discovery),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The example project, copied and migrated once for the module."""
    root = tmp_path_factory.mktemp("django") / "django_project"
    shutil.copytree(
        EXAMPLES / "django_project",
        root,
        ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3"),
    )
    (root / "blog" / "process_tasks.py").write_text(PROCESS_TASKS, encoding="utf-8")
    for name, text in SETTINGS.items():
        (root / "mysite" / f"{name}.py").write_text(
            f"from mysite.settings import *  # noqa: F403\n\n{text}", encoding="utf-8"
        )
    project = Project(root)
    migrated = project.manage("migrate", "--verbosity", "0")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    return project


@pytest.fixture(scope="module")
def workers(
    project: Project, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A control plane (dispatching only) and a subworker with a process pool, both
    ``manage.py fastworker``, serving the module's tests (each checks only the tasks it
    submitted); yields the discovery address once the subworker is in. Their logs are
    shown if a test failed."""
    cluster = Cluster(tmp_path_factory.mktemp("django-logs"))
    failed_before = request.session.testsfailed
    try:
        project.start(
            cluster,
            "control-plane",
            "control-plane",
            "--base-port",
            str(cluster.base_port),
            "--discovery-port",
            str(cluster.discovery_port),
            "--http-port",
            str(free_port_block(1)),
            "--local-concurrency",
            "0",
            "--shutdown-timeout",
            "3",
        )
        subworker = project.start(
            cluster,
            "subworker",
            "subworker",
            "--concurrency",
            "2",
            "--processes",
            "1",
            FASTWORKER_DISCOVERY_ADDRESS=cluster.discovery,  # the settings read it
        )
        asyncio.run(registered(cluster, "blog.tasks.count_words", "blog.process_tasks.count_posts"))
        yield cluster.discovery
        subworker.stop()
        assert subworker.popen.returncode == 0, subworker.output()[-3000:]
    finally:
        cluster.stop()
        if request.session.testsfailed > failed_before:
            for proc in cluster.procs:
                sys.stderr.write(f"\n--- {proc.name} (pid {proc.pid}) ---\n{proc.output()[-4000:]}")


async def registered(cluster: Cluster, *tasks: str) -> None:
    async with cluster.client() as client:

        async def there() -> bool:
            workers = await client.list_workers()
            return any(set(tasks) <= set(w.tasks) for w in workers if not w.local)

        await wait_until(there, READY_TIMEOUT, f"a subworker running {', '.join(tasks)}")


async def serving(cluster: Cluster, task: str) -> None:
    """Wait until a worker of the cluster, its control plane's own or a subworker, runs
    ``task``."""
    async with cluster.client() as client:

        async def there() -> bool:
            assert all(p.popen.poll() is None for p in cluster.procs), cluster.procs[0].output()
            return any(task in w.tasks for w in await client.list_workers())

        await wait_until(there, READY_TIMEOUT, f"a worker running {task}")


def test_the_example_projects_own_tests_pass_with_its_eager_settings(project: Project) -> None:
    done = project.manage("test", "--settings", "mysite.settings_test", "--verbosity", "2")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ran 4 tests" in done.stderr
    assert "test_a_new_post_has_its_words_counted_once_committed" in done.stderr


def test_delay_on_commit_submits_once_the_transaction_commits_and_the_task_writes_the_row(
    project: Project, workers: str
) -> None:
    seen = project.scenario("commit", workers)

    assert seen == {
        "while_open": 0,  # nothing on the control plane while the transaction was open
        "after_commit": 1,
        "name": "blog.tasks.count_words",  # module-qualified
        "status": "success",
        "result": 3,
        "word_count": 3,  # the subworker's write, read back from SQLite
    }


def test_a_rolled_back_transaction_submits_nothing(project: Project, workers: str) -> None:
    seen = project.scenario("rollback", workers)

    assert seen == {"submitted": 0, "post_exists": False}


def test_the_examples_view_queues_its_task_and_the_subworker_counts_the_words(
    project: Project, workers: str
) -> None:
    seen = project.scenario("view", workers)

    assert seen["status_code"] == 201
    assert (seen["status"], seen["result"]) == ("success", 5)
    assert seen["shown"] == {"id": seen["pk"], "title": "From the view", "word_count": 5}


@pytest.mark.parametrize("service", ["dev", "control-plane"])
def test_manage_py_fastworker_listens_where_the_settings_discovery_address_points(
    project: Project, tmp_path: Path, service: str
) -> None:
    # Given settings whose one port is FASTWORKER["DISCOVERY_ADDRESS"], on a free block:
    # discovery, then the six request ports 5 above it (as 5555 follows 5550)
    port = free_port_block(11)
    settings = f"settings_port_{service.replace('-', '_')}"
    (project.root / "mysite" / f"{settings}.py").write_text(
        "from mysite.settings import *  # noqa: F403\n\n"
        f'FASTWORKER = {{**FASTWORKER, "DISCOVERY_ADDRESS": "tcp://127.0.0.1:{port}"}}\n',
        encoding="utf-8",
    )
    cluster = Cluster(tmp_path, base_port=port + 5, discovery_port=port)
    try:
        # When manage.py fastworker SERVICE runs with them, given no port but the dashboard's
        project.start(
            cluster,
            service,
            service,
            settings=f"mysite.{settings}",
            FASTWORKER_HTTP_PORT=str(free_port_block(1)),
        )
        asyncio.run(serving(cluster, "blog.tasks.count_words"))
        # Then the view, whose client has only the settings to go by, gets its task run
        done = project.run(
            str(HERE / "django_scenarios.py"),
            "view_by_settings",
            env=project.env(f"mysite.{settings}"),
        )
        assert done.returncode == 0, done.stdout + done.stderr + cluster.procs[0].output()
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen == {"status_code": 201, "status": "success", "result": 2}
        assert f"127.0.0.1:{port + 5}" in cluster.procs[0].output()  # the first request port
    finally:
        cluster.stop()


def test_each_worker_forked_from_a_set_up_parent_makes_its_own_default_client(
    project: Project, workers: str
) -> None:
    seen = project.scenario("fork", workers)

    children = seen["children"]
    assert isinstance(children, list)
    assert [(c["exit"], c["result"], c["same_client"]) for c in children] == [(0, 2, True)] * 2
    assert len({c["pid"] for c in children} | {seen["pid"]}) == 3
    assert seen["parent"] == {"result": 2, "same_client": True}


def test_a_child_forked_after_its_parent_used_the_client_cannot_use_one(
    project: Project, workers: str
) -> None:
    """NNG's own limit (what the guide's prefork notes warn of): once a process has
    opened an NNG socket, a child it forks would abort at its first socket; the default
    client says so with a clear error instead."""
    done = project.run(
        str(HERE / "django_scenarios.py"),
        "fork_after_use",
        env=project.env(FASTWORKER_DISCOVERY_ADDRESS=workers),
    )

    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["parent"] == {"result": 2, "same_client": True}
    assert seen["child"]["exit"] == 0  # a clear error, not NNG's abort
    assert "FastWorkerError" in seen["child"]["error"]
    assert "forked" in seen["child"]["error"]


def test_a_process_task_sets_django_up_in_the_subworkers_child_process(
    project: Project, workers: str
) -> None:
    seen = project.scenario("process_task", workers)

    assert seen["error"] is None
    assert seen["status"] == "success"
    assert isinstance(seen["result"], int)
    assert seen["result"] >= 1  # the posts so far, counted in the child process


def test_an_unknown_fastworker_key_stops_the_project_with_improperly_configured(
    project: Project,
) -> None:
    done = project.manage("check", env=project.env("mysite.settings_typo"))

    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert "unknown key 'DISCOVERY_ADRESS': did you mean 'DISCOVERY_ADDRESS'?" in done.stderr


def test_a_worker_refuses_eager_settings(project: Project) -> None:
    done = project.manage("fastworker", "subworker", env=project.env("mysite.settings_test"))

    assert done.returncode == 1
    assert "CommandError: FASTWORKER['EAGER'] is True in these settings" in done.stderr


def test_arguments_after_the_service_go_to_the_fastworker_command(project: Project) -> None:
    done = project.manage("fastworker", "subworker", "--help")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: fastworker subworker")
    assert "--concurrency" in done.stdout
    assert os.environ.get("DJANGO_SETTINGS_MODULE") is None  # set for the child only
