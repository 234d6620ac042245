"""TLS settings: which sockets need them, and clear errors for unusable ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from fastworker_common.tls import TLS, TLSError, dial_config, host_of


def test_plain_tcp_needs_no_tls_config_even_with_settings() -> None:
    assert dial_config("tcp://127.0.0.1:5555", None) is None
    assert dial_config("tcp://127.0.0.1:5555", TLS(ca_file="/nowhere.pem")) is None


def test_a_tls_address_without_settings_says_what_to_give() -> None:
    with pytest.raises(TLSError, match="FASTWORKER_TLS_CA"):
        dial_config("tls+tcp://cp:5555", None)
    with pytest.raises(TLSError, match="needs the CA"):
        dial_config("tls+tcp://cp:5555", TLS(cert_file="c.pem", key_file="k.pem"))


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    with pytest.raises(TLSError, match=f"cannot read the TLS CA {missing}: No such file"):
        dial_config("tls+tcp://cp:5555", TLS(ca_file=str(missing)))


def test_listening_needs_a_certificate_and_a_key() -> None:
    with pytest.raises(TLSError, match="--tls-cert, --tls-key"):
        TLS(cert_file="c.pem").listening()


def test_settings_come_from_the_environment_or_not_at_all() -> None:
    assert TLS.from_env({}) is None
    assert TLS.from_env({"FASTWORKER_TLS_CA": ""}) is None
    env = {"FASTWORKER_TLS_CA": "ca.pem", "FASTWORKER_TLS_SERVER_NAME": "cp.internal"}
    assert TLS.from_env(env) == TLS(ca_file="ca.pem", server_name="cp.internal")


@pytest.mark.parametrize(
    ("address", "host"),
    [("tls+tcp://cp.ns.svc:5555", "cp.ns.svc"), ("tls+tcp://[::1]:5555", "::1")],
)
def test_the_name_checked_by_default_is_the_host_dialed(address: str, host: str) -> None:
    assert host_of(address) == host
