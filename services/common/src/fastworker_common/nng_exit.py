"""Python's last garbage collection runs before NNG shuts down.

pynng registers ``nng_fini`` with ``atexit``. A pynng object still uncollected then (an
aio left in a reference cycle by a cancelled coroutine, say) is freed later, by the
interpreter's final collection, into an NNG that has been shut down: the process hangs
or aborts with ``panic: pthread_mutex_lock`` (pynng issue #108). Exit handlers run
last-registered first, so a collection registered after pynng's frees those objects
while NNG still runs. The modules that open FastWorker's sockets (``transport``,
``discovery``, ``nng_io``) import this one, so any process using them exits cleanly.
"""

from __future__ import annotations

import atexit
import gc

import pynng  # noqa: F401  (its handler is registered on import, so before ours)

atexit.register(gc.collect)
