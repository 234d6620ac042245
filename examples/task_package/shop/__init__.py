"""An example package of task modules: ``shop.orders`` and ``shop.emails``.

Workers import the modules named in ``--task-modules``; this ``__init__`` only makes
``shop`` a package and defines what both modules share.
"""

from __future__ import annotations

PRICES = {"apple": 0.5, "bread": 2.25, "coffee": 7.0}
