"""Periodic tasks: the control plane's scheduler runs them, without arguments, once per tick
(never twice for one tick, however many subworkers could run them).

From this folder (examples/scheduling):

    uv run fastworker dev --task-modules tasks     # the cluster: schedules start at once
    uv run python schedules.py                     # another terminal: what is scheduled

The dashboard (http://127.0.0.1:8080/) and ``uv run fastworker schedules`` show them too.
"""

from __future__ import annotations

import time

from fastworker import task


@task(repeat_interval=1.0)
def heartbeat() -> float:
    """Every second (``repeat_interval`` is in seconds, from 0.01 to a year)."""
    return time.time()


@task(cron="*/5 * * * *", cron_tz="Europe/Paris")
def purge_expired_sessions() -> str:
    """At minutes 0, 5, 10... of each hour, Paris time (a cron expression, in ``cron_tz``,
    UTC by default; daylight saving time is followed)."""
    return "purged"


@task(cron="0 7 * * mon-fri")
async def morning_report() -> str:
    """At 07:00 UTC on weekdays."""
    return "report sent"
