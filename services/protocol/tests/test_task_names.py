"""Resolving a submitted task name: exact names, unique dotted suffixes, ambiguity."""

from __future__ import annotations

import pytest

from fastworker_protocol.task_names import (
    AmbiguousTaskName,
    TaskNames,
    dotted_suffixes,
    resolve_task_name,
)


def test_a_name_has_itself_and_each_shorter_dotted_suffix() -> None:
    assert dotted_suffixes("app.tasks.add") == ["app.tasks.add", "tasks.add", "add"]
    assert dotted_suffixes("add") == ["add"]


def test_a_suffix_with_an_empty_part_is_none() -> None:
    assert dotted_suffixes("a..b") == ["a..b", "b"]
    assert dotted_suffixes("a.b.") == ["a.b."]


def test_a_bare_name_unique_among_registered_names_resolves_to_the_full_name() -> None:
    names = TaskNames(["app.tasks.add", "app.tasks.mul"])

    assert names.resolve("add") == "app.tasks.add"
    assert names.resolve("mul") == "app.tasks.mul"


def test_a_dotted_suffix_resolves_like_a_bare_name() -> None:
    names = TaskNames(["app.tasks.add", "other.jobs.add"])

    assert names.resolve("tasks.add") == "app.tasks.add"
    assert names.resolve("jobs.add") == "other.jobs.add"


def test_a_suffix_must_end_at_a_dot_not_inside_a_part() -> None:
    names = TaskNames(["app.tasks.add"])

    assert names.resolve("dd") is None
    assert names.resolve("s.add") is None


def test_a_name_ending_several_registered_names_is_ambiguous_and_lists_them() -> None:
    names = TaskNames(["shop.tasks.notify", "billing.tasks.notify"])

    with pytest.raises(AmbiguousTaskName) as raised:
        names.resolve("notify")

    assert raised.value.candidates == ["billing.tasks.notify", "shop.tasks.notify"]
    assert str(raised.value) == (
        "task name 'notify' is ambiguous: billing.tasks.notify, shop.tasks.notify; "
        "give the full name"
    )
    with pytest.raises(AmbiguousTaskName):
        names.resolve("tasks.notify")


def test_a_registered_name_stands_for_itself_even_when_it_ends_longer_ones() -> None:
    names = TaskNames(["notify", "billing.tasks.notify", "shop.tasks.notify"])

    assert names.resolve("notify") == "notify"
    assert names.resolve("billing.tasks.notify") == "billing.tasks.notify"


def test_an_unknown_name_resolves_to_nothing() -> None:
    assert TaskNames(["app.tasks.add"]).resolve("sub") is None
    assert TaskNames().resolve("add") is None


def test_a_discarded_name_no_longer_makes_a_suffix_ambiguous() -> None:
    names = TaskNames(["billing.tasks.notify", "shop.tasks.notify"])

    names.discard("shop.tasks.notify")

    assert names.resolve("notify") == "billing.tasks.notify"
    assert "shop.tasks.notify" not in names
    assert "billing.tasks.notify" in names
    assert "notify" not in names  # a suffix is not a registered name


def test_the_pure_function_reads_any_index_of_suffixes() -> None:
    index = {"add": {"a.add"}, "a.add": {"a.add"}}

    assert resolve_task_name("add", index) == "a.add"
    assert resolve_task_name("a.add", index) == "a.add"
    assert resolve_task_name("b", index) is None
