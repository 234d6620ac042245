"""The in-process test cluster; use it as ``fastworker.testing.Cluster``."""

from fastworker_control_plane.testing.cluster import Cluster, ClusterError

__all__ = ["Cluster", "ClusterError"]
