"""The control plane's pure core: no sockets, no clocks, no asyncio.

Every function here takes the state, an event and ``now`` (Unix seconds) and returns what
changed. The I/O layer (``fastworker_control_plane.servers``) only moves bytes and calls it.
"""
