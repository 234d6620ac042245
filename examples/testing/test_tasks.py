"""The shop's tasks, with FastWorker's pytest fixtures: run inline as they are submitted
(``fastworker_eager``), and on the in-process cluster, whose clock the test moves
(``fastworker_cluster``, ``Cluster``)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
import tasks
from tasks import FOLLOW_UP_DELAY, charge_card, follow_up, place_order

from fastworker import SyncClient, TaskStatus
from fastworker.testing import Cluster, Eager

FOLLOW_UP = "order 7: is everything as you expected?"


class FlakyProcessor:
    """Drops the connection ``failures`` times, then charges."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def charge(self, order_id: int, cents: int) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("connection reset by peer")
        return f"ch_{order_id}_{cents}"


class DecliningProcessor:
    def charge(self, order_id: int, cents: int) -> str:
        raise ValueError(f"card declined for order {order_id}")


# --- eager: each task runs inline, in the test, as it is submitted ------------------------


def test_placing_an_order_charges_the_card(fastworker_eager: Eager) -> None:
    charge = place_order(7, 1250)

    [submitted] = fastworker_eager.submitted(charge_card)
    assert (submitted.task_id, submitted.args) == (charge, [7, 1250])
    assert submitted.result.result == "ch_7_1250"


def test_eager_does_not_wait_for_a_countdown(fastworker_eager: Eager) -> None:
    place_order(7, 1250)

    [email] = fastworker_eager.submitted(follow_up)
    assert email.eta is not None  # asked for in six hours...
    assert tasks.outbox == [FOLLOW_UP]  # ...and sent already


def test_a_declined_card_raises_out_of_delay(
    fastworker_eager: Eager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks, "processor", DecliningProcessor())

    with pytest.raises(ValueError, match="card declined"):
        place_order(7, 1250)

    assert fastworker_eager.submitted(follow_up) == []  # never reached


def test_the_client_fixture_alone_is_eager(fastworker_client: SyncClient) -> None:
    task_id = fastworker_client.delay(charge_card, 3, 500)

    assert fastworker_client.wait(task_id) == "ch_3_500"


# --- the in-process cluster: the real scheduling code, on a clock the test moves --------


def test_the_follow_up_goes_out_six_hours_later_not_before(fastworker_cluster: Cluster) -> None:
    place_order(7, 1250)

    fastworker_cluster.advance(FOLLOW_UP_DELAY - 1)
    assert tasks.outbox == []
    [waiting] = [t for t in fastworker_cluster.queued if t.name == follow_up.name]
    assert waiting.status == TaskStatus.SCHEDULED

    fastworker_cluster.advance(1)
    assert tasks.outbox == [FOLLOW_UP]


def test_a_dropped_connection_is_retried_after_a_backoff(
    fastworker_cluster: Cluster, fastworker_client: SyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = FlakyProcessor(failures=2)
    monkeypatch.setattr(tasks, "processor", flaky)

    task_id = charge_card.delay(7, 1250)
    fastworker_cluster.drain()  # runs it, the clock skipping over each backoff

    result = fastworker_client.wait_result(task_id)
    assert (result.status, result.result, result.attempts) == (TaskStatus.SUCCESS, "ch_7_1250", 3)
    assert [e.type for e in result.attempt_errors] == ["ConnectionError", "ConnectionError"]
    assert flaky.calls == 3


def test_a_declined_card_is_not_retried(
    fastworker_cluster: Cluster, fastworker_client: SyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks, "processor", DecliningProcessor())

    result = fastworker_client.wait_result(charge_card.delay(7, 1250))

    assert (result.status, result.attempts) == (TaskStatus.FAILURE, 1)
    assert result.error is not None
    assert result.error.type == "ValueError"


def test_a_wait_for_a_result_lets_the_clock_skip(
    fastworker_cluster: Cluster, fastworker_client: SyncClient
) -> None:
    email = follow_up.apply_async((7,), countdown=FOLLOW_UP_DELAY)

    # The wait's timeout counts on the cluster's clock: longer than the countdown.
    assert fastworker_client.wait(email, timeout=FOLLOW_UP_DELAY + 60) == FOLLOW_UP


def test_the_daily_report_runs_at_eight_in_berlin_across_the_clock_change() -> None:
    # Summer time starts on 29 March 2026: 08:00 in Berlin is 07:00 UTC before, 06:00 after.
    # Results are kept an hour by default: keep them for the whole run.
    with Cluster(start=datetime(2026, 3, 28, 6, tzinfo=UTC), result_ttl=2 * 86400) as cluster:
        cluster.advance(25 * 3600)
        runs = [r.submitted_at for r in cluster.results.values() if r.name == "tasks.daily_report"]

    utc = sorted(datetime.fromtimestamp(t or 0, UTC) for t in runs)
    assert [(t.day, t.hour, t.minute) for t in utc] == [(28, 7, 0), (29, 6, 0)]
    assert {t.astimezone(ZoneInfo("Europe/Berlin")).hour for t in utc} == {8}
    assert tasks.outbox == ["daily report", "daily report"]
