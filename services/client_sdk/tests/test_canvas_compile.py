"""What a canvas compiles to: the steps of a ``SubmitWorkflow``, who each waits for and what
each is fed (``fastworker.canvas``; the contract is ``fastworker_protocol.workflows``)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from fastworker import InvalidArguments, Priority, TaskRegistry, task
from fastworker.canvas import Canvas, Workflow, chain, chord, group, sig
from fastworker_protocol import TaskSpec
from fastworker_protocol.workflows import (
    MAX_STEPS,
    Feed,
    OnFailure,
    SubmitWorkflow,
    WorkflowStep,
)

registry = TaskRegistry()


@task(registry=registry)
def add(x: int, y: int) -> int:
    return x + y


@task(registry=registry)
def double(x: int) -> int:
    return 2 * x


@task(registry=registry, priority="high", queue="sums", max_retries=5)
def tsum(values: list[int]) -> int:
    return sum(values)


@task(registry=registry)
def ping() -> str:
    return "pong"


# What the steps are named: module-qualified, as every task is by default.
ADD, DOUBLE, TSUM, PING = (f"{__name__}.{t}" for t in ("add", "double", "tsum", "ping"))


def shape(item: Canvas) -> list[tuple[str, list[Any], list[int], str]]:
    """Each step as (task name, args, after, feed)."""
    return [(s.task.name, s.task.args, s.after, s.feed.value) for s in item.compile().steps]


def test_a_chain_of_three_feeds_each_result_to_the_next() -> None:
    assert shape(chain(add.s(1, 2), add.s(3), double.s())) == [
        (ADD, [1, 2], [], "none"),
        (ADD, [3], [0], "one"),
        (DOUBLE, [], [1], "one"),
    ]


def test_a_group_of_100_is_100_independent_steps() -> None:
    steps = group(add.s(i, i) for i in range(100)).compile().steps

    assert len(steps) == 100
    assert [s.task.args for s in steps] == [[i, i] for i in range(100)]
    assert all(s.after == [] and s.feed is Feed.NONE for s in steps)


def test_a_chord_of_1000_feeds_its_callback_every_result_in_order() -> None:
    steps = chord([add.s(i, i) for i in range(1000)], tsum.s()).compile().steps

    assert len(steps) == 1001
    callback = steps[-1]
    assert callback.task.name == TSUM
    assert callback.after == list(range(1000))
    assert callback.feed is Feed.ALL


def test_a_diamond_waits_for_both_branches() -> None:
    wf = Workflow()
    top = wf.add(add.s(1, 1))
    left = wf.add(double.s(), after=[top], feed="one")
    right = wf.add(add.s(10), after=[top], feed="one")
    wf.add(tsum.s(), after=[right, left], feed="all")

    assert shape(wf) == [
        (ADD, [1, 1], [], "none"),
        (DOUBLE, [], [0], "one"),
        (ADD, [10], [0], "one"),
        (TSUM, [], [2, 1], "all"),  # in after= order
    ]


def test_dag_steps_are_fed_nothing_unless_they_ask() -> None:
    wf = Workflow()
    a = wf.add(ping.s())
    b = wf.add(ping.s())
    wf.add(ping.s(), after=[a, b])

    assert shape(wf)[2] == (PING, [], [0, 1], "none")


def test_a_dag_step_fed_one_from_a_group_gets_its_list() -> None:
    wf = Workflow()
    fan = wf.add(group(add.s(1, 1), add.s(2, 2)))
    wf.add(tsum.s(), after=[fan], feed="one")

    assert shape(wf)[2] == (TSUM, [], [0, 1], "all")


def test_a_group_between_two_steps_is_fed_and_gathered_like_a_chord() -> None:
    assert shape(chain(add.s(1, 1), group(double.s(), add.s(5)), tsum.s())) == [
        (ADD, [1, 1], [], "none"),
        (DOUBLE, [], [0], "one"),
        (ADD, [5], [0], "one"),
        (TSUM, [], [1, 2], "all"),
    ]


def test_a_group_of_chains_leaves_the_last_result_of_each() -> None:
    fan = group(chain(add.s(1, 1), double.s()), chain(add.s(2, 2), double.s()))

    assert shape(chord(fan, tsum.s())) == [
        (ADD, [1, 1], [], "none"),
        (DOUBLE, [], [0], "one"),
        (ADD, [2, 2], [], "none"),
        (DOUBLE, [], [2], "one"),
        (TSUM, [], [1, 3], "all"),
    ]


def test_a_chord_inside_a_chain_is_fed_and_feeds_on() -> None:
    flow = chain(add.s(1, 1), chord([double.s(), double.s()], tsum.s()), double.s())

    assert shape(flow) == [
        (ADD, [1, 1], [], "none"),
        (DOUBLE, [], [0], "one"),
        (DOUBLE, [], [0], "one"),
        (TSUM, [], [1, 2], "all"),
        (DOUBLE, [], [3], "one"),
    ]


def test_a_group_after_a_group_feeds_each_member_the_whole_list() -> None:
    flow = chain(group(add.s(1, 1), add.s(2, 2)), group(tsum.s(), tsum.s()))

    assert [(after, feed) for _, _, after, feed in shape(flow)[2:]] == [
        ([0, 1], "all"),
        ([0, 1], "all"),
    ]


def test_a_group_of_one_still_leaves_a_list() -> None:
    assert shape(chord([add.s(1, 1)], tsum.s()))[1] == (TSUM, [], [0], "all")
    assert shape(chain(add.s(1, 1), group(double.s()), tsum.s()))[2][2:] == ([1], "all")


def test_a_workflow_in_a_chain_waits_but_feeds_its_entries_nothing() -> None:
    wf = Workflow()
    x = wf.add(ping.s())
    wf.add(add.s(1), after=[x], feed="one")
    wf.add(ping.s())

    assert shape(chain(add.s(1, 1), wf, tsum.s())) == [
        (ADD, [1, 1], [], "none"),
        (PING, [], [0], "none"),
        (ADD, [1], [1], "one"),
        (PING, [], [0], "none"),
        (TSUM, [], [2, 3], "all"),  # the workflow's last steps, in the order added
    ]


def test_a_workflow_in_a_group_and_a_chain_in_a_workflow() -> None:
    wf = Workflow()
    first = wf.add(chain(add.s(1, 1), double.s()))
    wf.add(double.s(), after=[first], feed="one")

    assert shape(chord([wf, add.s(5, 5)], tsum.s())) == [
        (ADD, [1, 1], [], "none"),
        (DOUBLE, [], [0], "one"),
        (DOUBLE, [], [1], "one"),
        (ADD, [5, 5], [], "none"),
        (TSUM, [], [2, 3], "all"),
    ]


def test_a_workflow_with_one_last_step_leaves_its_value_like_a_chain() -> None:
    diamond = Workflow()
    top = diamond.add(add.s(1, 1))
    sides = [diamond.add(double.s(), after=[top], feed="one") for _ in range(2)]
    diamond.add(tsum.s(), after=sides, feed="all")

    assert shape(chain(diamond, double.s()))[-1] == (DOUBLE, [], [3], "one")


def test_a_workflow_with_several_last_steps_cannot_be_one_item_of_a_list() -> None:
    wf = Workflow()
    wf.add(ping.s())
    wf.add(ping.s())

    assert shape(chain(wf, tsum.s()))[-1] == (TSUM, [], [0, 1], "all")
    with pytest.raises(ValueError, match=r"group member 0 .* several last steps"):
        chord([wf, ping.s()], tsum.s()).compile()


def test_immutable_signatures_only_wait() -> None:
    assert shape(chain(add.s(1, 1), ping.si(), group(ping.si(), add.si(2, 2)), ping.si())) == [
        (ADD, [1, 1], [], "none"),
        (PING, [], [0], "none"),
        (PING, [], [1], "none"),
        (ADD, [2, 2], [1], "none"),
        (PING, [], [2, 3], "none"),
    ]


def test_an_empty_chord_header_feeds_the_callback_an_empty_list() -> None:
    assert shape(chord([], tsum.s())) == [(TSUM, [[]], [], "none")]
    assert shape(chain(add.s(1, 1), group(), tsum.s())) == [
        (ADD, [1, 1], [], "none"),
        (TSUM, [[]], [0], "none"),
    ]


def test_nothing_to_run_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing to run"):
        group().compile()
    with pytest.raises(ValueError, match="empty Workflow has nothing to run"):
        Workflow().compile()


def test_feeding_a_nested_list_is_refused_but_waiting_for_one_is_not() -> None:
    nested = group(chain(add.s(1, 1), group(double.s(), double.s())), add.s(2, 2))

    with pytest.raises(ValueError, match=r"tsum\.s\(\) cannot be fed.*group member 0"):
        chord(nested, tsum.s()).compile()
    with pytest.raises(ValueError, match="an empty list"):
        chord([group(), add.s(1, 1)], tsum.s()).compile()
    assert shape(chain(nested, ping.si()))[-1] == (PING, [], [1, 2, 3], "none")


def test_options_are_carried_into_each_step_and_its_task() -> None:
    by_name = sig("report", 1, queue="reports", priority="critical").set(
        max_retries=3, time_limit=2.5
    )
    steps = chain(add.s(1, 1), tsum.s().set(priority="low"), by_name).compile().steps

    assert [(s.priority, s.task.queue) for s in steps] == [
        (Priority.NORMAL, "default"),  # a @task object's own settings
        (Priority.LOW, "sums"),
        (Priority.CRITICAL, "reports"),
    ]
    assert steps[2].task == TaskSpec(
        name="report", args=[1], max_retries=3, time_limit=2.5, queue="reports"
    )
    assert steps[1].task.max_retries is None  # the task's own 5 applies on the control plane


def test_a_task_by_name_has_normal_priority_and_its_registered_queue() -> None:
    (step,) = sig("remote.job", 1, x=2).compile().steps

    assert step == WorkflowStep(task=TaskSpec(name="remote.job", args=[1], kwargs={"x": 2}))


def test_workflow_options_are_carried_into_the_message() -> None:
    message = chain(add.s(1, 1), double.s()).compile(
        workflow_id="nightly-2026-12-03",
        on_failure="continue",
        link=tsum.s(),
        link_error=[sig("alert", channel="ops"), sig("cleanup")],
    )

    assert message.workflow_id == "nightly-2026-12-03"
    assert message.on_failure is OnFailure.CONTINUE
    assert message.link == [TaskSpec(name=TSUM, queue="sums")]
    assert message.link_error == [
        TaskSpec(name="alert", kwargs={"channel": "ops"}),
        TaskSpec(name="cleanup"),
    ]
    assert add.s(1, 1).compile().workflow_id == ""  # left to the client to fill


def test_link_tasks_that_cannot_be_expressed_are_refused() -> None:
    with pytest.raises(ValueError, match=r"always fed .* use \.s\(\), not \.si\(\)"):
        ping.s().compile(link=ping.si())
    with pytest.raises(ValueError, match="no priority of its own"):
        ping.s().compile(link_error=sig("alert", priority="high"))
    with pytest.raises(TypeError, match="link takes signatures"):
        ping.s().compile(link=[chain(ping.s(), ping.s())])  # type: ignore[list-item]
    with pytest.raises(InvalidArguments, match=r"ping\(\).*counting the result it is fed"):
        ping.s().compile(link=ping.s())


def test_a_bad_on_failure_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="on_failure must be one of 'cancel', 'continue'"):
        ping.s().compile(on_failure="ignore")


def test_arguments_are_checked_counting_the_fed_result() -> None:
    assert shape(chain(add.s(1, 2), add.s(3)))  # the first is fed nothing: two arguments

    with pytest.raises(InvalidArguments, match=r"add\(\): too many .*counting the result"):
        chain(add.s(1, 2), add.s(3, 4)).compile()
    with pytest.raises(InvalidArguments, match=r"add\(\): missing a required argument: 'y'"):
        add.s(1).compile()
    with pytest.raises(InvalidArguments, match="counting the result"):
        chord([], add.s(1, 2)).compile()  # fed [] as its first argument


def test_tasks_by_name_are_left_to_the_control_plane_to_check() -> None:
    assert shape(chain(ping.s(), sig("anything", 1, 2, 3))) == [
        (PING, [], [], "none"),
        ("anything", [1, 2, 3], [0], "one"),
    ]


def test_values_that_would_not_come_back_as_themselves_are_refused() -> None:
    with pytest.raises(InvalidArguments, match=re.escape(f"invalid_arguments: {TSUM}(): args[0]")):
        tsum.si({1, 2}).compile()  # type: ignore[arg-type]


def test_a_workflow_refuses_handles_it_did_not_make() -> None:
    mine, other = Workflow(), Workflow()
    foreign = other.add(ping.s())

    with pytest.raises(ValueError, match="belongs to another Workflow"):
        mine.add(ping.s(), after=[foreign])
    with pytest.raises(TypeError, match="after= takes steps returned by add"):
        mine.add(ping.s(), after=[ping.s()])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("after", "feed", "error"),
    [
        (2, "one", "feed='one' needs one parent in after=, got 2"),
        (0, "all", "feed='all' needs parents in after=, got 0"),
        (1, "some", "feed must be one of 'none', 'one', 'all'"),
    ],
)
def test_a_feed_that_does_not_fit_the_parents_is_refused(after: int, feed: str, error: str) -> None:
    wf = Workflow()
    parents = [wf.add(ping.s()) for _ in range(after)]

    with pytest.raises(ValueError, match=error):
        wf.add(tsum.s(), after=parents, feed=feed)


def test_a_dag_refuses_a_parent_twice_and_feeding_an_immutable_step() -> None:
    wf = Workflow()
    x = wf.add(ping.s())

    with pytest.raises(ValueError, match="names a step twice"):
        wf.add(ping.s(), after=[x, x])
    with pytest.raises(ValueError, match="is immutable: it cannot be fed"):
        wf.add(double.si(1), after=[x], feed="one")


def test_a_dag_step_fed_all_from_a_group_is_refused_when_compiled() -> None:
    wf = Workflow()
    fan = wf.add(group(add.s(1, 1), add.s(2, 2)))
    wf.add(tsum.s(), after=[fan], feed="all")

    with pytest.raises(ValueError, match="parent #0 leaves a list of results"):
        wf.compile()


def test_a_workflow_that_contains_itself_is_refused() -> None:
    outer, inner = Workflow(), Workflow()
    with pytest.raises(ValueError, match="cannot be added to itself"):
        outer.add(outer)
    outer.add(inner)
    inner.add(outer)

    with pytest.raises(ValueError, match="contains itself"):
        outer.compile()


def test_the_step_limit_is_enforced_before_sending() -> None:
    assert len(group(ping.s() for _ in range(MAX_STEPS)).compile().steps) == MAX_STEPS

    with pytest.raises(ValueError, match=f"at most {MAX_STEPS} steps"):
        chord([ping.s() for _ in range(MAX_STEPS)], tsum.s()).compile()


def test_the_compiled_message_survives_msgpack_as_the_protocol_type() -> None:
    wf = Workflow()
    top = wf.add(chord([add.s(i, i) for i in range(3)], tsum.s()))
    wf.add(double.s().set(priority="low", time_limit=1.5), after=[top], feed="one")
    message = wf.compile(workflow_id="w1", link=sig("done"), link_error=sig("oops"))

    data = msgspec.msgpack.encode(message)
    decoded = msgspec.msgpack.decode(data, type=SubmitWorkflow)

    assert decoded == message
    raw = msgspec.msgpack.decode(data)
    assert raw["op"] == "submit_workflow"
    assert raw["steps"][3] == {
        "task": {
            "name": TSUM,
            "id": "",
            "args": [],
            "kwargs": {},
            "headers": {},
            "eta": None,
            "max_retries": None,
            "timeout": None,
            "idempotency_key": None,
            "queue": "sums",
        },
        "after": [0, 1, 2],
        "feed": "all",
        "priority": "high",
    }
    assert msgspec.json.decode(msgspec.json.encode(message), type=SubmitWorkflow) == message
