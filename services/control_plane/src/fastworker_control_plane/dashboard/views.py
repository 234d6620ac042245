"""The JSON documents of the HTTP API (docs/http-api.md), built from the control plane's
state. Pure: the engine and ``now`` in, plain dicts out; the routes encode them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from fastworker import __version__
from fastworker.tracing import trace_id_of
from fastworker_control_plane.action_log import Action
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.events import Event
from fastworker_protocol import (
    MAX_NESTING,
    Priority,
    TaskError,
    TaskResult,
    TaskSignature,
    describe_ext,
)
from fastworker_protocol.operations import DeadLetter, FailedList, FailedPurged, FailedRetried
from fastworker_protocol.workflows import WorkflowInfo

SNAPSHOT_THROUGHPUT = 5  # seconds of throughput in each snapshot (the newest still filling)


@dataclass(frozen=True)
class Identity:
    instance_id: str
    started_at: float


def overview(engine: Engine, me: Identity) -> dict[str, Any]:
    view = engine.view
    cache = view.results_stats
    return {
        "instance_id": me.instance_id,
        "version": __version__,
        "started_at": me.started_at,
        "queues": {str(p): view.depth(p) for p in Priority.by_rank()},
        "scheduled": view.waiting_for_time(),
        "in_flight": view.in_flight(),
        "workers": view.workers,
        "totals": view.stats.totals(),
        "results": {
            "size": view.results,
            "bytes": view.results_bytes,
            "hits": cache.hits,
            "misses": cache.misses,
            "evictions": cache.evictions,
        },
        "events": {"published": engine.events.published, "dropped": engine.events.dropped},
    }


def workers(engine: Engine, now: float) -> list[dict[str, Any]]:
    out = []
    for info in engine.view.list_workers(now):
        item = msgspec.structs.asdict(info)
        item["last_heartbeat"] = now - info.last_seen_ago
        out.append(item)
    return out


def task_summary(result: TaskResult) -> dict[str, Any]:
    return {
        "task_id": result.task_id,
        "name": result.name,
        "status": result.status,
        "priority": result.priority,
        "attempts": result.attempts,
        "worker_id": result.worker_id,
        "submitted_at": result.submitted_at,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "duration": _duration(result.started_at, result.finished_at),
        "error": _error(result.error, traceback=False),
    }


def task_detail(record: TaskRecord) -> dict[str, Any]:
    """A finished task's arguments are ``null`` unless the control plane keeps them
    (``--result-keep-arguments``): ``[]`` would claim it was called without any."""
    result = record.snapshot()
    kept = record.arguments_kept
    return {
        **task_summary(result),
        "error": _error(result.error, traceback=True),
        "arguments_kept": kept,
        "args": json_safe(record.args) if kept else None,
        "kwargs": json_safe(record.kwargs) if kept else None,
        "result": json_safe(record.result),
        "attempt_errors": [_error(e, traceback=True) for e in record.attempt_errors],
        "eta": record.eta,
        "trace_id": trace_id_of(record.headers),
        "retry_of": result.retry_of,  # the dead letter this task runs again
    }


def workflow(info: WorkflowInfo) -> dict[str, Any]:
    """A workflow and its steps, step ``i`` at index ``i`` (its task is ``<id>.<i>``);
    ``after`` lists the indexes of the steps it waits for: the graph's edges."""
    return {
        "workflow_id": info.workflow_id,
        "state": str(info.state),
        "on_failure": str(info.on_failure),
        "submitted_at": info.submitted_at,
        "finished_at": info.finished_at,
        "steps": [
            {
                "index": i,
                "task_id": step.task_id,
                "name": step.name,
                "state": str(step.state),
                "after": list(step.after),
            }
            for i, step in enumerate(info.steps)
        ],
    }


def registered(engine: Engine) -> list[Any]:
    """Every registration, each field listed (the wire leaves defaults out)."""
    signatures = engine.view.signatures
    return [_whole(signatures[name]) for name in sorted(signatures)]


def _whole(signature: TaskSignature) -> dict[str, Any]:
    fields = _by_wire_name(signature)
    fields["params"] = [_by_wire_name(p) for p in signature.params]
    return fields


def _by_wire_name(struct: msgspec.Struct) -> dict[str, Any]:
    """Every field under its name on the wire (``time_limit`` is ``timeout`` there)."""
    return {f.encode_name: getattr(struct, f.name) for f in msgspec.structs.fields(struct)}


def schedules(engine: Engine, now: float) -> list[Any]:
    return [msgspec.to_builtins(s, enc_hook=_ext_text) for s in engine.view.schedule_infos()]


def _ext_text(value: Any) -> str:
    """A schedule's argument of a registered type (sent as an extension value), shown."""
    if isinstance(value, msgspec.msgpack.Ext):
        return describe_ext(value)
    raise TypeError(f"cannot show a {type(value).__name__}")


