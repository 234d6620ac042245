"""Testing code that submits tasks, without a cluster on the network.

* :func:`eager`: tasks run inline, in the caller, when submitted (Celery's
  ``task_always_eager``, Dramatiq's ``StubBroker`` + ``Worker``).
* :class:`Cluster`: the real control-plane core and a real subworker in this process, over
  an in-memory transport, on a clock the test moves (``cluster.advance(3600)``). It needs
  the ``fastworker-control-plane`` and ``fastworker-subworker`` packages, and is loaded
  only when asked for, from the ``fastworker.testing`` entry point the control plane
  declares.
* The pytest plugin (installed with the SDK): fixtures ``fastworker_eager``,
  ``fastworker_cluster`` and ``fastworker_client``.
* :func:`free_port_block` and :func:`free_ports_apart`: loopback ports for a test that
  starts a real control plane, picked outside the kernel's ephemeral range.
"""

from __future__ import annotations

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
        from importlib.metadata import entry_points

        found = entry_points(group="fastworker.testing", name=name)
        if not found:
            raise ImportError(
                f"fastworker.testing.{name} needs the fastworker-control-plane and "
                "fastworker-subworker packages installed"
            )
        return next(iter(found)).load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
