"""A Flask app (an application factory) that hands slow work to FastWorker. See README.md
for how to run it.

- ``POST /orders`` (JSON ``{"email": ..., "prices": [...]}``) queues ``send_receipt`` with
  ``fw.delay`` and answers at once (202) with the task's id;
- ``GET /orders/receipts/<task_id>`` reads that task (``?wait=`` seconds to wait for it);
- ``POST /quotes`` queues ``price_total`` with ``price_total.delay(...)`` (the process's
  default client, which ``fw.init_app`` configures from the same settings);
- ``/tasks/...`` is FastWorker's ready-made blueprint (submit any task by name, status,
  result, cancel): mount it behind your own authentication.
"""

from __future__ import annotations

from typing import Any

from flask import Flask

from fastworker.integration.flask import FastWorker

# One extension for every app the factory makes; each app gets its own client per process,
# made on first use from its FASTWORKER_* settings (unset ones come from the environment:
# FASTWORKER_DISCOVERY_ADDRESS, default tcp://127.0.0.1:5550).
fw = FastWorker()


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(FASTWORKER_TIMEOUT=10.0)
    app.config.from_mapping(config or {})
    fw.init_app(app)

    from bookshop.views import orders  # the views import fw: imported once it exists

    app.register_blueprint(orders)
    app.register_blueprint(fw.blueprint("/tasks"))
    return app
