"""Signatures and composites as objects: options, refusals and reprs (``fastworker.canvas``).

What they compile to is in ``test_canvas_compile.py``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mypy import api

from fastworker import Priority, TaskRegistry, task
from fastworker.canvas import Chain, Signature, Workflow, chain, chord, group, sig

registry = TaskRegistry()


@task(registry=registry)
def add(x: int, y: int) -> int:
    return x + y


@task(registry=registry, priority="high", queue="sums")
def tsum(values: list[int]) -> int:
    return sum(values)


CASES = Path(__file__).parent / "typing_cases" / "canvas_calls.py"


def test_s_makes_a_mutable_signature_and_si_an_immutable_one() -> None:
    fed = add.s(2)
    fixed = add.si(2, 2)

    assert (fed.task, fed.args, fed.kwargs, fed.immutable) == (add, (2,), {}, False)
    assert (fixed.args, fixed.immutable) == ((2, 2), True)
    assert fed.name == f"{__name__}.add"  # module-qualified


def test_sig_by_name_takes_priority_and_queue_as_options_and_the_rest_as_the_tasks() -> None:
    s = sig("reports.build", 7, fmt="pdf", priority="HIGH", queue="reports")

    assert s.task == "reports.build"
    assert (s.args, s.kwargs) == ((7,), {"fmt": "pdf"})
    assert (s.priority, s.queue) == (Priority.HIGH, "reports")


def test_the_long_form_passes_keywords_named_like_options_to_the_task() -> None:
    s = Signature("t", (1,), {"priority": 3, "queue": "mine"}, queue="q")

    assert s.kwargs == {"priority": 3, "queue": "mine"}
    assert (s.priority, s.queue) == (None, "q")


def test_set_returns_a_changed_copy_and_none_unsets_an_option() -> None:
    s = add.s(1)
    changed = s.set(priority="low", max_retries=2, time_limit=5)
    unset = changed.set(priority=None)

    assert s.options() == {}
    assert changed.options() == {"priority": Priority.LOW, "max_retries": 2, "time_limit": 5}
    assert unset.options() == {"max_retries": 2, "time_limit": 5}
    assert s.set(immutable=True) == add.si(1)  # type: ignore[call-arg]


@pytest.mark.parametrize("option", ["countdown", "eta", "link", "link_error", "task_id"])
def test_options_a_workflow_step_cannot_have_are_refused_with_the_reason(option: str) -> None:
    options: dict[str, Any] = {option: 1}

    with pytest.raises(ValueError, match=f"{option} is not a workflow step option: .+"):
        add.s(1).set(**options)


def test_an_unknown_option_is_refused_naming_the_known_ones() -> None:
    options: dict[str, Any] = {"prio": "high"}

    with pytest.raises(TypeError, match=r"unknown signature option 'prio'.*priority"):
        add.s(1).set(**options)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"priority": "urgent"}, "unknown priority"),
        ({"queue": "no spaces"}, "bad queue name"),
        ({"max_retries": -1}, "max_retries cannot be negative"),
        ({"time_limit": 0}, "time_limit must be positive"),
    ],
)
def test_bad_option_values_are_refused_when_set(options: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        add.s().set(**options)


def test_a_signature_needs_a_task_object_or_a_name() -> None:
    with pytest.raises(TypeError, match="a @task object or a task name"):
        Signature("")
    with pytest.raises(TypeError, match="a @task object or a task name"):
        Signature(add.fn)  # type: ignore[arg-type]  # the plain function, not the task


def test_pipe_builds_one_flat_chain() -> None:
    a, b, c = add.s(1), add.s(2), add.s(3)

    assert a | b | c == chain(a, b, c) == chain(a, chain(b, c)) == chain([a, b, c])
    assert isinstance(a | b, Chain)
    assert (a | b).items == (a, b)


def test_group_takes_items_or_one_iterable_of_them() -> None:
    items = [add.s(i, i) for i in range(3)]

    assert group(*items) == group(items) == group(s for s in items)
    assert group().items == ()


def test_an_empty_chain_is_refused() -> None:
    with pytest.raises(ValueError, match="an empty chain has no value"):
        chain()


def test_a_task_object_where_a_signature_belongs_is_refused_with_a_hint() -> None:
    with pytest.raises(TypeError, match=r"did you mean add\.s\(\)\?"):
        chain(add, add.s(1))  # type: ignore[arg-type]  # the mistake under test


def test_a_step_handle_where_a_signature_belongs_is_refused_with_a_hint() -> None:
    wf = Workflow()
    x = wf.add(add.s(1, 1))

    with pytest.raises(TypeError, match="a step handle goes in after="):
        group(x, add.s(1, 1))  # type: ignore[arg-type]  # the mistake under test


def test_a_chord_header_must_be_a_group_or_a_list() -> None:
    with pytest.raises(TypeError, match="a chord's header is a group or a list"):
        chord(add.s(1, 1), tsum.s())  # type: ignore[arg-type]  # the mistake under test


def test_reprs_read_like_the_code_that_made_them() -> None:
    assert repr(add.s(2)) == "add.s(2)"
    assert repr(add.si(2, y=3)) == "add.si(2, y=3)"
    assert repr(sig("add", 1, 2)) == "sig('add', 1, 2)"
    assert repr(sig("ping")) == "sig('ping')"
    assert repr(sig("add", 1).set(immutable=True)) == "sig('add', 1).set(immutable=True)"
    assert repr(add.s(1).set(priority="high", queue="q")) == (
        "add.s(1).set(priority='high', queue='q')"
    )
    assert repr(add.s(1) | group(add.s(2), add.s(3)) | tsum.s()) == (
        "add.s(1) | group(add.s(2), add.s(3)) | tsum.s()"
    )
    assert repr(chain(add.s(1, 1))) == "chain(add.s(1, 1))"
    assert repr(chord([add.s(1, 1)], tsum.s())) == "chord([add.s(1, 1)], tsum.s())"


def test_long_composites_and_arguments_are_shortened_in_reprs() -> None:
    big = chord([add.s(i, i) for i in range(1000)], tsum.s())

    assert repr(big) == (
        "chord([add.s(0, 0), add.s(1, 1), add.s(2, 2), ...996 more..., add.s(999, 999)], tsum.s())"
    )
    assert len(repr(tsum.s(list(range(10_000))))) < 60


def test_a_workflow_repr_lists_its_steps_with_their_parents_and_feed() -> None:
    wf = Workflow()
    x = wf.add(add.s(1, 1))
    y = wf.add(add.s(2), after=x, feed="one")
    wf.add(tsum.s(), after=[x, y], feed="all")

    assert repr(wf) == (
        "Workflow(#0 add.s(1, 1); #1 add.s(2) after #0 feed one; #2 tsum.s() after #0 #1 feed all)"
    )
    assert re.fullmatch(r"<step #1 of Workflow at 0x[0-9a-f]+: add\.s\(2\)>", repr(y))


def test_mypy_checks_si_against_the_task_and_leaves_s_unchecked() -> None:
    stdout, stderr, status = api.run(["--strict", "--no-incremental", str(CASES)])
    flagged = {int(n) for n in re.findall(rf"{re.escape(CASES.name)}:(\d+): error", stdout)}
    lines = CASES.read_text().splitlines()
    wrong = {n for n, line in enumerate(lines, 1) if line.endswith("# wrong")}
    assert status == 1, stdout + stderr
    assert flagged == wrong, stdout
