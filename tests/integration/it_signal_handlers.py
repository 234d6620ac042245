"""Worker-level signal handlers for tests/integration/test_signals.py (see ``it_signals``)."""

from __future__ import annotations

from it_signals import record

from fastworker import signals


@signals.worker_process_init
def on_init(process: signals.WorkerProcess) -> None:
    record("init", child=process.child, worker_id=process.worker_id, reported_pid=process.pid)


@signals.worker_shutdown
async def on_shutdown(process: signals.WorkerProcess) -> None:
    record("shutdown", child=process.child)
