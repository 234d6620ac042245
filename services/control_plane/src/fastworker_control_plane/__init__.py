"""FastWorker control plane: accepts tasks, queues them by priority, dispatches them to the
least-loaded subworker (itself included), keeps results and announces itself.

Its names are imported when first used, so the command's launcher (``launch``), which
may start the process again before anything else, loads none of the control plane.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastworker_common.health import PortInUse
    from fastworker_control_plane.app import ControlPlane
    from fastworker_control_plane.config import ControlPlaneConfig

__all__ = ["ControlPlane", "ControlPlaneConfig", "PortInUse"]

_HOMES = {
    "ControlPlane": "fastworker_control_plane.app",
    "ControlPlaneConfig": "fastworker_control_plane.config",
    "PortInUse": "fastworker_common.health",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
