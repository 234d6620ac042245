"""TLS on FastWorker's NNG sockets: the settings (``TLS``) and what a bad one raises.

Every FastWorker process dials and listens the same way, so this is defined in
``fastworker_common.tls`` (where the ``FASTWORKER_TLS_*`` variables are described); this
module is its public face.
"""

from fastworker_common.tls import TLS, TLSError

__all__ = ["TLS", "TLSError"]
