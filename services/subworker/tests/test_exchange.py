"""The outbox holds starts and outcomes until a fetch carries them; the exchange keeps one fetch
held for work, adds a second for news, splits what is too big, and puts back what failed to go."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest

from fastworker import ControlPlaneUnavailable, RequestRejected, Task, TaskRegistry, Unauthorized
from fastworker_protocol import Assign, Assignment, EncodeError, Outcome, TaskError
from fastworker_subworker.exchange import (
    MAX_OUTSTANDING,
    MAX_RETRY_PAUSE,
    RETRY_PAUSE,
    STARTED_DELAY,
    Backoff,
    Exchange,
    Outbox,
)
from fastworker_subworker.executor import Executor
from fastworker_subworker.runner import TaskRunner


class FakeLink:
    """Records the fetches that would go on the wire; replies from ``replies``, then nothing
    (if ``holding``, once ``release()`` is called). Too many outcomes, or "huge", cannot encode.
    It has no blocking side, so the quick lane never fetches here (``test_quick_lane``)."""

    blocks = False

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[Outcome]]] = []
        self.replies: list[list[Assignment] | Exception] = []
        self.holding, self.max_outcomes = False, 1000
        self.in_flight = self.peak = 0
        self._gate = asyncio.Event()
        self.received: list[list[int]] = []  # what each fetch confirmed
        self.batches = 0  # batch numbers handed out

    async def fetch(
        self,
        wait: float,
        prefetch: int,
        started: list[str],
        outcomes: list[Outcome],
        received: list[int] = [],  # noqa: B006 (never mutated)
    ) -> Assign:
        self.received.append(list(received))
        tasks = await self._tasks(started, outcomes)
        self.batches += bool(tasks)
        return Assign(tasks=tasks, batch=self.batches if tasks else 0)

    async def _tasks(self, started: list[str], outcomes: list[Outcome]) -> list[Assignment]:
        if len(outcomes) > self.max_outcomes or any(o.ok and o.result == "huge" for o in outcomes):
            raise EncodeError("too large")
        self.calls.append((list(started), list(outcomes)))
        reply = self.replies.pop(0) if self.replies else []
        if isinstance(reply, Exception):
            raise reply
        if reply or not self.holding:
            return reply
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await self._gate.wait()
        self.in_flight -= 1
        return []

    def release(self) -> None:
        self._gate.set()
        self._gate = asyncio.Event()

    def sent(self) -> list[str]:
        return [o.task_id for _, outcomes in self.calls for o in outcomes]


class Rig:
    """An exchange over a real runner and outbox, talking to a ``FakeLink``."""

    def __init__(self) -> None:
        self.registry, self.outbox, self.link = TaskRegistry(), Outbox(), FakeLink()
        executor = Executor(self.registry)
        self.runner = TaskRunner(executor, 2, self.outbox.started, self.outbox.finished)
        self.forgotten, self.registered, self.until = asyncio.Event(), True, asyncio.Event()
        self.registrations = 0
        self.pauses: list[float] = []  # seconds asked for; the pause itself is one loop turn
        self.exchange = Exchange(self.outbox, self.runner, 30.0, self.forgotten.set, self._pause)
        self.exchange.link = self.link  # type: ignore[assignment]  # a stand-in, duck-typed
        self.running: asyncio.Task[None] | None = None

    def start(self, *, hold: bool) -> asyncio.Task[None]:
        run = self.exchange.run(self.until, hold=hold, ready=self._ready)
        self.running = asyncio.create_task(run)
        return self.running

    async def _ready(self) -> bool:
        if self.forgotten.is_set() and self.registered:  # what the subworker does: register
            self.forgotten.clear()
            self.registrations += 1
        return self.registered

    async def _pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await quiet()


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig()
    yield r
    r.until.set()
    r.link.release()
    if r.running is not None:
        await asyncio.wait_for(r.running, 5)
    outstanding = list(r.exchange._outstanding)
    r.exchange.close()
    await asyncio.wait_for(asyncio.gather(*outstanding, return_exceptions=True), 5)
    await asyncio.wait_for(r.runner.drain(5), 10)
    r.runner.shutdown()


def ok(task_id: str, result: object = None) -> Outcome:
    return Outcome(task_id=task_id, ok=True, result=result)


async def until(predicate: Callable[[], bool], timeout: float = 5) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)  # the outbox and runner announce nothing: poll


async def quiet(turns: int = 1) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_a_start_readies_the_outbox_after_a_delay_an_outcome_at_once() -> None:
    outbox, began = Outbox(), asyncio.get_running_loop().time()
    outbox.started(["a"])
    await asyncio.sleep(0)
    assert (outbox.ready, outbox.pending) == (False, 1)
    await asyncio.wait_for(outbox.wait_ready(), 5)
    assert asyncio.get_running_loop().time() - began >= STARTED_DELAY - 0.001

    outbox.started(["b"])
    outbox.finished([ok("c")])
    assert (outbox.ready, outbox.pending, outbox.take()) == (True, 3, (["a", "b"], [ok("c")]))
    assert (outbox.ready, outbox.pending, outbox.take()) == (False, 0, ([], []))


async def test_put_back_goes_in_front_of_newer_items_and_makes_the_outbox_ready() -> None:
    outbox = Outbox()
    outbox.put_back([], [])
    assert outbox.ready is False
    outbox.put_back(["s2"], [ok("c")])
    assert (outbox.ready, outbox.pending) == (True, 2)
    outbox.put_back(["s1"], [ok("a"), ok("b")])
    outbox.finished([ok("d")])

    assert outbox.take() == (["s1", "s2"], [ok("a"), ok("b"), ok("c"), ok("d")])


async def test_idle_one_fetch_is_held_news_adds_a_second_and_never_a_third(rig: Rig) -> None:
    rig.link.holding = True
    rig.start(hold=True)
    await until(lambda: rig.link.in_flight == 1)
    await quiet(50)
    assert rig.link.calls == [([], [])]

    rig.outbox.finished([ok("t0")])
    await until(lambda: len(rig.link.calls) == 2)
    assert (rig.link.calls[1], rig.link.in_flight) == (([], [ok("t0")]), 2)
    for i in range(1, 10):
        rig.outbox.finished([ok(f"t{i}")])
        await quiet(5)
    assert (len(rig.link.calls), rig.link.peak, rig.outbox.pending) == (2, MAX_OUTSTANDING, 9)

    rig.link.release()  # the two answered, the other nine go out on one new held fetch
    await until(lambda: len(rig.link.sent()) == 10 and rig.link.in_flight > 0)
    assert Counter(rig.link.sent()) == Counter(f"t{i}" for i in range(10))
    assert rig.link.peak == MAX_OUTSTANDING


async def test_the_run_ends_when_the_ready_callback_says_false(rig: Rig) -> None:
    rig.link.holding = True
    running = rig.start(hold=True)
    await until(lambda: rig.link.in_flight == 1)
    rig.registered = False
    rig.outbox.finished([ok("a")])  # wakes the loop, which asks `ready` before sending
    await asyncio.wait_for(running, 5)

    assert (len(rig.link.calls), rig.outbox.pending) == (1, 1)


async def test_without_hold_a_fetch_goes_out_only_with_something_to_report(rig: Rig) -> None:
    rig.start(hold=False)
    await quiet(50)
    assert rig.link.calls == []

    rig.outbox.finished([ok("a")])
    await until(lambda: len(rig.link.calls) == 1)
    rig.outbox.started(["s"])
    await until(lambda: len(rig.link.calls) == 2)
    await quiet(50)
    assert rig.link.calls == [([], [ok("a")]), (["s"], [])]


async def test_a_batch_too_big_to_encode_is_split_and_each_outcome_sent_once(rig: Rig) -> None:
    rig.link.max_outcomes = 3
    outcomes = [ok(f"t{i}", i) for i in range(11)]
    rig.outbox.started(["s"])
    rig.outbox.finished(outcomes)
    rig.start(hold=False)
    await until(lambda: len(rig.link.sent()) >= 11 and rig.outbox.pending == 0)
    await quiet(50)

    assert all(len(sent) <= 3 for _, sent in rig.link.calls)
    assert Counter(o for _, sent in rig.link.calls for o in sent) == Counter(outcomes)
    assert [s for started, _ in rig.link.calls for s in started] == ["s"]


async def test_an_outcome_too_big_alone_goes_out_as_a_result_too_large_error(rig: Rig) -> None:
    rig.outbox.finished([ok("big", "huge"), ok("small", "fine")])
    rig.start(hold=False)
    await until(lambda: sorted(rig.link.sent()) == ["big", "small"])

    sent = {o.task_id: o for _, outcomes in rig.link.calls for o in outcomes}
    error = TaskError(type="ResultTooLarge", message="too large", reason="unserializable_result")
    assert (sent["big"].ok, sent["big"].result, sent["big"].error) == (False, None, error)
    assert sent["small"] == ok("small", "fine")


async def test_news_of_a_fetch_that_found_no_control_plane_goes_again_after_a_pause(
    rig: Rig,
) -> None:
    rig.link.replies = [ControlPlaneUnavailable("-")]
    rig.outbox.started(["a", "b"])
    rig.outbox.finished([ok("a")])
    rig.start(hold=False)
    await until(lambda: len(rig.link.calls) == 2)
    await quiet(50)

    assert rig.link.calls == [(["a", "b"], [ok("a")])] * 2
    assert (rig.outbox.pending, rig.registrations, rig.pauses) == (0, 0, [RETRY_PAUSE])


async def test_outcomes_a_control_plane_rejected_as_unknown_worker_go_again_after_registering(
    rig: Rig,
) -> None:
    # Given a control plane that restarted, or expelled this worker after a freeze
    rig.link.replies = [RequestRejected("unknown_worker", "-")]
    rig.outbox.started(["a", "b"])
    rig.outbox.finished([ok("a")])
    # When a fetch carrying finished work is rejected with unknown_worker
    rig.start(hold=False)
    await until(lambda: len(rig.link.calls) == 2)
    await quiet(50)
    # Then the worker registers again and the outcomes go with the next fetch (the starts,
    # which were about the forgotten registration, do not)
    assert rig.link.calls == [(["a", "b"], [ok("a")]), ([], [ok("a")])]
    assert (rig.outbox.pending, rig.registrations, rig.pauses) == (0, 1, [])


async def test_outcomes_rejected_again_and_again_go_again_after_ever_longer_pauses(
    rig: Rig,
) -> None:
    # Given a control plane that rejects fetches with `internal` (a journal on a full disk)
    internal = RequestRejected("internal", "the journal cannot be written")
    rig.link.replies = [internal] * 4
    rig.outbox.finished([ok("a")])
    # When it rejects the same outcomes four times, then takes them
    rig.start(hold=False)
    await until(lambda: len(rig.link.calls) == 5)
    await quiet(50)
    # Then each pause doubles, and the outcomes are never dropped nor sent twice at once
    assert rig.pauses == [0.5, 1.0, 2.0, 4.0]
    assert rig.link.calls == [([], [ok("a")])] * 5
    assert rig.outbox.pending == 0
    # And after a fetch goes through, the next rejection pauses briefly again
    rig.link.replies = [internal]
    rig.outbox.finished([ok("b")])
    await until(lambda: len(rig.link.calls) == 7)
    assert rig.pauses[4:] == [RETRY_PAUSE]


async def test_a_refused_token_ends_the_exchange_and_nothing_is_sent_again(rig: Rig) -> None:
    # Given a control plane that no longer accepts this worker's token (rotated away)
    rig.link.replies = [Unauthorized("unauthorized", "missing or wrong auth token")]
    rig.outbox.finished([ok("a")])
    # When a fetch is refused
    running = rig.start(hold=True)
    rig.running = None  # it ends here, raising
    # Then the run raises it at once, with no pause and no retry
    with pytest.raises(Unauthorized):
        await asyncio.wait_for(running, 5)
    assert (len(rig.link.calls), rig.pauses) == (1, [])
    # And a settle sends nothing more either (the outcomes stay: nowhere to send them)
    await asyncio.wait_for(rig.exchange.settle(5), 5)
    assert (len(rig.link.calls), rig.outbox.pending) == (1, 1)


def test_the_backoff_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    backoff = Backoff()
    delays = [backoff.next() for _ in range(8)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, MAX_RETRY_PAUSE, MAX_RETRY_PAUSE, MAX_RETRY_PAUSE]
    backoff.reset()
    assert backoff.next() == RETRY_PAUSE


async def test_settle_sends_nothing_while_the_worker_must_register_again(rig: Rig) -> None:
    rig.outbox.finished([ok("a")])
    await asyncio.wait_for(rig.exchange.settle(5, registered=lambda: False), 5)
    assert (rig.link.calls, rig.outbox.pending) == ([], 1)


async def test_assigned_tasks_run_and_their_outcomes_go_out_on_a_later_fetch(rig: Rig) -> None:
    rig.registry.add(Task(fn=abs, name="abs"))  # sync
    rig.registry.add(Task(fn=asyncio.sleep, name="sleep"))  # async: sleep(0, x) returns x
    work = [Assignment(id=n[0], name=n, args=a) for n, a in [("abs", [-7]), ("sleep", [0, 5])]]
    rig.link.replies, rig.link.holding = [work], True
    rig.start(hold=True)
    await until(lambda: sorted(rig.link.sent()) == ["a", "s"])

    first, *later = rig.link.calls
    assert first == ([], [])
    assert sorted(s for started, _ in later for s in started) == ["a", "s"]
    results = {o.task_id: (o.ok, o.result) for _, outcomes in later for o in outcomes}
    assert results == {"a": (True, 7), "s": (True, 5)}


async def test_settle_sends_what_is_left_and_waits_for_fetches_up_to_its_timeout(rig: Rig) -> None:
    rig.link.max_outcomes = 1
    rig.outbox.started(["s"])  # sent at once: settle does not wait out STARTED_DELAY
    rig.outbox.finished([ok(f"t{i}") for i in range(4)])
    await asyncio.wait_for(rig.exchange.settle(5), 10)
    assert sorted(rig.link.sent()) == ["t0", "t1", "t2", "t3"]
    assert [s for started, _ in rig.link.calls for s in started] == ["s"]
    assert (rig.outbox.pending, rig.exchange._outstanding) == (0, set())

    rig.link.holding = True
    rig.outbox.finished([ok("a")])
    await asyncio.wait_for(rig.exchange.settle(0.05), 5)  # returns though the fetch is held
    assert (rig.link.calls[-1], rig.link.in_flight, rig.outbox.pending) == (([], [ok("a")]), 1, 0)


async def test_a_received_batch_is_confirmed_by_the_next_fetch(rig: Rig) -> None:
    rig.registry.add(Task(fn=abs, name="abs"))
    rig.link.replies, rig.link.holding = [[Assignment(id="a", name="abs", args=[-1])]], True
    rig.start(hold=True)

    await until(lambda: len(rig.link.received) >= 2)

    assert rig.link.received[0] == []
    assert rig.link.received[1] == [1]  # the batch of the first reply
    assert all(r == [] for r in rig.link.received[2:])  # confirmed once