def throughput(engine: Engine, now: float, window: int) -> dict[str, Any]:
    points = engine.view.stats.throughput.points(now, window)
    return {
        "interval": 1.0,
        "points": [{"t": t, "succeeded": ok, "failed": failed} for t, ok, failed in points],
    }


def queues(engine: Engine, now: float) -> list[dict[str, Any]]:
    """The named queues: depth per priority, oldest age, running, workers, paused, limits."""
    return [msgspec.structs.asdict(q) for q in engine.view.queue_infos(now)]


def limits(engine: Engine, now: float) -> list[dict[str, Any]]:
    """The rate and concurrency limits in effect, on queues and on task names."""
    return [msgspec.structs.asdict(limit) for limit in engine.view.limit_infos(now)]


def queue_acted(engine: Engine, queue: str, purged: int = 0) -> dict[str, Any]:
    """A queue after a pause, resume or purge (as the wire's ``queue_acted``)."""
    return {"queue": queue, "paused": engine.view.is_paused(queue), "purged": purged}


def queue_state(engine: Engine, now: float) -> dict[str, Any]:
    """The stream's ``queues`` event: the queues and the limits, sent with every snapshot
    so that pauses and limit changes show at once wherever they were made."""
    return {"queues": queues(engine, now), "limits": limits(engine, now)}


def event(e: Event) -> dict[str, Any]:
    return {
        "kind": e.kind,
        "task_id": e.task_id,
        "name": e.name,
        "worker_id": e.worker_id,
        "attempts": e.attempts,
        "at": e.at,
    }


def action(a: Action) -> dict[str, Any]:
    """An operator's action, as the stream's ``actions`` event carries it."""
    return {
        "seq": a.seq,
        "kind": a.kind,
        "target": a.target,
        "source": a.source,
        "at": a.at,
        "detail": json_safe(a.detail),
    }


def dead_letter(d: DeadLetter) -> dict[str, Any]:
    """A dead letter in full: its arguments, its last error with the traceback, and the
    earlier attempts' errors."""
    return {
        "task_id": d.task_id,
        "name": d.name,
        "status": str(d.status),
        "error": _error(d.error, traceback=True),
        "args": json_safe(d.args),
        "kwargs": json_safe(d.kwargs),
        "priority": str(d.priority),
        "queue": d.queue,
        "attempts": d.attempts,
        "attempt_errors": [_error(e, traceback=True) for e in d.attempt_errors],
        "worker_id": d.worker_id,
        "submitted_at": d.submitted_at,
        "failed_at": d.failed_at,
        "retry_of": d.retry_of,
        "truncated": d.truncated,
    }


def failed_list(listing: FailedList) -> dict[str, Any]:
    return {
        "tasks": [dead_letter(d) for d in listing.tasks],
        "total": listing.total,
        "stored": listing.stored,
        "more": listing.more,
    }


def failed_retried(reply: FailedRetried) -> dict[str, Any]:
    return {
        "retried": [{"task_id": r.task_id, "new_task_id": r.new_task_id} for r in reply.retried],
        "missing": list(reply.missing),
        "more": reply.more,
    }


def failed_purged(reply: FailedPurged) -> dict[str, Any]:
    return {"purged": reply.purged, "missing": list(reply.missing)}


def cancelled(result: TaskResult, changed: bool) -> dict[str, Any]:
    return {"task_id": result.task_id, "status": str(result.status), "changed": changed}


def snapshot(engine: Engine, me: Identity, now: float) -> dict[str, Any]:
    return {
        "overview": overview(engine, me),
        "workers": workers(engine, now),
        "throughput": throughput(engine, now, SNAPSHOT_THROUGHPUT)["points"],
    }


def json_safe(value: Any, depth: int = MAX_NESTING) -> Any:
    """``value`` as JSON can carry it, so that no task makes its page fail: msgpack carries
    map keys such as ``None``, ``True`` or tuples that JSON cannot (they become their
    ``repr``) and extension values (a UUID or a Decimal becomes its ``str``, any other
    ``"ext(code, N bytes)"``: the control plane knows no application's types); containers
    nested past ``depth`` become ``"..."`` (only a result can nest that deep: arguments
    deeper than ``MAX_NESTING`` are refused, and encoders recurse)."""
    if isinstance(value, dict | list | tuple) and depth <= 0:
        return "..."
    if isinstance(value, dict):
        return {
            k if isinstance(k, str) else repr(k): json_safe(v, depth - 1) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [json_safe(v, depth - 1) for v in value]
    if isinstance(value, msgspec.msgpack.Ext):
        return describe_ext(value)
    return value


def _duration(started: float | None, finished: float | None) -> float | None:
    return None if started is None or finished is None else max(0.0, finished - started)


def _error(error: TaskError | None, *, traceback: bool) -> dict[str, Any] | None:
    if error is None:
        return None
    out = {"type": error.type, "message": error.message, "reason": error.reason}
    if traceback:
        out["traceback"] = error.traceback
    return out
