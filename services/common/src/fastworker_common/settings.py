"""Settings declared once: a config dataclass's fields are its command's flags, its
``FASTWORKER_<NAME>`` environment variables and its page of the CLI reference.

A field is a setting when its metadata says so::

    max_held_waits: int = field(default=5000, metadata=setting("requests held at once"))

From that one declaration :func:`add_settings` adds the flag ``--max-held-waits`` (the
field's name with dashes) whose default is read from ``FASTWORKER_MAX_HELD_WAITS`` when
that is set, else is the field's own; a flag on the command line wins over both. The
value is parsed by the field's type (``int``, ``float`` or ``str``, optional or not; a
``bool`` is an on/off switch) unless the setting names its own parser. A default made by
a factory is made when the parser is built, so ``--help`` shows it, unless the setting is
``late`` (a default worth nothing in ``--help``, such as one made of the process id). A
field kept out of its class's ``repr`` is a secret: ``--help`` says "(set)", never the
value. :func:`config_from` makes the config from the parsed flags, and the config's own
``__post_init__`` checks it. ``docs/gen_cli.py`` renders the CLI reference from the
parsers this builds.

Every other command declares its flags one at a time with :func:`add_option`, by the
same rules. This module only reads the environment and builds parsers: a variable that
does not parse is argparse's usage error (exit status 2), naming the variable.
"""

from __future__ import annotations

import argparse
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    Config = TypeVar("Config", bound=DataclassInstance)

_KEY = "fastworker.setting"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_PLAIN = (int, float, str, bool)


@dataclass(frozen=True)
class Setting:
    """What a config field needs, beyond its name, type and default, to be a flag."""

    help: str
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None  # None: the field's type
    late: bool = False  # the default is made with the config: the flag has none


def setting(
    help: str,
    *,
    metavar: str | None = None,
    parse: Callable[[str], Any] | None = None,
    late: bool = False,
) -> Mapping[str, Setting]:
    """A field's ``metadata`` making it a setting (see the module's docstring)."""
    return {_KEY: Setting(help, metavar, parse, late)}


def add_settings(parser: argparse.ArgumentParser, config: type[DataclassInstance]) -> None:
    """A flag for each setting ``config`` declares, in the order of its fields."""
    hints = typing.get_type_hints(config)
    for field, declared in _settings(config):
        kind = _plain_type(hints[field.name])
        parse = declared.parse or kind
        if parse is None:
            raise TypeError(f"{config.__name__}.{field.name}: name its parser (parse=...)")
        add_option(
            parser,
            "--" + field.name.replace("_", "-"),
            help=declared.help,
            default=_flag_default(field, declared),
            type=parse,
            switch=kind is bool,
            metavar=declared.metavar,
            secret=not field.repr,
        )


def config_from(config: type[Config], args: argparse.Namespace, **given: Any) -> Config:
    """The ``config`` the parsed flags of :func:`add_settings` say; ``given`` are its fields
    that are no settings. A setting given nothing (or an empty text, where the flag has no
    default of its own) keeps the field's default."""
    values = dict(given)
    for field, declared in _settings(config):
        value = getattr(args, field.name)
        blank = value == "" and (declared.late or field.default is None)
        if value is not None and not blank:
            values[field.name] = value
    return config(**values)


def _settings(config: type[DataclassInstance]) -> list[tuple[Field[Any], Setting]]:
    return [(f, f.metadata[_KEY]) for f in fields(config) if _KEY in f.metadata]


def _plain_type(hint: Any) -> type | None:
    """``int`` for ``int`` or ``int | None`` (and so on); ``None`` for anything else."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        others = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        hint = others[0] if len(others) == 1 else None
    return hint if hint in _PLAIN else None


def _flag_default(field: Field[Any], declared: Setting) -> Any:
    if declared.late:
        return None
    if field.default_factory is not MISSING:
        return field.default_factory()
    return None if field.default is MISSING else field.default


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
