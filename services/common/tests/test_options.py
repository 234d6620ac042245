"""Options that are both a CLI flag and a ``FASTWORKER_<NAME>`` environment variable."""

from __future__ import annotations

import argparse

import pytest

from fastworker_common.settings import add_option, env_name


def parser_with(**option: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fw-test")
    flag = str(option.pop("flag", "--base-port"))
    add_option(parser, flag, help="the option", **option)  # type: ignore[arg-type]
    return parser


def test_the_variable_name_is_the_flag_upper_cased_with_underscores() -> None:
    assert env_name("--base-port") == "FASTWORKER_BASE_PORT"
    assert env_name("--x") == "FASTWORKER_X"


def test_without_flag_or_variable_the_default_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTWORKER_BASE_PORT", raising=False)

    args = parser_with(type=int, default=5555).parse_args([])

    assert args.base_port == 5555


def test_the_environment_variable_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTWORKER_BASE_PORT", "6000")

    args = parser_with(type=int, default=5555).parse_args([])

    assert args.base_port == 6000


def test_the_flag_beats_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTWORKER_BASE_PORT", "6000")

    args = parser_with(type=int, default=5555).parse_args(["--base-port", "7000"])

    assert args.base_port == 7000


def test_help_names_the_variable_and_the_effective_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FASTWORKER_BASE_PORT", "6000")

    text = parser_with(type=int, default=5555).format_help()

    assert "env FASTWORKER_BASE_PORT" in text
    assert "default: 6000" in text


@pytest.mark.parametrize("raw", ["a b c", "a,b,c", "a, b ,c", " a,,b  c "])
def test_a_many_variable_splits_on_spaces_and_commas(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("FASTWORKER_TASKS", raw)

    args = parser_with(flag="--tasks", many=True).parse_args([])

    assert args.tasks == ["a", "b", "c"]


def test_a_many_flag_takes_several_values_and_beats_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FASTWORKER_PORTS", "1,2")

    parser = parser_with(flag="--ports", many=True, type=int)

    assert parser.parse_args([]).ports == [1, 2]
    assert parser.parse_args(["--ports", "7", "8", "9"]).ports == [7, 8, 9]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
        ("", False),
    ],
)
def test_a_switch_variable_reads_true_and_false_words(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    monkeypatch.setenv("FASTWORKER_DEBUG", raw)

    args = parser_with(flag="--debug", switch=True).parse_args([])

    assert args.debug is expected


def test_a_switch_flag_beats_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTWORKER_DEBUG", "true")
    parser = parser_with(flag="--debug", switch=True)

    assert parser.parse_args(["--no-debug"]).debug is False
    monkeypatch.setenv("FASTWORKER_DEBUG", "false")
    assert parser_with(flag="--debug", switch=True).parse_args(["--debug"]).debug is True


def test_a_switch_defaults_to_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTWORKER_DEBUG", raising=False)

    assert parser_with(flag="--debug", switch=True).parse_args([]).debug is False


def test_a_junk_switch_variable_exits_with_status_two_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FASTWORKER_DEBUG", "maybe")

    with pytest.raises(SystemExit) as exited:
        parser_with(flag="--debug", switch=True)

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "FASTWORKER_DEBUG='maybe' is invalid" in err
    assert "expected true or false" in err


@pytest.mark.parametrize(
    ("flag", "raw", "extra"),
    [("--base-port", "many", {}), ("--ports", "1,two", {"many": True})],
)
def test_a_badly_typed_variable_exits_with_status_two_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    raw: str,
    extra: dict[str, object],
) -> None:
    variable = env_name(flag)
    monkeypatch.setenv(variable, raw)

    with pytest.raises(SystemExit) as exited:
        parser_with(flag=flag, type=int, **extra)

    assert exited.value.code == 2
    assert f"{variable}={raw!r} is invalid" in capsys.readouterr().err
