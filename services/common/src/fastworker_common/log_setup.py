"""Logging for FastWorker's processes: structlog, JSON lines unless stdout is a terminal
(``FASTWORKER_LOG_FORMAT=json`` or ``console`` decides instead, as ``fastworker dev`` does
for the processes it runs).

Only the subworker and control plane commands (and their task processes) call
:func:`configure_logging`; importing a package never touches logging. It needs the ``server``
extra (structlog), which the client SDK does not install.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    if json is None:
        chosen = os.environ.get("FASTWORKER_LOG_FORMAT", "").lower()
        json = chosen == "json" if chosen in {"json", "console"} else not sys.stdout.isatty()
    use_json = json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info if use_json else _identity,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def _identity(
    logger: object, name: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    return event
