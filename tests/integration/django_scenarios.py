"""Scenarios test_django.py runs in a copy of examples/django_project, against a real
control plane and subworker started by ``manage.py fastworker``: ``python
django_scenarios.py NAME`` prints one JSON line of what it saw.

It is the web side: Django set up with the project's settings, tasks submitted through the
process's default client (``FASTWORKER_DISCOVERY_ADDRESS``), and a ``SyncClient`` of its
own to look at the control plane while a transaction is open.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import django  # type: ignore[import-untyped]

django.setup()

from blog.models import Post  # type: ignore[import-not-found]  # noqa: E402 (after django.setup())
from blog.tasks import count_words  # type: ignore[import-not-found]  # noqa: E402
from django.db import transaction  # type: ignore[import-untyped]  # noqa: E402
from django.test import Client as Browser  # type: ignore[import-untyped]  # noqa: E402

from fastworker import SyncClient, default_client  # noqa: E402

WAIT = 20.0


def listed(client: SyncClient) -> list[str]:
    """The ids of the tasks the control plane knows (the cluster serves every scenario)."""
    return [t.task_id for t in client.list_tasks(limit=1000)]


def new_since(client: SyncClient, before: list[str]) -> list[str]:
    return [task_id for task_id in listed(client) if task_id not in before]


def commit() -> dict[str, Any]:
    """delay_on_commit inside atomic(): nothing on the control plane until the commit."""
    with SyncClient(timeout=WAIT) as client:
        before = listed(client)
        with transaction.atomic():
            post = Post.objects.create(title="Committed", body="one two three")
            count_words.delay_on_commit(post.pk)
            while_open = new_since(client, before)
        after_commit = new_since(client, before)
        result = client.wait_result(after_commit[0], WAIT)
    post.refresh_from_db()
    return {
        "while_open": len(while_open),
        "after_commit": len(after_commit),
        "name": result.name,
        "status": result.status.value,
        "result": result.result,
        "word_count": post.word_count,
    }


def rollback() -> dict[str, Any]:
    """delay_on_commit inside a transaction that rolls back: nothing, ever."""
    with SyncClient(timeout=WAIT) as client:
        before = listed(client)
        try:
            with transaction.atomic():
                post = Post.objects.create(title="Rolled back", body="never committed")
                count_words.delay_on_commit(post.pk)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        return {
            "submitted": len(new_since(client, before)),
            "post_exists": Post.objects.filter(pk=post.pk).exists(),
        }


def view() -> dict[str, Any]:
    """The example's view, through Django's test client: the post, then its word count."""
    with SyncClient(timeout=WAIT) as client:
        before = listed(client)
        reply = Browser().post("/posts/", {"title": "From the view", "body": "a b c d e"})
        [task_id] = new_since(client, before)
        result = client.wait_result(task_id, WAIT)
    pk = reply.json()["id"]
    shown = Browser().get(f"/posts/{pk}/").json()
    return {
        "status_code": reply.status_code,
        "status": result.status.value,
        "result": result.result,
        "shown": shown,
        "pk": pk,
    }


def view_by_settings() -> dict[str, Any]:
    """The example's view, with nothing but ``FASTWORKER["DISCOVERY_ADDRESS"]`` to find
    the control plane: the default client, which the settings configured, submits the
    task and reads it back."""
    client = default_client()
    before = listed(client)
    reply = Browser().post("/posts/", {"title": "By the settings", "body": "one two"})
    [task_id] = new_since(client, before)
    result = client.wait_result(task_id, WAIT)
    return {
        "status_code": reply.status_code,
        "status": result.status.value,
        "result": result.result,
    }


def forked(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()`` in a child forked from here, as a prefork server's worker; what it
    reported (or, if it died before reporting, how it ended)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's exit hooks
        os.close(read)
        try:
            report = work()
        except BaseException as exc:  # whatever it is, the parent reports it
            report = {"error": repr(exc)}
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    return {"pid": pid, "exit": os.waitstatus_to_exitcode(status), **json.loads(text or "{}")}


def submit_and_wait(post_id: int) -> dict[str, Any]:
    client = default_client()
    result = client.wait_result(count_words.delay(post_id), WAIT)
    return {"result": result.result, "same_client": default_client() is client}


def fork() -> dict[str, Any]:
    """A prefork server: the parent has Django set up (the default client configured, not
    made); each worker forked from it makes its own client; the parent can still make one."""
    post = Post.objects.create(title="Forked", body="x y")
    children = [forked(lambda: submit_and_wait(post.pk)) for _ in range(2)]
    return {"children": children, "parent": submit_and_wait(post.pk), "pid": os.getpid()}


def fork_after_use() -> dict[str, Any]:
    """A parent that used its client before forking: NNG refuses to start in the child."""
    post = Post.objects.create(title="Forked late", body="x y")
    parent = submit_and_wait(post.pk)
    return {"parent": parent, "child": forked(lambda: submit_and_wait(post.pk))}


def process_task() -> dict[str, Any]:
    """A process task (run in a subworker's child process) that uses the ORM."""
    from blog.process_tasks import count_posts  # type: ignore[import-not-found]

    Post.objects.create(title="Counted", body="in a child process")
    result = default_client().wait_result(count_posts.delay(), WAIT)
    return {"status": result.status.value, "result": result.result, "error": result.error}


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "commit": commit,
    "rollback": rollback,
    "view": view,
    "view_by_settings": view_by_settings,
    "fork": fork,
    "fork_after_use": fork_after_use,
    "process_task": process_task,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
