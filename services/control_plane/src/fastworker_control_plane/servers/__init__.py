"""The control plane's sockets, one module per role. Each only moves bytes and calls the
pure core (``fastworker_control_plane.core``)."""
