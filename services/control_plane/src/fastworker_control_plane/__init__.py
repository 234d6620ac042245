"""FastWorker control plane: accepts tasks, queues them by priority, dispatches them to the
least-loaded subworker (itself included), keeps results and announces itself."""

from fastworker_control_plane.app import ControlPlane, PortInUse
from fastworker_control_plane.config import ControlPlaneConfig

__all__ = ["ControlPlane", "ControlPlaneConfig", "PortInUse"]
