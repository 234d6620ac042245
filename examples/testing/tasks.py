"""A small shop's background work, and the function that queues it: what the tests beside
this file test, with no cluster on the network (test_tasks.py, test_app.py) and with one
(test_real_cluster.py)."""

from __future__ import annotations

from fastworker import task

FOLLOW_UP_DELAY = 6 * 3600  # seconds: the follow-up email goes out six hours after the order
outbox: list[str] = []  # stands in for an email service; the tests read it


class CardProcessor:
    """Stands in for a payment provider's client; a test replaces it."""

    def charge(self, order_id: int, cents: int) -> str:
        return f"ch_{order_id}_{cents}"


processor = CardProcessor()


@task(max_retries=3, retry_backoff=60, retry_on=(ConnectionError,))
def charge_card(order_id: int, cents: int) -> str:
    """Charge an order. A dropped connection is retried up to 3 times, after random waits
    of up to 60, 120 and 240 s; any other error fails the task at once."""
    return processor.charge(order_id, cents)


@task
def follow_up(order_id: int) -> str:
    message = f"order {order_id}: is everything as you expected?"
    outbox.append(message)
    return message


@task(cron="0 8 * * *", cron_tz="Europe/Berlin")
def daily_report() -> str:
    """Every morning at 08:00, Berlin time (summer time included)."""
    outbox.append("daily report")
    return f"{len(outbox)} emails sent"


def place_order(order_id: int, cents: int) -> str:
    """Charge the card now, follow up in six hours; returns the charge's task id."""
    charge = charge_card.delay(order_id, cents)
    follow_up.apply_async((order_id,), countdown=FOLLOW_UP_DELAY)
    return charge
