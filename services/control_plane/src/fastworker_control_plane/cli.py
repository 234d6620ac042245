"""``fastworker-control-plane`` (also ``fastworker control-plane``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from fastworker.cli.common import (
    EXIT_OK,
    EXIT_TASK_FAILED,
    EXIT_USAGE,
    CommandError,
    add_auth_token,
    add_log_level,
    add_tls_options,
    serve,
    tls_from,
    traced,
)
from fastworker.options import add_option, queue_weights
from fastworker_common.allocator import return_large_blocks_to_the_system
from fastworker_common.health import PortInUse, check
from fastworker_common.log_setup import configure_logging
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.durability.journal import JournalError
from fastworker_control_plane.ha.node import replicated_or_alone
from fastworker_control_plane.launch import on_chosen_allocator
from fastworker_control_plane.supervision import TaskDied
from fastworker_protocol import (
    DEFAULT_BASE_PORT,
    DEFAULT_DISCOVERY_PORT,
    DEFAULT_MAX_MESSAGE_SIZE,
)
from fastworker_subworker import TaskModuleError, load_task_modules
from fastworker_subworker.cli import add_recycling_options
from fastworker_subworker.processes import cpu_count

_D = ControlPlaneConfig.__dataclass_fields__


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_option(
        parser, "--host", default="127.0.0.1", help="address to bind (0.0.0.0 for every interface)"
    )
    add_option(
        parser,
        "--advertise-host",
        default=None,
        help="host peers should dial, announced on discovery (default: --host, or "
        "this machine's hostname when binding 0.0.0.0)",
    )
    add_option(
        parser,
        "--base-port",
        type=int,
        default=DEFAULT_BASE_PORT,
        help="first submission port; the next five follow it",
    )
    add_option(
        parser,
        "--discovery-port",
        type=int,
        default=DEFAULT_DISCOVERY_PORT,
        help="discovery BUS port",
    )
    add_option(
        parser,
        "--task-modules",
        many=True,
        default=[],
        metavar="MODULE",
        help="modules whose @task functions the control plane runs and accepts",
    )
    add_option(
        parser,
        "--local-concurrency",
        type=int,
        default=os.cpu_count() or 1,
        help="tasks the control plane runs itself at once (0: only subworkers run)",
    )
    add_option(
        parser,
        "--local-queues",
        type=queue_weights,
        default=None,
        metavar="QUEUE[:WEIGHT],...",
        help="queues the control plane takes the tasks it runs itself from, as a "
        "subworker's --queues (default: every queue its --task-modules' tasks name)",
    )
    add_option(
        parser,
        "--local-processes",
        type=int,
        default=cpu_count(),
        help='child processes for the @task(pool="process") tasks the control plane runs '
        "itself, as a subworker's --processes",
    )
    add_recycling_options(parser)
    add_option(
        parser,
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="seconds in-flight local tasks get to finish on SIGTERM",
    )
    add_option(
        parser,
        "--result-ttl",
        type=float,
        default=_D["result_ttl"].default,
        help="seconds a final result is kept",
    )
    add_option(
        parser,
        "--result-max-size",
        type=int,
        default=_D["result_max_size"].default,
        help="results kept at most (least recently used go first)",
    )
    add_option(
        parser,
        "--result-max-bytes",
        type=int,
        default=_D["result_max_bytes"].default,
        help="bytes of results kept at most, counted encoded (least recently used go first)",
    )
    add_option(
        parser,
        "--result-keep-arguments",
        switch=True,
        help="keep finished tasks' arguments in the result cache, for the dashboard and API "
        "(default: dropped when a task finishes)",
    )
    add_option(
        parser,
        "--dead-letter-max",
        type=int,
        default=_D["dead_letter_max"].default,
        help="tasks failed for good kept in the dead-letter store at most (oldest go first)",
    )
    add_option(
        parser,
        "--dead-letter-ttl",
        type=float,
        default=_D["dead_letter_ttl"].default,
        help="seconds a dead letter (a task failed for good) is kept (default: 7 days)",
    )
    add_option(
        parser,
        "--dead-letter-max-bytes",
        type=int,
        default=_D["dead_letter_max_bytes"].default,
        help="bytes of dead letters kept at most, counted encoded with their arguments "
        "(oldest go first)",
    )
    add_option(
        parser,
        "--workflow-ttl",
        type=float,
        default=_D["workflow_ttl"].default,
        help="seconds a finished workflow's state is kept (at least --result-ttl)",
    )
    add_option(
        parser,
        "--workflow-max-finished",
        type=int,
        default=_D["workflow_max_finished"].default,
        help="finished workflows kept at most (oldest go first)",
    )
    add_option(
        parser,
        "--workflow-max-live-bytes",
        type=int,
        default=_D["workflow_max_live_bytes"].default,
        help="bytes unfinished workflows may hold; new ones are refused (queue_full) past it",
    )
    add_option(
        parser,
        "--max-redeliveries",
        type=int,
        default=_D["max_redeliveries"].default,
        help="times a task whose subworker was lost is delivered again",
    )
    add_option(
        parser,
        "--heartbeat-timeout",
        type=float,
        default=_D["heartbeat_timeout"].default,
        help="seconds of silence after which a subworker is dropped",
    )
    add_option(
        parser,
        "--max-message-size",
        type=int,
        default=DEFAULT_MAX_MESSAGE_SIZE,
        help="largest message accepted, in bytes",
    )
    add_option(
        parser,
        "--max-wait",
        type=float,
        default=_D["max_wait"].default,
        help="longest a client may ask a result request to be held, in seconds",
    )
    add_option(
        parser,
        "--max-held-waits",
        type=int,
        default=_D["max_held_waits"].default,
        help="requests held at once waiting for tasks or workflows (about 7 KiB each); "
        "past it a wait is answered at once with what is known, and the client asks again",
    )
    add_option(
        parser,
        "--max-event-streams",
        type=int,
        default=_D["max_event_streams"].default,
        help="dashboard event streams open at once (each may queue 10,000 events, about "
        "2.5 MiB); past it a new one is refused with 503",
    )
    add_option(
        parser,
        "--announce-interval",
        type=float,
        default=_D["announce_interval"].default,
        help="seconds between discovery announcements",
    )
    add_option(
        parser,
        "--max-queued",
        type=int,
        default=_D["max_queued"].default,
        help="live tasks each priority may hold; past it submissions get queue_full",
    )
    add_option(
        parser,
        "--state-dir",
        default=None,
        metavar="PATH",
        help="keep tasks, results and schedules in a journal here, so they survive a "
        "restart or crash (default: in memory only)",
    )
    add_option(
        parser,
        "--salvage-journal",
        switch=True,
        help="start even though the journal is damaged before its end: replay every intact "
        "frame, skip the damage (its tasks are lost) and keep the damaged file aside; "
        "without it such a journal is refused, untouched",
    )
    add_option(
        parser,
        "--http-port",
        type=int,
        default=_D["http_port"].default,
        help="dashboard, JSON API, /metrics, /healthz and /readyz (0: off); binds --host",
    )
    add_replication_options(parser)
    add_auth_token(parser)
    add_option(
        parser,
        "--next-auth-token",
        default=None,
        secret=True,
        help="while rotating the token: the new one, accepted as well as --auth-token",
    )
    add_tls_options(parser, listening=True)
    add_option(
        parser,
        "--check",
        switch=True,
        help="ask a running control plane's /readyz (same --host/--http-port), exit 0 if ready",
    )
    add_log_level(parser)
    parser.set_defaults(run=run)
    return parser


def add_replication_options(parser: argparse.ArgumentParser) -> None:
    add_option(
        parser,
        "--leader-election",
        default=None,
        metavar="URL",
        help="run as one of 2 or 3 replicas: etcd://host:2379[,host:2379]/prefix or "
        "kubernetes://[namespace/]lease-name elects the leader; followers keep a copy of "
        "its journal (needs --state-dir; default: run alone)",
    )
    add_option(
        parser,
        "--lease-duration",
        type=float,
        default=_D["lease_duration"].default,
        metavar="SECONDS",
        help="how long a leader's term lasts unrenewed: how soon a follower takes over "
        "from a leader that died",
    )
    add_option(
        parser,
        "--sync-replicas",
        type=int,
        default=_D["sync_replicas"].default,
        metavar="N",
        help="followers that must have a write on disk before it is acknowledged",
    )
    add_option(
        parser,
        "--require-sync",
        switch=True,
        help="refuse writes while fewer than --sync-replicas followers are in sync "
        "(default: go on alone, and say so in logs, metrics and /readyz)",
    )
    add_option(
        parser,
        "--replication-port",
        type=int,
        default=_D["replication_port"].default,
        metavar="PORT",
        help="where a leader serves its journal to followers (0: the base port + 6)",
    )
    add_option(
        parser,
        "--replica-id",
        default=None,
        metavar="NAME",
        help="this replica's name in metrics and the dashboard, unique among the replicas "
        "(default: host name:replication port)",
    )


def run(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args)
    on_chosen_allocator()  # as `fastworker control-plane`: `launch` did it otherwise
    configure_logging(args.log_level)
    return_large_blocks_to_the_system()
    try:
        load_task_modules(args.task_modules)
        config = ControlPlaneConfig(
            host=args.host,
            advertise_host=args.advertise_host,
            base_port=args.base_port,
            discovery_port=args.discovery_port,
            local_concurrency=args.local_concurrency,
            local_queues=args.local_queues,
            local_processes=args.local_processes,
            max_tasks_per_child=args.max_tasks_per_child,
            max_memory_per_child=args.max_memory_per_child,
            shutdown_timeout=args.shutdown_timeout,
            result_ttl=args.result_ttl,
            result_max_size=args.result_max_size,
            result_max_bytes=args.result_max_bytes,
            result_keep_arguments=args.result_keep_arguments,
            dead_letter_max=args.dead_letter_max,
            dead_letter_ttl=args.dead_letter_ttl,
            dead_letter_max_bytes=args.dead_letter_max_bytes,
            workflow_ttl=args.workflow_ttl,
            workflow_max_finished=args.workflow_max_finished,
            workflow_max_live_bytes=args.workflow_max_live_bytes,
            max_redeliveries=args.max_redeliveries,
            max_queued=args.max_queued,
            heartbeat_timeout=args.heartbeat_timeout,
            max_wait=args.max_wait,
            max_held_waits=args.max_held_waits,
            max_event_streams=args.max_event_streams,
            announce_interval=args.announce_interval,
            max_message_size=args.max_message_size,
            http_port=args.http_port,
            state_dir=args.state_dir or None,
            salvage_journal=args.salvage_journal,
            tls=tls_from(args),
            auth_token=args.auth_token or None,
            next_auth_token=args.next_auth_token or None,
            leader_election=args.leader_election or None,
            lease_duration=args.lease_duration,
            sync_replicas=args.sync_replicas,
            require_sync=args.require_sync,
            replication_port=args.replication_port,
            replica_id=args.replica_id or None,
        )
        plane = replicated_or_alone(config)
        with traced("fastworker-control-plane"):
            return serve(plane.run, plane.request_stop)
    except (TaskModuleError, ValueError, PortInUse, CommandError, JournalError) as exc:
        print(f"fastworker-control-plane: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TaskDied as exc:  # logged with its traceback already: one line here
        print(f"fastworker-control-plane: {exc}", file=sys.stderr)
        return EXIT_TASK_FAILED


def _check(args: argparse.Namespace) -> int:
    if not args.http_port:
        print("fastworker-control-plane: --check needs the HTTP port on", file=sys.stderr)
        return EXIT_USAGE
    ready, said = check(args.host, args.http_port)
    print(said)
    return EXIT_OK if ready else EXIT_TASK_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = configure_parser(
        argparse.ArgumentParser(
            prog="fastworker-control-plane", description="Run a FastWorker control plane."
        )
    )
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
