"""The pytest plugin, registered by the SDK's ``pytest11`` entry point (nothing to enable).

Fixtures, each for one test:

* ``fastworker_eager``: an active :class:`~fastworker.testing.Eager`; tasks submitted
  during the test run inline, and ``fastworker_eager.submissions`` records them.
* ``fastworker_cluster``: a started :class:`~fastworker.testing.Cluster` with one
  subworker running every ``@task`` of the process; move its clock with ``advance``.
* ``fastworker_client``: a started :class:`~fastworker.SyncClient` of whichever of the two
  the test also asks for (eager mode if it asks for neither).

Clients made inside the test connect to the same place with no address, so code under test
that calls ``add.delay()`` or makes its own ``Client`` needs no change.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fastworker import testing
from fastworker.sync_client import SyncClient
from fastworker.testing import Eager, eager


@pytest.fixture
def fastworker_eager() -> Iterator[Eager]:
    with eager() as runner:
        yield runner


@pytest.fixture
def fastworker_cluster() -> Iterator[Any]:
    with testing.Cluster() as cluster:  # imported only by tests that ask for it
        yield cluster


@pytest.fixture
def fastworker_client(request: pytest.FixtureRequest) -> Iterator[SyncClient]:
    wanted = [f for f in ("fastworker_cluster", "fastworker_eager") if f in request.fixturenames]
    if wanted:
        request.getfixturevalue(wanted[0])  # set up before the client, whatever the order
    fallback = None if wanted else eager().start()
    client = SyncClient()
    try:
        client.start()
        yield client
    finally:
        client.stop()
        if fallback is not None:
            fallback.stop()
