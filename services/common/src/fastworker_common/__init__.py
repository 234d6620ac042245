"""The code every FastWorker package shares.

The client SDK, the subworker and the control plane are separate packages; what more than one
of them needs (the NNG transport, discovery, supervision, the health web server, tokens) lives
here, as public modules, so no package reaches into another's private ones.
"""

__all__: list[str] = []
