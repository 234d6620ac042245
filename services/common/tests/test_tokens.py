"""The tokens a server accepts: its own, and during a rotation the next one."""

from __future__ import annotations

import pytest

from fastworker_common.tokens import Tokens


def test_the_token_is_accepted_as_text_or_bytes_and_nothing_else() -> None:
    tokens = Tokens("current")

    assert tokens.accepts("current")
    assert tokens.accepts(b"current")
    for offered in ("", "curren", "current ", "next", None):
        assert not tokens.accepts(offered)


def test_during_a_rotation_the_next_token_is_accepted_too() -> None:
    tokens = Tokens("current", "next")

    assert tokens.accepts("current")
    assert tokens.accepts("next")
    assert not tokens.accepts("other")
    assert tokens.current == "current"  # what this process itself sends


def test_a_plain_string_becomes_tokens_and_none_stays_none() -> None:
    tokens = Tokens.of("t")
    assert tokens is not None
    assert tokens.accepts("t")
    assert Tokens.of(None) is None
    assert Tokens.of(tokens) is tokens


def test_an_empty_token_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be empty"):
        Tokens("")
