"""``fastworker.integration.flask`` in the Flask example (examples/flask_app), through
Flask's test client: under ``FASTWORKER_EAGER`` (tasks run inline), against a real control
plane and subworker (the views return ids, the results arrive), and started with no
control plane at all (503 with Retry-After, then the same view succeeds once one comes).
The example's own tests run too, as its README says."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from examples_harness import EXAMPLES, clean_env, copy_example
from flask import Flask
from harness import Cluster, wait_until

import fastworker
from fastworker import _default

pytestmark = pytest.mark.integration

ORDER = {"email": "ada@example.com", "prices": [12.5, 7.5]}
RECEIPT = "(20.00) sent to ada@example.com"
WAIT = {"wait": 20}


@pytest.fixture(autouse=True)
def default_client_kept() -> Iterator[None]:
    """``init_app`` configures the process's default client: as it was, after each test."""
    before = dict(_default._options)
    yield
    fastworker.configure(**before)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the example, imported from there once for the module: its ``@task``
    functions register in this process (once: another import would register others)."""
    where = copy_example("flask_app", tmp_path_factory.mktemp("flask"))
    sys.path.insert(0, str(where))
    yield where
    sys.path.remove(str(where))


@pytest.fixture
def bookshop(example: Path) -> ModuleType:
    return importlib.import_module("bookshop")


@pytest.fixture
def make_app(bookshop: ModuleType) -> Iterator[Callable[..., Flask]]:
    """``create_app(config)``; each app's client is closed (and eager mode ended) after."""
    made: list[Flask] = []

    def make(**config: Any) -> Flask:
        app: Flask = bookshop.create_app(config)
        made.append(app)
        return app

    yield make
    for app in made:
        bookshop.fw.close(app)


def workers_env(cluster: Cluster, example: Path) -> dict[str, str]:
    """The environment of processes that load ``bookshop.tasks`` from the copy."""
    env = cluster.env()
    env["PYTHONPATH"] = os.pathsep.join([str(example), env["PYTHONPATH"]])
    return env


def test_under_eager_a_view_runs_its_task_inline_and_records_it(
    bookshop: ModuleType, make_app: Callable[..., Flask]
) -> None:
    # Given the app made with FASTWORKER_EAGER, and no control plane anywhere
    app = make_app(TESTING=True, FASTWORKER_EAGER=True)
    http = app.test_client()

    # When a view queues a task
    placed = http.post("/orders", json=ORDER)

    # Then it ran before the view answered, and was recorded as submitted
    assert placed.status_code == 202
    with app.app_context():
        [sent] = bookshop.fw.eager.submitted("send_receipt")
    assert sent.task_id == placed.get_json()["task_id"]
    assert sent.args == [placed.get_json()["order_id"], "ada@example.com", 20.0]
    assert sent.succeeded
    receipt = http.get(f"/orders/receipts/{sent.task_id}")
    assert (receipt.status_code, receipt.get_json()["status"]) == (200, "success")
    assert receipt.get_json()["result"].endswith(RECEIPT)


def test_against_a_control_plane_and_a_subworker_the_views_results_arrive(
    cluster: Cluster, example: Path, bookshop: ModuleType, make_app: Callable[..., Flask]
) -> None:
    # Given a control plane that runs nothing itself, and a subworker running the tasks
    env = workers_env(cluster, example)
    cluster.control_plane("--task-modules", "bookshop.tasks", local_concurrency=0, env=env)
    cluster.subworker("--task-modules", "bookshop.tasks", env=env)
    app = make_app(
        FASTWORKER_DISCOVERY_ADDRESS=cluster.discovery,
        FASTWORKER_TIMEOUT=30,
        FASTWORKER_CONNECT_TIMEOUT=20,  # the control plane may still be starting
    )
    http = app.test_client()

    # When the views queue tasks, with fw.delay and with the task's own delay
    placed = http.post("/orders", json=ORDER)
    quoted = http.post("/quotes", json={"prices": [10, 20]})

    # Then each answers an id at once, and the results arrive from the subworker
    assert (placed.status_code, quoted.status_code) == (202, 202)
    receipt = http.get(f"/orders/receipts/{placed.get_json()['task_id']}", query_string=WAIT)
    assert (receipt.status_code, receipt.get_json()["status"]) == (200, "success")
    assert (
        receipt.get_json()["result"]
        == f"receipt for order {placed.get_json()['order_id']} {RECEIPT}"
    )
    quote = http.get(f"/tasks/{quoted.get_json()['task_id']}/result", query_string=WAIT)
    assert (quote.status_code, quote.get_json()["result"]) == (200, 36.0)
    assert quote.get_json()["priority"] == "high"  # the task's own priority
    with app.app_context():
        [subworker] = [w.worker_id for w in bookshop.fw.client.list_workers()]
    ran_on = {
        http.get(f"/tasks/{t.get_json()['task_id']}").get_json()["worker_id"]
        for t in (placed, quoted)
    }
    assert ran_on == {subworker}


