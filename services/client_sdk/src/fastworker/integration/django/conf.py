"""The ``FASTWORKER`` Django setting: one dict, read and checked once, at start.

Its keys are the client's options in Django's spelling (``DISCOVERY_ADDRESS`` for
``discovery_address``...) plus this integration's own (``EAGER``, ``TASK_MODULES``). A key
left out, or set to ``None``, is not passed on, so the SDK's own default applies (which
reads the ``FASTWORKER_*`` environment variables). An unknown key is an error, not a
silent no-op: a misspelt ``AUTH_TOKNE`` would otherwise run without its token.

Pure: it is handed the setting's value and never reads ``django.conf.settings`` itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

from fastworker.tls import TLS

__all__ = ["CLIENT_KEYS", "KEYS", "FastWorkerSettings", "read_settings"]

# FASTWORKER key -> keyword of fastworker.configure() / SyncClient().
CLIENT_KEYS: dict[str, str] = {
    "DISCOVERY_ADDRESS": "discovery_address",
    "ADDRESS": "address",
    "TIMEOUT": "timeout",
    "RETRIES": "retries",
    "CONNECT_TIMEOUT": "connect_timeout",
    "AUTH_TOKEN": "auth_token",
    "TLS": "tls",
    "MAX_MESSAGE_SIZE": "max_message_size",
}
KEYS = frozenset({*CLIENT_KEYS, "EAGER", "TASK_MODULES"})

_TYPES: dict[str, tuple[type, ...]] = {
    "DISCOVERY_ADDRESS": (str,),
    "ADDRESS": (str,),
    "TIMEOUT": (int, float),
    "RETRIES": (int,),
    "CONNECT_TIMEOUT": (int, float),
    "AUTH_TOKEN": (str,),
    "TLS": (TLS,),
    "MAX_MESSAGE_SIZE": (int,),
}


@dataclass(frozen=True)
class FastWorkerSettings:
    """``FASTWORKER`` as this integration uses it."""

    client_options: Mapping[str, Any] = field(default_factory=dict)
    eager: bool = False
    task_modules: tuple[str, ...] = ()


def read_settings(value: object) -> FastWorkerSettings:
    """Check ``settings.FASTWORKER`` (``None`` when the project has none); raises
    ``ImproperlyConfigured`` saying which key is wrong and why."""
    if value is None:
        return FastWorkerSettings()
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"FASTWORKER must be a dict, not {type(value).__name__}")
    for key in value:
        if key not in KEYS:
            raise ImproperlyConfigured(_unknown(key))
    options: dict[str, Any] = {}
    for key, keyword in CLIENT_KEYS.items():
        setting = value.get(key)
        if setting is None:
            continue
        expected = _TYPES[key]
        if isinstance(setting, bool) or not isinstance(setting, expected):
            names = " or ".join(t.__name__ for t in expected)
            raise ImproperlyConfigured(
                f"FASTWORKER[{key!r}] must be {names}, not {type(setting).__name__}"
            )
        options[keyword] = setting
    return FastWorkerSettings(options, _eager(value.get("EAGER")), _modules(value))


def _unknown(key: object) -> str:
    message = f"FASTWORKER has an unknown key {key!r}"
    close = difflib.get_close_matches(str(key), sorted(KEYS), n=1)
    if close:
        return f"{message}: did you mean {close[0]!r}?"
    return f"{message}; the keys are {', '.join(sorted(KEYS))}"


def _eager(value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ImproperlyConfigured(f"FASTWORKER['EAGER'] must be True or False, not {value!r}")
    return value


def _modules(value: Mapping[str, Any]) -> tuple[str, ...]:
    modules = value.get("TASK_MODULES")
    if modules is None:
        return ()
    if isinstance(modules, str) or not isinstance(modules, list | tuple):
        raise ImproperlyConfigured(
            "FASTWORKER['TASK_MODULES'] must be a list of module names, "
            f"not {type(modules).__name__}"
        )
    for name in modules:
        if not isinstance(name, str) or not name:
            raise ImproperlyConfigured(
                f"FASTWORKER['TASK_MODULES'] holds {name!r}: give dotted module names"
            )
    return tuple(modules)
