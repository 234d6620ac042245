"""Submitting a task once the database transaction commits: ``delay_on_commit``.

A task submitted inside ``transaction.atomic()`` may start on a subworker before the
transaction commits, find no row, or an old one; and a rolled-back transaction must not
leave a task behind. ``transaction.on_commit`` runs the submission after the commit (at
once outside an atomic block, as Django does) and drops it on rollback.

``Task.delay_on_commit(...)`` calls :func:`delay_on_commit`. A submission failing after
the commit (no control plane) raises out of the block that committed, as any
``on_commit`` callback does; the data is committed by then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction  # type: ignore[import-untyped]

from fastworker._task import Task

__all__ = ["apply_async_on_commit", "delay_on_commit"]


def delay_on_commit(
    task: Task[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    using: str | None = None,
) -> None:
    """``task.delay(*args, **kwargs)`` once the transaction of database ``using`` (the
    default one) commits; never if it rolls back."""
    frozen_args, frozen_kwargs = tuple(args), dict(kwargs or {})

    def submit() -> None:
        task.delay(*frozen_args, **frozen_kwargs)

    transaction.on_commit(submit, using=using)


def apply_async_on_commit(
    task: Task[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    using: str | None = None,
    **options: Any,
) -> None:
    """``task.apply_async(args, kwargs, **options)`` (``priority``, ``countdown``,
    ``eta``, ``queue``, ``idempotency_key``, ``time_limit``) once the transaction of
    database ``using`` commits; never if it rolls back."""
    frozen_args, frozen_kwargs = tuple(args), dict(kwargs or {})

    def submit() -> None:
        task.apply_async(frozen_args, frozen_kwargs, **options)

    transaction.on_commit(submit, using=using)
