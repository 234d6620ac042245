"""A process-pool child's own logic, in this process: running a chunk, deciding a cancel
against what runs (skipped, halted or too late), finding its tasks, the soft time limit."""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from fastworker import SoftTimeLimitExceeded, Task, TaskRegistry, task
from fastworker_protocol import Assignment
from fastworker_subworker import child, child_wire
from fastworker_subworker.executor import Executor

HERE = Path(__file__).parent


class FakeChannel:
    """The child's socket: what it sends is recorded; what it reads is given up front."""

    def __init__(self, *incoming: child_wire.ToChild) -> None:
        self.sent: list[child_wire.FromChild] = []
        self._incoming = list(incoming)

    def send(self, message: child_wire.FromChild) -> None:
        self.sent.append(message)  # list.append is atomic: the reader thread sends too

    def read(self) -> child_wire.ToChild | None:
        return self._incoming.pop(0) if self._incoming else None


class Tasks:
    """A registry of sync tasks recording which of them began, with a gate to hold one."""

    def __init__(self) -> None:
        self.began: list[str] = []
        self.entered, self.gate = threading.Event(), threading.Event()
        self.registry = TaskRegistry()
        self.registry.add(Task(fn=self.echo, name="echo"))
        self.registry.add(Task(fn=self.hold, name="hold"))

    def echo(self, key: str) -> str:
        self.began.append(key)
        return key

    def hold(self, key: str) -> str:
        self.began.append(key)
        self.entered.set()
        self.gate.wait(5)
        return key


@pytest.fixture
def tasks() -> Iterator[Tasks]:
    given = Tasks()
    yield given
    given.gate.set()


def make_child(tasks: Tasks, channel: FakeChannel) -> child.Child:
    return child.Child(cast(child.Channel, channel), Executor(tasks.registry), tasks.registry)


def given(ran: child.Child, chunk: list[Assignment]) -> None:
    """A chunk read by the reader thread (``expect``), then run by the main thread."""
    ran.expect(chunk)
    ran.run(chunk)


def assign(task_id: str, name: str, *args: Any) -> Assignment:
    return Assignment(id=task_id, name=name, args=list(args))


def from_another_thread(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, name="test-commands")
    thread.start()
    return thread


def test_a_chunk_runs_in_order_and_each_task_is_reported_done_as_it_ends(tasks: Tasks) -> None:
    channel = FakeChannel()

    given(make_child(tasks, channel), [assign("a", "echo", "a"), assign("b", "echo", "b")])

    assert tasks.began == ["a", "b"]
    assert [type(m) for m in channel.sent] == [child_wire.Done, child_wire.Done]
    outcomes = [cast(child_wire.Done, m).outcome for m in channel.sent]
    assert [(o.task_id, o.ok, o.result) for o in outcomes] == [("a", True, "a"), ("b", True, "b")]


def test_a_failing_task_is_reported_done_with_its_error_and_the_chunk_goes_on(
    tasks: Tasks,
) -> None:
    channel = FakeChannel()

    given(make_child(tasks, channel), [assign("a", "missing"), assign("b", "echo", "b")])

    outcomes = [cast(child_wire.Done, m).outcome for m in channel.sent]
    assert [(o.task_id, o.ok) for o in outcomes] == [("a", False), ("b", True)]
    assert outcomes[0].error is not None
    assert outcomes[0].error.type == "LookupError"


def test_a_task_cancelled_while_an_earlier_one_runs_is_skipped_and_never_starts(
    tasks: Tasks,
) -> None:
    # Given a chunk whose first task holds the child
    channel = FakeChannel()
    ran = make_child(tasks, channel)

    def cancel_the_second() -> None:
        if tasks.entered.wait(5):
            ran.cancel("b")  # as the reader thread does, while "a" runs
        tasks.gate.set()

    thread = from_another_thread(cancel_the_second)
    # When the second is cancelled while the first runs
    given(ran, [assign("a", "hold", "a"), assign("b", "echo", "b"), assign("c", "echo", "c")])
    thread.join(5)

    # Then it is skipped, said at once, and the chunk goes on without it
    assert tasks.began == ["a", "c"]
    assert channel.sent[0] == child_wire.Skipped("b")
    assert [cast(child_wire.Done, m).outcome.task_id for m in channel.sent[1:]] == ["a", "c"]


def test_a_cancel_read_with_its_chunk_before_the_chunk_starts_skips_the_task(
    tasks: Tasks,
) -> None:
    # Given the reader thread reading a chunk and, right behind it, a cancel of one of its
    # tasks, before the main thread has taken the chunk
    chunk = [assign("a", "echo", "a"), assign("b", "echo", "b")]
    channel = FakeChannel(child_wire.Run(chunk), child_wire.Cancel("b"), child_wire.Stop())
    ran = make_child(tasks, channel)
    chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
    child._read_commands(cast(child.Channel, channel), ran, chunks)

    # When the main thread runs the chunk
    ran.run(chunks.get_nowait())

    # Then the cancelled task never starts and is said to be skipped
    assert tasks.began == ["a"]
    assert child_wire.Skipped("b") in channel.sent
    assert [cast(child_wire.Done, m).outcome.task_id for m in channel.sent[1:]] == ["a"]
    assert chunks.get_nowait() is None  # the Stop


