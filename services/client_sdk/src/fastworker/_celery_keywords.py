"""What a Celery task option is called in FastWorker, for the error that refuses it.

``@task`` takes only FastWorker's own options; a Celery codebase moved over brings its
own (``bind=True``, ``autoretry_for=...``), and each is refused with the way to say the
same thing here, rather than Python's bare "unexpected keyword argument".
"""

from __future__ import annotations

from collections.abc import Iterable

EQUIVALENTS = {
    "bind": (
        "tasks are not bound: read the running task with fastworker.current_task() "
        "(id, name, attempt...) and retry it with fastworker.retry(countdown=..., exc=...)"
    ),
    "autoretry_for": "retry_on=(...) with max_retries=N retries those exceptions",
    "retry_kwargs": "max_retries=N (and retry_backoff=...) on @task",
    "default_retry_delay": (
        "retry_backoff=SECONDS (the backoff's base), or fastworker.retry(countdown=...)"
    ),
    "retry_jitter": "retries always wait a random time up to their backoff (full jitter)",
    "acks_late": (
        "tasks are acknowledged when they end: one whose subworker is lost is run again "
        "(at least once; see the control plane's --max-redeliveries)"
    ),
    "reject_on_worker_lost": "a task whose subworker is lost runs again (--max-redeliveries)",
    "ignore_result": "result_ttl=0 keeps no result",
    "serializer": (
        "arguments and results are always msgpack; register a type's encoding with "
        "fastworker.register_type"
    ),
    "base": "tasks are functions, not classes: use fastworker.signals for what a base class did",
    "track_started": "a task's start is always tracked (its status is running)",
    "expires": "give a time_limit, or cancel the task (handle.cancel())",
    "shared": "every @task is shared by the processes that import its module",
    "typing": "arguments are always checked against the function's parameters",
}


def refusal(keywords: Iterable[str]) -> str:
    """The error for ``@task`` options FastWorker does not take: one line each, with its
    FastWorker equivalent when it is a Celery option."""
    lines = []
    for keyword in sorted(keywords):
        equivalent = EQUIVALENTS.get(keyword)
        if equivalent is None:
            lines.append(f"@task got an unexpected keyword argument {keyword!r}")
        else:
            lines.append(f"@task({keyword}=...) is Celery's; in FastWorker, {equivalent}")
    return "\n".join(lines)
