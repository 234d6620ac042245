"""Testing code that submits tasks, without a cluster on the network.

* :func:`eager`: tasks run inline, in the caller, when submitted (Celery's
  ``task_always_eager``, Dramatiq's ``StubBroker`` + ``Worker``).
* :class:`Cluster`: the real control-plane core and a real subworker in this process, over
  an in-memory transport, on a clock the test moves (``cluster.advance(3600)``). It needs
  the ``fastworker-control-plane`` and ``fastworker-subworker`` packages, and is imported
  from there only when asked for.
* The pytest plugin (installed with the SDK): fixtures ``fastworker_eager``,
  ``fastworker_cluster`` and ``fastworker_client``.
* :func:`free_port_block` and :func:`free_ports_apart`: loopback ports for a test that
  starts a real control plane, picked outside the kernel's ephemeral range.
"""

from __future__ import annotations

import importlib
from typing import Any

from fastworker.testing.eager import Eager, Submission, eager
from fastworker.testing.ports import free_port_block, free_ports_apart

__all__ = [
    "Cluster",
    "ClusterError",
    "Eager",
    "Submission",
    "eager",
    "free_port_block",
    "free_ports_apart",
]


def __getattr__(name: str) -> Any:
    if name in ("Cluster", "ClusterError"):
        try:
            module = importlib.import_module("fastworker_control_plane.testing")
        except ModuleNotFoundError as exc:
            raise ImportError(
                "fastworker.testing.Cluster needs the fastworker-control-plane and "
                f"fastworker-subworker packages installed ({exc})"
            ) from exc
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
