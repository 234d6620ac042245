"""The code every FastWorker package shares.

The client SDK, the subworker and the control plane are separate packages; what more than one
of them needs lives here, as public modules, so no package reaches into another's private ones:

- ``errors``, ``tls``: the exception tree and the TLS settings (``fastworker.errors`` and
  ``fastworker.tls`` are their public faces);
- ``transport``, ``discovery``, ``leader``, ``local``: how a process asks a control plane
  (REQ sockets, the discovery bus, following a replicated leader, in-process backends);
  ``sightings``: when each control plane last answered, to tell one that stopped answering
  from one never reached;
- ``nng_io``, ``nng_exit``: cheaper NNG I/O for servers, and a clean exit with NNG;
- ``context``, ``histogram``, ``tokens``, ``allocator``: the running task's context, latency
  histograms, auth tokens, returning memory to the system;
- ``health``, ``web``, ``log_setup``: the health check, the health/metrics web server and the
  processes' logs.

Only ``web`` and ``log_setup`` need the ``server`` extra (structlog, aiohttp,
prometheus-client): the subworker and control plane install it, the client imports neither.
"""

__all__: list[str] = []
