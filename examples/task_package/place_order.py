"""Place an order, then e-mail its confirmation: two tasks from two modules of ``shop``.

From this folder (examples/task_package), with the cluster running
(``uv run fastworker dev --task-modules shop.orders shop.emails``):

    uv run python place_order.py

The control plane is found at FASTWORKER_DISCOVERY_ADDRESS (default tcp://127.0.0.1:5550).
"""

from __future__ import annotations

import asyncio
import os

from shop.emails import send_confirmation
from shop.orders import place_order

from fastworker import Client, TaskFailed

DISCOVERY = os.environ.get("FASTWORKER_DISCOVERY_ADDRESS", "tcp://127.0.0.1:5550")


async def main() -> None:
    async with Client(DISCOVERY, timeout=30) as client:
        # Submitting by the function object uses its default priority (high, for this one).
        order_id = await client.delay(place_order, "ada", {"apple": 4, "coffee": 1})
        order = await client.wait(order_id)
        print(f"order: {order['items']} items, total {order['total']:.2f}")

        mail_id = await client.delay(send_confirmation, order["customer"], order["total"])
        print(f"email: {await client.wait(mail_id)}")

        # A task that raises: wait() raises TaskFailed, carrying the worker's error.
        bad_id = await client.delay(place_order, "bob", {"caviar": 1})
        try:
            await client.wait(bad_id)
        except TaskFailed as exc:
            print(f"rejected: {exc.remote_type}: {exc.remote_message}")


if __name__ == "__main__":
    asyncio.run(main())
