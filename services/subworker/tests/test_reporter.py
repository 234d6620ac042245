"""The reporter batches outcomes and never dies of one that is too large to send."""

from __future__ import annotations

import asyncio

from fastworker_protocol import EncodeError, Outcome
from fastworker_subworker.reporter import Reporter


class Recorder:
    """Stands in for the link: records reports, refusing any with more than ``limit``."""

    def __init__(self, limit: int = 100, too_big: frozenset[str] = frozenset()) -> None:
        self.limit = limit
        self.too_big = too_big
        self.reports: list[tuple[list[str], list[Outcome]]] = []

    async def __call__(self, started: list[str], outcomes: list[Outcome]) -> None:
        if len(outcomes) > self.limit or any(o.ok and o.task_id in self.too_big for o in outcomes):
            raise EncodeError("Report is over the byte limit")
        self.reports.append((started, outcomes))


def _ok(task_id: str) -> Outcome:
    return Outcome(task_id=task_id, ok=True, result=1)


async def _run_until_flushed(reporter: Reporter) -> None:
    runner = asyncio.create_task(reporter.run())
    try:
        assert await reporter.flush(5)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_outcomes_queued_together_go_in_one_report() -> None:
    send = Recorder()
    reporter = Reporter(send, lambda: None)
    reporter.started(["a"])
    reporter.finished([_ok("a")])
    reporter.finished([_ok("b")])
    await _run_until_flushed(reporter)
    assert send.reports == [(["a"], [_ok("a"), _ok("b")])]


async def test_a_report_too_large_to_encode_is_split_until_it_fits() -> None:
    send = Recorder(limit=3)
    reporter = Reporter(send, lambda: None)
    for i in range(10):
        reporter.finished([_ok(str(i))])
    await _run_until_flushed(reporter)
    sent = [o.task_id for _, outcomes in send.reports for o in outcomes]
    assert sent == [str(i) for i in range(10)]
    assert all(len(outcomes) <= 3 for _, outcomes in send.reports)


async def test_an_outcome_too_large_on_its_own_becomes_a_failure_and_reporting_goes_on() -> None:
    send = Recorder(too_big=frozenset({"huge"}))
    reporter = Reporter(send, lambda: None)
    reporter.finished([_ok("huge")])
    reporter.finished([_ok("small")])
    await _run_until_flushed(reporter)
    outcomes = {o.task_id: o for _, batch in send.reports for o in batch}
    assert outcomes["small"].ok
    assert not outcomes["huge"].ok
    assert outcomes["huge"].error is not None
    assert outcomes["huge"].error.type == "ResultTooLarge"
