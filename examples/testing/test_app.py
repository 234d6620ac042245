"""The shop's web API, through FastAPI's TestClient, with its tasks run inline (eager) or
by the in-process cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import tasks
from app import app
from fastapi.testclient import TestClient
from tasks import FOLLOW_UP_DELAY, charge_card, follow_up

from fastworker.testing import Cluster, Eager


@pytest.fixture
def http(fastworker_eager: Eager) -> Iterator[TestClient]:
    # Eager mode first: the app's client starts when TestClient starts the app, and a
    # client uses the test backend that is active when it starts.
    with TestClient(app) as client:
        yield client


def test_an_order_is_charged_and_followed_up(http: TestClient, fastworker_eager: Eager) -> None:
    reply = http.post("/orders/7", params={"cents": 1250})

    assert reply.status_code == 202
    [charge] = fastworker_eager.submitted(charge_card)
    assert (charge.task_id, charge.args) == (reply.json()["charge"], [7, 1250])
    [email] = fastworker_eager.submitted(follow_up)
    assert email.eta is not None
    status = http.get(f"/charges/{charge.task_id}").json()
    assert status == {"status": "success", "receipt": "ch_7_1250"}


def test_an_unknown_charge_is_404(http: TestClient) -> None:
    assert http.get("/charges/no-such-task").status_code == 404


def test_the_follow_up_goes_out_six_hours_after_the_order(fastworker_cluster: Cluster) -> None:
    with TestClient(app) as http:
        http.post("/orders/7", params={"cents": 1250})

        fastworker_cluster.advance(FOLLOW_UP_DELAY - 1)
        assert tasks.outbox == []
        fastworker_cluster.advance(1)
        assert tasks.outbox == ["order 7: is everything as you expected?"]
