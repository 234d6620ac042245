"""What ``fastworker control-plane`` flags become: the settings the control plane runs
with (the replication and workflow flags of issues 20 and 21)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fastworker_control_plane import cli
from fastworker_control_plane.config import ControlPlaneConfig


class Captured(Exception):
    def __init__(self, config: ControlPlaneConfig) -> None:
        self.config = config


def settings_of(monkeypatch: pytest.MonkeyPatch, *argv: str) -> ControlPlaneConfig:
    def capture(config: ControlPlaneConfig) -> None:
        raise Captured(config)

    monkeypatch.setattr(cli, "replicated_or_alone", capture)
    args = cli.configure_parser(argparse.ArgumentParser()).parse_args(list(argv))
    with pytest.raises(Captured) as captured:
        cli.run(args)
    return captured.value.config


def test_the_workflow_flags_reach_the_control_planes_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = settings_of(
        monkeypatch,
        "--result-ttl",
        "600",
        "--workflow-ttl",
        "7200",
        "--workflow-max-finished",
        "50",
        "--workflow-max-live-bytes",
        "1000000",
    )
    assert (config.workflow_ttl, config.workflow_max_finished) == (7200, 50)
    assert config.workflow_max_live_bytes == 1_000_000


def test_the_replication_flags_reach_the_control_planes_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = settings_of(
        monkeypatch,
        "--state-dir",
        str(tmp_path),
        "--leader-election",
        "etcd://127.0.0.1:2379/fw",
        "--lease-duration",
        "8",
        "--sync-replicas",
        "2",
        "--require-sync",
        "--replication-port",
        "6000",
        "--replica-id",
        "a",
    )
    assert config.leader_election == "etcd://127.0.0.1:2379/fw"
    assert (config.lease_duration, config.sync_replicas, config.require_sync) == (8, 2, True)
    assert (config.replication_port_number, config.replica_name) == (6000, "a")


def test_the_dead_letter_flags_and_variables_reach_the_control_planes_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FASTWORKER_DEAD_LETTER_TTL", "3600")
    config = settings_of(
        monkeypatch, "--dead-letter-max", "50", "--dead-letter-max-bytes", "1000000"
    )
    assert (config.dead_letter_max, config.dead_letter_ttl) == (50, 3600.0)
    assert config.dead_letter_max_bytes == 1_000_000
    defaults = ControlPlaneConfig()
    assert (defaults.dead_letter_max, defaults.dead_letter_ttl) == (100_000, 604_800.0)


@pytest.mark.parametrize(
    ("setting", "flag"),
    [
        ({"dead_letter_max": 0}, "--dead-letter-max"),
        ({"dead_letter_ttl": -1.0}, "--dead-letter-ttl"),
        ({"dead_letter_ttl": float("nan")}, "--dead-letter-ttl"),
        ({"dead_letter_max_bytes": 0}, "--dead-letter-max-bytes"),
    ],
)
def test_dead_letter_bounds_must_be_positive(setting: dict[str, float], flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        ControlPlaneConfig(**setting)  # type: ignore[arg-type]