async def test_with_no_control_plane_the_app_starts_answers_503_then_succeeds_once_one_comes(
    cluster: Cluster, example: Path, make_app: Callable[..., Flask]
) -> None:
    # Given the app, made while no control plane runs
    started = time.monotonic()
    app = make_app(FASTWORKER_DISCOVERY_ADDRESS=cluster.discovery, FASTWORKER_CONNECT_TIMEOUT=0.5)
    http = app.test_client()
    assert time.monotonic() - started < 1  # init_app connects to nothing

    # When a view needs the control plane, Then it answers 503 within the connect timeout
    asked = time.monotonic()
    down = await asyncio.to_thread(http.post, "/orders", json=ORDER)
    assert down.status_code == 503
    assert down.headers["Retry-After"] == "1"
    assert cluster.discovery in down.get_json()["detail"]
    assert time.monotonic() - asked < 5

    # When a control plane starts, Then the same view succeeds, and its task finishes
    cluster.control_plane("--task-modules", "bookshop.tasks", env=workers_env(cluster, example))
    replies = []

    async def accepted() -> bool:
        replies.append(await asyncio.to_thread(http.post, "/orders", json=ORDER))
        assert replies[-1].status_code in (202, 503), replies[-1].text
        return replies[-1].status_code == 202

    await wait_until(accepted, 30, "the view to accept an order")
    task_id = replies[-1].get_json()["task_id"]
    receipt = await asyncio.to_thread(http.get, f"/orders/receipts/{task_id}", query_string=WAIT)
    assert (receipt.status_code, receipt.get_json()["status"]) == (200, "success")


FORKS = """\
import os, sys
from bookshop import create_app, fw
from fastworker import FastWorkerError

app = create_app({"FASTWORKER_DISCOVERY_ADDRESS": sys.argv[1], "FASTWORKER_TIMEOUT": 20})


def in_child(use):
    pid = os.fork()
    if pid == 0:
        with app.app_context():
            try:
                print(use(), flush=True)
            except FastWorkerError as exc:
                print("refused:", exc, flush=True)
        os._exit(0)  # a refused child's normal exit would hang in nng_fini (pynng's atexit)
    return os.waitpid(pid, 0)[1]


def receipt(n):
    return lambda: fw.result(fw.delay("send_receipt", n, "ada@example.com", 1.0)).status


# forked before anything connected (gunicorn --preload): each child connects on its own
codes = [in_child(receipt(n)) for n in (1, 2)]
with app.app_context():
    print("parent", receipt(3)())
# forked after the parent connected: refused with an error, not aborted by nng
codes.append(in_child(receipt(4)))
print("exit codes", codes)
"""


def test_forked_workers_connect_on_their_own_and_are_refused_once_the_parent_connected(
    cluster: Cluster, example: Path
) -> None:
    cluster.control_plane("--task-modules", "bookshop.tasks", env=workers_env(cluster, example))

    done = subprocess.run(
        [sys.executable, "-c", FORKS, cluster.discovery],
        cwd=example,
        env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert lines[:3] == ["success", "success", "parent success"], done.stdout
    assert lines[3].startswith("refused: this process was forked from process"), done.stderr
    assert lines[4] == "exit codes [0, 0, 0]", done.stdout


def test_the_examples_own_tests_pass_as_its_readme_runs_them() -> None:
    """In the example's folder, under this repository's pytest settings (warnings are
    errors); no bytecode or cache is written there."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=EXAMPLES / "flask_app",
        env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert done.stdout.splitlines()[-1].startswith("4 passed"), done.stdout