def test_a_cancel_of_the_running_task_halts_the_child_and_nothing_starts_after_it(
    tasks: Tasks,
) -> None:
    channel = FakeChannel()
    ran = make_child(tasks, channel)

    def cancel_the_running_one() -> None:
        if tasks.entered.wait(5):
            ran.cancel("a")
        tasks.gate.set()

    thread = from_another_thread(cancel_the_running_one)
    given(ran, [assign("a", "hold", "a"), assign("b", "echo", "b")])
    thread.join(5)

    assert tasks.began == ["a"]
    assert channel.sent[0] == child_wire.Halted("a")
    # nothing about "b": the subworker terminates the child on ``Halted``
    assert all(getattr(m, "task_id", None) != "b" for m in channel.sent)
    assert all(m.outcome.task_id != "b" for m in channel.sent if isinstance(m, child_wire.Done))


@pytest.mark.parametrize("task_id", ["a", "never-given"])
def test_a_cancel_of_a_finished_or_unknown_task_sends_nothing(tasks: Tasks, task_id: str) -> None:
    channel = FakeChannel()
    ran = make_child(tasks, channel)
    given(ran, [assign("a", "echo", "a")])

    ran.cancel(task_id)

    assert [type(m) for m in channel.sent] == [child_wire.Done]


def test_the_next_chunk_runs_after_a_chunk_whose_task_was_skipped(tasks: Tasks) -> None:
    channel = FakeChannel()
    ran = make_child(tasks, channel)

    def cancel_the_second() -> None:
        if tasks.entered.wait(5):
            ran.cancel("b")
        tasks.gate.set()

    thread = from_another_thread(cancel_the_second)
    given(ran, [assign("a", "hold", "a"), assign("b", "echo", "b")])
    thread.join(5)
    given(ran, [assign("c", "echo", "c")])

    assert tasks.began == ["a", "c"]


# --- finding the tasks ---------------------------------------------------------------------


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``process_tasks`` importable by name, as in a child given this directory."""
    monkeypatch.syspath_prepend(str(HERE))
    yield
    sys.modules.pop("process_tasks", None)


@pytest.mark.usefixtures("importable")
def test_resolve_finds_a_module_level_process_task_by_module_and_qualname() -> None:
    ref = child_wire.TaskRef("process_tasks.double", "process_tasks", "double")
    registry = child.resolve([ref])

    found = registry.get("process_tasks.double")
    assert found is not None
    assert found.pool == "process"
    assert found(21) == 42


@pytest.mark.usefixtures("importable")
@pytest.mark.parametrize(
    ("name", "qualname"),
    [("vanished", "vanished"), ("not_a_task", "not_a_task"), ("renamed", "double")],
)
def test_resolve_refuses_a_name_that_is_not_that_task_there(name: str, qualname: str) -> None:
    ref = child_wire.TaskRef(name, "process_tasks", qualname)

    with pytest.raises(LookupError) as caught:
        child.resolve([ref])

    assert str(caught.value) == (
        f"process task {name!r}: process_tasks.{qualname} is not that task here "
        "(define process tasks at the top level of an importable module)"
    )


def test_resolve_lets_a_module_that_does_not_import_say_why() -> None:
    with pytest.raises(ModuleNotFoundError, match="no_such_module_for_fastworker"):
        child.resolve([child_wire.TaskRef("t", "no_such_module_for_fastworker", "t")])


# --- the soft time limit and memory -------------------------------------------------------


@pytest.fixture
def alarm_restored() -> Iterator[None]:
    """The soft limit takes ``SIGALRM`` and the real-time timer (pytest-timeout uses them
    too): both are put back as they were."""
    handler = signal.getsignal(signal.SIGALRM)
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    yield
    signal.signal(signal.SIGALRM, handler)
    if remaining:
        signal.setitimer(signal.ITIMER_REAL, remaining)


def spin_until(deadline: float) -> None:
    while time.monotonic() < deadline:
        pass


@pytest.mark.usefixtures("alarm_restored")
def test_a_soft_limit_raises_soft_time_limit_exceeded_in_the_running_code() -> None:
    deadline = time.monotonic() + 5

    with (
        pytest.raises(SoftTimeLimitExceeded, match=r"past its 0\.05 s soft time limit"),
        child._soft_limit(0.05),
    ):
        spin_until(deadline)

    assert time.monotonic() < deadline
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.usefixtures("alarm_restored")
def test_a_block_ending_within_its_soft_limit_leaves_no_timer_behind() -> None:
    with child._soft_limit(30.0):
        pass

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.usefixtures("alarm_restored")
def test_a_process_task_past_its_soft_limit_can_catch_it_and_clean_up() -> None:
    registry = TaskRegistry()

    @task(pool="process", soft_time_limit=0.05, registry=registry)
    def tidy() -> str:
        try:
            spin_until(time.monotonic() + 5)
        except SoftTimeLimitExceeded:
            return "cleaned up"
        return "ran to the end"

    @task(pool="process", soft_time_limit=0.05, registry=registry)
    def careless() -> None:
        spin_until(time.monotonic() + 5)

    channel = FakeChannel()
    given(
        child.Child(cast(child.Channel, channel), Executor(registry), registry),
        [assign("a", tidy.name), assign("b", careless.name)],
    )

    tidied, failed = (cast(child_wire.Done, m).outcome for m in channel.sent)
    assert (tidied.ok, tidied.result) == (True, "cleaned up")
    assert failed.error is not None
    assert (failed.ok, failed.error.type) == (False, "SoftTimeLimitExceeded")


def test_resident_memory_is_a_positive_number_of_bytes() -> None:
    rss = child.resident_memory()

    assert isinstance(rss, int)
    assert 1 << 20 < rss < 1 << 40  # this interpreter: more than a MiB, less than a TiB
