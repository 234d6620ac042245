"""Tasks that need a third-party package (humanize), which the image installs."""

from __future__ import annotations

import humanize

from fastworker import task


@task
def describe_upload(size_bytes: int) -> str:
    return f"received {humanize.naturalsize(size_bytes)}"
