"""FastWorker control plane: accepts tasks, queues them by priority, dispatches them to the
least-loaded subworker (itself included), keeps results and announces itself."""

from fastworker_control_plane.app import ControlPlane
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_subworker.health import PortInUse

__all__ = ["ControlPlane", "ControlPlaneConfig", "PortInUse"]
