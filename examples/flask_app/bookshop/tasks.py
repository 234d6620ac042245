"""The tasks the app (bookshop/views.py) queues; workers load them with
``--task-modules bookshop.tasks``."""

from __future__ import annotations

import time

from fastworker import task


@task
def send_receipt(order_id: int, email: str, total: float) -> str:
    """Stands for a slow call to a mail service, which should not hold up a request."""
    time.sleep(0.05)
    return f"receipt for order {order_id} ({total:.2f}) sent to {email}"


@task(priority="high")
def price_total(prices: list[float], tax_rate: float = 0.2) -> float:
    return round(sum(prices) * (1 + tax_rate), 2)
