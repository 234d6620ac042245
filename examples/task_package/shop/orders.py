"""Order tasks (loaded with ``--task-modules shop.orders``)."""

from __future__ import annotations

from fastworker import task
from shop import PRICES


@task(priority="high")
def place_order(customer: str, items: dict[str, int]) -> dict[str, object]:
    """Price an order; unknown items make the task fail (the client sees the error)."""
    unknown = sorted(set(items) - set(PRICES))
    if unknown:
        raise ValueError(f"unknown items: {', '.join(unknown)}")
    total = sum(PRICES[name] * count for name, count in items.items())
    return {"customer": customer, "items": sum(items.values()), "total": round(total, 2)}
