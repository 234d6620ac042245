"""TLS on FastWorker's NNG sockets: ``tls+tcp://`` addresses, certificates from PEM files.

The control plane listens with its certificate and key; clients and subworkers dial with
the CA that signed it, and check that the certificate names the host they dial (or
``server_name``). Give the control plane a CA too and it requires peers to present a
certificate signed by it (mutual TLS); they then need their own certificate and key.

Every setting is also a ``FASTWORKER_TLS_*`` variable: ``FASTWORKER_TLS_CA``,
``FASTWORKER_TLS_CERT``, ``FASTWORKER_TLS_KEY``, ``FASTWORKER_TLS_SERVER_NAME``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pynng

TLS_SCHEME = "tls+tcp://"


class TLSError(ValueError):
    """TLS settings that cannot work (a missing or unreadable file, or none at all for a
    ``tls+tcp://`` address); the message says which and how to fix it."""


@dataclass(frozen=True)
class TLS:
    ca_file: str | None = None  # PEM: the CA that signed the other side's certificate
    cert_file: str | None = None  # PEM: this side's certificate (chain)
    key_file: str | None = None  # PEM: its private key
    server_name: str | None = None  # the name the control plane's certificate must carry

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> TLS | None:
        """The ``FASTWORKER_TLS_*`` settings, or ``None`` if none is set."""
        tls = cls(
            environ.get("FASTWORKER_TLS_CA") or None,
            environ.get("FASTWORKER_TLS_CERT") or None,
            environ.get("FASTWORKER_TLS_KEY") or None,
            environ.get("FASTWORKER_TLS_SERVER_NAME") or None,
        )
        return tls if tls != cls() else None

    def listening(self) -> pynng.TLSConfig:
        """The control plane's side: its certificate, and the CA peers must be signed by
        if one is given."""
        if self.cert_file is None or self.key_file is None:
            raise TLSError(
                "listening with TLS needs a certificate and its key (--tls-cert, --tls-key)"
            )
        if self.ca_file is None:
            return pynng.TLSConfig(
                pynng.TLSConfig.MODE_SERVER,
                own_cert_string=_read(self.cert_file, "certificate"),
                own_key_string=_read(self.key_file, "key"),
                auth_mode=pynng.TLSConfig.AUTH_MODE_NONE,
            )
        return pynng.TLSConfig(
            pynng.TLSConfig.MODE_SERVER,
            own_cert_string=_read(self.cert_file, "certificate"),
            own_key_string=_read(self.key_file, "key"),
            ca_string=_read(self.ca_file, "CA"),
            auth_mode=pynng.TLSConfig.AUTH_MODE_REQUIRED,
        )

    def dialing(self, address: str) -> pynng.TLSConfig:
        """A peer's side: verify the control plane at ``address`` (and present this side's
        own certificate, if it has one)."""
        if self.ca_file is None:
            raise TLSError(
                f"dialing {address} needs the CA that signed the control plane's certificate "
                "(--tls-ca or FASTWORKER_TLS_CA)"
            )
        own: dict[str, str] = {}
        if self.cert_file is not None and self.key_file is not None:
            own = {
                "own_cert_string": _read(self.cert_file, "certificate"),
                "own_key_string": _read(self.key_file, "key"),
            }
        return pynng.TLSConfig(
            pynng.TLSConfig.MODE_CLIENT,
            ca_string=_read(self.ca_file, "CA"),
            server_name=self.server_name or host_of(address),
            auth_mode=pynng.TLSConfig.AUTH_MODE_REQUIRED,
            **own,
        )


def dial_config(address: str, tls: TLS | None) -> pynng.TLSConfig | None:
    """What a socket dialing ``address`` needs: a TLS config for ``tls+tcp://``, else none."""
    if not address.startswith(TLS_SCHEME):
        return None
    if tls is None:
        raise TLSError(
            f"{address} is a TLS address: give the CA that signed the control plane's "
            "certificate (--tls-ca or FASTWORKER_TLS_CA)"
        )
    return tls.dialing(address)


def host_of(address: str) -> str:
    """``host`` of ``scheme://host:port`` (IPv6 brackets removed)."""
    host = address.partition("://")[2].rpartition(":")[0]
    return host.removeprefix("[").removesuffix("]")


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not a PEM text file"
        raise TLSError(f"cannot read the TLS {what} {path}: {reason}") from None
