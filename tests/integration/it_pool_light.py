"""A task module only some subworkers import (the "light" pool of the dispatch tests)."""

from __future__ import annotations

from fastworker import task


@task
def light(value: int) -> int:
    return value
