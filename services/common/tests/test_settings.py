"""Settings declared once, as config fields: the flags, variables and configs made of them."""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass, field

import pytest

from fastworker_common.settings import add_settings, config_from, setting

_made = itertools.count(1)


def _weights(text: str) -> dict[str, int]:
    name, _, weight = text.partition(":")
    return {name: int(weight)}


@dataclass(frozen=True)
class Sample:
    host: str = field(default="127.0.0.1", metadata=setting("address to bind"))
    port: int = field(default=5555, metadata=setting("port", metavar="PORT"))
    ttl: float = field(default=1.5, metadata=setting("seconds kept"))
    limit: int | None = field(default=None, metadata=setting("at most"))
    state_dir: str | None = field(default=None, metadata=setting("where"))
    verbose: bool = field(default=False, metadata=setting("say more"))
    workers: int = field(default_factory=lambda: 8, metadata=setting("workers"))
    name: str = field(
        default_factory=lambda: f"made-{next(_made)}", metadata=setting("n", late=True)
    )
    token: str | None = field(default=None, repr=False, metadata=setting("the secret"))
    weights: dict[str, int] | None = field(default=None, metadata=setting("w", parse=_weights))
    tls: object = None  # not a setting


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog="sample")
    add_settings(made, Sample)
    return made


def sample(*argv: str, **given: object) -> Sample:
    return config_from(Sample, parser().parse_args(list(argv)), **given)


@pytest.fixture(autouse=True)
def _no_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HOST", "PORT", "TTL", "LIMIT", "STATE_DIR", "VERBOSE", "WORKERS", "NAME"):
        monkeypatch.delenv(f"FASTWORKER_{name}", raising=False)
    monkeypatch.delenv("FASTWORKER_TOKEN", raising=False)
    monkeypatch.delenv("FASTWORKER_WEIGHTS", raising=False)


def test_each_setting_is_a_flag_named_after_its_field_in_field_order() -> None:
    flags = [a.option_strings[0] for a in parser()._actions if a.dest != "help"]

    assert flags == [
        "--host",
        "--port",
        "--ttl",
        "--limit",
        "--state-dir",
        "--verbose",
        "--workers",
        "--name",
        "--token",
        "--weights",
    ]


def test_without_flags_or_variables_the_config_has_its_fields_defaults() -> None:
    config = sample()

    assert (config.host, config.port, config.ttl, config.limit) == ("127.0.0.1", 5555, 1.5, None)
    assert (config.verbose, config.workers, config.state_dir) == (False, 8, None)
    assert config.name.startswith("made-")


def test_a_value_is_parsed_by_its_fields_type_or_its_own_parser() -> None:
    config = sample("--port", "6000", "--ttl", "2", "--limit", "3", "--weights", "a:4")

    assert (config.port, config.ttl, config.limit, config.weights) == (6000, 2.0, 3, {"a": 4})


def test_the_flag_beats_the_variable_which_beats_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FASTWORKER_PORT", "6000")
    monkeypatch.setenv("FASTWORKER_TTL", "9")

    config = sample("--port", "7000")

    assert (config.port, config.ttl) == (7000, 9.0)


def test_a_bool_setting_is_a_switch_with_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sample("--verbose").verbose is True
    monkeypatch.setenv("FASTWORKER_VERBOSE", "yes")
    assert sample().verbose is True
    assert sample("--no-verbose").verbose is False


def test_a_badly_typed_variable_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FASTWORKER_PORT", "many")

    with pytest.raises(SystemExit) as exited:
        parser()

    assert exited.value.code == 2
    assert "FASTWORKER_PORT='many' is invalid" in capsys.readouterr().err


def test_help_shows_a_factory_default_but_not_a_late_one_nor_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FASTWORKER_TOKEN", "hunter2")

    text = " ".join(parser().format_help().split())

    assert "workers (env FASTWORKER_WORKERS; default: 8)" in text
    assert "n (env FASTWORKER_NAME; default: None)" in text
    assert "the secret (env FASTWORKER_TOKEN; default: (set))" in text
    assert "hunter2" not in text


def test_a_late_default_is_made_with_each_config() -> None:
    assert sample().name != sample().name
    assert sample("--name", "w1").name == "w1"


def test_an_empty_text_keeps_the_default_only_where_the_flag_has_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FASTWORKER_STATE_DIR", "")
    monkeypatch.setenv("FASTWORKER_NAME", "")
    monkeypatch.setenv("FASTWORKER_HOST", "")

    config = sample()

    assert (config.state_dir, config.name.startswith("made-")) == (None, True)
    assert config.host == ""  # a value of its own: the wildcard host


def test_fields_that_are_no_settings_are_given_to_the_config() -> None:
    marker = object()

    assert sample(tls=marker).tls is marker
    assert "--tls" not in parser().format_help()


def test_a_field_of_a_type_with_no_parser_must_name_one() -> None:
    @dataclass(frozen=True)
    class Unparsed:
        queues: dict[str, int] | None = field(default=None, metadata=setting("queues"))

    with pytest.raises(TypeError, match=r"Unparsed\.queues"):
        add_settings(argparse.ArgumentParser(), Unparsed)
