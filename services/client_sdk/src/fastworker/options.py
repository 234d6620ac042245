"""Command-line options that also read ``FASTWORKER_<NAME>`` from the environment.

Every FastWorker command declares its flags through :func:`add_option`, so each flag has
exactly one environment variable, shown in ``--help``, and the flag wins over the variable.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from fastworker_protocol import check_queue, parse_queues

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_name(flag: str) -> str:
    return "FASTWORKER_" + flag.lstrip("-").replace("-", "_").upper()


def add_option(
    parser: argparse.ArgumentParser,
    flag: str,
    *,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
    many: bool = False,
    switch: bool = False,
    required: bool = False,
    metavar: str | None = None,
    secret: bool = False,
) -> None:
    """Add ``flag``; its default comes from ``FASTWORKER_<FLAG>`` when that is set.

    ``many`` takes any number of values (the variable splits on spaces and commas);
    ``switch`` is a boolean flag (the variable takes 1/0, true/false, yes/no, on/off);
    ``required`` flags may be given by their variable instead; a ``secret`` one never
    shows its value in ``--help``.
    """
    env = env_name(flag)
    raw = os.environ.get(env)
    if raw is not None:
        default = _parse_env(parser, env, raw, type, many, switch)
    shown = "(set)" if secret and default else default
    text = f"{help} (env {env}; default: {shown})" if not switch else f"{help} (env {env})"
    if switch:
        parser.add_argument(
            flag, action=argparse.BooleanOptionalAction, default=bool(default), help=text
        )
    else:
        parser.add_argument(
            flag,
            default=default,
            type=type,
            help=text,
            metavar=metavar,
            nargs="*" if many else None,
            required=required and raw is None,
        )


def _parse_env(
    parser: argparse.ArgumentParser,
    env: str,
    raw: str,
    convert: Callable[[str], Any],
    many: bool,
    switch: bool,
) -> Any:
    try:
        if switch:
            value = raw.strip().lower()
            if value not in _TRUE | _FALSE:
                raise ValueError(f"expected true or false, got {raw!r}")
            return value in _TRUE
        if many:
            return [convert(v) for v in raw.replace(",", " ").split()]
        return convert(raw)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        parser.error(f"{env}={raw!r} is invalid: {exc}")


def queue_name(text: str) -> str:
    """A queue name, or a usage error saying the rule."""
    try:
        return check_queue(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def queue_weights(text: str) -> dict[str, int]:
    """``--queues reports:1,default:4``: queue -> weight, or a usage error saying why."""
    try:
        return parse_queues(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
